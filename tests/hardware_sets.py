"""Readers of the hardware reference sets for the GEMM tests (not a test module).

``vectors/provenance/mmasim/<preset>__<variant>.npz`` (MMA-Sim outputs, README there) and
``vectors/provenance/h200-mmasim/h200_mmasim.npz`` (the same operands through cuBLAS on an
H200) as fpspec GEMM operands: code arrays (``fmt`` per operand) or QuantizedTensors built
from codes and scale bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from fpspec.quantized import QuantizedTensor

ROOT = Path(__file__).resolve().parents[1] / "vectors" / "provenance"
MMASIM = ROOT / "mmasim"
H200 = ROOT / "h200-mmasim" / "h200_mmasim.npz"


@dataclass(frozen=True)
class HardwareSet:
    name: str
    meta: dict
    arrays: dict

    @property
    def preset(self) -> str:
        return self.meta["preset"]

    @property
    def k(self) -> int:
        return self.meta["k"]

    @property
    def nan_bits_defined(self) -> bool:
        return bool(self.meta["nan_bits_defined"])

    def operands(self, k: int | None = None, rows=None, cols=None):
        """(A, BT, fmt) for the first ``k`` products (all of K when None), rows of A and
        columns of B as given (all when None)."""
        a, b = self.arrays["a"], self.arrays["b"]
        k = a.shape[1] if k is None else k
        rows = slice(None) if rows is None else rows
        cols = slice(None) if cols is None else cols
        a = np.ascontiguousarray(a[rows, :k])
        bt = np.ascontiguousarray(b[:k, cols].T)
        sf = self.meta["scale_format"]
        if sf is None:
            return a, bt, (self.meta["a_format"], self.meta["b_format"])
        blk = self.meta["block_size"]
        sa = np.ascontiguousarray(self.arrays["a_scale"][rows, :k // blk])
        sb = np.ascontiguousarray(self.arrays["b_scale"][:k // blk, cols].T)
        qa = QuantizedTensor.from_codes(a, sa, payload_format=self.meta["a_format"], scale_format=sf, block=blk)
        qb = QuantizedTensor.from_codes(bt, sb, payload_format=self.meta["b_format"], scale_format=sf, block=blk)
        return qa, qb, None

    def expected(self, part: str, rows=None, cols=None) -> np.ndarray:
        """Bits of ``d_first`` or ``d``."""
        x = self.arrays[part]
        rows = slice(None) if rows is None else rows
        cols = slice(None) if cols is None else cols
        return x[rows][:, cols]


@lru_cache(maxsize=None)
def load(name: str) -> HardwareSet:
    with np.load(MMASIM / f"{name}.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays.pop("__meta__").tobytes().decode())
    return HardwareSet(name, meta, arrays)


def set_names() -> list[str]:
    return sorted(p.stem for p in MMASIM.glob("*.npz"))


@lru_cache(maxsize=1)
def h200() -> dict[str, np.ndarray]:
    with np.load(H200, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def bits_of(y: np.ndarray) -> np.ndarray:
    return y.view(np.uint16 if y.dtype == np.float16 else np.uint32)


def mismatches(got: np.ndarray, want: np.ndarray, nan_bits: bool = True) -> np.ndarray:
    """Boolean mask of outputs that differ: every bit, or for ``nan_bits=False`` NaN-ness only
    where the expected output is a NaN (CDNA3: MMA-Sim leaves NaN bits undefined)."""
    g = bits_of(got).astype(np.uint64)
    w = want.astype(np.uint64)
    if nan_bits:
        return g != w
    if got.dtype == np.float16:
        exp, man = 0x7C00, 0x03FF
    else:
        exp, man = 0x7F800000, 0x007FFFFF
    gn = ((g & exp) == exp) & ((g & man) != 0)
    wn = ((w & exp) == exp) & ((w & man) != 0)
    return np.where(wn | gn, gn != wn, g != w)
