"""envdoctor's smoke child: runs in the TARGET interpreter with only the standard library + torch.

It is started as ``python -c <this source> <json config>`` (or ``python child.py <json>``), so
the target environment needs no envdoctor; it must stay importable on Python 3.8. It never
decides what an error *means*: it runs the steps, checks results against a CPU reference and
reports, one protocol line per event::

    @@envdoctor-smoke@@ {"event": "start", "step": "gemm-fp16"}
    @@envdoctor-smoke@@ {"event": "result", "step": "gemm-fp16", "status": "passed", ...}
    @@envdoctor-smoke@@ {"event": "done"}

The protocol owns the process's stdout alone: the child first moves descriptor 1 to a private
descriptor and points 1 at stderr, so whatever libraries print on stdout (NCCL's
``NCCL_DEBUG=INFO`` logs, unflushed C stdio, prints from site hooks) lands in stderr and can
never be glued to a protocol line.

Config keys: ``mode`` ("smoke" or "reproduce"), ``device`` ("cuda" or "cpu": the CPU runs the
same steps, for tests and benchmarks), ``index`` (the CUDA device to use), ``devices`` (how many
for the NCCL step), ``steps``, ``poison`` (regexes of errors after which the CUDA context is
unusable: the remaining steps are reported as skipped), ``budget`` (seconds: a native watchdog
ends the process after it even if Python is stuck), ``memory_mib`` and ``watch_stdin`` (exit when
stdin reaches end-of-file, i.e. when envdoctor is gone).

Reproduce mode (``envdoctor smoke --reproduce``) runs ``steps`` among import, context, warm-up,
hold and the ``probe`` step (``gemm-fp32`` or ``conv-forward``): after its own context exists it
holds device memory until only ``leave_mib`` MiB are free, then runs the probe step once.
``hold`` says how: ``raw`` takes the memory with the CUDA driver API (cuMemAlloc), outside
torch's allocator, as another process would; ``torch-cache`` first runs the probe step on the
main thread (warm-up), fills torch's caching allocator, frees the tensors into its cache (torch
keeps the memory reserved), then runs the probe step in a new thread, which must create its own
cuBLAS/cuDNN handle.
"""

from __future__ import annotations

import faulthandler
import gc
import importlib
import json
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

MARK = "@@envdoctor-smoke@@ "
MIB = 1 << 20
STEPS = (
    "import",
    "context",
    "memory",
    "gemm-fp32",
    "gemm-fp16",
    "gemm-bf16",
    "conv-forward",
    "conv-backward",
    "nccl-allreduce",
    "nccl-bandwidth",
    "p2p-bandwidth",
)
MULTI_GPU_STEPS = ("nccl-allreduce", "nccl-bandwidth", "p2p-bandwidth")
"""The steps of the child that sees every GPU (the runner starts it once the GPUs passed)."""
BANDWIDTH_MIB = 256  # the all-reduce's buffer per GPU: large enough for NCCL's peak busbw
COPY_MIB = 64  # each peer copy's buffer (nvbandwidth's copies reach their peak well below)
BANDWIDTH_ITERATIONS = 5
# Largest error accepted, relative to the largest magnitude of the float64 CPU reference that
# was computed from the very same (rounded) inputs. TF32 is switched off for the fp32 checks;
# where torch keeps it on anyway (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 in a parent, a patched
# torch), fp32 GEMMs and convolutions round their inputs to 10 mantissa bits and get the TF32
# tolerance: their error on these inputs is 2e-4 to 3.3e-4 (float32 inputs rounded to TF32 and
# multiplied in float64, 50 seeds), a factor of 6 below it.
TOLERANCE = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 3e-2, "conv": 1e-4}
TF32_TOLERANCE = 2e-3
GEMM_N = 256
GRAIN = 2 * MIB  # the driver hands out device memory in 2 MiB pages
CUDA_ERROR_OUT_OF_MEMORY = 2
_PROTOCOL_FD: int | None = None
_EMIT_LOCK = threading.Lock()


class SkipStepError(Exception):
    """The step does not apply here (e.g. bf16 on a GPU older than sm_80)."""


class MismatchError(Exception):
    """The step ran but its result differs from the CPU reference."""


def claim_stdout() -> None:
    """Keep descriptor 1 for the protocol alone; from now on stdout output goes to stderr."""
    global _PROTOCOL_FD
    sys.stdout.flush()
    _PROTOCOL_FD = os.dup(1)  # not inherited by grandchildren (PEP 446)
    os.dup2(2, 1)


def emit(data: dict[str, Any]) -> None:
    line = MARK + json.dumps(data) + "\n"
    with _EMIT_LOCK:
        if _PROTOCOL_FD is None:
            sys.stdout.write(line)
            sys.stdout.flush()
            return
        raw = line.encode("utf-8")
        while raw:
            raw = raw[os.write(_PROTOCOL_FD, raw) :]


def _traceback() -> str:
    """The end of the current exception's traceback ("" if even that cannot be had: the step's
    result must still be sent)."""
    try:
        import traceback

        return traceback.format_exc()[-3000:]
    except Exception:  # noqa: BLE001 (a MemoryError importing it: the result goes out without)
        return ""


def error_text(exc: BaseException) -> str:
    text = str(exc).strip()
    return (type(exc).__name__ + (": " + text if text else ""))[:6000]


class Context:
    """What the steps share: the config, torch once imported, the device, held memory."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.cpu = config.get("device", "cuda") == "cpu"
        self.index = int(config.get("index", 0))
        self.devices = int(config.get("devices", 1))
        self.torch: Any = None
        self.capability = (0, 0)
        self.held: Any = None

    @property
    def device(self) -> str:
        return "cpu" if self.cpu else f"cuda:{self.index}"

    def sync(self) -> None:
        if not self.cpu:
            self.torch.cuda.synchronize(self.index)

    def free(self) -> int:
        return int(self.torch.cuda.mem_get_info(self.index)[0])


def mapped_libraries(*families: str) -> list[str]:
    """Paths of the shared libraries of these families this process has mapped (Linux)."""
    found: list[str] = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) == 6 else ""
                name = path.rsplit("/", 1)[-1]
                if any(name.startswith(f + ".so") for f in families) and path not in found:
                    found.append(path)
    except OSError:
        pass
    return found


def relative_error(torch: Any, got: Any, ref: Any) -> float:
    scale = float(ref.abs().max().item()) or 1.0
    return float((got.double() - ref).abs().max().item()) / scale


def check(name: str, err: float, tol: float, why: str = "") -> str:
    reason = f"tolerance {tol:.0e}" + (f", {why}" if why else "")
    if not err <= tol:  # also catches NaN
        raise MismatchError(
            f"{name} differs from the float64 CPU reference: max error {err:.3g} of the largest "
            f"value ({reason})"
        )
    return f"max error {err:.1e} ({reason})"


# --- TF32 -----------------------------------------------------------------------------------


def _quietly(action: Callable[[], Any]) -> Any:
    """Run a torch setting or reading; None when this torch refuses it (old or new API)."""
    with warnings.catch_warnings():
        # torch >= 2.9 deprecates allow_tf32 in favour of fp32_precision: not the user's concern
        warnings.simplefilter("ignore")
        try:
            return action()
        except Exception:  # noqa: BLE001 (an API this torch lacks: the read-back says what holds)
            return None


def tf32_state(ctx: Context, owner: Any, flag: str) -> tuple[bool | None, str]:
    """Switch TF32 off for ``owner`` (torch.backends.cuda.matmul or .cudnn), then say what
    torch will really do (True: TF32 stays on, None: torch does not say) and why."""
    if ctx.cpu:
        return False, "TF32 off"
    matmul = owner is ctx.torch.backends.cuda.matmul
    if matmul:
        _quietly(lambda: ctx.torch.set_float32_matmul_precision("highest"))
        # torch applies the override inside its cuBLAS calls; recent versions no longer show
        # it through allow_tf32, so the variable itself is the evidence.
        if os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE") == "1":
            return True, "TF32 on: TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 forces it"
    _quietly(lambda: setattr(owner, "allow_tf32", False))
    value = _quietly(lambda: bool(owner.allow_tf32))
    if value is None:
        return None, f"TF32 state unknown ({flag} unreadable): TF32 tolerance"
    return value, f"TF32 on: {flag} stayed True" if value else "TF32 off"


def fp32_tolerance(key: str, tf32: bool | None) -> float:
    """float32 GEMMs and convolutions: the TF32 tolerance unless TF32 is known to be off."""
    return TOLERANCE[key] if tf32 is False else TF32_TOLERANCE


# --- steps ----------------------------------------------------------------------------------


def step_import(ctx: Context) -> tuple[str, dict[str, Any]]:
    # without the collector: torch's import makes ~370 passes over what it builds and frees
    # almost nothing (~10 % of its time); on again for the steps, whose tensors it may free
    gc.disable()
    try:
        torch = importlib.import_module("torch")
    finally:
        gc.enable()
    ctx.torch = torch
    version = str(getattr(torch, "__version__", "?"))
    cuda = str(getattr(getattr(torch, "version", None), "cuda", None) or "")
    info = {"torch": version, "cuda": cuda, "file": str(getattr(torch, "__file__", ""))}
    return f"torch {version} (CUDA {cuda or 'none'})", info


def step_context(ctx: Context) -> tuple[str, dict[str, Any]]:
    torch = ctx.torch
    if ctx.cpu:
        return "CPU run: no CUDA context", {}
    torch.cuda.init()
    count = int(torch.cuda.device_count())
    needed = ctx.index + ctx.devices
    if count < needed:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise RuntimeError(
            f"torch sees {count} CUDA device(s) with CUDA_VISIBLE_DEVICES={visible!r}; "
            f"{needed} needed"
        )
    for i in range(ctx.index, needed):
        torch.cuda.set_device(i)
        torch.empty(1, device=f"cuda:{i}")  # an allocation creates the context; no kernel yet
        torch.cuda.synchronize(i)
    torch.cuda.set_device(ctx.index)
    props = torch.cuda.get_device_properties(ctx.index)
    ctx.capability = (int(props.major), int(props.minor))
    free, total = (int(v) for v in torch.cuda.mem_get_info(ctx.index))
    info = {
        "name": str(props.name),
        "capability": "{}.{}".format(*ctx.capability),
        "uuid": str(getattr(props, "uuid", "") or ""),
        "free": free,
        "total": total,
        "devices": count,
    }
    major, minor = ctx.capability
    detail = f"{props.name} (sm_{major}{minor}), {free / MIB:.0f} MiB free of {total / MIB:.0f} MiB"
    return detail, info


def step_memory(ctx: Context) -> tuple[str, dict[str, Any]]:
    torch = ctx.torch
    mib = int(ctx.config.get("memory_mib", 8))
    n = mib * MIB // 4
    on_device = torch.arange(n, dtype=torch.int32, device=ctx.device) * 3 + 7  # fill by a kernel
    ctx.sync()
    back = on_device.cpu()
    if not bool(torch.equal(back, torch.arange(n, dtype=torch.int32) * 3 + 7)):
        raise MismatchError(f"a {mib} MiB buffer filled on the device reads back wrong")
    gen = torch.Generator().manual_seed(7)
    host = torch.randn(n, generator=gen)
    round_trip = host.to(ctx.device).cpu()
    if not bool(torch.equal(round_trip, host)):
        raise MismatchError(f"a {mib} MiB host buffer copied to the device and back differs")
    del on_device
    return f"{mib} MiB filled on the device, copied both ways and verified", {"mib": mib}


def gemm(ctx: Context, dtype_name: str) -> tuple[str, dict[str, Any]]:
    torch = ctx.torch
    if dtype_name == "bfloat16" and not ctx.cpu and ctx.capability < (8, 0):
        raise SkipStepError(
            "bf16 GEMM needs compute capability 8.0 or newer; this GPU is {}.{}".format(
                *ctx.capability
            )
        )
    flag = "torch.backends.cuda.matmul.allow_tf32"
    tf32, state = tf32_state(ctx, torch.backends.cuda.matmul, flag)
    tol, why = TOLERANCE[dtype_name], ""
    if dtype_name == "float32":
        tol, why = fp32_tolerance("float32", tf32), state
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(1234)
    a = (torch.rand(GEMM_N, GEMM_N, generator=gen) * 2 - 1).to(dtype)
    b = (torch.rand(GEMM_N, GEMM_N, generator=gen) * 2 - 1).to(dtype)
    ref = a.double() @ b.double()
    out = a.to(ctx.device) @ b.to(ctx.device)  # the first one creates the cuBLAS handle
    ctx.sync()
    err = relative_error(torch, out.cpu(), ref)
    detail = check(f"{dtype_name} GEMM", err, tol, why)
    info: dict[str, Any] = {}
    if dtype_name == "float32":
        info["tf32"] = {True: "on", False: "off", None: "unknown"}[tf32]
    if not ctx.cpu:
        info["libraries"] = mapped_libraries("libcublas", "libcublasLt")
    return f"{GEMM_N}x{GEMM_N} {dtype_name}: {detail}", info


def conv_inputs(ctx: Context) -> tuple[Any, Any, Any, float, str]:
    """The inputs, and the tolerance with the TF32 state it follows from."""
    torch = ctx.torch
    if not ctx.cpu:
        cudnn = torch.backends.cudnn
        if not bool(cudnn.is_available()):
            raise RuntimeError(
                "torch.backends.cudnn.is_available() is False: this torch cannot load cuDNN"
            )
        cudnn.enabled = True
        cudnn.benchmark = False
    owner = None if ctx.cpu else torch.backends.cudnn
    tf32, why = tf32_state(ctx, owner, "torch.backends.cudnn.allow_tf32")
    tol = fp32_tolerance("conv", tf32)
    gen = torch.Generator().manual_seed(99)
    x = torch.rand(2, 8, 16, 16, generator=gen) * 2 - 1
    w = torch.rand(16, 8, 3, 3, generator=gen) * 2 - 1
    grad = torch.rand(2, 16, 16, 16, generator=gen) * 2 - 1
    return x, w, grad, tol, why


def cudnn_info(ctx: Context) -> dict[str, Any]:
    if ctx.cpu:
        return {}
    return {
        "cudnn": str(ctx.torch.backends.cudnn.version()),
        "libraries": mapped_libraries("libcudnn", "libcudnn_ops", "libcudnn_cnn", "libcudnn_graph"),
    }


def step_conv_forward(ctx: Context) -> tuple[str, dict[str, Any]]:
    torch = ctx.torch
    conv2d = torch.nn.functional.conv2d
    x, w, _, tol, why = conv_inputs(ctx)
    ref = conv2d(x.double(), w.double(), padding=1)
    out = conv2d(x.to(ctx.device), w.to(ctx.device), padding=1)  # the first creates the handle
    ctx.sync()
    detail = check("conv2d forward", relative_error(torch, out.cpu(), ref), tol, why)
    return "conv2d 2x8x16x16 * 16x8x3x3: " + detail, cudnn_info(ctx)


def conv_gradients(ctx: Context, x: Any, w: Any, grad: Any) -> tuple[Any, Any]:
    """Input and weight gradients of a 3x3, padding 1 conv2d: cuDNN's backward-data and
    backward-filter kernels on a GPU. The aten op skips the autograd engine's start-up (which
    costs more than the kernels); autograd is the fallback where the op is missing."""
    torch = ctx.torch
    backward = getattr(getattr(torch, "ops", None), "aten", None)
    backward = getattr(backward, "convolution_backward", None)
    if backward is not None:
        one, pad = [1, 1], [1, 1]
        grads = backward(grad, x, w, None, one, pad, one, False, [0, 0], 1, [True, True, False])
        return grads[0], grads[1]
    xr, wr = x.requires_grad_(), w.requires_grad_()
    torch.nn.functional.conv2d(xr, wr, padding=1).backward(grad)
    return xr.grad, wr.grad


def step_conv_backward(ctx: Context) -> tuple[str, dict[str, Any]]:
    torch = ctx.torch
    x, w, grad, tol, why = conv_inputs(ctx)
    ref_x, ref_w = conv_gradients(ctx, x.double(), w.double(), grad.double())
    dev = ctx.device
    got_x, got_w = conv_gradients(ctx, x.to(dev), w.to(dev), grad.to(dev))
    ctx.sync()
    errors = [
        relative_error(torch, got_x.cpu(), ref_x),
        relative_error(torch, got_w.cpu(), ref_w),
    ]
    detail = check("conv2d backward (input and weight gradients)", max(errors), tol, why)
    return "input and weight gradients: " + detail, {}


def step_gemm_fp32(ctx: Context) -> tuple[str, dict[str, Any]]:
    return gemm(ctx, "float32")


def step_gemm_fp16(ctx: Context) -> tuple[str, dict[str, Any]]:
    return gemm(ctx, "float16")


def step_gemm_bf16(ctx: Context) -> tuple[str, dict[str, Any]]:
    return gemm(ctx, "bfloat16")


def step_nccl(ctx: Context) -> tuple[str, dict[str, Any]]:
    torch = ctx.torch
    if ctx.cpu:
        raise SkipStepError("NCCL needs CUDA devices")
    if ctx.devices < 2:
        raise SkipStepError("an all-reduce needs two or more GPUs")
    nccl = importlib.import_module("torch.cuda.nccl")
    tensors = [
        torch.full((1 << 16,), float(i + 1), device=f"cuda:{ctx.index + i}")
        for i in range(ctx.devices)
    ]
    if not bool(nccl.is_available(tensors)):
        raise SkipStepError("this torch was built without NCCL")
    nccl.all_reduce(tensors)
    for i in range(ctx.devices):
        torch.cuda.synchronize(ctx.index + i)
    expected = ctx.devices * (ctx.devices + 1) / 2
    for i, tensor in enumerate(tensors):
        if not bool((tensor.cpu() == expected).all()):
            raise MismatchError(f"all-reduce result on GPU {i} is not {expected:g} everywhere")
    version = ".".join(str(p) for p in nccl.version()) if hasattr(nccl, "version") else "?"
    return f"all-reduce across {ctx.devices} GPUs (NCCL {version}) verified", {"nccl": version}


def _timed(ctx: Context, devices: list[int], action: Callable[[], Any], iterations: int) -> float:
    """Seconds one ``action`` takes, averaged over ``iterations`` after one warm-up, with every
    device in ``devices`` synchronised before the clock starts and before it stops."""
    torch = ctx.torch
    action()
    for d in devices:
        torch.cuda.synchronize(d)
    start = time.perf_counter()
    for _ in range(iterations):
        action()
    for d in devices:
        torch.cuda.synchronize(d)
    return max(time.perf_counter() - start, 1e-9) / iterations


def step_nccl_bandwidth(ctx: Context) -> tuple[str, dict[str, Any]]:
    """Time an all-reduce of ``bandwidth_mib`` per GPU and report nccl-tests' figures: algbw =
    bytes / time, busbw = algbw * 2(n-1)/n (what each GPU's links carried: comparable with
    the links' bandwidth whatever the number of GPUs)."""
    torch = ctx.torch
    if ctx.cpu:
        raise SkipStepError("NCCL needs CUDA devices")
    if ctx.devices < 2:
        raise SkipStepError("an all-reduce needs two or more GPUs")
    nccl = importlib.import_module("torch.cuda.nccl")
    nbytes = int(ctx.config.get("bandwidth_mib", BANDWIDTH_MIB)) * MIB
    iterations = max(1, int(ctx.config.get("iterations", BANDWIDTH_ITERATIONS)))
    devices = [ctx.index + i for i in range(ctx.devices)]
    tensors = [
        torch.empty((nbytes // 4,), dtype=torch.float32, device=f"cuda:{d}") for d in devices
    ]
    if not bool(nccl.is_available(tensors)):
        raise SkipStepError("this torch was built without NCCL")
    seconds = _timed(ctx, devices, lambda: nccl.all_reduce(tensors), iterations)
    n = len(devices)
    algbw = nbytes / seconds / 1e9
    busbw = algbw * 2 * (n - 1) / n
    info = {
        "bytes": nbytes,
        "iterations": iterations,
        "seconds": round(seconds, 6),
        "algbw_gbps": round(algbw, 2),
        "busbw_gbps": round(busbw, 2),
    }
    detail = (
        f"all-reduce of {nbytes // MIB} MiB across {n} GPUs: {seconds * 1e3:.2f} ms, "
        f"bus bandwidth {busbw:.1f} GB/s (algorithm {algbw:.1f} GB/s)"
    )
    return detail, info


def step_p2p_bandwidth(ctx: Context) -> tuple[str, dict[str, Any]]:
    """Time a device-to-device copy of ``copy_mib`` for every ordered pair, as nvbandwidth's
    device-to-device copies do (the copy engines; through host memory where P2P is off)."""
    torch = ctx.torch
    if ctx.cpu:
        raise SkipStepError("peer copies need CUDA devices")
    if ctx.devices < 2:
        raise SkipStepError("a peer copy needs two or more GPUs")
    nbytes = int(ctx.config.get("copy_mib", COPY_MIB)) * MIB
    iterations = max(1, int(ctx.config.get("iterations", BANDWIDTH_ITERATIONS)))
    devices = [ctx.index + i for i in range(ctx.devices)]
    buffers = {d: torch.empty((nbytes,), dtype=torch.uint8, device=f"cuda:{d}") for d in devices}
    spare = {d: torch.empty((nbytes,), dtype=torch.uint8, device=f"cuda:{d}") for d in devices}
    pairs = []
    slowest = None
    for a in devices:
        for b in devices:
            if a == b:
                continue

            def peer(a: int = a, b: int = b) -> bool:
                return bool(torch.cuda.can_device_access_peer(a, b))

            def copy(dst: Any = spare[b], src: Any = buffers[a]) -> Any:
                return dst.copy_(src, non_blocking=True)

            p2p = _quietly(peer)
            seconds = _timed(ctx, [a, b], copy, iterations)
            gbps = nbytes / seconds / 1e9
            pairs.append(f"{a - ctx.index}>{b - ctx.index} {gbps:.2f} {'p2p' if p2p else 'host'}")
            if slowest is None or gbps < slowest[0]:
                slowest = (gbps, a - ctx.index, b - ctx.index)
    info = {"bytes": nbytes, "iterations": iterations, "pairs": pairs}
    assert slowest is not None  # two or more devices: at least one pair
    detail = (
        f"{len(pairs)} peer copies of {nbytes // MIB} MiB; slowest {slowest[1]}>{slowest[2]} "
        f"at {slowest[0]:.1f} GB/s"
    )
    return detail, info


STEP_FUNCTIONS: dict[str, Callable[[Context], tuple[str, dict[str, Any]]]] = {
    "import": step_import,
    "context": step_context,
    "memory": step_memory,
    "gemm-fp32": step_gemm_fp32,
    "gemm-fp16": step_gemm_fp16,
    "gemm-bf16": step_gemm_bf16,
    "conv-forward": step_conv_forward,
    "conv-backward": step_conv_backward,
    "nccl-allreduce": step_nccl,
    "nccl-bandwidth": step_nccl_bandwidth,
    "p2p-bandwidth": step_p2p_bandwidth,
}


def run_step(
    ctx: Context,
    name: str,
    function: Callable[[Context], tuple[str, dict[str, Any]]] | None = None,
    *,
    measure: bool = False,
) -> dict[str, Any]:
    """Run one step and report it; ``measure`` adds the device's free memory after it."""
    emit({"event": "start", "step": name})
    start = time.monotonic()
    result: dict[str, Any] = {"event": "result", "step": name}
    info: dict[str, Any] = {}
    try:
        detail, info = (function or STEP_FUNCTIONS[name])(ctx)
        result.update(status="passed", detail=detail)
    except SkipStepError as exc:
        result.update(status="skipped", reason=str(exc))
    except MismatchError as exc:
        result.update(status="failed", kind="mismatch", error=str(exc), error_type="Mismatch")
    except Exception as exc:  # noqa: BLE001 (every failure is the step's result, verbatim)
        result.update(
            status="failed",
            error=error_text(exc),
            error_type=type(exc).__name__,
            traceback=_traceback(),
        )
    result["seconds"] = round(time.monotonic() - start, 4)
    if measure and not ctx.cpu:
        free = _quietly(ctx.free)
        if free is not None:
            info = {**info, "free_after": free}
    if info:
        result["info"] = info
    emit(result)
    return result


def skip_rest(steps: list[str], reason: str) -> None:
    for name in steps:
        emit({"event": "result", "step": name, "status": "skipped", "reason": reason, "seconds": 0})


def run_smoke(ctx: Context) -> None:
    steps = [s for s in ctx.config.get("steps", STEPS) if s in STEP_FUNCTIONS]
    poison = [re.compile(p, re.IGNORECASE) for p in ctx.config.get("poison", [])]
    for position, name in enumerate(steps):
        result = run_step(ctx, name)
        if result["status"] != "failed":
            continue
        first_line = (result.get("error") or "").splitlines()[0:1] or [""]
        rest = steps[position + 1 :]
        if name == "import":
            skip_rest(rest, "torch could not be imported")
            return
        if name == "context":
            skip_rest(rest, "no CUDA context: `context` failed")
            return
        if any(p.search(result.get("error") or "") for p in poison):
            skip_rest(
                rest,
                f"the CUDA context is unusable after `{name}` failed with: {first_line[0]}",
            )
            return


# --- reproduce mode -------------------------------------------------------------------------


class RawMemory:
    """Device memory taken with the CUDA driver API, outside torch's allocator: torch can
    neither see nor release it, exactly like memory another process holds."""

    how = "cuMemAlloc (CUDA driver API, outside torch's allocator)"

    def __init__(self, lib: Any = None) -> None:
        # Imported by name, like torch: native access happens in the target interpreter only.
        self.ctypes = ctypes = importlib.import_module("ctypes")
        if lib is None:
            lib = ctypes.CDLL("libcuda.so.1")  # already loaded by torch: the same library
            lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
            lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        current = ctypes.c_void_p()
        status = lib.cuCtxGetCurrent(ctypes.byref(current))
        if status != 0 or not current.value:
            raise OSError(f"no current CUDA context for the driver API (status {status})")
        self.lib = lib
        self.held = 0
        self.pointers: list[int] = []

    def take(self, nbytes: int) -> bool:
        ctypes = self.ctypes
        pointer = ctypes.c_uint64()
        status = self.lib.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(nbytes))
        if status == CUDA_ERROR_OUT_OF_MEMORY:
            return False
        if status != 0:
            raise OSError(f"cuMemAlloc of {nbytes} bytes failed with CUDA driver error {status}")
        self.pointers.append(int(pointer.value))
        self.held += nbytes
        return True


class TorchMemory:
    """Device memory taken as torch tensors, through torch's caching allocator."""

    how = "torch tensors (torch's caching allocator)"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.held = 0
        self.tensors: list[Any] = []

    def take(self, nbytes: int) -> bool:
        torch = self.ctx.torch
        try:
            tensor = torch.empty((nbytes,), dtype=torch.uint8, device=self.ctx.device)
        except Exception as exc:  # out of memory is an answer; anything else is not
            if "out of memory" in str(exc).lower():
                return False
            raise
        self.tensors.append(tensor)
        self.held += nbytes
        return True

    def into_cache(self) -> None:
        """Free the tensors: torch's allocator keeps their memory reserved in its cache."""
        self.tensors.clear()


def fill(holder: Any, free_now: Callable[[], int], leave: int) -> int:
    """Take device memory through ``holder`` until less than ``leave`` + 2 MiB is free; the free
    bytes at the end. Halves the chunk when an allocation is refused."""
    free = free_now()
    size = (free - leave) // GRAIN * GRAIN
    for _ in range(512):
        room = (free - leave) // GRAIN * GRAIN
        size = min(size, room)
        if size < GRAIN:
            break
        if holder.take(size):
            free = free_now()
        else:
            size = size // 2 // GRAIN * GRAIN
    return free


def step_hold(ctx: Context) -> tuple[str, dict[str, Any]]:
    torch = ctx.torch
    leave = int(ctx.config["leave_mib"]) * MIB
    mode = ctx.config.get("hold", "raw")
    holder: Any
    how = ""
    if mode == "torch-cache":
        holder = TorchMemory(ctx)
        how = "torch's cache (tensors allocated, then freed into the cache)"
    else:
        try:
            holder = RawMemory()
            how = holder.how
        except (OSError, AttributeError) as exc:
            holder = TorchMemory(ctx)
            how = f"{holder.how}; the driver API is unusable here: {exc}"
    fill(holder, ctx.free, leave)
    if mode == "torch-cache":
        holder.into_cache()
    ctx.held = holder
    free = ctx.free()
    info: dict[str, Any] = {"free_held": free, "held": holder.held, "holder": how}
    reserved = _quietly(lambda: int(torch.cuda.memory_reserved(ctx.index)))
    if reserved is not None:
        info["reserved"] = reserved
    detail = (
        f"{holder.held / MIB:.0f} MiB held by {how.split(';')[0]}; {free / MIB:.0f} MiB free "
        f"(asked to leave {leave / MIB:.0f} MiB)"
    )
    return detail, info


def run_in_new_thread(ctx: Context, name: str) -> dict[str, Any]:
    """Run a step in a thread of its own: torch gives each thread its own cuBLAS/cuDNN handle,
    so the step creates one while the memory is held."""
    box: list[dict[str, Any]] = []
    worker = threading.Thread(target=lambda: box.append(run_step(ctx, name, measure=True)))
    worker.daemon = True
    worker.start()
    worker.join()
    return box[0] if box else {"status": "failed"}


def run_reproduce(ctx: Context) -> None:
    probe = str(ctx.config.get("probe", "gemm-fp32"))
    in_thread = ctx.config.get("hold") == "torch-cache"
    steps = [str(s) for s in ctx.config.get("steps", ["import", "context", probe])]
    for position, name in enumerate(steps):
        rest = steps[position + 1 :]
        if name == "warm-up":
            result = run_step(ctx, name, STEP_FUNCTIONS[probe], measure=True)
        elif name == "hold":
            result = run_step(ctx, name, step_hold)
        elif name == probe and in_thread:
            result = run_in_new_thread(ctx, name)
        else:
            result = run_step(ctx, name, measure=name == probe)
        if result["status"] == "failed" and rest:
            skip_rest(rest, f"`{name}` failed")
            return


# --- entry point ----------------------------------------------------------------------------


def exit_when_stdin_closes() -> None:
    # os.read on the raw descriptor: a daemon thread blocked inside sys.stdin's buffer would
    # hold its lock and stall the interpreter's shutdown.
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    os._exit(70)


def main(argv: list[str]) -> None:
    config: dict[str, Any] = json.loads(argv[0]) if argv else {}
    claim_stdout()
    faulthandler.enable()  # a native crash leaves the Python stack on stderr
    budget = float(config.get("budget", 0) or 0)
    if budget > 0:
        # Native watchdog: ends the process even when a CUDA call hangs holding the GIL.
        faulthandler.dump_traceback_later(budget, exit=True)
    ctx = Context(config)
    if config.get("watch_stdin"):
        threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    if config.get("mode") == "reproduce":
        run_reproduce(ctx)
    else:
        run_smoke(ctx)
    emit({"event": "done"})
    # Everything is reported: skip the interpreter's (and torch's) teardown, which can take
    # longer than all the steps together. The driver releases the context at exit anyway.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
