"""Parse YAML into a node tree whose every node knows its line, so errors can say file:line.

The compatibility tables, the explain signatures and node specs all read YAML this way; each
turns the node tree into its own values.
"""

from __future__ import annotations

import yaml

from envdoctor.errors import EnvdoctorError

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def compose(
    text: str,
    where: str,
    *,
    invalid: str = "invalid YAML",
    empty: str = "the file is empty",
    empty_hint: str = "",
) -> yaml.Node:
    """The document's root node; a syntax error or an empty document is an ``EnvdoctorError``."""
    try:
        root = yaml.compose(text, Loader=LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or str(exc)
        raise EnvdoctorError(f"{invalid}: {problem}", where=f"{where}{line}") from None
    except yaml.YAMLError as exc:
        raise EnvdoctorError(f"{invalid}: {exc}", where=where) from None
    if root is None:
        raise EnvdoctorError(empty, where=where, hint=empty_hint)
    return root
