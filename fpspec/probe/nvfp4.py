"""NVFP4-specific probes (FPS-PRB-13): rounding inside a 64-product group, the 1/1024
output lattice, on a block-scaled GEMM (E2M1 payloads, UE4M3 scales per 16 along K).

A block-scaled target has ``matmul_blockscaled(a, a_scales, bt, bt_scales) -> float32
(M, N)`` (:class:`fpspec.adapters.torch_nvfp4.TorchNVFP4Target` on a Blackwell GPU,
:class:`ModelBlockScaledTarget` for fpspec's own models).  Each probe row is built
from payload pairs and per-block scale pairs whose products are exact.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import FpspecError
from .operands import pow2, value_table
from .recipes import classify_rounding

__all__ = ["BlockRow", "build_blockscaled", "ModelBlockScaledTarget", "probe_nvfp4"]

BLOCK = 16


def _code_map(fmt: str) -> dict[float, int]:
    out: dict[float, int] = {}
    for c, v in enumerate(value_table(fmt).tolist()):
        if v == v and v not in out:
            out[v] = c
    return out


class BlockRow:
    """One probe: payload pairs at indices k, and scale pairs per 16-block."""

    def __init__(self) -> None:
        self.payload: dict[int, tuple[Fraction, Fraction]] = {}
        self.scales: dict[int, tuple[Fraction, Fraction]] = {}

    def put(self, k: int, pa: Fraction, pb: Fraction) -> "BlockRow":
        self.payload[k] = (Fraction(pa), Fraction(pb))
        return self

    def scale(self, block: int, sa: Fraction, sb: Fraction) -> "BlockRow":
        self.scales[block] = (Fraction(sa), Fraction(sb))
        return self

    def exact(self) -> Fraction:
        total = Fraction(0)
        for k, (pa, pb) in self.payload.items():
            sa, sb = self.scales.get(k // BLOCK, (Fraction(1), Fraction(1)))
            total += pa * pb * sa * sb
        return total


def build_blockscaled(rows: list[BlockRow], K: int) -> tuple[np.ndarray, ...]:
    """Codes and scale grids (a, a_scales, bt, bt_scales) for the rows; every value is
    checked to be an E2M1 / UE4M3 value (FPS-PRB-1); unset scales are 1."""
    e2m1, ue4m3 = _code_map("e2m1"), _code_map("ue4m3")
    n = len(rows)
    a = np.zeros((n, K), np.uint8)
    bt = np.zeros((n, K), np.uint8)
    one = ue4m3[1.0]
    sa = np.full((n, K // BLOCK), one, np.uint8)
    sb = np.full((n, K // BLOCK), one, np.uint8)

    def code(table: dict[float, int], v: Fraction, what: str) -> int:
        f = float(v)
        if Fraction(f) != v or f not in table:
            raise FpspecError(f"{v} is not an exact {what} value")
        return table[f]

    for i, r in enumerate(rows):
        for k, (pa, pb) in r.payload.items():
            a[i, k], bt[i, k] = code(e2m1, pa, "E2M1"), code(e2m1, pb, "E2M1")
        for b, (x, y) in r.scales.items():
            sa[i, b], sb[i, b] = code(ue4m3, x, "UE4M3"), code(ue4m3, y, "UE4M3")
    return a, sa, bt, sb


class ModelBlockScaledTarget:
    """fpspec's GEMM model on NVFP4-style quantized operands (alpha = 1), for self-tests."""

    def __init__(self, model: Any):
        from ..models import get_model

        self.model = get_model(model)
        self.name = f"fpspec:{model if isinstance(model, str) else 'model'}"

    def _qt(self, codes, scales):
        from ..quantized import QuantizedTensor

        return QuantizedTensor(codes=codes, scales=scales, scale_format="ue4m3", block=BLOCK, tile="1xB",
                               encode_scale=np.float32(1), decode_scale=np.float32(1), amax=np.float32(6),
                               scheme="nvfp4", profile="probe", params={"target": 1})

    def matmul_blockscaled(self, a, a_scales, bt, bt_scales, alpha=None) -> np.ndarray:
        from ..exact.accumulate import gemm_exact

        return gemm_exact(self._qt(a, a_scales), self._qt(bt, bt_scales), self.model)

    def rowdot_blockscaled(self, a, a_scales, bt, bt_scales) -> np.ndarray:
        return np.array([self.matmul_blockscaled(a[i:i + 1], a_scales[i:i + 1], bt[i:i + 1],
                                                 bt_scales[i:i + 1])[0, 0] for i in range(a.shape[0])],
                        dtype=np.float32)


def _run(target, rows: list[BlockRow], K: int) -> list[Fraction]:
    a, sa, bt, sb = build_blockscaled(rows, K)
    if hasattr(target, "rowdot_blockscaled"):
        y = target.rowdot_blockscaled(a, sa, bt, sb)
    else:
        y = np.diagonal(np.asarray(target.matmul_blockscaled(a, sa, bt, sb), dtype=np.float32))
    return [Fraction(float(v)) for v in y]


def probe_nvfp4(target, K: int = 128) -> dict[str, Any]:
    """NV-1 (rounding of the 64-product group sum) and NV-2 (the output lattice).

    NV-1: X = 1.5 x 1 x 2^8 x 2^6 in block 0 (k = 0) and an offset t ulp32(X) = t 2^-9,
    t in {1/4, 1/2, 3/4}, as payload x 1 x 2^-9 x 2^-1 in block 1 (k = 16): the same
    64-group.  Both signs.  RNE of the exact group sum gives X + ulp for 3/4 only; RZ
    never.  ulp32(X) = 2^-9 lies on a 1/1024 lattice, so a snap cannot hide the answer.
    NV-2: single products 2^-17, 2^-11, 3 x 2^-12, 2^-10, 3 x 2^-11 alone: a 1/1024 snap
    (ties to even) maps them to 0, 0, 2^-10, 2^-10, 2^-9.
    """
    X = Fraction(3, 2) * pow2(14)
    ulp = pow2(14 - 23)
    rows, cases = [], []
    for sign in (1, -1):
        for t, pa in ((Fraction(1, 4), Fraction(1, 2)), (Fraction(1, 2), Fraction(1)), (Fraction(3, 4), Fraction(3, 2))):
            r = BlockRow().put(0, sign * Fraction(3, 2), Fraction(1)).scale(0, pow2(8), pow2(6))
            r.put(16, sign * pa, Fraction(1)).scale(1, pow2(-9), pow2(-1))
            assert r.exact() == sign * (X + t * ulp)
            rows.append(r)
            cases.append((r.exact(), ulp))
    y = _run(target, rows, K)
    modes = classify_rounding([(v, q, o) for (v, q), o in zip(cases, y)])
    singles = [pow2(-17), pow2(-11), 3 * pow2(-12), pow2(-10), 3 * pow2(-11)]
    srows = []
    for v in singles:
        r = BlockRow()
        if v < pow2(-15):  # 2^-17 = 0.5 x 1 x 2^-9 x 2^-7
            r.put(0, Fraction(1, 2), 1).scale(0, pow2(-9), pow2(-7))
        else:  # v = p x 2^-12 with p in {2, 3, 4, 6}: payload p/2 x 1, scales 2^-9, 2^-2
            p = v / pow2(-11)
            r.put(0, p, 1).scale(0, pow2(-9), pow2(-2))
        assert r.exact() == v, (r.exact(), v)
        srows.append(r)
    ys = _run(target, srows, K)
    exact = all(o == v for o, v in zip(ys, singles))
    snap = [Fraction(round(v * 1024)) / 1024 for v in singles]
    lattice = "none (single products off the 1/1024 lattice come out exactly)" if exact else (
        "1/1024 (ties to even)" if ys == snap else "unexplained")
    return {"group_rounding_candidates": modes,
            "group_rounding": modes[0] if len(modes) == 1 else ("unexplained" if not modes else "ambiguous"),
            "lattice": lattice, "single_products": [[str(v), str(o)] for v, o in zip(singles, ys)]}
