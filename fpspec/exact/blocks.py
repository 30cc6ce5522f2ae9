"""The executable spec of block quantization, per scheme and profile (FPS-BLK-*).

Everything is :class:`fractions.Fraction` arithmetic and
:func:`fpspec.exact.rounding.round_to_code`.  Profiles that are sequences of
binary32 operations are emulated step by step with :mod:`fpspec.exact.binary32`:
each operation is the exact real result rounded once with
``round_to_code(., "fp32", "rne")``, which is what IEEE 754 requires of a
correctly rounded binary32 ``*``, ``/`` and ``+``.

The input is the *quantized view* (the tensor, or its transpose for columnwise
operands, after the optional Hadamard transform), shape (M, K), K a multiple of
the block.  The functions here are slow on purpose: one Python loop per
element, in the order the docs state.  :mod:`fpspec.fast.blocks` is the twin;
each profile function here has a namesake there with the same numbered steps:

* :func:`_exact_profile`   FPS-BLK-2 (ue5m3 and nvfp4 ``exact``)
* :func:`_fp32_profile`    FPS-BLK-3 (``seed-fp32``), FPS-BLK-8/9 (``te-fp32``, ``te-kernel``)
* :func:`_torchao_profile` FPS-BLK-18 (``torchao-0.18``)
* :func:`_mx_profile`      FPS-BLK-12/13 (``mxfp4`` floor, ceil, even, rceil), FPS-BLK-27/28 (``mxfp8``)
* :func:`_torchao_mx_profile` FPS-BLK-23 (``mxfp4`` torchao-0.18-floor, -ceil, -even, -rceil)
* :func:`_microxcaling_profile` FPS-BLK-24 (``mxfp4`` microxcaling)

and every payload goes through the one payload rounding step :func:`payload_code`
(E2M1, or the FP8 element format of ``mxfp8``).  The three MX profile functions share
the per-block steps of :func:`_mx_blocks`; the element format is data
(``spec.payload_format``: its emax, largest value and mantissa width), never a branch
on the scheme.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, cast

import numpy as np

from ..choices import Policies
from ..errors import FpspecError
from ..formats import E2M1, FloatFormat
from ..input_check import BINARY32_OVERFLOW, FLOAT_INPUT_DTYPES, not_a_float_input, not_a_matrix, refused_input
from ..schemes import (AmaxZero, Arithmetic, BlockResult, BlockSpec, Dequant, MxScaleMode, MxZeroByte, SignedZero,
                       SrEvaluation, TorchDevice)
from .binary32 import FLT_MAX, ceil_log2, f32, f32_add, f32_div, f32_fma, f32_mul, floor_log2
from .log2 import float_log2_ceil, float_log2_floor
from .rounding import round_to_code

__all__ = ["scan_input_exact", "quantize_view_exact", "block_amax_grid_exact", "rht16_exact", "round_bf16_exact", "payload_code",
           "RHT_SIGNS", "block_trace_exact", "BlockTrace", "ElementTrace"]

#: TransformerEngine's wgrad sign vector for the 16-point random Hadamard transform.
RHT_SIGNS = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)


# --------------------------------------------------------------- helpers
def scan_input_exact(x: object, block: int = 0) -> tuple[np.ndarray, np.float32, None]:
    """Step 0's check of the input (FPS-BLK-1), element by element: the (M, K) view (fp16/bf16
    widened exactly, leading dimensions flattened), fp32(max |x|) (the largest magnitude, rounded
    once), no block amaxes (this twin measures its own); refuses the first NaN, Inf or value
    beyond binary32 (:func:`fpspec.input_check.refused_input`)."""
    x = np.asarray(x)
    if x.dtype.name not in FLOAT_INPUT_DTYPES:
        raise not_a_float_input(x.dtype)
    if x.ndim < 2:
        raise not_a_matrix(x.shape)
    if x.dtype.name in ("float16", "bfloat16"):
        x = x.astype(np.float32)  # exact widening
    top = 0.0
    for i, v in enumerate(x.reshape(-1).tolist()):
        if not math.isfinite(v) or abs(v) >= BINARY32_OVERFLOW:
            why = "non-finite" if not math.isfinite(v) else "binary32-range"
            raise refused_input(why, v, tuple(int(j) for j in np.unravel_index(i, x.shape)))
        top = max(top, abs(v))
    x2 = np.ascontiguousarray(x)
    if x2.ndim > 2:
        x2 = x2.reshape(-1, x.shape[-1])
    return x2, np.float32(top), None


def block_amax_grid_exact(x: np.ndarray, block: int, tile: str) -> list[list[Fraction]]:
    """max |x| over each block (1xB) or tile (BxB), exactly, as Fractions (FPS-BLK-6)."""
    m, k = x.shape
    rows = m // block if tile == "BxB" else m
    return [[_block_amax(x, block, tile, bi, bj) for bj in range(k // block)] for bi in range(rows)]


def _block_cells(block: int, tile: str, bi: int, bj: int) -> list[tuple[int, int]]:
    """The (row, column) indices of the view that block (bi, bj) of the scale grid covers, in row-major order."""
    r0, r1 = (bi * block, (bi + 1) * block) if tile == "BxB" else (bi, bi + 1)
    return [(i, j) for i in range(r0, r1) for j in range(bj * block, (bj + 1) * block)]


def _block_amax(x: np.ndarray, block: int, tile: str, bi: int, bj: int) -> Fraction:
    """max |x| over block (bi, bj) of the scale grid, exactly (FPS-BLK-6)."""
    a = Fraction(0)
    for i, j in _block_cells(block, tile, bi, bj):
        a = max(a, abs(Fraction(float(x[i, j]))))
    return a


def rht16_exact(x: np.ndarray) -> np.ndarray:
    """The 16-point random Hadamard transform along the last axis, in binary32 (FPS-BLK-10).

    For each group of 16 and each output j, with w_ij = s_i H16[i, j] / 4 (H16 the
    Sylvester Hadamard matrix, s = :data:`RHT_SIGNS`; every w_ij is +-1/4):
    a_0 = fp32(x_0 w_0j), a_i = fma32(x_i, w_ij, a_(i-1)) = fp32(a_(i-1) + x_i w_ij)
    (one rounding per step, the product exact), y_j = a_15: sequential fused
    multiply-add accumulation in index order.  A result beyond binary32 is refused.
    """
    m, k = x.shape
    if k % 16:
        raise FpspecError(f"the Hadamard transform needs the last dimension {k} to be a multiple of 16")
    h = _sylvester(16)
    out = np.empty((m, k), dtype=np.float32)
    for r in range(m):
        for g in range(k // 16):
            xs = [f32(float(x[r, 16 * g + i])) for i in range(16)]
            for j in range(16):
                acc = f32_mul(xs[0], RHT_SIGNS[0] * h[0][j] * 0.25)
                for i in range(1, 16):
                    acc = f32_fma(xs[i], RHT_SIGNS[i] * h[i][j] * 0.25, acc)
                if math.isinf(acc):
                    raise FpspecError("the Hadamard transform of the view overflows binary32 (FPS-BLK-10)",
                                      (r, 16 * g + j))
                out[r, 16 * g + j] = acc
    return out


def round_bf16_exact(v: np.ndarray) -> np.ndarray:
    """Each binary32 value of ``v`` rounded to bfloat16 (RNE), as float32 (FPS-BLK-20).

    A value that rounds past bfloat16's largest finite value is refused.
    """
    out = np.empty(v.shape, dtype=np.float32)
    bf16_max = float.fromhex("0x1.fep127")
    for idx in np.ndindex(v.shape):
        xv = float(v[idx])
        code = round_to_code(xv, "bf16", "rne")
        val = float(np.array([code << 16], dtype=np.uint32).view(np.float32)[0])
        if math.isinf(val):
            raise FpspecError(f"the transformed value {xv!r} rounds beyond bfloat16's largest finite "
                              f"value {bf16_max!r} (FPS-BLK-20)", tuple(int(i) for i in idx))
        out[idx] = val
    return out


def _sylvester(n: int) -> list[list[int]]:
    h = [[1]]
    while len(h) < n:
        h = [row + row for row in h] + [row + [-v for v in row] for row in h]
    return h


def _fmt_value(fmt: FloatFormat, code: int) -> Fraction:
    v = fmt.decode_exact(code)
    assert isinstance(v, Fraction)
    return v


def _signed_value(fmt: FloatFormat, code: int) -> float:
    """The value of a payload code as a float, negative zero kept."""
    v = float(_fmt_value(fmt, code))
    return -0.0 if (code & fmt.sign_mask and v == 0) else v


#: Payload conversions saturate at the element format's largest finite value (FPS-BLK-7,
#: FPS-BLK-28); a NaN never reaches them (FPS-BLK-1).
_SATURATE = Policies(overflow="sat", nan="error")


# ------------------------------------------------- the payload rounding
def payload_code(v: float | Fraction, spec: BlockSpec, r: int | None) -> int:
    """The payload code of one scaled value ``v`` (FPS-BLK-7, FPS-BLK-11, FPS-BLK-19, FPS-BLK-28).

    f is ``spec.payload_format`` (E2M1; E4M3 or E5M2 for mxfp8), with mantissa width m,
    smallest normal exponent emin and largest finite value max (6, 448, 57344).

    1. A scaled value that is -0.0 gets code 0x0 under ``signed_zero = positive``.
    2. ``sr_eval = fp32`` (the seed's FP32 evaluation of sr-midpoint, v a binary32
       value; E2M1 only): a = abs(v); the binade exponent q = max(floor(log2 a), 0) - 1;
       sig = fp32(a * 2^-q), lower = floor(sig), delta = fp32(sig - lower) (both
       exact), m = fp32((2r+1) * 2^-(N+1)) (exact); up iff fp32(delta + m) >= 1;
       the magnitude is min((lower + up) 2^q, 6).
    3. ``microxcaling`` (v the binary32 quotient A = fp32(x / 2^e), FPS-BLK-24):
       with a = abs(A), pe = max(FL(a), emin) (emin for a = 0) and
       t = a 2^(m - pe) (exact), the integer r = floor(t) (rtz), floor(fp32(t + 1/2))
       (rna), or that minus one when fp32(t - 1/2) is an even integer >= 0 (rne); the
       magnitude is min(r 2^(pe - m), max) (step 1 has made A = -0.0 positive).
    4. Otherwise: :func:`round_to_code` of v to f with the payload rounding,
       saturating at +-max.
    """
    fmt = spec.payload_format
    if spec.profile.signed_zero is SignedZero.POSITIVE and v == 0:
        v = 0.0
    if spec.arithmetic is Arithmetic.MICROXCALING:
        assert isinstance(v, float)
        return _microxcaling_code(v, fmt, spec.rounding.value)
    if spec.sr_eval is SrEvaluation.FP32:
        assert r is not None and isinstance(v, float)
        a = abs(v)
        if a == 0:
            mag = Fraction(0)
        elif a >= 6:  # saturated (also y = +-inf, from a multiplier near FLT_MAX)
            mag = Fraction(6)
        else:
            q = max(floor_log2(Fraction(a)), 0) - 1
            sig = f32_mul(a, 2.0 ** -q)
            lower = math.floor(sig)
            delta = f32_add(sig, -float(lower))
            m = f32_mul(float(2 * r + 1), 2.0 ** -(spec.nbits + 1))
            up = f32_add(delta, m) >= 1.0
            mag = min((lower + int(up)) * Fraction(2) ** q, Fraction(6))
        code = round_to_code(mag, E2M1, "rne")
        return code | (0x8 if math.copysign(1.0, v) < 0 else 0)
    return round_to_code(v, fmt, spec.rounding, r=r, nbits=spec.nbits, policies=_SATURATE)


def _microxcaling_code(v: float, fmt: FloatFormat, rounding: str) -> int:
    """Step 3 of :func:`payload_code`: microxcaling's ``_quantize_elemwise_core`` on a binary32 A."""
    a = abs(v)
    m = fmt.man_bits
    # floor(log2(|A| + (A == 0))), clipped at the element's smallest normal exponent
    pe = max(float_log2_floor(a) if a != 0 else 0, fmt.emin)
    t = Fraction(a) * Fraction(2) ** (m - pe)          # _safe_lshift: exact
    if rounding == "rtz":
        r = math.floor(t)
    else:
        r = math.floor(f32_add(float(t), 0.5))
        half_below = f32_add(float(t), -0.5)
        if rounding == "rne" and half_below >= 0 and half_below == math.floor(half_below) \
                and int(half_below) % 2 == 0:
            r -= 1
    mag = min(r * Fraction(2) ** (pe - m), fmt.max_finite)
    return round_to_code(mag, fmt, "rne") | (fmt.sign_mask if v < 0 else 0)


# ----------------------------------------------------------- the quantizer
def _record(trace: dict[str, object] | None, **values: object) -> None:
    """Write a step's intermediates into ``trace`` when one is asked for (the quantizer passes none)."""
    if trace is not None:
        trace.update(values)


# Each step takes an optional ``trace`` dict, where it writes its intermediates when one is given
# (:func:`block_trace_exact`; the quantizer passes none): a block step records ``scale_unrounded``
# (the value rounded to the scale format; None for MX profiles, whose scale is an exponent) and,
# for MX, ``exponent``; an element step records ``scaled`` (the value :func:`payload_code` rounds).
#: elem(x, r, trace=None) -> (payload code, dequantized value)
ElemFn = Callable[..., tuple[int, float]]
#: block_fn(a_B, trace=None) -> (scale code, elem)
BlockFn = Callable[..., tuple[int, ElemFn]]


def quantize_view_exact(x: np.ndarray, spec: BlockSpec, amax: float,
                        rbits: np.ndarray | None = None) -> BlockResult:
    """Quantize the (M, K) view ``x`` with tensor amax ``amax`` (a binary32 value).

    ``amax`` is the g of the docs: measured (current scaling) or given (a held
    value, possibly 0); it is ignored by MX profiles except as metadata.
    For each block: its amax a_B, then the profile's ``block_fn(a_B)`` gives the
    scale code and the element function, which gives each element's code and
    dequantized value.
    """
    m, k = x.shape
    b = spec.block
    grid = block_amax_grid_exact(x, b, spec.tile)
    codes = np.zeros((m, k), dtype=np.uint8)
    scales = np.zeros((len(grid), k // b), dtype=np.uint8)
    deq = np.zeros((m, k), dtype=np.float32)
    stochastic = spec.rounding.stochastic
    enc, dec, block_fn = _PROFILE_FUNCTIONS[spec.arithmetic](spec, amax)
    for i in range(m):
        gi = i // b if spec.tile == "BxB" else i
        for bj in range(k // b):
            scale_code, elem = block_fn(grid[gi][bj])
            scales[gi, bj] = scale_code
            for j in range(bj * b, (bj + 1) * b):
                r = int(rbits[i, j]) if (stochastic and rbits is not None) else None
                codes[i, j], deq[i, j] = elem(float(x[i, j]), r)
    return BlockResult(codes, scales, np.float32(enc), np.float32(dec), deq)


@dataclass(frozen=True)
class ElementTrace:
    """One element of a traced block: its view index, input, the scaled value the payload
    rounding takes (a Fraction for exact profiles, a binary32 float for binary32 ones), its
    payload code and dequantized value."""

    index: tuple[int, int]
    x: float
    scaled: float | Fraction
    code: int
    value: float


@dataclass(frozen=True)
class BlockTrace:
    """The intermediates of one block of :func:`quantize_view_exact`, computed by the same steps.

    ``block`` is the block's index in the scale grid; ``amax`` the tensor amax g; ``block_amax``
    a_B (exact); ``scale_unrounded`` the value the profile rounds to the scale format (the exact
    u_B of exact profiles, the binary32 value of binary32 ones, None for MX profiles, whose
    scale is the exponent ``exponent``); ``scale_code`` c_B after the zero-scale rule."""

    block: tuple[int, int]
    amax: float
    encode_scale: float
    block_amax: Fraction
    scale_unrounded: float | Fraction | None
    exponent: int | None
    scale_code: int
    elements: tuple[ElementTrace, ...]


def block_trace_exact(x: np.ndarray, spec: BlockSpec, amax: float, block_index: tuple[int, int],
                      rbits: np.ndarray | None = None) -> BlockTrace:
    """The intermediates of block ``block_index`` = (row of the scale grid, block along K) of the
    (M, K) view ``x``, quantized as :func:`quantize_view_exact` quantizes it (the same profile
    functions, asked to record their steps): a_B, the unrounded scale, c_B and every element's
    scaled value, code and dequantized value (FPS-BLK-2, FPS-BLK-3, FPS-BLK-12, FPS-CHK-4)."""
    m, k = x.shape
    b = spec.block
    rows = m // b if spec.tile == "BxB" else m
    bi, bj = (int(i) for i in block_index)
    if not (0 <= bi < rows and 0 <= bj < k // b):
        raise FpspecError(f"block {block_index} is outside the scale grid ({rows}, {k // b}) of view {x.shape}")
    a_b = _block_amax(x, b, spec.tile, bi, bj)
    enc, _, block_fn = _PROFILE_FUNCTIONS[spec.arithmetic](spec, amax)
    steps: dict[str, object] = {}
    scale_code, elem = block_fn(a_b, steps)
    stochastic = spec.rounding.stochastic
    elements = []
    for i, j in _block_cells(b, spec.tile, bi, bj):
        r = int(rbits[i, j]) if (stochastic and rbits is not None) else None
        e_steps: dict[str, object] = {}
        code, value = elem(float(x[i, j]), r, e_steps)
        scaled = cast("float | Fraction", e_steps["scaled"])
        elements.append(ElementTrace((i, j), float(x[i, j]), scaled, code, value))
    exponent = cast("int | None", steps.get("exponent"))
    unrounded = cast("float | Fraction | None", steps["scale_unrounded"])
    return BlockTrace((bi, bj), float(amax), float(enc), a_b, unrounded, exponent, scale_code, tuple(elements))


def _zero_amax(spec: BlockSpec) -> None:
    """Step 1 for g = 0 under a profile whose formula divides 0 by 0 (FPS-BLK-5)."""
    raise FpspecError(spec.profile.zero_amax_refusal())


def _exact_profile(spec: BlockSpec, amax: float) -> tuple[float, float, BlockFn]:
    """Real arithmetic (FPS-BLK-2).

    1. G = 6T/g, or G = 1 when g = 0.
    2. u_B = a_B G / 6; c_B = RNE(u_B) in the scale format, saturating.
    3. The zero-scale rule; s_B = the value of c_B.
    4. q = E2M1(x G / s_B); if s_B = 0 a nonzero x becomes +-6, a zero stays zero.
    5. Dequantized: q s_B / G rounded once to binary32.
    """
    t = spec.target
    assert t is not None
    g = Fraction(amax)
    big_g = 6 * t / g if g > 0 else Fraction(1)                        # 1
    sf = spec.scale_format

    def block_fn(a_b: Fraction, trace: dict[str, object] | None = None):
        u_b = a_b * big_g / 6
        _record(trace, scale_unrounded=u_b)
        code = round_to_code(u_b, sf, "rne")                            # 2
        if code == 0 and spec.zero_scale_rule:                          # 3
            code = spec.one_code
        s = _fmt_value(sf, code)

        def elem(xv: float, r: int | None, trace: dict[str, object] | None = None) -> tuple[int, float]:
            if s == 0:                                                  # 4
                v: float | Fraction = xv if xv == 0 else math.copysign(math.inf, xv)
            elif xv == 0:
                v = xv  # keeps the sign of zero
            else:
                v = Fraction(xv) * big_g / s
            _record(trace, scaled=v)
            q = payload_code(v, spec, r)
            qv = _signed_value(spec.payload_format, q)                      # 5
            return q, math.copysign(f32(abs(Fraction(qv)) * s / big_g), qv)
        return code, elem

    return f32(big_g), f32(1 / big_g), block_fn


def _fp32_profile(spec: BlockSpec, amax: float) -> tuple[float, float, BlockFn]:
    """The binary32 sequence of seed-fp32 (FPS-BLK-3), te-fp32 and te-kernel (FPS-BLK-8, FPS-BLK-9).

    1. ge = 1 if g = 0 (amax_zero = one); else min(fp32(fp32(6 T) / g), FLT_MAX), 1 if that is 0.
    2. gd = fp32(1 / ge).
    3. sc = fp32(a_B * fp32(ge * fp32(1/6))); sc = min(sc, FLT_MAX, U); c_B = RNE(sc).
    4. The zero-scale rule; s_B = the value of c_B.
    5. mult = fp32(1 / fp32(s_B * gd)), capped at FLT_MAX.
    6. q = E2M1(fp32(x * mult)).
    7. Dequantized: seed kernel fp32(fp32(q s_B) gd); seed portable fp32(q fp32(s_B gd));
       TE fp32(q fp32(fp32(s_B g) fp32(1/(6T)))).
    """
    prof = spec.profile
    t = spec.target
    assert t is not None
    sf = spec.scale_format
    smax = float(sf.max_finite)
    six_t = f32_mul(6.0, f32(t))
    if amax == 0 and prof.amax_zero is AmaxZero.ONE:                    # 1
        ge = 1.0
    elif amax == 0 and prof.amax_zero is AmaxZero.REFUSE:
        _zero_amax(spec)
    else:
        ge = min(f32_div(six_t, amax), FLT_MAX)
        if ge == 0:
            ge = 1.0
    gd = f32_div(1.0, ge)                                               # 2
    mulf = f32_mul(ge, f32_div(1.0, 6.0))
    inv_six_t = f32_div(1.0, six_t)

    def block_fn(a_b: Fraction, trace: dict[str, object] | None = None):
        sc = f32_mul(float(a_b), mulf)                                  # 3
        sc = min(sc, FLT_MAX, smax)
        _record(trace, scale_unrounded=sc)
        code = round_to_code(sc, sf, "rne")
        if code == 0 and spec.zero_scale_rule:                          # 4
            code = spec.one_code
        s = float(_fmt_value(sf, code))
        mult = f32_div(1.0, f32_mul(s, gd))                             # 5
        if prof.cap_multiplier:
            mult = min(mult, FLT_MAX)
        dscale = f32_mul(f32_mul(s, amax), inv_six_t)

        def elem(xv: float, r: int | None, trace: dict[str, object] | None = None) -> tuple[int, float]:
            y = f32_mul(xv, mult)                                       # 6
            _record(trace, scaled=y)
            q = payload_code(y, spec, r)
            qv = _signed_value(spec.payload_format, q)                      # 7
            if prof.dequant is Dequant.TE:
                return q, f32_mul(qv, dscale)
            if prof.dequant is Dequant.SEED_PORTABLE:
                return q, f32_mul(qv, f32_mul(s, gd))
            return q, f32_mul(f32_mul(qv, s), gd)
        return code, elem

    return ge, gd, block_fn


def _torchao_profile(spec: BlockSpec, amax: float) -> tuple[float, float, BlockFn]:
    """torchao 0.18's two-level NVFP4 sequence (FPS-BLK-18).

    1. pts = fp32(g / fp32(6 T)); ipts = fp32(1 / pts) (refused when g = 0 or ipts overflows).
    2. sbs = fp32(fp32(a_B / 6) / pts), clamped to [2^-6, 448]; c_B = RNE(sbs).
       (On CUDA, ``torchao-0.18-cuda``, g / fp32(6 T) and a_B / 6 are products with the
       binary32 reciprocals, FPS-BLK-29.)
    3. recip = fp32(ipts / s_B); q = E2M1(fp32(x * recip)).
    4. Dequantized: fp32(q * fp32(pts * s_B)).
    """
    t = spec.target
    assert t is not None
    sf = spec.scale_format
    smax = float(sf.max_finite)
    smin = float(sf.min_normal)  # E4M3_EPS = finfo(float8_e4m3fn).tiny = 2^-6
    six_t = f32_mul(6.0, f32(t))
    if amax == 0:                                                       # 1
        _zero_amax(spec)
    device = spec.profile.torch_device
    pts = _scalar_quotient(amax, six_t, device)
    inv_pts = f32_div(1.0, pts)
    if math.isinf(inv_pts):
        raise FpspecError(f"profile {spec.profile.name} overflows 1/per_tensor_scale for amax {amax!r}")

    def block_fn(a_b: Fraction, trace: dict[str, object] | None = None):
        bs = _scalar_quotient(float(a_b), 6.0, device)                  # 2
        sbs = f32_div(bs, pts)
        sbs = min(max(sbs, smin), smax)
        _record(trace, scale_unrounded=sbs)
        code = round_to_code(sbs, sf, "rne")
        s = float(_fmt_value(sf, code))
        recip = f32_div(inv_pts, s)                                     # 3
        dscale = f32_mul(pts, s)

        def elem(xv: float, r: int | None, trace: dict[str, object] | None = None) -> tuple[int, float]:
            y = f32_mul(xv, recip)
            _record(trace, scaled=y)
            q = payload_code(y, spec, r)
            return q, f32_mul(_signed_value(spec.payload_format, q), dscale)  # 4
        return code, elem

    return inv_pts, pts, block_fn


def _scalar_quotient(a: float, c: float, device: TorchDevice) -> float:
    """torch's binary32 a / c for a Python number c (FPS-BLK-29): one division on the CPU, a
    multiplication by fp32(1 / c) on CUDA."""
    return f32_div(a, c) if device is TorchDevice.CPU else f32_mul(a, f32_div(1.0, c))


def _mx_exponent(a_b: Fraction, mode: MxScaleMode, elem: FloatFormat,
                 device: TorchDevice = TorchDevice.CPU) -> int:
    """Unbiased E8M0 scale exponent of a block with amax a_b (FPS-BLK-12, FPS-BLK-22, FPS-BLK-27),
    clamped to [-127, 127]; a zero block gets -127.  ``elem`` is the payload format: its emax
    (2, 8, 15), largest value (6, 448, 57344) and mantissa width m (1, 3, 2); ``device`` the torch
    device of a binary32 rule (FPS-BLK-29: its log2 differs from FL / CL only where e is clamped)."""
    if a_b == 0:
        return -127
    emax = elem.emax
    top = elem.max_finite
    if mode is MxScaleMode.FLOOR:
        e = floor_log2(a_b) - emax
    elif mode is MxScaleMode.CEIL:
        e = ceil_log2(a_b) - emax
    elif mode is MxScaleMode.EVEN:
        # a_b rounded to m mantissa bits, ties away, reaches the next binade iff
        # a_b >= (2 - 2^-(m+1)) 2^fl  (7/4 for E2M1, 31/16 for E4M3, 15/8 for E5M2)
        fl = floor_log2(a_b)
        up = a_b >= (2 - Fraction(1, 2 ** (elem.man_bits + 1))) * Fraction(2) ** fl
        e = fl + (1 if up else 0) - emax
    elif mode is MxScaleMode.RCEIL:
        e = ceil_log2(a_b / top)
    elif mode is MxScaleMode.RCEIL_FP32:
        d = _scalar_quotient(float(a_b), float(top), device)   # a binary32 a_b (the profile reads binary32)
        e = float_log2_ceil(d) if d > 0 else -127             # log2(0) = -inf
    else:  # FLOOR_FP32
        e = float_log2_floor(a_b) - emax
    return max(-127, min(127, e))


def _mx_divisor(e: int, zero_byte: MxZeroByte) -> Fraction:
    """The power of two a block with exponent e divides its elements by (FPS-BLK-13, FPS-BLK-23)."""
    if e == -127 and zero_byte is MxZeroByte.MIN_NORMAL:
        return Fraction(2) ** -126
    if e == -127 and zero_byte is MxZeroByte.ONE:
        return Fraction(1)
    return Fraction(2) ** e


def _mx_blocks(spec: BlockSpec) -> BlockFn:
    """The per-block steps every MX profile shares (FPS-BLK-12, FPS-BLK-13, FPS-BLK-27, FPS-BLK-28):

    2. e = the profile's exponent of a_B for the payload format (:func:`_mx_exponent`);
       c_B = e + 127.
    3. q = the payload code (:func:`payload_code`) of x / d, d = the profile's divisor
       (:func:`_mx_divisor`; 2^e unless c_B = 0): the exact quotient, or for
       ``microxcaling`` the binary32 one.
    4. Dequantized: q 2^e, exact (+-inf beyond binary32).
    """
    prof = spec.profile
    assert prof.mx_mode is not None and prof.mx_zero_byte is not None
    fp32_quotient = spec.arithmetic is Arithmetic.MICROXCALING

    def block_fn(a_b: Fraction, trace: dict[str, object] | None = None):
        e = _mx_exponent(a_b, prof.mx_mode, spec.payload_format, prof.torch_device)  # 2
        _record(trace, scale_unrounded=None, exponent=e)
        d = _mx_divisor(e, prof.mx_zero_byte)
        scale = Fraction(2) ** e

        def elem(xv: float, r: int | None, trace: dict[str, object] | None = None) -> tuple[int, float]:
            if fp32_quotient:                                           # 3
                v: float | Fraction = f32_div(xv, float(d))
            else:
                v = xv if xv == 0 else Fraction(xv) / d
            _record(trace, scaled=v)
            q = payload_code(v, spec, r)
            qv = _signed_value(spec.payload_format, q)                  # 4
            val = abs(Fraction(qv)) * scale
            return q, math.copysign(math.inf if val > FLT_MAX else f32(val), qv)
        return e + 127, elem

    return block_fn


def _mx_profile(spec: BlockSpec, amax: float) -> tuple[float, float, BlockFn]:
    """OCP MX (FPS-BLK-12, FPS-BLK-13; mxfp8: FPS-BLK-27, FPS-BLK-28).

    1. No tensor scale: encode and decode scales are 1.
    2. e = the profile's exponent of a_B from the exact value (floor, ceil, even, rceil),
       clamped to [-127, 127]; c_B = e + 127.
    3. q = the payload code of x / 2^e (exact division), saturating.
    4. Dequantized: q 2^e, exact (+-inf beyond binary32).
    """
    return 1.0, 1.0, _mx_blocks(spec)


def _torchao_mx_profile(spec: BlockSpec, amax: float) -> tuple[float, float, BlockFn]:
    """torchao 0.18's ``to_mx`` on binary32 input (FPS-BLK-23).

    1. No tensor scale: encode and decode scales are 1 (the view is binary32).
    2. e: floor, ceil, even from the bits of a_B (as the OCP floor, ceil, even);
       rceil: CL(fp32(a_B / max)), -127 for a zero quotient; clamped to [-127, 127].
    3. q = payload code of x / d with RNE, saturating, d = 2^e, except for c_B = 0:
       d = 2^-126 (floor, ceil, even) or 1 (rceil).  x / d is exact, or below 2^-126
       where every code is a zero.
    4. Dequantized: q 2^e (2^-127 for c_B = 0).
    """
    return 1.0, 1.0, _mx_blocks(spec)


def _microxcaling_profile(spec: BlockSpec, amax: float) -> tuple[float, float, BlockFn]:
    """microxcaling's ``_quantize_mx`` with shared_exp_method "max" (FPS-BLK-24).

    1. No tensor scale: encode and decode scales are 1 (the view is binary32).
    2. e = max(FL(a_B) - emax, -127) (a zero block read as 2^-126); c_B = e + 127.
    3. A = fp32(x / 2^e); q = microxcaling's rounding of A (:func:`payload_code`
       step 3), A = -0.0 giving +0.
    4. Dequantized: q 2^e.
    """
    return 1.0, 1.0, _mx_blocks(spec)


#: Arithmetic -> profile function (the same table as in :mod:`fpspec.fast.blocks`).
_PROFILE_FUNCTIONS: dict[Arithmetic, Callable[[BlockSpec, float], tuple[float, float, BlockFn]]] = {
    Arithmetic.EXACT: _exact_profile,
    Arithmetic.FP32: _fp32_profile,
    Arithmetic.TORCHAO: _torchao_profile,
    Arithmetic.MX: _mx_profile,
    Arithmetic.TORCHAO_MX: _torchao_mx_profile,
    Arithmetic.MICROXCALING: _microxcaling_profile,
}
