"""`python -m envdoctor` runs the same CLI as the `envdoctor` command."""

from envdoctor.cli.entry import main

if __name__ == "__main__":
    main()
