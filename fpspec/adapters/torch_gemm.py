"""torch GEMMs as probe targets (FPS-PRB-16): ``torch._scaled_mm`` on float8_e4m3fn and
``torch.mm`` on BF16 / FP16 with FP32 output, on CUDA.

torch is optional: it is imported on first use, and a missing torch or a missing
CUDA device is a clear :class:`~fpspec.errors.FpspecError`.  Operands travel as
their bit patterns (``Tensor.view`` of the code arrays), so nothing is rounded on
the way in.  ``device="cpu"`` runs the same calls on torch's CPU kernels (for
tests of this module; those kernels are not what the probe is after).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import FpspecError

__all__ = ["require_torch", "TorchScaledMMTarget", "TorchMatmulTarget", "torch_info", "Observation",
           "observe_call", "observation", "observation_from_trace", "settle_observation", "observe", "target_call",
           "OBSERVE_TAG"]


def require_torch(device: str = "cuda") -> Any:
    """Import torch; FpspecError when it is missing or ``device`` is CUDA without a GPU."""
    try:
        import torch
    except ImportError:
        raise FpspecError("this probe target needs PyTorch (pip install 'fpspec[torch]', "
                          "or a CUDA build of torch for GPU targets); torch is not installed") from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise FpspecError(f"this probe target needs a CUDA device; torch {torch.__version__} "
                          "sees none (torch.cuda.is_available() is False)")
    return torch


def torch_info(torch: Any, device: str) -> dict:
    """Versions and device facts for the report."""
    d: dict[str, Any] = {"torch": torch.__version__, "cuda_runtime": torch.version.cuda, "device": device}
    if device.startswith("cuda"):
        idx = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(idx)
        d.update(gpu=props.name, compute_capability=f"{props.major}.{props.minor}",
                 sm_count=props.multi_processor_count,
                 allow_bf16_reduced_precision_reduction=torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
                 allow_fp16_reduced_precision_reduction=torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction)
        try:
            d["cublas"] = torch._C._cuda_getCompiledVersion()
        except Exception:  # pragma: no cover - informational only
            pass
    return d


def _pad16(x: np.ndarray) -> np.ndarray:
    """Zero rows up to a multiple of 16 (cuBLAS FP8 needs M, N multiples of 16)."""
    r = -x.shape[0] % 16
    return x if r == 0 else np.concatenate([x, np.zeros((r, x.shape[1]), dtype=x.dtype)])


class TorchScaledMMTarget:
    """``torch._scaled_mm(A, B, scale_a, scale_b, out_dtype=float32, use_fast_accum=...)``.

    A is float8_e4m3fn (M x K row-major), B the transpose of BT (K x N column-major),
    both tensor scales 1.0 unless :meth:`matmul_scaled` gives others.
    """

    def __init__(self, fmt: str = "e4m3", use_fast_accum: bool = False, device: str = "cuda"):
        if fmt != "e4m3":
            raise FpspecError("torch._scaled_mm target: e4m3 operands only (e5m2 x e5m2 is not a cuBLAS GEMM)")
        self.torch = require_torch(device)
        self.operand_format = fmt
        self.use_fast_accum = use_fast_accum
        self.device = device
        self.name = "torch-scaled-mm" + ("-fast" if use_fast_accum else "")

    def _fp8(self, codes: np.ndarray) -> Any:
        t = self.torch
        if codes.dtype != np.uint8 or codes.ndim != 2:
            raise FpspecError(f"{self.name}: operands must be 2-D uint8 e4m3 codes, got {codes.dtype} {codes.shape}")
        if codes.shape[1] % 16:
            raise FpspecError(f"{self.name}: K = {codes.shape[1]} is not a multiple of 16")
        return t.from_numpy(np.ascontiguousarray(_pad16(codes))).to(self.device).view(t.float8_e4m3fn)

    def matmul_scaled(self, a: np.ndarray, bt: np.ndarray, scale_a: float, scale_b: float) -> np.ndarray:
        t = self.torch
        m, n = a.shape[0], bt.shape[0]
        ta, tb = self._fp8(a), self._fp8(bt)
        sa = t.tensor(float(np.float32(scale_a)), dtype=t.float32, device=self.device)
        sb = t.tensor(float(np.float32(scale_b)), dtype=t.float32, device=self.device)
        y = t._scaled_mm(ta, tb.t(), scale_a=sa, scale_b=sb, out_dtype=t.float32,
                         use_fast_accum=self.use_fast_accum)
        return y[:m, :n].cpu().numpy()

    def matmul(self, a: np.ndarray, bt: np.ndarray) -> np.ndarray:
        return self.matmul_scaled(a, bt, 1.0, 1.0)

    def info(self) -> dict:
        return {"target": self.name, "call": "torch._scaled_mm(A_fp8, BT_fp8.t(), scale_a=1, scale_b=1, "
                f"out_dtype=torch.float32, use_fast_accum={self.use_fast_accum})",
                **torch_info(self.torch, self.device)}


class TorchMatmulTarget:
    """``torch.mm(A, BT.t(), out_dtype=torch.float32)`` with BF16 or FP16 operands."""

    def __init__(self, fmt: str = "bf16", device: str = "cuda", reduced_precision_reduction: bool | None = None):
        if fmt not in ("bf16", "fp16"):
            raise FpspecError(f"torch matmul target: bf16 or fp16 operands, not {fmt}")
        self.torch = require_torch(device)
        self.operand_format = fmt
        self.device = device
        self.reduced = reduced_precision_reduction
        self.name = f"torch-{fmt}" + ("" if reduced_precision_reduction is None else
                                      f"-rpr{int(bool(reduced_precision_reduction))}")

    def _t(self, codes: np.ndarray) -> Any:
        t = self.torch
        if codes.dtype != np.uint16 or codes.ndim != 2:
            raise FpspecError(f"{self.name}: operands must be 2-D uint16 codes, got {codes.dtype} {codes.shape}")
        dt = t.bfloat16 if self.operand_format == "bf16" else t.float16
        return t.from_numpy(np.ascontiguousarray(codes).view(np.int16)).to(self.device).view(dt)

    def matmul(self, a: np.ndarray, bt: np.ndarray) -> np.ndarray:
        t = self.torch
        flag = (t.backends.cuda.matmul.allow_bf16_reduced_precision_reduction if self.operand_format == "bf16"
                else t.backends.cuda.matmul.allow_fp16_reduced_precision_reduction)
        if self.reduced is not None:
            self._set_flag(self.reduced)
        try:
            y = t.mm(self._t(a), self._t(bt).t(), out_dtype=t.float32)
        finally:
            if self.reduced is not None:
                self._set_flag(flag)
        return y.cpu().numpy()

    def _set_flag(self, value: bool) -> None:
        m = self.torch.backends.cuda.matmul
        if self.operand_format == "bf16":
            m.allow_bf16_reduced_precision_reduction = value
        else:
            m.allow_fp16_reduced_precision_reduction = value

    def info(self) -> dict:
        return {"target": self.name, "call": "torch.mm(A, BT.t(), out_dtype=torch.float32)",
                "reduced_precision_reduction": self.reduced, **torch_info(self.torch, self.device)}


# ================================================================== the observer (FPS-CUB-8)
#: The ``record_function`` name the observed call runs under.
OBSERVE_TAG = "fpspec-observe:"
#: torch's CPU GEMM ops, the stand-ins for kernels when no CUDA kernel ran.
_CPU_GEMM_OPS = ("aten::_scaled_mm", "aten::mm", "aten::addmm", "aten::bmm", "aten::matmul")


@dataclass(frozen=True)
class Observation:
    """One observed GEMM call: the target (a :data:`fpspec.cublas.h200.TARGETS` name), the
    shape (M, N, K), the kernels it launched (name, grid; in launch order), the GEMM kernel
    among them, how they were attributed, the call's result, the kernel's
    :class:`~fpspec.cublas.h200.KernelChoice` (``choice``; confidence ``"outputs"`` when
    the call's outputs settled a persistent launch's slice count, FPS-CUB-10) and the
    model (:func:`fpspec.cublas.library.kernel_model` of it) or why there is none."""

    target: str
    shape: tuple[int, int, int]
    kernels: tuple[tuple[str, tuple[int, ...] | None], ...]
    kernel: str | None
    grid: tuple[int, ...] | None
    method: str | None
    model: Any = None
    error: str | None = None
    result: Any = field(default=None, repr=False, compare=False)
    choice: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        return {"target": self.target, "shape": list(self.shape), "kernel": self.kernel,
                "grid": list(self.grid) if self.grid else None, "method": self.method,
                "kernels": [[n, list(g) if g else None] for n, g in self.kernels],
                "model": self.model.to_dict() if self.model is not None else None, "error": self.error,
                "settled": self.choice.note if self.choice is not None and self.choice.confidence == "outputs"
                else None}


def target_call(torch: Any, target: str, a: Any, bt: Any) -> Any:
    """The torch call of a cuBLAS target on tensors a (M x K) and bt (N x K) of its dtype:
    ``torch.mm(a, bt.t(), out_dtype=float32)`` (BF16, FP16; on the CPU, which has no
    ``out_dtype`` mm, the FP32 product of the upcast operands stands in) or
    ``torch._scaled_mm(a, bt.t(), scale_a=1, scale_b=1, out_dtype=float32, use_fast_accum=...)``."""
    from ..cublas.h200 import TARGETS

    tg = TARGETS[target]
    if tg.fmt == "e4m3":
        one = torch.tensor(1.0, dtype=torch.float32, device=a.device)
        return torch._scaled_mm(a, bt.t(), scale_a=one, scale_b=one, out_dtype=torch.float32,
                                use_fast_accum=target.endswith("-fast"))
    if a.device.type == "cpu":
        return torch.mm(a.float(), bt.float().t())
    return torch.mm(a, bt.t(), out_dtype=torch.float32)


def observe_call(call: Any, target: str, shape: Any, *, torch: Any = None) -> Observation:
    """Run ``call()`` (a GEMM of the target at ``shape``) once under the torch profiler and
    read the kernel it launched and that kernel's grid (FPS-CUB-8): the kernels inside
    ``record_function(OBSERVE_TAG)`` (:func:`fpspec.adapters.kernel_trace.attribute_kernels`;
    on the CPU, torch's CPU ops stand in for kernels), the GEMM kernel among them
    (:func:`fpspec.cublas.h200.pick_gemm_kernel`), then
    :func:`fpspec.cublas.library.model_for_kernel`.  An unmodelled kernel (SIMT, a CPU op)
    gives an Observation with ``model`` None and the reason in ``error``."""
    import json
    import tempfile
    from pathlib import Path

    from ..cublas.h200 import PRESET_TARGETS, TARGETS

    target = PRESET_TARGETS.get(target, target)
    if target not in TARGETS:
        raise FpspecError(f"unknown cuBLAS target {target!r}; expected one of {', '.join(TARGETS)} "
                          f"or a library preset ({', '.join(PRESET_TARGETS)})")
    t = torch or require_torch("cpu")
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = t.cuda.is_available()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        with record_function(OBSERVE_TAG):
            y = call()
        if cuda:
            t.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    return observation_from_trace(trace, target, shape, result=y)


def observation_from_trace(trace: dict, target: str, shape: Any, *, result: Any = None) -> Observation:
    """The :class:`Observation` of a kineto trace (Chrome JSON) in which the call ran inside
    ``record_function(OBSERVE_TAG)`` (FPS-CUB-8); pure Python.  Without CUDA kernel events
    torch's CPU GEMM ops stand in (no grid: no model)."""
    from ..cublas.h200 import PRESET_TARGETS, choice_for_kernel, pick_gemm_kernel
    from ..cublas.library import kernel_model
    from .kernel_trace import attribute_kernels

    target = PRESET_TARGETS.get(target, target)
    has_kernels = any(isinstance(e, dict) and str(e.get("cat", "")).lower() == "kernel"
                      for e in trace.get("traceEvents", []))
    owners = attribute_kernels(trace, OBSERVE_TAG, ("kernel",) if has_kernels else ("cpu_op",))
    slot = owners.get(OBSERVE_TAG, {"kernels": [], "method": None})
    kernels = tuple((k["name"], tuple(k["grid"]) if k.get("grid") else None) for k in slot["kernels"])
    if not has_kernels:  # CPU ops stand in: the GEMM op itself (no grid)
        gemm_ops = tuple((n, g) for n, g in kernels if n in _CPU_GEMM_OPS)
        kernels = gemm_ops or tuple((n, g) for n, g in kernels if n != OBSERVE_TAG)
    m, n, k = (int(v) for v in shape)
    picked = pick_gemm_kernel([(nm, g or (1, 1, 1)) for nm, g in kernels])
    base = dict(target=target, shape=(m, n, k), kernels=kernels, method=slot["method"], result=result)
    if picked is None:
        return Observation(**base, kernel=None, grid=None, error="no kernel attributed to the call")
    name, grid = picked
    grid_seen = dict(kernels).get(name)
    choice = None
    try:
        if grid_seen is None:
            raise FpspecError(f"{name}: the profiler gave no launch grid (a CPU op, or no CUDA activity)")
        choice = choice_for_kernel(target, (m, n, k), name, grid)
        model = kernel_model(choice)
    except FpspecError as exc:
        return Observation(**base, kernel=name, grid=tuple(grid_seen) if grid_seen else None, error=str(exc),
                           choice=choice)
    return Observation(**base, kernel=name, grid=tuple(grid), model=model, choice=choice)


def settle_observation(obs: Observation, a: Any, bt: Any, *, avoid_rows: Any = (),
                       avoid_cols: Any = ()) -> Observation:
    """``obs`` with a persistent launch's slice count settled by the call's outputs
    (FPS-CUB-10, :func:`fpspec.adapters.settle.settle_choice`): the samples of
    :data:`~fpspec.adapters.settle.SETTLE_SAMPLES` in turn (rows x columns spread over the
    result, outside ``avoid_rows`` / ``avoid_cols`` where it can be), until one sample
    leaves one candidate; a, bt are the call's operands (numpy codes or tensors).  Any
    other observation is returned as it is; when no candidate reproduces a sample, or the
    largest leaves more than one, there is no model and ``error`` says why."""
    from ..cublas.library import kernel_model
    from .settle import SETTLE_SAMPLES, fitting_candidates, settle_sample, unsettled

    if obs.choice is None or obs.choice.confidence != "candidates" or obs.result is None:
        return obs
    m, n, _ = obs.shape
    y = obs.result
    for n_rows, n_cols in SETTLE_SAMPLES:
        rows = settle_sample(m, n_rows, list(avoid_rows))
        cols = settle_sample(n, n_cols, list(avoid_cols))
        got = y[rows][:, cols]
        want = np.asarray(got.float().cpu().numpy() if hasattr(got, "cpu") else got, dtype=np.float32)
        try:
            fits = fitting_candidates(obs.choice, _as_codes(a, rows), _as_codes(bt, cols), want)
        except FpspecError as exc:
            return replace(obs, error=str(exc))
        if len(fits) == 1:
            return replace(obs, choice=fits[0], model=kernel_model(fits[0]), error=None)
        if not fits:
            return replace(obs, error=unsettled(obs.choice, fits, want.size, ""))
    return replace(obs, error=unsettled(obs.choice, fits, want.size, "the call's outputs cannot settle P"))


def _as_codes(x: Any, rows: list[int]) -> np.ndarray:
    """The code arrays (uint8 / uint16 bit patterns) of some rows of an operand."""
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x[rows])
    sub = x[rows].cpu().contiguous()
    width = sub.element_size()
    import torch as _t  # x is a tensor, so torch is there
    raw = sub.view(_t.uint8 if width == 1 else _t.int16).numpy()
    return raw.view(np.uint8 if width == 1 else np.uint16)


def observation(a: Any, bt: Any, target: str, *, device: str | None = None) -> Observation:
    """:func:`observe_call` of the target's torch call on operands a (M x K) and bt (N x K):
    numpy code arrays (uint16 BF16 / FP16, uint8 e4m3; moved to ``device``, default
    "cuda" when torch sees a GPU, else "cpu") or torch tensors of the target's dtype.
    One unprofiled call first (cuBLAS handles, workspaces), then the observed one."""
    from ..cublas.h200 import PRESET_TARGETS, TARGETS

    target = PRESET_TARGETS.get(target, target)
    if target not in TARGETS:
        raise FpspecError(f"unknown cuBLAS target {target!r}; expected one of {', '.join(TARGETS)} "
                          f"or a library preset ({', '.join(PRESET_TARGETS)})")
    t = require_torch(device or "cpu")
    dev = device or ("cuda" if t.cuda.is_available() else "cpu")
    ta, tb = (_as_tensor(t, x, TARGETS[target].fmt, dev) for x in (a, bt))
    if ta.ndim != 2 or tb.ndim != 2 or ta.shape[1] != tb.shape[1]:
        raise FpspecError(f"observe: A (M x K) and BT (N x K) must be 2-D with one K, got {tuple(ta.shape)} and "
                          f"{tuple(tb.shape)}")
    shape = (int(ta.shape[0]), int(tb.shape[0]), int(ta.shape[1]))
    try:
        target_call(t, target, ta, tb)
    except RuntimeError as exc:
        raise FpspecError(f"{target} at {'x'.join(map(str, shape))}: torch refused the call: {exc}") from None
    obs = observe_call(lambda: target_call(t, target, ta, tb), target, shape, torch=t)
    return settle_observation(obs, ta, tb)


def observe(a: Any, bt: Any, target: str, *, device: str | None = None) -> Any:
    """The exact :class:`~fpspec.models.GemmModel` of one torch GEMM call, read from the
    kernel cuBLAS launched for it (FPS-CUB-8; :func:`observation`); FpspecError when that
    kernel is not modelled."""
    obs = observation(a, bt, target, device=device)
    if obs.model is None:
        raise FpspecError(f"{obs.target} at {'x'.join(map(str, obs.shape))}: {obs.error}")
    return obs.model


def _as_tensor(t: Any, x: Any, fmt: str, device: str) -> Any:
    """A code array as a tensor of the format's dtype on ``device`` (bit patterns kept)."""
    if isinstance(x, np.ndarray):
        want = np.uint8 if fmt == "e4m3" else np.uint16
        if x.dtype != want:
            raise FpspecError(f"observe: {fmt} operands must be {np.dtype(want).name} codes, got {x.dtype}")
        dt = {"bf16": t.bfloat16, "fp16": t.float16, "e4m3": t.float8_e4m3fn}[fmt]
        raw = np.ascontiguousarray(x).view(np.int16) if fmt != "e4m3" else np.ascontiguousarray(x)
        return t.from_numpy(raw).to(device).view(dt)
    return x.to(device)
