"""NVFP4 GEMM on Blackwell through ``torch._scaled_mm`` (FPS-PRB-13): operand construction
and the target.  It cannot run here (no Blackwell GPU); its operand construction is
tested on the CPU, and docs/probe.rst says how to run the NVFP4 probes on a B200.

Operands (cuBLAS / PyTorch conventions, as this module builds them):

* payload: E2M1 codes (M, K) packed two per byte along K into ``float4_e2m1fn_x2``
  (M, K/2); element k = 2j sits in the **low** nibble of byte j, k = 2j + 1 in the
  high nibble (:data:`NIBBLE_ORDER`; probe NV-0 checks it on the device);
* block scales: one UE4M3 code (``float8_e4m3fn``, sign 0) per 16 elements along K,
  a (rows, K/16) grid stored in cuBLAS's blocked ("swizzled", 128 x 4 tiles) layout
  :func:`swizzle_scales`: tiles of 128 rows x 4 scale columns in row-major tile order,
  512 bytes each; inside a tile, scale (i, j) goes to byte ``(i % 32) * 16 + (i // 32) * 4 + j``;
  rows padded to 128 and scale columns to 4 with zeros;
* B is given as BT (N x K) and passed as ``BT_fp4.t()`` (column-major K x N);
* the tensor scale alpha (TransformerEngine's global decode scales) is applied by
  this adapter as a separate FP32 multiply of the output unless ``alpha=None``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import FpspecError

__all__ = ["NIBBLE_ORDER", "pack_e2m1", "unpack_e2m1", "swizzle_scales", "unswizzle_scales",
           "swizzled_offset", "TorchNVFP4Target"]

#: Which nibble of a packed byte holds the even-k element (FPS-PRB-13).
NIBBLE_ORDER = "low-first"


def pack_e2m1(codes: np.ndarray) -> np.ndarray:
    """(M, K) E2M1 codes (0..15) -> (M, K/2) bytes, even k in the low nibble."""
    codes = np.asarray(codes)
    if codes.dtype != np.uint8 or codes.ndim != 2:
        raise FpspecError(f"E2M1 codes must be a 2-D uint8 array, got {codes.dtype} {codes.shape}")
    if codes.shape[1] % 2:
        raise FpspecError(f"K = {codes.shape[1]} is odd: two E2M1 codes share a byte")
    if codes.size and codes.max() > 15:
        bad = np.argwhere(codes > 15)[0]
        raise FpspecError(f"E2M1 code {int(codes[tuple(bad)])} > 15", tuple(int(i) for i in bad))
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def unpack_e2m1(packed: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_e2m1`."""
    packed = np.asarray(packed, dtype=np.uint8)
    out = np.empty((packed.shape[0], packed.shape[1] * 2), dtype=np.uint8)
    out[:, 0::2] = packed & 0x0F
    out[:, 1::2] = packed >> 4
    return out


def swizzled_offset(i: np.ndarray, j: np.ndarray, n_col_tiles: int) -> np.ndarray:
    """Byte offset of scale (row i, scale column j) in the blocked 128 x 4 layout."""
    tile = (i // 128) * n_col_tiles + (j // 4)
    r = i % 128
    return tile * 512 + (r % 32) * 16 + (r // 32) * 4 + (j % 4)


def swizzle_scales(scales: np.ndarray) -> np.ndarray:
    """(rows, cols) scale codes -> flat uint8 in cuBLAS's blocked layout (zero padded)."""
    scales = np.asarray(scales)
    if scales.dtype != np.uint8 or scales.ndim != 2:
        raise FpspecError(f"scales must be a 2-D uint8 array, got {scales.dtype} {scales.shape}")
    rows, cols = scales.shape
    nrt, nct = -(-rows // 128), -(-cols // 4)
    out = np.zeros(nrt * nct * 512, dtype=np.uint8)
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    out[swizzled_offset(i, j, nct)] = scales
    return out


def unswizzle_scales(flat: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Inverse of :func:`swizzle_scales`."""
    nct = -(-cols // 4)
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return np.asarray(flat, dtype=np.uint8)[swizzled_offset(i, j, nct)]


class TorchNVFP4Target:
    """``torch._scaled_mm`` on NVFP4 operands (E2M1 payload, UE4M3 scales per 16), FP32 out.

    ``matmul_blockscaled(a, a_scales, bt, bt_scales, alpha=None)``: a (M x K) and bt
    (N x K) E2M1 codes, scale grids (M x K/16) and (N x K/16) of UE4M3 codes.
    Needs torch >= 2.8 with CUDA on a Blackwell GPU (compute capability 10.x).
    """

    operand_format = "e2m1"
    block = 16
    scale_format = "ue4m3"

    def __init__(self, device: str = "cuda"):
        from .torch_gemm import require_torch

        self.torch = require_torch(device)
        if not hasattr(self.torch, "float4_e2m1fn_x2"):
            raise FpspecError(f"torch {self.torch.__version__} has no float4_e2m1fn_x2 (needs torch >= 2.8)")
        self.device = device
        self.name = "torch-nvfp4-scaled-mm"

    def operands(self, a: np.ndarray, a_scales: np.ndarray, bt: np.ndarray, bt_scales: np.ndarray) -> tuple:
        """The four tensors handed to torch._scaled_mm (CPU-testable up to the device copy)."""
        t = self.torch
        for name, codes, sc in (("A", a, a_scales), ("BT", bt, bt_scales)):
            if codes.shape[1] % 32:
                raise FpspecError(f"{name}: K = {codes.shape[1]} must be a multiple of 32")
            if sc.shape != (codes.shape[0], codes.shape[1] // 16):
                raise FpspecError(f"{name}: scales {sc.shape}, expected {(codes.shape[0], codes.shape[1] // 16)}")
            if sc.size and (sc & 0x80).any():
                raise FpspecError(f"{name}: UE4M3 scale codes must have sign bit 0")
        ta = t.from_numpy(pack_e2m1(a)).view(t.float4_e2m1fn_x2).to(self.device)
        tb = t.from_numpy(pack_e2m1(bt)).view(t.float4_e2m1fn_x2).to(self.device)
        sa = t.from_numpy(swizzle_scales(a_scales)).view(t.float8_e4m3fn).to(self.device)
        sb = t.from_numpy(swizzle_scales(bt_scales)).view(t.float8_e4m3fn).to(self.device)
        return ta, tb, sa, sb

    def matmul_blockscaled(self, a, a_scales, bt, bt_scales, alpha: float | None = None) -> np.ndarray:
        t = self.torch
        ta, tb, sa, sb = self.operands(a, a_scales, bt, bt_scales)
        y = t._scaled_mm(ta, tb.t(), sa, sb, out_dtype=t.float32)
        if alpha is not None:
            y = y * t.tensor(float(np.float32(alpha)), dtype=t.float32, device=self.device)
        return y.cpu().numpy()

    def info(self) -> dict[str, Any]:
        from .torch_gemm import torch_info

        return {"target": self.name, "call": "torch._scaled_mm(A_fp4x2, BT_fp4x2.t(), swizzled UE4M3 "
                "scales, out_dtype=torch.float32)", "nibble_order": NIBBLE_ORDER,
                **torch_info(self.torch, self.device)}
