"""The executable spec of block quantization, per scheme and profile (FPS-BLK-*).

Everything is :class:`fractions.Fraction` arithmetic and
:func:`fpspec.exact.rounding.round_to_code`.  Profiles that are sequences of
binary32 operations are emulated step by step: each operation is the exact
real result rounded once with ``round_to_code(., "fp32", "rne")``, which is what
IEEE 754 requires of a correctly rounded binary32 ``*`` and ``/``.

The input is the *quantized view* (the tensor, or its transpose for columnwise
operands, after the optional Hadamard transform), shape (M, K), K a multiple of
the block.  The functions here are slow on purpose: one Python loop per
element, in the order the docs state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import FpspecError
from ..formats import get_format
from ..schemes import AmaxZero, Arithmetic, BlockSpec, MxScaleMode, SignedZero
from .binary32 import FLT_MAX, ceil_log2, f32, f32_div, f32_fma, f32_mul, floor_log2
from .rounding import round_to_code

__all__ = ["BlockResult", "quantize_view_exact", "block_amax_grid_exact", "rht16_exact", "RHT_SIGNS"]

#: TransformerEngine's wgrad sign vector for the 16-point random Hadamard transform.
RHT_SIGNS = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)


@dataclass
class BlockResult:
    codes: np.ndarray         # uint8 (M, K)
    scales: np.ndarray        # uint8 scale grid
    encode_scale: np.float32
    decode_scale: np.float32
    dequant: np.ndarray | None  # float32 (M, K); None when not asked for (fast path)


# --------------------------------------------------------------- helpers
def block_amax_grid_exact(x: np.ndarray, block: int, tile: str) -> list[list[Fraction]]:
    """max |x| over each block (1xB) or tile (BxB), exactly, as Fractions."""
    m, k = x.shape
    rows = m // block if tile == "BxB" else m
    grid = []
    for bi in range(rows):
        row = []
        for bj in range(k // block):
            r0, r1 = (bi * block, (bi + 1) * block) if tile == "BxB" else (bi, bi + 1)
            a = Fraction(0)
            for i in range(r0, r1):
                for j in range(bj * block, (bj + 1) * block):
                    a = max(a, abs(Fraction(float(x[i, j]))))
            row.append(a)
        grid.append(row)
    return grid


def rht16_exact(x: np.ndarray) -> np.ndarray:
    """The 16-point random Hadamard transform along the last axis, in binary32 (FPS-BLK-10).

    For each group of 16 and each output j, with w_ij = s_i H16[i, j] / 4 (H16 the
    Sylvester Hadamard matrix, s = :data:`RHT_SIGNS`; every w_ij is +-1/4):
    a_0 = fp32(x_0 w_0j), a_i = fma32(x_i, w_ij, a_(i-1)) = fp32(a_(i-1) + x_i w_ij)
    (one rounding per step, the product exact), y_j = a_15: sequential fused
    multiply-add accumulation in index order.
    """
    m, k = x.shape
    if k % 16:
        raise FpspecError(f"the Hadamard transform needs the last dimension {k} to be a multiple of 16")
    h = _sylvester(16)
    out = np.empty((m, k), dtype=np.float32)
    for r in range(m):
        for g in range(k // 16):
            xs = [f32(float(x[r, 16 * g + i])) if x.dtype != np.float32 else float(x[r, 16 * g + i])
                  for i in range(16)]
            for j in range(16):
                acc = f32_mul(xs[0], RHT_SIGNS[0] * h[0][j] * 0.25)
                for i in range(1, 16):
                    acc = f32_fma(xs[i], RHT_SIGNS[i] * h[i][j] * 0.25, acc)
                out[r, 16 * g + j] = acc
    return out


def _sylvester(n: int) -> list[list[int]]:
    h = [[1]]
    while len(h) < n:
        h = [row + row for row in h] + [row + [-v for v in row] for row in h]
    return h


def _fmt_value(fmt_name: str, code: int) -> Fraction:
    v = get_format(fmt_name).decode_exact(code)
    assert isinstance(v, Fraction)
    return v


def _e2m1_signed_value(code: int) -> Fraction:
    return _fmt_value("e2m1", code)


def _zero_like(x: float) -> float:
    return math.copysign(0.0, x)


# ----------------------------------------------------------- the quantizer
def quantize_view_exact(x: np.ndarray, spec: BlockSpec, amax: float,
                        rbits: np.ndarray | None = None) -> BlockResult:
    """Quantize the (M, K) view ``x`` with tensor amax ``amax`` (a binary32 value).

    ``amax`` is the g of the docs: measured (current scaling) or given (a held
    value); it is ignored by MX profiles except as metadata.
    """
    m, k = x.shape
    b = spec.block
    grid = block_amax_grid_exact(x, b, spec.tile)
    codes = np.zeros((m, k), dtype=np.uint8)
    scales = np.zeros((len(grid), k // b), dtype=np.uint8)
    deq = np.zeros((m, k), dtype=np.float32)
    mode = spec.rounding

    def rnd(i: int, j: int) -> int | None:
        return int(rbits[i, j]) if (mode.stochastic and rbits is not None) else None

    if spec.arithmetic is Arithmetic.EXACT:
        enc, dec, block_fn = _exact_profile(spec, amax)
    elif spec.arithmetic is Arithmetic.FP32:
        enc, dec, block_fn = _fp32_profile(spec, amax)
    elif spec.arithmetic is Arithmetic.TORCHAO:
        enc, dec, block_fn = _torchao_profile(spec, amax)
    else:
        enc, dec, block_fn = _mx_profile(spec)

    for i in range(m):
        gi = i // b if spec.tile == "BxB" else i
        for bj in range(k // b):
            scale_code, elem = block_fn(grid[gi][bj])
            scales[gi, bj] = scale_code
            for j in range(bj * b, (bj + 1) * b):
                q, d = elem(float(x[i, j]), rnd(i, j))
                codes[i, j] = q
                deq[i, j] = d
    return BlockResult(codes, scales, np.float32(enc), np.float32(dec), deq)


def _e2m1(v: float | Fraction, mode, r: int | None, nbits: int) -> int:
    return round_to_code(v, "e2m1", mode, r=r, nbits=nbits)


def _exact_profile(spec: BlockSpec, amax: float):
    """Real arithmetic: G = 6T/g (1 if g = 0); u = a_B G / 6; q = E2M1(x G / s) (FPS-BLK-2)."""
    t = spec.target
    assert t is not None
    g = Fraction(amax)
    big_g = 6 * t / g if g > 0 else Fraction(1)
    sf = spec.scale_format
    mode, nbits = spec.rounding, spec.nbits

    def block_fn(a_b: Fraction):
        code = round_to_code(a_b * big_g / 6, sf, "rne")
        if code == 0 and spec.zero_scale_rule:
            code = spec.one_code
        s = _fmt_value(sf, code)

        def elem(xv: float, r: int | None):
            if s == 0:  # no zero-scale rule: |x| / 0 saturates, zeros stay zeros
                v: float | Fraction = xv if xv == 0 else math.copysign(math.inf, xv)
            elif xv == 0:
                v = xv  # keeps the sign of zero
            else:
                v = Fraction(xv) * big_g / s
            q = _e2m1(v, mode, r, nbits)
            val = _e2m1_signed_value(q) * s / big_g
            d = f32(val)
            if val == 0 and q & 0x8:
                d = -0.0
            return q, d
        return code, elem

    return f32(big_g), f32(1 / big_g), block_fn


def _fp32_profile(spec: BlockSpec, amax: float):
    """The binary32 operation sequence shared by seed-fp32 and te-fp32 (FPS-BLK-3, FPS-BLK-8)."""
    prof = spec.profile
    t = spec.target
    assert t is not None
    sf = spec.scale_format
    smax = float(get_format(sf).max_finite)
    mode, nbits = spec.rounding, spec.nbits
    six_t = f32_mul(6.0, f32(t))
    if amax == 0 and prof.amax_zero is AmaxZero.ONE:
        ge = 1.0
    else:
        ge = min(f32_div(six_t, amax), FLT_MAX)
        if ge == 0:
            ge = 1.0
    gd = f32_div(1.0, ge)
    mulf = f32_mul(ge, f32_div(1.0, 6.0))
    inv_six_t = f32_div(1.0, six_t)

    def block_fn(a_b: Fraction):
        sc = f32_mul(float(a_b), mulf)
        sc = min(sc, FLT_MAX, smax)
        code = round_to_code(sc, sf, "rne")
        if code == 0 and spec.zero_scale_rule:
            code = spec.one_code
        s = float(_fmt_value(sf, code))
        mult = f32_div(1.0, f32_mul(s, gd))
        if prof.cap_multiplier:
            mult = min(mult, FLT_MAX)
        if prof.dequant == "te":
            dscale = f32_mul(f32_mul(s, amax), inv_six_t)

        def elem(xv: float, r: int | None):
            y = f32_mul(xv, mult)
            if y == 0 and prof.signed_zero is SignedZero.POSITIVE:
                y = 0.0
            q = _e2m1(y, mode, r, nbits)
            qv = float(_e2m1_signed_value(q))
            if q & 0x8 and qv == 0:
                qv = -0.0
            if prof.dequant == "te":
                d = f32_mul(qv, dscale)
            else:  # seed kernel: (payload * scale) * global_decode
                d = f32_mul(f32_mul(qv, s), gd)
            return q, d
        return code, elem

    return ge, gd, block_fn


def _torchao_profile(spec: BlockSpec, amax: float):
    """torchao 0.18's two-level NVFP4 sequence (FPS-BLK-18)."""
    t = spec.target
    assert t is not None
    sf = spec.scale_format
    smax = float(get_format(sf).max_finite)
    smin = float(get_format(sf).min_normal)  # E4M3_EPS = finfo(float8_e4m3fn).tiny = 2^-6
    six_t = f32_mul(6.0, f32(t))
    if amax == 0:
        raise FpspecError("profile torchao-0.18 is undefined for a zero tensor amax (0/0 in the block scale)")
    pts = f32_div(amax, six_t)
    inv_pts = f32_div(1.0, pts)
    if math.isinf(inv_pts):
        raise FpspecError(f"profile torchao-0.18 overflows 1/per_tensor_scale for amax {amax!r}")

    def block_fn(a_b: Fraction):
        bs = f32_div(float(a_b), 6.0)
        sbs = f32_div(bs, pts)
        sbs = min(max(sbs, smin), smax)
        code = round_to_code(sbs, sf, "rne")
        s = float(_fmt_value(sf, code))
        recip = f32_div(inv_pts, s)
        dscale = f32_mul(pts, s)

        def elem(xv: float, r: int | None):
            y = f32_mul(xv, recip)
            q = _e2m1(y, spec.rounding, r, spec.nbits)
            qv = float(_e2m1_signed_value(q))
            if q & 0x8 and qv == 0:
                qv = -0.0
            return q, f32_mul(qv, dscale)
        return code, elem

    return inv_pts, pts, block_fn


def _mx_exponent(a_b: Fraction, mode: MxScaleMode) -> int:
    """Unbiased E8M0 scale exponent of a block with amax a_b (FPS-BLK-12)."""
    if a_b == 0:
        return -127
    emax_e2m1 = 2
    if mode is MxScaleMode.FLOOR:
        e = floor_log2(a_b) - emax_e2m1
    elif mode is MxScaleMode.CEIL:
        e = ceil_log2(a_b) - emax_e2m1
    elif mode is MxScaleMode.EVEN:
        fl = floor_log2(a_b)
        e = fl + (1 if a_b >= Fraction(7, 4) * Fraction(2) ** fl else 0) - emax_e2m1
    else:
        e = ceil_log2(a_b / 6)
    return max(-127, min(127, e))


def _mx_profile(spec: BlockSpec):
    mode_r = spec.rounding
    mx_mode = spec.profile.mx_mode
    assert mx_mode is not None

    def block_fn(a_b: Fraction):
        e = _mx_exponent(a_b, mx_mode)
        scale = Fraction(2) ** e

        def elem(xv: float, r: int | None):
            v = xv if xv == 0 else Fraction(xv) / scale
            q = _e2m1(v, mode_r, r, spec.nbits)
            val = _e2m1_signed_value(q) * scale
            d = f32(val)
            if val == 0 and q & 0x8:
                d = -0.0
            return q, d
        return e + 127, elem

    return 1.0, 1.0, block_fn
