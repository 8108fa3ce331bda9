"""torch's facts for a command: the child run directly, or through the torch cache.

Apart from ``torch_build`` (the child's protocol) and ``torch_cache`` (which reuses an earlier
import), so that neither of those two imports the other's importer.
"""

from __future__ import annotations

from envdoctor.model.facts import TorchFacts
from envdoctor.platform.cache import CacheDir
from envdoctor.platform.host import Deadline, Host
from envdoctor.probes.interpreter import run_python
from envdoctor.probes.torch_build import (
    TORCH_TIMEOUT,
    child_source,
    decode_environment,
    last_json,
    parse_child,
)


def probe_torch(
    host: Host,
    *,
    python: str,
    deadline: Deadline,
    force_import: bool = False,
    version_only: bool = False,
    cache: CacheDir | None = None,
) -> TorchFacts:
    """torch's facts. A CPU-only build is read from torch/version.py without the ~1 s import,
    unless ``force_import`` (its import can still be checked then); ``version_only`` reads
    every build that way (``imported`` is False: what CUDA makes of it is not known).
    With a ``cache``, an earlier import is reused while nothing it read has changed
    (``probes/torch_cache.py``).

    The child runs in ``/`` with ``-P`` where the interpreter has it: nothing the current
    directory holds is imported (see ``probes/interpreter.py``).
    """
    timeout = deadline.cap(TORCH_TIMEOUT)
    flags = ["--import"] if force_import else ["--version-only"] if version_only else []
    args = ["-c", child_source(), *flags]
    if cache is not None and not version_only:
        from envdoctor.probes.torch_cache import probe_cached  # only commands that import torch

        probed, data = probe_cached(host, cache, args, python=python, deadline=deadline)
        return TorchFacts(python=python, torch=probed, **decode_environment(data))
    result = run_python(host, python, args, timeout=timeout)
    data = last_json(result.stdout) if result.ok else None
    return TorchFacts(python=python, torch=parse_child(result, python), **decode_environment(data))
