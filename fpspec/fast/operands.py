"""Fast GEMM operands: code arrays and QuantizedTensors as integer significands and
power-of-two exponents, the form every fast kernel takes (FPS-GEMM-10).

The twin of the exact spec's ``operand_from_codes`` and ``operand_from_quantized``
(:mod:`fpspec.exact.accumulate`); shared by the term kernels' dispatch
(:mod:`fpspec.fast.accumulate`) and the BLAS partial sums (:mod:`fpspec.fast.partials`).
Every value is exact: a decoded code is ``sig * 2^lsb`` with ``sig`` odd (at most 11
bits for FP16, 8 for BF16, 4 for E4M3, 3 for E5M2, 2 x 4 for an E2M1 payload times an
E4M3 / UE5M3 scale, 30 for an exactly dequantized value, 24 for an FP32-decoded one);
E2M1 payloads are held as the integers 2q in [-12, 12] (:func:`payload_ints`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ..errors import FpspecError
from ..exact.binary32 import FP32_EMIN
from ..formats import get_format
from ..gemm_operands import code_format, tf32_truncate
from ..models import ZERO_ALIGNMENT_EXPONENT, GemmModel
from .chain import NO_TERMS, Plan, bits_float
from .fp32 import bitlen
from .jit import gemm_jit
from .kernels import (FINITE, LANE_WIDTHS, NAN, NEG_INF, POS_INF, SPAN_TOO_WIDE, AlignedOperand, BlockOperand,
                      NarrowLanes, ScaledBlockOperand, TermOperand)
from .rounding import decode_fast, decode_table

__all__ = ["zero_exponent", "split_values", "code_values", "code_terms", "code_operand", "code_values_of",
           "payload_ints", "scale_values", "quantized_values", "floor_log2_table", "quantized_operand",
           "scaled_block_operand", "block_operand", "transposed", "fp32_exact", "aligned_operand", "aligned_codes",
           "ValueRange", "aligned_values", "narrow_lanes", "LOCAL_SCALE_BITS"]

#: Widest local block-scale integers of a group (beyond: the exact term-by-term path).
LOCAL_SCALE_BITS = 40


def zero_exponent(model: GemmModel) -> int:
    """Alignment exponent of a zero operand: -126 under ``zero_alignment="emin"``; else 0,
    never read (zero products are left out) (FPS-GEMM-16)."""
    return ZERO_ALIGNMENT_EXPONENT if model.zero_alignment == "emin" else 0


def split_values(v: np.ndarray, emin: int | None, zero: int = 0) -> TermOperand:
    """float64 values -> TermOperand (odd sig, lsb, alignment exponent max(floor(log2|v|),
    emin) (``zero`` for a zero), special code)."""
    v = np.asarray(v, dtype=np.float64)
    special = np.full(v.shape, FINITE, dtype=np.int8)
    special[np.isposinf(v)] = POS_INF
    special[np.isneginf(v)] = NEG_INF
    special[np.isnan(v)] = NAN
    fin = np.where(special == FINITE, v, 0.0)
    m, e = np.frexp(fin)
    sig = np.ldexp(m, 53).astype(np.int64)
    lsb = (e.astype(np.int64) - 53)
    aexp = e.astype(np.int64) - 1
    if emin is not None:
        aexp = np.maximum(aexp, emin)
    nz = sig != 0
    for _ in range(53):
        even = nz & ((sig & 1) == 0)
        if not even.any():
            break
        sig = np.where(even, sig >> 1, sig)
        lsb = np.where(even, lsb + 1, lsb)
    if np.abs(sig).max(initial=0) >= (1 << 31):
        raise FpspecError("operand significand wider than 31 bits (internal)")
    lsb = np.where(nz, lsb, 0)
    aexp = np.where(nz, aexp, zero)
    return TermOperand(sig.astype(np.int32), lsb.astype(np.int32), aexp.astype(np.int32), special)


@functools.lru_cache(maxsize=None)
def code_values(name: str) -> np.ndarray:
    """float64 value of every code of a plain format (exact): fp16 and bf16 from their
    bits, 8-bit formats from the exact decode table."""
    if name == "fp16":
        t = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    elif name == "bf16":
        with np.errstate(invalid="ignore"):  # NaN patterns widen to NaN
            t = (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32).astype(np.float64)
    else:
        t = decode_table(name)
    t.setflags(write=False)
    return t


@functools.lru_cache(maxsize=None)
def code_terms(name: str, emin: int, zero: int) -> TermOperand:
    """:func:`split_values` of every code of a plain format (cached per format)."""
    op = split_values(code_values(name), emin, zero)
    for x in op:
        x.setflags(write=False)
    return op


def code_operand(codes: np.ndarray, name: str, model: GemmModel) -> TermOperand:
    """Code array (rows, K) of operand format ``name`` -> TermOperand: exact decoded values,
    alignment exponent with the input format's emin (FP32's for ``decoded-fp32``), a zero's
    per ``zero_alignment`` (exact: ``operand_from_codes``).  ``tf32``: the FP32 codes with
    their low 13 bits cleared, split directly (no table of 2^32 codes)."""
    fmt = code_format(name)
    emin = FP32_EMIN if model.operand_domain == "decoded-fp32" else fmt.emin
    if name == "tf32":
        return split_values(decode_fast(tf32_truncate(codes), fmt), emin, zero_exponent(model))
    table = code_terms(fmt.name, emin, zero_exponent(model))
    idx = codes.astype(np.intp)
    return TermOperand(*(x[idx] for x in table))


def payload_ints(qt) -> np.ndarray:
    """2 x E2M1 value of every payload code, int8 (exact: E2M1 values are multiples of 1/2)."""
    table = decode_table(get_format(qt.payload_format))
    lut = (table * 2).astype(np.int8)
    if qt.codes.max(initial=0) >= len(lut):
        raise FpspecError(f"payload code out of range for {qt.payload_format}")
    return lut[qt.codes.astype(np.intp)]


def scale_values(qt) -> np.ndarray:
    """float64 block scale per (row, block) (2-D tiles repeated over their rows)."""
    fmt = get_format(qt.scale_format)
    if qt.scales.max(initial=0) >= fmt.num_codes:
        bad = int(np.argmax(qt.scales.reshape(-1) >= fmt.num_codes))
        raise FpspecError(f"scale code {int(qt.scales.reshape(-1)[bad])} out of range for {fmt.name}",
                          tuple(int(x) for x in np.unravel_index(bad, qt.scales.shape)))
    grid = qt.scales if qt.tile == "1xB" else np.repeat(qt.scales, qt.block, axis=0)
    return decode_table(fmt)[grid.astype(np.intp)]


def quantized_values(qt, model: GemmModel) -> np.ndarray:
    """float64 operand values of a QuantizedTensor in the model's domain (exact; exact:
    ``operand_from_quantized``)."""
    p = decode_table(get_format(qt.payload_format))[qt.codes.astype(np.intp)]
    s = np.repeat(scale_values(qt), qt.block, axis=1)
    with np.errstate(invalid="ignore"):
        v = p * s  # exact: 2-bit x 4-bit significands (or x 1 for E8M0), in float64 range
    if model.operand_domain == "encoded":
        return v
    d = float(np.float32(qt.decode_scale))
    if model.operand_domain == "decoded-fp32":
        with np.errstate(invalid="ignore", over="ignore"):
            w = v * d  # exact in float64: <= 6 + 24 significant bits, exponents within range
            return w.astype(np.float32).astype(np.float64)  # one IEEE rounding, RNE
    with np.errstate(invalid="ignore"):
        return v * d  # exact: < 2^30 significand, exponent >= -149 - 17 - 1


def floor_log2_table(table: np.ndarray, emin: int, zero: int) -> np.ndarray:
    """max(floor(log2|v|), emin) of every finite nonzero entry of a decode table, ``zero``
    for a zero, NO_TERMS for a special (float64 frexp: exact)."""
    fin = np.where(np.isfinite(table), table, 0.0)
    _, e = np.frexp(fin)
    out = np.maximum(e.astype(np.int64) - 1, emin)
    out = np.where(fin == 0.0, zero, out)
    return np.where(np.isfinite(table), out, NO_TERMS).astype(np.int64)


def quantized_operand(qt, model: GemmModel) -> TermOperand:
    """A QuantizedTensor as a TermOperand of its values in the model's domain; under
    ``block_exponent="scales"`` the alignment exponent is e(payload) + e(scale), each with
    its own format's emin (exact: ``operand_from_quantized``)."""
    zero = zero_exponent(model)
    op = split_values(quantized_values(qt, model), FP32_EMIN if model.operand_domain == "decoded-fp32" else None,
                       zero)
    if model.block_exponent != "scales":
        return op
    pf, sf = get_format(qt.payload_format), get_format(qt.scale_format)
    ep = floor_log2_table(decode_table(pf), pf.emin, zero)[qt.codes.astype(np.intp)]
    grid = qt.scales if qt.tile == "1xB" else np.repeat(qt.scales, qt.block, axis=0)
    es = np.repeat(floor_log2_table(decode_table(sf), sf.emin, zero)[grid.astype(np.intp)], qt.block, axis=1)
    aexp = np.where((ep == NO_TERMS) | (es == NO_TERMS), 0, ep + es)
    return op._replace(aexp=aexp.astype(np.int32))


def scaled_block_operand(qt, model: GemmModel) -> ScaledBlockOperand:
    """An E2M1 QuantizedTensor as a ScaledBlockOperand (per (row, block) scale: sig, lsb,
    alignment exponent with the scale format's emin, special code)."""
    sf = get_format(qt.scale_format)
    sv = scale_values(qt)
    split = split_values(sv, None)
    grid = qt.scales if qt.tile == "1xB" else np.repeat(qt.scales, qt.block, axis=0)
    zero = ZERO_ALIGNMENT_EXPONENT if model.zero_alignment == "emin" else NO_TERMS
    aexp = floor_log2_table(decode_table(sf), sf.emin, zero)[grid.astype(np.intp)]
    return ScaledBlockOperand(payload_ints(qt), split.sig, split.lsb, aexp.astype(np.int32), split.special)


def bitlen_np(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.int64)
    n = np.zeros(x.shape, dtype=np.int64)
    for b in range(62, -1, -1):
        hit = (n == 0) & (x >= (np.int64(1) << b))
        n = np.where(hit, b + 1, n)
    return n


def block_operand(qt, scales: np.ndarray, plan: Plan | None, transposed: bool) -> BlockOperand:
    """A QuantizedTensor as a BlockOperand; with a plan, its block scales per planned group
    as integers relative to the group's smallest scale exponent (width SPAN_TOO_WIDE
    where they need more than LOCAL_SCALE_BITS)."""
    sv = split_values(scales, None)
    sig, lsb = sv.sig.astype(np.int64), sv.lsb.astype(np.int64)
    if plan is None:
        local = base = width = np.zeros((1, 1), dtype=np.int64)
    else:
        first = plan.start // qt.block
        blocks = (plan.stop - plan.start) // qt.block
        far = np.int64(1 << 40)
        base = np.minimum.reduceat(np.where(sig != 0, lsb, far), first, axis=1)
        base = np.where(base == far, 0, base)
        shift = np.where(sig != 0, lsb - np.repeat(base, blocks, axis=1), 0)
        width = np.maximum.reduceat(np.where(sig != 0, bitlen_np(np.abs(sig)) + shift, 0), first, axis=1)
        fits = width <= LOCAL_SCALE_BITS
        local = np.where(np.repeat(fits, blocks, axis=1) & (sig != 0), sig << np.clip(shift, 0, 62), 0)
        width = np.where(fits, width, SPAN_TOO_WIDE)
    arrays = (payload_ints(qt), sig.astype(np.int32), lsb.astype(np.int32), local, base, width)
    if transposed:
        arrays = tuple(np.ascontiguousarray(x.T) if x.shape != (1, 1) else x for x in arrays)
    return BlockOperand(*arrays)


def _narrowest(x: np.ndarray) -> np.ndarray:
    """x as the narrowest of int8, int16, int32 that holds every value."""
    lo, hi = int(x.min(initial=0)), int(x.max(initial=0))
    for t in (np.int8, np.int16, np.int32):
        if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max:
            return x.astype(t)
    raise FpspecError("aligned operand wider than 32 bits (internal)")


def aligned_operand(op: TermOperand, width: int = 0) -> tuple[AlignedOperand | None, int, int]:
    """A TermOperand of finite values on one scale: value = m 2^(aexp - w), m =
    sig 2^(lsb - aexp + w), exact for w at least the largest aexp - lsb of the operand's
    nonzero values: that, or ``width`` if larger.  Returns (the AlignedOperand, w, the bits
    of the largest abs(m)); (None, w, 64) when some m would need more than 31 bits."""
    nz = op.sig != 0
    aexp = op.aexp.astype(np.int64)
    gap = np.where(nz, aexp - op.lsb, 0)
    w = max(int(gap.max(initial=0)), width, 0)
    shift = np.where(nz, op.lsb - aexp + w, 0)  # >= 0
    if int(shift.max(initial=0)) > 31:  # m >= 2^shift
        return None, w, 64
    m = op.sig.astype(np.int64) << shift  # below 2^62: sig < 2^31
    top = int(np.abs(m).max(initial=0)).bit_length()
    if top > 31:
        return None, w, 64
    return AlignedOperand(_narrowest(m), _narrowest(aexp)), w, top


def aligned_codes(codes: np.ndarray, name: str, model: GemmModel,
                  width: int = 0) -> tuple[AlignedOperand | None, int, int]:
    """:func:`aligned_operand` of :func:`code_operand` (codes, name, model), made from the
    format's table of every code (so w and the bits are those of the whole format), for
    finite codes only: (None, 0, 64) when a code is Inf or NaN, or for ``tf32`` (no table)."""
    if name == "tf32":
        return None, 0, 64
    fmt = code_format(name)
    emin = FP32_EMIN if model.operand_domain == "decoded-fp32" else fmt.emin
    table = code_terms(fmt.name, emin, zero_exponent(model))
    lut, w, bits = aligned_operand(table, width)
    if lut is None:
        return None, w, bits
    m, e = np.empty(np.shape(codes), dtype=lut.m.dtype), np.empty(np.shape(codes), dtype=lut.e.dtype)
    if not _gather_finite(np.ascontiguousarray(codes), lut.m, lut.e, table.special != FINITE, m, e):
        return None, 0, 64
    return AlignedOperand(m, e), w, bits


@gemm_jit
def _gather_finite(codes, m_lut, e_lut, special, m, e):
    """m[...] = m_lut[codes], e[...] = e_lut[codes] in one pass (a table gather without
    numpy's conversion of the codes to intp); False, at the first code whose ``special``
    is set (Inf or NaN), with m and e left partly written."""
    cf, mf, ef = codes.ravel(), m.ravel(), e.ravel()
    for k in range(cf.size):
        c = np.int64(cf[k])
        if special[c]:
            return False
        mf[k] = m_lut[c]
        ef[k] = e_lut[c]
    return True


class ValueRange(NamedTuple):
    """What the float32 products of :func:`fpspec.fast.accumulate.float_products` need to
    know of an operand's values (nonzero ones; zeros add nothing): whether each is a
    float32 number, the most significant bits of one (``sig`` odd: its bit length), the
    smallest and largest floor(log2|v|), and the smallest alignment exponent."""

    float32: bool
    bits: int
    low: int
    high: int
    least_exponent: int


@gemm_jit
def _value_range(m, e, width, v):
    """:func:`aligned_values` in one pass over m, e (any shape, flattened): writes the
    float32 values into ``v`` where every one is a float32 number, and returns the
    :class:`ValueRange` fields, all from integer arithmetic on m and e."""
    mf, ef, vf = m.ravel(), e.ravel(), v.ravel()
    float32, bits, low, high, least = True, 0, 1 << 30, -(1 << 30), 1 << 30
    for k in range(mf.size):
        x = np.int64(mf[k])
        if x == 0:
            continue
        mag = abs(x)
        top = bitlen(mag)                       # |x| in [2^(top - 1), 2^top)
        tz = bitlen(mag & -mag) - 1             # its lowest set bit, 2^tz
        ex = np.int64(ef[k])
        lg = top - 1 + ex - width               # floor(log2|value|)
        bits = max(bits, top - tz)
        low = min(low, lg)
        high = max(high, lg)
        least = min(least, ex)
        float32 &= (top - tz <= 24) & (lg <= 127) & (tz + ex - width >= -149)
    if float32:
        for k in range(mf.size):
            # m < 2^31 is a float64 and 2^(e - w) scales it exactly; a float32 number converts exactly
            vf[k] = np.float32(np.float64(mf[k]) * bits_float((np.int64(ef[k]) - width + 1023) << 52))
    return float32, bits, low, high, least


def aligned_values(op: AlignedOperand, width: int) -> tuple[np.ndarray | None, ValueRange]:
    """The values m 2^(e - width) of an AlignedOperand as float32 (None unless every one is
    a float32 number) and their :class:`ValueRange`."""
    v = np.empty(op.m.shape, dtype=np.float32)
    float32, bits, low, high, least = _value_range(op.m, op.e, width, v)
    if bits == 0:  # no nonzero value
        return v, ValueRange(True, 0, 0, 0, 0)
    return (v if float32 else None), ValueRange(bool(float32), int(bits), int(low), int(high), int(least))


def narrow_lanes(op: AlignedOperand, zero_terms: bool, values: np.ndarray | None,
                 exponents: int) -> NarrowLanes | None:
    """The :class:`NarrowLanes` of an AlignedOperand, in the narrowest lanes of
    :data:`~fpspec.fast.kernels.LANE_WIDTHS` that hold ``exponents`` (the largest alignment
    exponent magnitude of both operands; None when none does): ``ez`` its alignment
    exponents, ``absent`` for a zero unless ``zero_terms``; ``v`` the float32 ``values`` (a
    1 x 1 placeholder for None)."""
    for lane, limit, absent, absent_sums in LANE_WIDTHS:
        if exponents <= limit:
            ez = op.e.astype(lane)
            if not zero_terms:
                ez[op.m == 0] = absent
            v = np.zeros((1, 1), dtype=np.float32) if values is None else values
            return NarrowLanes(ez, v, lane(absent), np.iinfo(lane).min, absent_sums)
    return None


def transposed(op: TermOperand) -> TermOperand:
    return TermOperand(*(np.ascontiguousarray(x.T) for x in op))


def fp32_exact(v: np.ndarray) -> bool:
    """Whether every value is an FP32 value (NaN and Inf included)."""
    with np.errstate(invalid="ignore", over="ignore"):
        w = v.astype(np.float32).astype(np.float64)
    return bool(np.array_equal(w, v, equal_nan=True))


def code_values_of(codes: np.ndarray, name: str) -> np.ndarray:
    """float64 values of a code array of operand format ``name`` (exact)."""
    if name == "tf32":
        return decode_fast(tf32_truncate(codes), code_format(name))
    return code_values(code_format(name).name)[np.asarray(codes).astype(np.intp)]
