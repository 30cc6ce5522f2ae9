"""The torch twin's table of steps (:class:`fpspec.twins.Twin`), built when it is first chosen.

Each entry is the torch module's twin of the fast step of the same name: conversion
(:mod:`fpspec.torch.rounding`), step 0's input scan (:mod:`fpspec.torch.scan`), the transform
(:mod:`fpspec.torch.rht`), the block profiles (:mod:`fpspec.torch.blocks`, :mod:`fpspec.torch.mx`),
dequantization (:mod:`fpspec.torch.dequant`) and the GEMM models (:mod:`fpspec.torch.accumulate`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..input_check import FLOAT_INPUT_DTYPES, not_a_float_input, not_a_matrix, refused_input

__all__ = ["build", "scan_input_torch"]


def scan_input_torch(x: Any, block: int = 0) -> tuple[torch.Tensor, np.float32, torch.Tensor | None]:
    """Step 0's check of a torch input (FPS-BLK-1), the twin of :func:`fpspec.fast.scan.scan_input`:
    the (M, K) view (fp16/bf16 widened exactly to binary32, leading dimensions flattened),
    fp32(max |x|), and (``block`` > 0, binary32, rows of whole blocks) the 1xB block amaxes."""
    from .scan import scan_values_torch

    dtype = str(x.dtype).replace("torch.", "")
    if dtype not in FLOAT_INPUT_DTYPES:
        raise not_a_float_input(dtype)
    if x.ndim < 2:
        raise not_a_matrix(tuple(x.shape))
    if dtype in ("float16", "bfloat16"):
        x = x.to(torch.float32)  # exact widening
    shape = tuple(x.shape)
    flat = x.contiguous().reshape(-1)
    whole = block > 0 and shape[-1] % block == 0
    scan = scan_values_torch(flat, block if whole else 0)
    if scan.bad >= 0:
        idx = tuple(int(i) for i in np.unravel_index(scan.bad, shape))
        raise refused_input(scan.why, float(flat[scan.bad].item()), idx)
    x2 = flat.reshape(shape)
    if x2.ndim > 2:
        x2 = x2.reshape(-1, shape[-1])
    return x2, np.float32(scan.amax), scan.block_amax


def _pad(v: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    out = torch.zeros((v.shape[0] + rows, v.shape[1] + cols), dtype=v.dtype, device=v.device)
    out[:v.shape[0], :v.shape[1]] = v
    return out


def _step(module: str, name: str) -> Any:
    """The step ``name`` of ``fpspec.torch.<module>``, imported at its first call (so that choosing
    the twin for a conversion does not import the GEMM models)."""
    import importlib

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(f"{__package__}.{module}"), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


def _quantize_view(v, spec, amax, rbits, want_dequant=True, block_amax=None):
    return _step("blocks", "quantize_view_torch")(v, spec, float(amax), rbits, want_dequant=want_dequant,
                                                 block_amax=block_amax)


def build(twin_class: type) -> Any:
    """The torch :class:`~fpspec.twins.Twin` (``twin_class`` is that class, passed in by
    :mod:`fpspec.twins` so that this module does not import upward)."""
    return twin_class(name="torch", scan_input=scan_input_torch, to_binary32=lambda v: v.to(torch.float32),
                      pad=_pad, encode=_step("rounding", "encode_torch"), decode=_step("rounding", "decode_torch"),
                      transpose=_step("transpose", "transpose_torch"), rht16=_step("rht", "rht16_torch"),
                      round_bf16=_step("rht", "round_bf16_torch"), tensor_amax=_step("scan", "tensor_amax_torch"),
                      quantize_view=_quantize_view, block_amax_from_scan=True,
                      dequantize_blocks=_step("dequant", "dequantize_blocks_torch"),
                      gemm=_step("accumulate", "gemm_torch"), rowdot=_step("accumulate", "rowdot_torch"),
                      gemm_declines=_step("accumulate", "gemm_declines_torch"),
                      gemm_kernel=_step("accumulate", "gemm_kernel_torch"))
