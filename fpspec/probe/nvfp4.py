"""NVFP4-specific probes (FPS-PRB-13): rounding inside a 64-product group, the 1/1024
output lattice, where block scales enter, on a block-scaled GEMM (E2M1 payloads, UE4M3 scales per 16 along K).

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

__all__ = ["BlockRow", "build_blockscaled", "ModelBlockScaledTarget", "probe_nvfp4", "probe_scale_placement"]

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
        from ..named_models import get_model

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


def _trunc(v: Fraction, q: Fraction) -> Fraction:
    k = abs(v) // q
    return (k if v >= 0 else -k) * q


def _rz32(v: Fraction) -> Fraction:
    from ..exact.rounding import round_to_code
    from ..formats import FP32

    return FP32.decode_exact(round_to_code(v, FP32, "rtz"))


def _rne32(v: Fraction) -> Fraction:
    from ..exact.rounding import round_to_code
    from ..formats import FP32

    return FP32.decode_exact(round_to_code(v, FP32, "rne"))


def probe_scale_placement(target, K: int = 128) -> dict[str, Any]:
    """NV-3: where block scales enter.  X = 1.5 x 1 x 2^8 x 2^6 in block 0; block 1 holds
    1.5 x 1.5 and 1.5 x 0.5 under scales with product s = 2^-j (j = -2 .. 18).  With a
    window of F bits (LSB = 2^(14 - F)), products aligned one by one keep
    trunc(2.25 s) + trunc(0.75 s); the block's payload sum scaled as one term keeps
    trunc(3 s); an exact group sum keeps 3 s.  The hypotheses (placement, F) that
    explain every row are reported; with no window, or one wider than FP32 (F > 23),
    the FP32 rounding of X + ... hides the difference and the question has no answer."""
    X = Fraction(3, 2) * pow2(14)
    js = list(range(-2, 19))
    rows = []
    for j in js:
        ja = min(max(j, 0), 9)
        r = BlockRow().put(0, Fraction(3, 2), 1).scale(0, pow2(8), pow2(6))
        r.put(16, Fraction(3, 2), Fraction(3, 2)).put(17, Fraction(3, 2), Fraction(1, 2))
        r.scale(1, pow2(-ja), pow2(ja - j))
        rows.append(r)
    y = _run(target, rows, K)
    fits: dict[str, list[int]] = {"product": [], "block": []}
    for F in range(8, 41):
        lsb = pow2(14 - F)
        per_product = [_rz32(X + _trunc(Fraction(9, 4) * pow2(-j), lsb) + _trunc(Fraction(3, 4) * pow2(-j), lsb))
                       for j in js]
        per_block = [_rz32(X + _trunc(3 * pow2(-j), lsb)) for j in js]
        if per_product == y:
            fits["product"].append(F)
        if per_block == y:
            fits["block"].append(F)
    exact = [_rne32(X + 3 * pow2(-j)) for j in js] == y or [_rz32(X + 3 * pow2(-j)) for j in js] == y
    if fits["product"] and not fits["block"]:
        answer = f"product (window F in {fits['product']})"
    elif fits["block"] and not fits["product"]:
        answer = f"block (window F in {fits['block']})"
    elif fits["product"] and fits["block"]:
        answer = (f"ambiguous: product with F in {fits['product']} or block with F in {fits['block']} "
                  "(the FP32 rounding of X + ... hides the window)")
    elif exact:
        answer = ("unobservable: no window narrower than FP32 (an exact group sum, or F > 23): "
                  "both placements give the same bits")
    else:
        answer = "unexplained"
    return {"scale_placement": answer, "outputs": [[j, str(v)] for j, v in zip(js, y)]}


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
    placement = probe_scale_placement(target, K)
    return {"scale_placement": placement["scale_placement"], "group_rounding_candidates": modes,
            "group_rounding": modes[0] if len(modes) == 1 else ("unexplained" if not modes else "ambiguous"),
            "lattice": lattice, "single_products": [[str(v), str(o)] for v, o in zip(singles, ys)]}
