"""The command line: thin Typer commands over the engine, probes and renderers."""
