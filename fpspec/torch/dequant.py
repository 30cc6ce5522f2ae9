"""Dequantization of block-quantized tensors on torch tensors: the torch twin of
:mod:`fpspec.fast.dequant` (FPS-BLK-14, FPS-BLK-21).

The numbered steps are those of :func:`fpspec.exact.dequant.dequant_value_exact`; as in the fast
twin, every (scale code, payload code) pair's value is one table
(:func:`fpspec.fast.dequant.dequant_value_table`, built on the host from the profile's formula:
q F exact in binary64, one quotient rounded to binary32), moved to the device once per call, and
each element is a look-up of its block's row.  A look-up rounds nothing, so every device gives
the table's bits.
"""

from __future__ import annotations

import torch

from ..fast.dequant import dequant_value_table

__all__ = ["dequantize_blocks_torch"]


def _scale_per_element(scales: torch.Tensor, m: int, k: int, block: int, tile: str) -> torch.Tensor:
    """The scale code of every element (int64, (M, K)) from the row-major scale grid."""
    s = scales.to(torch.int64)
    if tile == "BxB":
        s = s.repeat_interleave(block, dim=0)
    return s.repeat_interleave(block, dim=1)[:m, :k]


def dequantize_blocks_torch(codes: torch.Tensor, scales: torch.Tensor, formula, scale_format, payload_format: str,
                            amax: float, target, decode_scale, block: int, tile: str) -> tuple[torch.Tensor, int]:
    """float32 values of (M, K) payload codes under their blocks' scale codes, and the flat index
    of the first non-finite value (-1 when every value is finite)."""
    values, _ = dequant_value_table(formula, scale_format, payload_format, amax, target, decode_scale)
    table = torch.from_numpy(values).to(codes.device)
    m, k = codes.shape
    s = _scale_per_element(scales, m, k, block, tile)
    width = table.shape[1]
    out = table.reshape(-1)[(s * width + codes.to(torch.int64)).reshape(-1)].reshape(m, k)
    bad = ~torch.isfinite(out)
    if not bool(bad.any().item()):
        return out, -1
    return out, int(torch.argmax(bad.reshape(-1).to(torch.uint8)).item())
