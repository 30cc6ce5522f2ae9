"""GEMM targets for the probe (FPS-PRB-16): fpspec's own models, numpy, torch on CUDA.

``make_target("fpspec:km-h100-fp8", fmt="e4m3")``, ``make_target("numpy", fmt="bf16")``,
``make_target("torch-scaled-mm")`` ... build the object ``fpspec probe --target``
names.  torch is optional: its adapters import it on first use and raise a clear
FpspecError when it is missing or has no CUDA device.
"""

from __future__ import annotations

from typing import Any

from ..errors import FpspecError

__all__ = ["make_target", "TARGET_HELP"]

TARGET_HELP = {
    "fpspec:PRESET": "fpspec's own model PRESET (see `fpspec models`); --format picks the operands",
    "numpy": "numpy float32 matmul of the decoded operands (BLAS order; CPU)",
    "torch-scaled-mm": "torch._scaled_mm, float8_e4m3fn operands, FP32 out, use_fast_accum=False (CUDA)",
    "torch-scaled-mm-fast": "the same with use_fast_accum=True (CUDA)",
    "torch-bf16": "torch.matmul of BF16 operands with FP32 output (CUDA)",
    "torch-fp16": "torch.matmul of FP16 operands with FP32 output (CUDA)",
}


def make_target(spec: str, fmt: str | None = None, **kw: Any) -> Any:
    """Build a probe target from its CLI name (see :data:`TARGET_HELP`)."""
    if spec.startswith("fpspec:"):
        from .fpspec_model import ModelTarget

        return ModelTarget(spec.split(":", 1)[1], fmt or "e4m3", **kw)
    if spec == "numpy":
        from .numpy_gemm import NumpyTarget

        return NumpyTarget(fmt or "e4m3")
    if spec in ("torch-scaled-mm", "torch-scaled-mm-fast"):
        from .torch_gemm import TorchScaledMMTarget

        if fmt not in (None, "e4m3", "e5m2"):
            raise FpspecError(f"{spec} takes e4m3 or e5m2 operands, not {fmt}")
        return TorchScaledMMTarget(fmt or "e4m3", use_fast_accum=spec.endswith("-fast"), **kw)
    if spec in ("torch-bf16", "torch-fp16"):
        from .torch_gemm import TorchMatmulTarget

        want = spec.split("-")[1]
        if fmt not in (None, want):
            raise FpspecError(f"{spec} takes {want} operands, not {fmt}")
        return TorchMatmulTarget(want, **kw)
    raise FpspecError(f"unknown probe target {spec!r}; known: {', '.join(TARGET_HELP)}")
