"""Block quantization's step 2 on torch tensors: the torch twin of
:func:`fpspec.fast.blocks.quantize_view_fast` (FPS-BLK-2..28), by profile family.

The MX family (``Arithmetic.MX``, ``TORCHAO_MX``, ``MICROXCALING``: every mxfp4 and mxfp8
profile) is :mod:`fpspec.torch.mx`.  The NV family (the exact, binary32 and torchao profiles of
ue5m3 and nvfp4) is not in this version of the torch twin: a tensor of those profiles is refused
by name, never quantized by another rule (quantize it on the host with ``impl="fast"``; issue 30).
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import FpspecError
from ..schemes import BlockResult, BlockSpec
from .mx import MX_ARITHMETICS, quantize_mx_torch

__all__ = ["quantize_view_torch"]


def quantize_view_torch(x: torch.Tensor, spec: BlockSpec, amax: float, rbits: torch.Tensor | None = None,
                        want_dequant: bool = True, block_amax: torch.Tensor | None = None) -> BlockResult:
    """Steps 1-2 of block quantization on a prepared (M, K) view; same contract as
    :func:`fpspec.fast.blocks.quantize_view_fast`, torch tensors in and out."""
    if spec.arithmetic not in MX_ARITHMETICS:
        raise FpspecError(f"the torch twin does not carry the {spec.profile.scheme} profile {spec.profile.name!r} "
                          f"(arithmetic {spec.arithmetic.value}) in this version: quantize it on the host "
                          "(numpy input, impl='fast'); it carries the MX profiles (mxfp4, mxfp8)")
    codes, scales, enc, dec = quantize_mx_torch(x, spec, amax, rbits, block_amax)
    res = BlockResult(codes, scales, np.float32(enc), np.float32(dec), None)
    if want_dequant:
        from .dequant import dequantize_blocks_torch

        res.dequant, _ = dequantize_blocks_torch(codes, scales, spec.profile.dequant, spec.scale_format,
                                                 spec.payload_format.name, amax, spec.target, res.decode_scale,
                                                 spec.block, spec.tile)
    return res
