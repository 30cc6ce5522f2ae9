"""torch GEMMs as probe targets (FPS-PRB-16): ``torch._scaled_mm`` on float8_e4m3fn and
``torch.mm`` on BF16 / FP16 with FP32 output, on CUDA.

torch is optional: it is imported on first use, and a missing torch or a missing
CUDA device is a clear :class:`~fpspec.errors.FpspecError`.  Operands travel as
their bit patterns (``Tensor.view`` of the code arrays), so nothing is rounded on
the way in.  ``device="cpu"`` runs the same calls on torch's CPU kernels (for
tests of this module; those kernels are not what the probe is after).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import FpspecError

__all__ = ["require_torch", "TorchScaledMMTarget", "TorchMatmulTarget", "torch_info"]


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
