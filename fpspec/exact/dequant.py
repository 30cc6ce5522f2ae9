"""The executable spec of dequantization: the value of every element of a block-quantized
tensor, from its payload code and its block's scale code (FPS-BLK-14, FPS-BLK-21).

:mod:`fpspec.fast.dequant` is the twin (a table of every (scale code, payload code) pair and
a look-up kernel); both take the same numbered steps, here one element at a time with
:class:`fractions.Fraction` values and the correctly rounded binary32 operations of
:mod:`fpspec.exact.binary32`:

1. s, the value of the block's scale code (a finite value of the scale format);
2. q, the value of the element's payload code (E2M1, or the E4M3 / E5M2 element of
   ``mxfp8``), its sign kept (-0 too);
3. the profile's formula (:class:`~fpspec.schemes.Dequant`; g the tensor amax, T the
   target, gd the decode scale the quantizer recorded):

   * ``exact``: q s g / (6T) rounded once to binary32 (q s when g = 0);
   * ``seed-kernel``: fp32(fp32(q s) gd), the seed kernel's order;
   * ``seed-portable``: fp32(q fp32(s gd)), the seed's portable reference;
   * ``te``: fp32(q fp32(fp32(s g) fp32(1 / fp32(6T)))), TransformerEngine's;
   * ``torchao``: fp32(q fp32(gd s));
   * ``mx``: q s = q 2^(c - 127) rounded once to binary32 (exact unless beyond binary32);
     a tensor built from codes (no tensor scale) takes this formula too.

A value the formula takes past binary32 is +-inf (IEEE overflow), and TE's 0 * inf is NaN;
the caller decides whether that is a refusal (:func:`dequantize_blocks_exact` reports the
first such element, as the fast twin does).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import FpspecError
from ..formats import FloatFormat, get_format
from ..schemes import Dequant
from .binary32 import f32, f32_div, f32_mul

__all__ = ["dequant_value_exact", "dequantize_blocks_exact"]


def _finite_value(fmt: FloatFormat, code: int, what: str) -> Fraction:
    """|value| of a code that must be finite (the scale of step 1, the payload of step 2)."""
    v = fmt.decode_exact(code)
    if not isinstance(v, Fraction):
        raise FpspecError(f"{what} code {code} is not a finite {fmt.name} value")
    return abs(v)


def _signed(magnitude: Fraction | float, negative: bool) -> float:
    """A binary32 value (a float) with the payload's sign."""
    return math.copysign(float(magnitude), -1.0 if negative else 1.0)


def dequant_value_exact(formula: Dequant, scale_code: int, payload_code: int, scale_format: FloatFormat | str,
                        payload_format: FloatFormat | str, amax: float, target: Fraction | float | None,
                        decode_scale: float) -> float:
    """The dequantized binary32 value (a float) of one element: payload code ``payload_code`` in
    a block of scale code ``scale_code``, under the profile's ``formula`` (steps 1-3 of the module
    docstring; FPS-BLK-14).  ``amax`` is g, ``target`` T (unused by ``mx``, None there),
    ``decode_scale`` the quantizer's gd (read by ``seed-kernel``, ``seed-portable`` and
    ``torchao``)."""
    sf, pf = get_format(scale_format), get_format(payload_format)
    s = _finite_value(sf, scale_code, "scale")                                   # 1
    q = _finite_value(pf, payload_code, "payload")                               # 2
    negative = bool(payload_code & pf.sign_mask)
    qv = _signed(q, negative)
    g = float(amax)
    gd = float(np.float32(decode_scale))
    if formula is Dequant.EXACT:                                                 # 3
        exact = q * s * Fraction(g) / (6 * Fraction(target)) if g > 0 else q * s
        return _signed(f32(exact), negative)
    if formula is Dequant.MX:
        return _signed(f32(q * s), negative)
    if formula is Dequant.SEED_KERNEL:
        return f32_mul(f32_mul(qv, float(s)), gd)
    if formula is Dequant.SEED_PORTABLE:
        return f32_mul(qv, f32_mul(float(s), gd))
    if formula is Dequant.TE:
        inv_six_t = f32_div(1.0, f32(6 * Fraction(target)))
        return f32_mul(qv, f32_mul(f32_mul(float(s), g), inv_six_t))
    if formula is Dequant.TORCHAO:
        return f32_mul(qv, f32_mul(gd, float(s)))
    raise FpspecError(f"no dequantization formula {formula!r}")


def dequantize_blocks_exact(codes: np.ndarray, scales: np.ndarray, formula: Dequant, scale_format: FloatFormat | str,
                            payload_format: FloatFormat | str, amax: float, target: Fraction | float | None,
                            decode_scale: float, block: int, tile: str) -> tuple[np.ndarray, int]:
    """float32 values of (M, K) payload codes under their blocks' scale codes (the twin of
    :func:`fpspec.fast.dequant.dequantize_blocks` with its table
    :func:`fpspec.fast.dequant.dequant_value_table`), and the flat row-major index of the first
    non-finite value (-1 when every value is finite).

    ``scales`` is the scale grid: (M, K / B) for ``tile="1xB"``, (M / B, K / B) for ``"BxB"``;
    element (i, j) takes scale [i, j // B] or [i // B, j // B].  Every element is evaluated by
    :func:`dequant_value_exact` (FPS-BLK-14, FPS-BLK-21)."""
    codes = np.asarray(codes)
    m, k = codes.shape
    rows = m // block if tile == "BxB" else m
    if np.shape(scales) != (rows, k // block):
        raise FpspecError(f"scales must have the shape {(rows, k // block)} of the {tile} scale grid of "
                          f"codes {codes.shape} (block {block}), got {np.shape(scales)}")
    out = np.empty((m, k), dtype=np.float32)
    first_bad = -1
    for i in range(m):
        si = i // block if tile == "BxB" else i
        for j in range(k):
            v = dequant_value_exact(formula, int(scales[si][j // block]), int(codes[i, j]), scale_format,
                                    payload_format, amax, target, decode_scale)
            out[i, j] = v
            if first_bad < 0 and not math.isfinite(v):
                first_bad = i * k + j
    return out, first_bad
