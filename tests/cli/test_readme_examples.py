"""README.md's shell examples use only what the commands declare (#37 item 5).

Every ``envdoctor …`` line in the code blocks of the README and of docs/ (and every inline
``envdoctor …`` span of the README) is read as a shell would split it, its command found in the
Typer app, and each option it uses looked up among that command's declared options (the click
objects Typer built, not a list kept here). An example that names an option or a command that
does not exist fails, naming the line.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from envdoctor import __version__
from tests.cli.commands import find, spellings
from tests.runner import invoke

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
INLINE = re.compile(r"`(envdoctor [^`]+)`")
OUTPUT = re.compile(r"envdoctor (\d|[a-z-]+:)")  # "envdoctor 0.1.0 — …", "envdoctor check: no …"
FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def examples(text: str) -> list[str]:
    """The ``envdoctor …`` command lines of the text's code blocks: every line of a shell block,
    the ``$`` lines of a console block (the rest is output)."""
    found = []
    for language, block in FENCE.findall(text):
        for line in block.splitlines():
            line = line.strip()
            if language == "console":
                if not line.startswith("$ "):
                    continue
                line = line.removeprefix("$ ")
            if line.startswith("envdoctor ") and not OUTPUT.match(line):
                found.append(line)
    return found


def inline_examples(text: str) -> list[str]:
    """The ``envdoctor …`` spans of the text (not what envdoctor prints, which some quote)."""
    return [span for span in INLINE.findall(text) if not OUTPUT.match(span)]


def _all_examples() -> list[str]:
    lines = [line for doc in DOCS for line in examples(doc.read_text(encoding="utf-8"))]
    return sorted({*lines, *inline_examples(README.read_text(encoding="utf-8"))})


def problems(line: str) -> list[str]:
    """What in ``line`` the commands do not declare (nothing: the example is right)."""
    words = shlex.split(line, comments=True)
    for stop in ("|", "&&", ";", ">", "2>", "||"):
        if stop in words:
            words = words[: words.index(stop)]
    words = words[1:]  # "envdoctor"
    path: list[str] = []
    command: Any = find([])
    while getattr(command, "commands", None) and words and not words[0].startswith("-"):
        name = words.pop(0)
        alternatives = name.replace("\\|", "|").split("|")  # `tables validate\|show`
        missing = [a for a in alternatives if a not in command.commands]
        if missing:
            return [f"no command {' '.join([*path, missing[0]])!r}"]
        path.append(alternatives[0])
        command = command.commands[alternatives[0]]
    declared = spellings(command)
    stops_at_argument = not (command.context_settings or {}).get("allow_interspersed_args", True)
    out = []
    takes_value = {o for p in command.params if not getattr(p, "is_flag", True) for o in p.opts}
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word == "--":
            break
        if not word.startswith("-") or word == "-":
            if stops_at_argument:
                break  # `run CMD --its-own-flags`
            continue
        name = word.partition("=")[0]
        if name.startswith("--"):
            if name not in declared:
                out.append(f"envdoctor {' '.join(path)}: no option {name}")
            skip = name in takes_value and "=" not in word
        else:
            for letter in name[1:]:
                if f"-{letter}" not in declared:
                    out.append(f"envdoctor {' '.join(path)}: no option -{letter}")
                    break
                if f"-{letter}" in takes_value:
                    skip = name.endswith(letter)
                    break
    return out


def test_the_readme_has_examples_to_check() -> None:
    assert len(examples(README.read_text(encoding="utf-8"))) >= 3


@pytest.mark.parametrize("line", _all_examples())
def test_every_documented_example_uses_declared_options(line: str) -> None:
    assert problems(line) == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("envdoctor check --jsn", ["envdoctor check: no option --jsn"]),
        ("envdoctor fix --json", ["envdoctor fix: no option --json"]),
        ("envdoctor spec check", ["no command 'spec check'"]),
        ("envdoctor probe -vx", ["envdoctor probe: no option -x"]),
        ("envdoctor recommend --python /venv/bin/python", []),
        ("envdoctor check -o out.json --format=json  # a comment --nope", []),
        ("envdoctor run --blocking python train.py --lr 3", []),
        ("envdoctor run -- python -X importtime", []),
        ("envdoctor explain train.log | head -n 3", []),
        ("envdoctor tables validate\\|show", []),
        ("envdoctor tables validate\\|shew", ["no command 'tables shew'"]),
        ("envdoctor --show-completion [SHELL]", []),
    ],
)
def test_the_checker_catches_what_a_command_does_not_declare(
    line: str, expected: list[str]
) -> None:
    """The check above can fail: a made-up option or command is named."""
    assert problems(line) == expected


def test_the_readme_tells_this_envdoctor_from_pypis_envdoctor_cli() -> None:
    """PyPI's ``envdoctor-cli`` (a .env linter) installs a command also called ``envdoctor``:
    the README says how to tell them apart, and what it quotes is what this one prints."""
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "envdoctor-cli" in text
    quoted = re.search(r"`envdoctor --version` (?:prints|answers[^`]*with) `([^`]+)`", text)
    assert quoted is not None, "the README should quote what `envdoctor --version` prints"
    shown = invoke(["--version"]).stdout.strip()
    assert quoted.group(1) == shown == f"envdoctor {__version__} (gpu-envdoctor)"
    assert "python -m envdoctor" in text  # the way that never meets the other command
    listed = invoke(["--help"]).stdout
    assert "`envdoctor --help` lists `check`, `probe` and `explain`" in text
    assert all(f"\n  {name} " in listed for name in ("check", "probe", "explain"))
