"""Package index URLs: which ones root may install torch from.

A compatibility table (``--tables``, ``ENVDOCTOR_TABLES``) names an index per CUDA variant, and
`envdoctor fix` writes it into a script root runs (``pip install --index-url``). A table is a
file anyone may have written, so its URL is parsed (``urllib.parse``), never matched as text:
``https://download.pytorch.org@evil.example/whl/cu130`` is user information
``download.pytorch.org`` and the host ``evil.example``.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable

PYTORCH_INDEX_HOSTS = ("download.pytorch.org",)
"""The hosts of PyTorch's own wheel indexes; any other must be named on the command line."""

_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")


def index_url_problem(url: str) -> str:
    """Why ``url`` is not a plain https index URL ("" when it is one): https, a host name (no
    user information, no port), a path; no query, fragment, space or control character."""
    if any(c.isspace() or not c.isprintable() or c == "\\" for c in url):
        return "it holds a space, a backslash or a control character"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return "it is not a URL"
    if parts.scheme != "https":
        return "it is not an https URL"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "it holds user information (an @ before the host)"
    if port is not None or ":" in parts.netloc:
        return "it names a port"
    host = parts.hostname or ""
    if not host or not set(host) <= _HOST_CHARS or host != parts.netloc.lower():
        return "it names no plain host"
    if parts.query or parts.fragment or "?" in url or "#" in url:
        return "it holds a query or a fragment"
    return ""


def index_host(url: str) -> str:
    """The host of an index URL that ``index_url_problem`` accepts, lower case."""
    return (urllib.parse.urlsplit(url).hostname or "").lower()


def untrusted_index(url: str, extra_hosts: Iterable[str] = ()) -> str:
    """Why root must not install from ``url`` ("" when it may): a URL ``index_url_problem``
    refuses, or a host that is neither PyTorch's nor one of ``extra_hosts`` (named by the
    operator on the command line)."""
    problem = index_url_problem(url)
    if problem:
        return problem
    allowed = {*PYTORCH_INDEX_HOSTS, *(h.lower() for h in extra_hosts)}
    host = index_host(url)
    if host not in allowed:
        return f"its host {host} is not PyTorch's ({', '.join(sorted(allowed))})"
    return ""


def host_problem(host: str) -> str:
    """Why ``host`` (``fix --index-host``) is not a plain host name ("" when it is one)."""
    if not host or len(host) > 253 or not set(host.lower()) <= _HOST_CHARS:
        return "a host name such as mirror.example.com (letters, digits, dots and dashes)"
    if host.startswith((".", "-")) or ".." in host:
        return "a host name such as mirror.example.com"
    return ""
