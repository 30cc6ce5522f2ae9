"""Step 0 of block quantization on torch tensors: the input scan (FPS-BLK-1), the torch twin of
:mod:`fpspec.fast.scan`.

One pass over the flat input gives max |x| (the tensor amax g of current scaling), the first
value block quantization cannot take (NaN, +-inf, or a binary64 magnitude whose binary32
rounding is infinite) and, for binary32 input, max |x| of every block of 16 or 32 (which
:func:`fpspec.torch.blocks.quantize_view_torch` then reads instead of measuring them again).

Exactness: a maximum is exact in any order; binary32 magnitudes are compared as their bit
patterns with the sign cleared (int32: the integer order of those bits is the order of the
magnitudes, and a NaN or Inf is at least 0x7F800000), binary64 magnitudes as values with NaN
found apart.  A binary64 amax becomes binary32 by ``.to(torch.float32)``, the IEEE conversion
(RNE) on every device, which is what the fast twin's ``np.float32`` does; the scan refuses the
values whose conversion would be infinite first.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..input_check import BINARY32_OVERFLOW

__all__ = ["scan_values_torch", "tensor_amax_torch", "TorchScan"]

_MAGNITUDE = 0x7FFFFFFF
_INF_BITS = 0x7F800000


class TorchScan(NamedTuple):
    """What :func:`fpspec.fast.scan.scan_values` returns, from a tensor: max |x| as a float (NaN
    when a value is not finite), the first bad flat index or -1, why, and the 1xB block amaxes
    (a float32 tensor on the input's device, or None)."""

    amax: float
    bad: int
    why: str
    block_amax: torch.Tensor | None = None


def _first(mask: torch.Tensor) -> int:
    """The first flat index where ``mask`` holds (one scalar read)."""
    return int(torch.argmax(mask.to(torch.uint8)).item())


def scan_values_torch(flat: torch.Tensor, block: int = 0) -> TorchScan:
    """max |x| of a flat binary32 or binary64 tensor, its first value block quantization cannot
    take, and (binary32, ``block`` 16 or 32 dividing the size) max |x| of every block."""
    if flat.numel() == 0:
        return TorchScan(0.0, -1, "")
    if flat.dtype == torch.float32:
        mags = flat.view(torch.int32) & _MAGNITUDE
        if block in (16, 32) and flat.numel() % block == 0:
            runs = mags.view(-1, block).amax(dim=1)
            top = int(runs.max().item())
            if top < _INF_BITS:
                return TorchScan(float(np.array([top], np.uint32).view(np.float32)[0]), -1, "",
                                 runs.view(torch.float32))
        else:
            top = int(mags.max().item())
            if top < _INF_BITS:
                return TorchScan(float(np.array([top], np.uint32).view(np.float32)[0]), -1, "")
        return TorchScan(float("nan"), _first(mags >= _INF_BITS), "non-finite")
    a = flat.abs()
    finite = torch.isfinite(flat)
    if not bool(finite.all().item()):
        return TorchScan(float("nan"), _first(~finite), "non-finite")
    top = float(a.max().item())
    if top < BINARY32_OVERFLOW:
        return TorchScan(top, -1, "")
    return TorchScan(top, _first(a >= BINARY32_OVERFLOW), "binary32-range")


def tensor_amax_torch(v: torch.Tensor) -> np.float32:
    """max |v| rounded to binary32 (FPS-BLK-5); 0 for an empty tensor."""
    if v.numel() == 0:
        return np.float32(0)
    top = v.abs().max()
    return np.float32(float(top.to(torch.float32).item()))
