"""The 16-point random Hadamard transform and its bfloat16 rounding on torch tensors: the torch
twins of :func:`fpspec.fast.rht.rht16_fast` and :func:`fpspec.fast.rht.round_bf16_fast`
(FPS-BLK-10, FPS-BLK-20).

Exactness: each output of a group of 16 is the chain a_0 = fp32(x_0 w_0j), a_i = fp32(a_(i-1) +
x_i w_ij), the spec's order.  Every weight is +-1/4, so x_i w_ij is exact in binary64; the
binary64 sum a + x w then rounded to binary32 is the fused step's single rounding (when the sum
is not exact in binary64 the exponent gap exceeds 29 bits and both roundings return the larger
addend: docs/scheme-nvfp4.rst), as in the fast twin.  Each of these is one torch elementwise
operation (a binary64 multiply by a power of two, a binary64 add, one conversion to binary32),
vectorised over every group at once; the 16 x 16 chain runs in the same order for every group.
The bfloat16 rounding is an integer operation on the binary32 bits.
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import FpspecError

__all__ = ["rht16_torch", "round_bf16_torch"]


def _weights() -> np.ndarray:
    h = np.ones((1, 1))
    while h.shape[0] < 16:
        h = np.block([[h, h], [h, -h]])
    signs = np.array([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1], dtype=np.float64)
    return signs[:, None] * h * 0.25


_W = _weights()  # (the fast twin's _RHT_W, the same 256 powers of two)


def rht16_torch(x: torch.Tensor) -> torch.Tensor:
    """The transform of every run of 16 along the last axis of a binary32 (M, K) tensor."""
    m, k = x.shape
    if k % 16:
        raise FpspecError(f"the Hadamard transform needs the last dimension {k} to be a multiple of 16")
    groups = x.to(torch.float32).reshape(-1, 16).to(torch.float64)  # exact widening
    out = torch.empty(groups.shape, dtype=torch.float32, device=x.device)
    for j in range(16):
        acc = (groups[:, 0] * float(_W[0, j])).to(torch.float32)
        for i in range(1, 16):
            acc = (acc.to(torch.float64) + groups[:, i] * float(_W[i, j])).to(torch.float32)
        out[:, j] = acc
    out = out.reshape(m, k)
    bad = ~torch.isfinite(out)
    if bool(bad.any().item()):
        i = int(torch.argmax(bad.reshape(-1).to(torch.uint8)).item())
        raise FpspecError("the Hadamard transform of the view overflows binary32 (FPS-BLK-10)", (i // k, i % k))
    return out


def round_bf16_torch(v: torch.Tensor) -> torch.Tensor:
    """RNE of binary32 values to bfloat16 on the bits (kept as binary32); a value rounding beyond
    bfloat16's largest finite value is refused."""
    bits = v.to(torch.float32).contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    r = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = (r - ((r >> 31) << 32)).to(torch.int32).view(torch.float32)  # (the uint32 bits as int32)
    bad = ~torch.isfinite(out)
    if bool(bad.any().item()):
        idx = tuple(int(i) for i in np.argwhere(bad.cpu().numpy())[0])
        raise FpspecError(f"the transformed value {float(v[idx].item())!r} rounds beyond bfloat16's largest "
                          f"finite value {float.fromhex('0x1.fep127')!r} (FPS-BLK-20)", idx)
    return out
