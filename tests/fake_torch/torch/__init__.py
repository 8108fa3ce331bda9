"""A fake `torch` for the smoke child, put first on its PYTHONPATH by the tests.

It implements just what envdoctor/smoke/child.py touches, computes nothing, and misbehaves on
demand, selected by environment variables:

ENVDOCTOR_FAKE_TORCH   comma-separated ``op=behaviour`` (``op@VISIBLE=behaviour`` applies only
                       when CUDA_VISIBLE_DEVICES == VISIBLE). Ops: import, init, context, alloc,
                       fill, copy, matmul, matmul.float32|float16|bfloat16, conv, conv-backward,
                       nccl, sync. Behaviours: raise:<fixture name> (the verbatim text from
                       tests/smoke/fixtures/cuda_errors.json), hang, sleep:<seconds>, segv,
                       abort, exit:<status>, wrong (a wrong result), hang-with-child (starts a
                       grandchild `sleep`, records its PID, hangs).
ENVDOCTOR_FAKE_STATE   a directory: every fake process writes pid-<pid> there; the hog (the
                       child run with PYTORCH_NO_CUDA_MEMORY_CACHING=1) publishes what it holds
                       in hog.json so that probes see less free memory while it lives.
ENVDOCTOR_FAKE_TOTAL_MIB / _USED_MIB (held by others) / _CONTEXT_MIB (a context's own cost)
ENVDOCTOR_FAKE_CUBLAS_MIB / _CUDNN_MIB  free memory cuBLAS / cuDNN need at their first use,
                       below which they raise the cublas-alloc-failed / cudnn-not-initialized
                       fixtures (override with ENVDOCTOR_FAKE_CUBLAS_ERROR / _CUDNN_ERROR).
ENVDOCTOR_FAKE_CAPABILITY ("9.0"), ENVDOCTOR_FAKE_NAME, ENVDOCTOR_FAKE_CUDNN_AVAILABLE ("1").
"""

import json
import os
import signal
import subprocess
import sys
import time
import types

MIB = 1 << 20
_HERE = os.path.dirname(os.path.abspath(__file__))
_FIXTURES = os.path.join(_HERE, "..", "..", "smoke", "fixtures", "cuda_errors.json")
_ENV = os.environ

__version__ = "2.11.0+cu130"
__file__ = os.path.abspath(__file__)
version = types.SimpleNamespace(cuda="13.0")


class OutOfMemoryError(RuntimeError):
    pass


class DistBackendError(RuntimeError):
    pass


_TYPES = {
    "RuntimeError": RuntimeError,
    "AssertionError": AssertionError,
    "OutOfMemoryError": OutOfMemoryError,
    "DistBackendError": DistBackendError,
}


def _fixture(name):
    with open(_FIXTURES) as handle:
        entry = json.load(handle)["errors"][name]
    return _TYPES[entry["type"]](entry["message"])


def _rules():
    rules = {}
    visible = _ENV.get("CUDA_VISIBLE_DEVICES")
    for item in filter(None, _ENV.get("ENVDOCTOR_FAKE_TORCH", "").split(",")):
        op, _, behaviour = item.partition("=")
        op, _, only = op.partition("@")
        if only and only != visible:
            continue
        rules[op.strip()] = behaviour.strip()
    return rules


_RULES = _rules()
_STATE = _ENV.get("ENVDOCTOR_FAKE_STATE")


def _note(name, text):
    if _STATE:
        with open(os.path.join(_STATE, name), "w") as handle:
            handle.write(text)


def _misbehave(op):
    """Apply the behaviour configured for ``op``; True means "give a wrong result"."""
    behaviour = _RULES.get(op, "")
    kind, _, arg = behaviour.partition(":")
    if kind == "raise":
        raise _fixture(arg)
    if kind == "hang":
        time.sleep(3600)
    if kind == "sleep":
        time.sleep(float(arg))
    if kind == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "abort":
        os.abort()
    if kind == "exit":
        os._exit(int(arg))
    if kind == "hang-with-child":
        grandchild = subprocess.Popen(["sleep", "300"])
        _note("grandchild", str(grandchild.pid))
        time.sleep(3600)
    return kind == "wrong"


_note(f"pid-{os.getpid()}", "hog" if _ENV.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1" else "child")
_misbehave("import")


# --- simulated device memory ----------------------------------------------------------------


class _Memory:
    def __init__(self):
        self.total = int(_ENV.get("ENVDOCTOR_FAKE_TOTAL_MIB", "81559")) * MIB
        self.used = int(_ENV.get("ENVDOCTOR_FAKE_USED_MIB", "0")) * MIB
        self.own = 0
        self.context = False
        self.cublas = False
        self.cudnn = False
        self.hog = _ENV.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1"

    def others(self):
        if not _STATE:
            return 0
        try:
            with open(os.path.join(_STATE, "hog.json")) as handle:
                data = json.load(handle)
            if data["pid"] == os.getpid():
                return 0
            os.kill(data["pid"], 0)
        except (OSError, ValueError, KeyError):
            return 0
        return int(data["bytes"])

    def free(self):
        return max(0, self.total - self.used - self.others() - self.own)

    def take(self, nbytes):
        self.own += nbytes
        self.publish()

    def give(self, nbytes):
        self.own -= nbytes
        self.publish()

    def publish(self):
        if self.hog:
            _note("hog.json", json.dumps({"pid": os.getpid(), "bytes": self.own}))

    def ensure_context(self):
        if self.context:
            return
        _misbehave("context")
        need = int(_ENV.get("ENVDOCTOR_FAKE_CONTEXT_MIB", "500")) * MIB
        if self.free() < need:
            raise _fixture("cuda-error-out-of-memory")
        self.context = True
        self.take(need)

    def first_use(self, library):
        if getattr(self, library):
            return
        need = int(_ENV.get(f"ENVDOCTOR_FAKE_{library.upper()}_MIB", "0")) * MIB
        if self.free() < need:
            default = "cublas-alloc-failed" if library == "cublas" else "cudnn-not-initialized"
            raise _fixture(_ENV.get(f"ENVDOCTOR_FAKE_{library.upper()}_ERROR", default))
        setattr(self, library, True)
        self.take(need)


_MEMORY = _Memory()


# --- tensors --------------------------------------------------------------------------------


class dtype:  # noqa: N801 (torch's spelling)
    def __init__(self, name, size):
        self.name = name
        self.itemsize = size

    def __repr__(self):
        return f"torch.{self.name}"


float32 = dtype("float32", 4)
float64 = dtype("float64", 8)
float16 = dtype("float16", 2)
bfloat16 = dtype("bfloat16", 2)
int32 = dtype("int32", 4)
uint8 = dtype("uint8", 1)
_GRAD_WRONG = []


def _device_of(value):
    return "cuda" if str(value).startswith("cuda") else "cpu"


class Tensor:
    def __init__(self, device="cpu", dt=float32, wrong=False, nbytes=0, owned=False):
        self.device = device
        self.dtype = dt
        self.wrong = wrong
        self.nbytes = nbytes
        self.owned = owned

    def _new(self, **changes):
        fields = {"device": self.device, "dt": self.dtype, "wrong": self.wrong}
        fields.update(changes)
        return Tensor(**fields)

    def __del__(self):
        if self.owned:
            _MEMORY.give(self.nbytes)

    def to(self, *args, **kwargs):
        result = self._new()
        for arg in (*args, *kwargs.values()):
            if isinstance(arg, dtype):
                result.dtype = arg
            elif isinstance(arg, str):
                if _device_of(arg) == "cuda" and self.device == "cpu":
                    _MEMORY.ensure_context()
                    result.wrong = _misbehave("copy") or result.wrong
                result.device = _device_of(arg)
        return result

    def cpu(self):
        return self._new(device="cpu")

    def double(self):
        return self._new(dt=float64)

    def _combine(self, other):
        wrong = self.wrong or (isinstance(other, Tensor) and other.wrong)
        return self._new(wrong=wrong)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _combine
    __eq__ = _combine
    __hash__ = object.__hash__

    def __matmul__(self, other):
        wrong = False
        if self.device == "cuda":
            _MEMORY.first_use("cublas")
            wrong = _misbehave("matmul") | _misbehave(f"matmul.{self.dtype.name}")
        return self._combine(other)._new(wrong=self.wrong or other.wrong or wrong)

    def abs(self):
        return self._new()

    def max(self, *args):
        return self._new()

    def all(self):
        return self._new()

    def item(self):
        return 1.0 if self.wrong else 0.0

    def __bool__(self):
        return not self.wrong

    def numel(self):
        return self.nbytes

    def requires_grad_(self, flag=True):
        return self

    @property
    def grad(self):
        return self._new(wrong=bool(_GRAD_WRONG) and self.device == "cuda")

    def backward(self, gradient=None):
        if self.device == "cuda" and _misbehave("conv-backward"):
            _GRAD_WRONG.append(True)


def _size(shape):
    count = 1
    for dim in shape if isinstance(shape, tuple | list) else (shape,):
        count *= int(dim)
    return count


def empty(shape, dtype=float32, device="cpu"):
    if _device_of(device) == "cpu":
        return Tensor()
    _MEMORY.ensure_context()
    _misbehave("alloc")
    nbytes = _size(shape) * dtype.itemsize
    if nbytes > 4096:
        nbytes = -(-nbytes // (2 * MIB)) * 2 * MIB
        if nbytes > _MEMORY.free():
            raise _fixture("torch-out-of-memory")
        _MEMORY.take(nbytes)
        return Tensor("cuda", dtype, nbytes=nbytes, owned=True)
    return Tensor("cuda", dtype)


def arange(n, dtype=int32, device="cpu"):
    if _device_of(device) == "cuda":
        _MEMORY.ensure_context()
        return Tensor("cuda", dtype, wrong=_misbehave("fill"))
    return Tensor("cpu", dtype)


def rand(*size, generator=None):
    return Tensor()


randn = rand


def full(shape, value, device="cpu"):
    return Tensor(_device_of(device))


def equal(a, b):
    return not (a.wrong or b.wrong)


class Generator:
    def manual_seed(self, seed):
        return self


# --- torch.cuda, torch.backends, torch.nn ---------------------------------------------------


def _visible_count():
    visible = _ENV.get("CUDA_VISIBLE_DEVICES")
    default = len([v for v in visible.split(",") if v]) if visible else 1
    return int(_ENV.get("ENVDOCTOR_FAKE_DEVICES", default))


def _init():
    _misbehave("init")


def _synchronize(device=None):
    _misbehave("sync")


def _properties(index=0):
    major, minor = _ENV.get("ENVDOCTOR_FAKE_CAPABILITY", "9.0").split(".")
    return types.SimpleNamespace(
        name=_ENV.get("ENVDOCTOR_FAKE_NAME", "NVIDIA H100 80GB HBM3"),
        major=int(major),
        minor=int(minor),
        uuid="00000000-0000-0000-0000-00000000000%d" % index,  # noqa: UP031 (stays 3.8-simple)
        total_memory=_MEMORY.total,
    )


def _all_reduce(tensors):
    if _misbehave("nccl"):
        tensors[0].wrong = True


nccl = types.ModuleType("torch.cuda.nccl")
nccl.is_available = lambda tensors: True
nccl.all_reduce = _all_reduce
nccl.version = lambda: (2, 27, 5)

cuda = types.ModuleType("torch.cuda")
cuda.OutOfMemoryError = OutOfMemoryError
cuda.is_available = lambda: True
cuda.init = _init
cuda.device_count = _visible_count
cuda.set_device = lambda index: None
cuda.synchronize = _synchronize
cuda.get_device_properties = _properties
cuda.mem_get_info = lambda index=0: (_MEMORY.free(), _MEMORY.total)
cuda.empty_cache = lambda: None
cuda.nccl = nccl
sys.modules["torch.cuda"] = cuda
sys.modules["torch.cuda.nccl"] = nccl

backends = types.SimpleNamespace(
    cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=True)),
    cudnn=types.SimpleNamespace(
        is_available=lambda: _ENV.get("ENVDOCTOR_FAKE_CUDNN_AVAILABLE", "1") == "1",
        version=lambda: 91500,
        enabled=True,
        benchmark=False,
        allow_tf32=True,
    ),
)


def _conv2d(x, w, bias=None, padding=0):
    wrong = False
    if x.device == "cuda":
        _MEMORY.first_use("cudnn")
        wrong = _misbehave("conv")
    return x._combine(w)._new(wrong=x.wrong or wrong)


nn = types.SimpleNamespace(functional=types.SimpleNamespace(conv2d=_conv2d))
