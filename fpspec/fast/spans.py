"""Operand values and their spans, for the exactness guard of the BLAS partial sums
(FPS-GEMM-24, docs/gemm.rst "BLAS partial sums": "The operands' pass", "Why a partial is
exact").

Per (row, group) of an operand the guard needs T, the largest floor(log2 |v|) + 1, and L,
the smallest lsb exponent, of the nonzero values v, and AE, the largest alignment exponent
of the values that take part (:func:`group_spans`).  :func:`operand_spans` writes an
operand's values (float64, or float32 where every value of its code tables is a float32
number) and their spans in one pass from per-code tables (:func:`values_and_spans`;
block-scaled E2M1 by :func:`block_values_and_spans`, from tables indexed by the set of
payload magnitudes present and the scale code); both equal :func:`group_spans` of the
values by test (``tests/test_gemm_partials.py``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..exact.binary32 import FP32_EMIN
from ..formats import get_format
from ..gemm_operands import code_format, operand_formats
from ..models import ZERO_ALIGNMENT_EXPONENT, GemmModel
from ..quantized import QuantizedTensor
from .chain import NO_TERMS, Plan
from .jit import gemm_jit
from .operands import code_values, code_values_of, floor_log2_table, scale_values
from .rounding import decode_table

__all__ = ["NO_VALUES", "lsb_of", "group_spans", "values_and_spans", "block_values_and_spans", "block_pieces",
           "operand_spans"]

#: Span value of a (row, group) with no nonzero value: T = -NO_VALUES, L = +NO_VALUES,
#: so every sum with it passes the guard (its products are all zero).
NO_VALUES = 1 << 20


@gemm_jit(inline=True)
def lsb_of(c):
    """lsb exponent of a finite nonzero float64 c = m 2^(e - 53) (m an integer): that of its
    lowest set bit, m & -m, a power of two whose float64 frexp is exact."""
    m, ex = math.frexp(c)
    mi = np.int64(math.ldexp(abs(m), 53))
    _, lx = math.frexp(float(mi & -mi))
    return ex - 53 + lx - 1


@gemm_jit
def group_spans(v, start, stop, emin, zero_aexp, zero_terms):
    """Per (row, group) of the float64 values v (rows, K): (T, L, AE) as int32 arrays
    (rows, groups): the largest floor(log2|v|) + 1 and the smallest lsb exponent of the
    nonzero values (-NO_VALUES / NO_VALUES when none), and the largest alignment
    exponent max(floor(log2|v|), emin) (a zero's ``zero_aexp`` under ``zero_terms``;
    NO_TERMS when none takes part); lsb exponents by :func:`lsb_of`."""
    rows = v.shape[0]
    ng = start.size
    top = np.empty((rows, ng), dtype=np.int32)
    low = np.empty((rows, ng), dtype=np.int32)
    ae = np.empty((rows, ng), dtype=np.int32)
    for i in range(rows):
        for g in range(ng):
            t = -NO_VALUES
            lo = NO_VALUES
            e_al = NO_TERMS
            for k in range(start[g], stop[g]):
                x = v[i, k]
                if x == 0.0:
                    if zero_terms and zero_aexp > e_al:
                        e_al = zero_aexp
                    continue
                _, ex = math.frexp(x)
                if ex > t:
                    t = ex
                lsb = lsb_of(x)
                if lsb < lo:
                    lo = lsb
                al = ex - 1 if ex - 1 > emin else emin
                if al > e_al:
                    e_al = al
            top[i, g] = t
            low[i, g] = lo
            ae[i, g] = e_al
    return top, low, ae


@gemm_jit
def values_and_spans(codes, vlut, tlut, llut, aelut, start, stop, values):
    """One pass over an operand's codes (rows, K): its values ``vlut[code]`` and the
    :func:`group_spans` of them from per-code tables; also the number of non-finite values.
    The tables are :func:`group_spans` of every code's value (:func:`_tables`), so the
    result is group_spans of the values.  ``values``: the (rows, K) float64 array to write,
    or float32 where every value of ``vlut`` is a float32 number (:func:`operand_spans`)
    (allocated by numpy, which backs large arrays with huge pages: a 32 MB array allocated
    in compiled code took 8 ms more to fill, in page faults)."""
    rows, kk = codes.shape
    ng = start.size
    top = np.empty((rows, ng), dtype=np.int32)
    low = np.empty((rows, ng), dtype=np.int32)
    ae = np.empty((rows, ng), dtype=np.int32)
    bad = 0
    for i in range(rows):
        for g in range(ng):
            t = -NO_VALUES
            lo = NO_VALUES
            e_al = NO_TERMS
            for k in range(start[g], stop[g]):
                x = np.int64(codes[i, k])
                v = vlut[x]
                values[i, k] = v
                bad += not math.isfinite(v)
                t = max(t, tlut[x])
                lo = min(lo, llut[x])
                e_al = max(e_al, aelut[x])
            top[i, g] = t
            low[i, g] = lo
            ae[i, g] = e_al
    return values, (top, low, ae), bad


@gemm_jit
def block_values_and_spans(codes, scales, pv, sv, tmax, lmin, aemax, pieces, groups, values):
    """:func:`values_and_spans` of E2M1 payload codes (rows, K) with block scale codes
    ``scales`` (rows, K / block): the values ``pv[code] x sv[scale]`` (the product is exact:
    2-bit by 4-bit significands) and their spans over ``groups`` planned groups.

    ``pieces`` = (start, stop, group, block) cut K where a group or a scale block ends
    (:func:`block_pieces`).  Per piece the loop keeps only the set of payload magnitudes
    present (bit ``code & 7`` of a mask; E2M1 codes c and c + 8 are +-|v|); the piece's
    (T, L, AE) are the entries ``[mask, scale]`` of the tables (:func:`_block_tables`),
    which hold the spans of the values of every magnitude in the mask, and a group's are
    the largest T and AE and the smallest L of its pieces, so the result is group_spans of
    the values.  A non-finite scale makes every value of its block non-finite (E2M1 has
    no Inf or NaN).  ``values``: as for :func:`values_and_spans`."""
    p_start, p_stop, p_group, p_block = pieces
    top = np.full((codes.shape[0], groups), -NO_VALUES, dtype=np.int32)
    low = np.full((codes.shape[0], groups), NO_VALUES, dtype=np.int32)
    ae = np.full((codes.shape[0], groups), NO_TERMS, dtype=np.int32)
    bad = 0
    for i in range(codes.shape[0]):
        for q in range(p_start.size):
            sc = np.int64(scales[i, p_block[q]])
            scale = sv[sc]
            mask = np.int32(0)
            for k in range(p_start[q], p_stop[q]):
                code = np.int32(codes[i, k])
                values[i, k] = pv[code] * scale
                mask |= np.int32(1) << (code & np.int32(7))
            if not math.isfinite(scale):
                bad += p_stop[q] - p_start[q]
            g = p_group[q]
            top[i, g] = max(top[i, g], tmax[mask, sc])
            low[i, g] = min(low[i, g], lmin[mask, sc])
            ae[i, g] = max(ae[i, g], aemax[mask, sc])
    return values, (top, low, ae), bad


def block_pieces(start: np.ndarray, stop: np.ndarray, block: int):
    """(start, stop, group, block) int64 arrays of the pieces of K that lie inside one
    planned group (``start[g] .. stop[g] - 1``) and one scale block of ``block`` elements,
    in order of k (the groups tile K)."""
    rows = []
    for g, (g0, g1) in enumerate(zip(start.tolist(), stop.tolist())):
        k = g0
        while k < g1:
            end = min(g1, (k // block + 1) * block)
            rows.append((k, end, g, k // block))
            k = end
    cols = np.array(rows, dtype=np.int64).reshape(-1, 4).T
    return tuple(np.ascontiguousarray(c) for c in cols)


def _tables(vlut: np.ndarray, emin: int, zero_aexp: int, zero_terms: bool):
    """Per-code (value, T, L, AE) tables of :func:`values_and_spans`: group_spans of each
    finite value on its own (a non-finite one gets the spans of a zero; it never reaches
    BLAS)."""
    n = vlut.size
    fin = np.where(np.isfinite(vlut), vlut, 0.0).reshape(1, n)
    idx = np.arange(n, dtype=np.int64)
    top, low, ae = group_spans(fin, idx, idx + 1, emin, zero_aexp, zero_terms)
    return np.ascontiguousarray(vlut, dtype=np.float64), top[0], low[0], ae[0]


@functools.lru_cache(maxsize=8)
def _block_tables(payload: str, scale: str, zero_aexp: int, zero_terms: bool, scale_zero: int | None = None):
    """(pv, sv, tmax, lmin, aemax) of :func:`block_values_and_spans`: the decode tables of
    the payload and scale codes, and for every magnitude mask (256) and scale code the
    largest T, smallest L and largest AE of the values ``pv[c] x sv[s]`` over the payload
    codes c whose magnitude ``c & 7`` is in the mask (from :func:`_tables` of every
    (payload, scale) pair: group_spans of each value on its own).  With ``scale_zero``
    (block terms aligned by their scales, FPS-GEMM-22) AE is the scale's alignment
    exponent max(floor(log2 s), emin of the scale format) whatever the payloads
    (``scale_zero`` for a zero scale, as ``scaled_block_operand``)."""
    pv = decode_table(get_format(payload))
    sv = decode_table(get_format(scale))
    if pv.size != 16:
        raise ValueError(f"block_values_and_spans takes 4-bit (E2M1) payload codes, not {payload}")
    with np.errstate(invalid="ignore"):
        vlut = (pv[:, None] * sv[None, :]).reshape(-1)
    _, top, low, ae = _tables(vlut, FP32_EMIN, zero_aexp, zero_terms)  # emin not read: no window on these
    ns = sv.size
    per_code = [x.reshape(16, ns).astype(np.int64) for x in (top, low, ae)]
    # magnitude m stands for codes m and m + 8
    tm = np.maximum(per_code[0][:8], per_code[0][8:])
    lm = np.minimum(per_code[1][:8], per_code[1][8:])
    am = np.maximum(per_code[2][:8], per_code[2][8:])
    tmax = np.full((256, ns), -NO_VALUES, dtype=np.int64)
    lmin = np.full((256, ns), NO_VALUES, dtype=np.int64)
    aemax = np.full((256, ns), NO_TERMS, dtype=np.int64)
    for mask in range(1, 256):
        m = (mask & -mask).bit_length() - 1  # lowest magnitude in the mask
        rest = mask & (mask - 1)
        tmax[mask] = np.maximum(tmax[rest], tm[m])
        lmin[mask] = np.minimum(lmin[rest], lm[m])
        aemax[mask] = np.maximum(aemax[rest], am[m])
    if scale_zero is not None:
        aemax[1:] = floor_log2_table(sv, get_format(scale).emin, scale_zero)[None, :]
    return (pv, sv) + tuple(np.ascontiguousarray(x, dtype=np.int32) for x in (tmax, lmin, aemax))


def _fits_float32(values: np.ndarray) -> bool:
    """Whether every finite value of a table is a float32 number."""
    fin = values[np.isfinite(values)]
    with np.errstate(over="ignore"):
        return bool(np.array_equal(fin.astype(np.float32).astype(np.float64), fin))


@functools.lru_cache(maxsize=16)
def _block_fits_float32(payload: str, scale: str) -> bool:
    """Whether every finite payload x scale value of a block-scaled format is a float32 number."""
    pv, sv = decode_table(get_format(payload)), decode_table(get_format(scale))
    with np.errstate(invalid="ignore"):
        return _fits_float32((pv[:, None] * sv[None, :]).reshape(-1))


def operand_spans(x, fmt, side: int, model: GemmModel, plan: Plan, zero: int, zero_terms: bool, float32: bool):
    """An operand's values (rows, K), spans (:func:`group_spans`) and number of non-finite
    values, in one table-driven pass (:func:`values_and_spans`; block-scaled E2M1 by
    :func:`block_values_and_spans`); TF32 codes (2^32 of them) through :func:`group_spans` on
    the decoded values.  The values are float32 where ``float32`` asks for it and every
    value of the code tables is a float32 number (TF32: never), else float64."""

    if isinstance(x, QuantizedTensor):
        grid = x.scales if x.tile == "1xB" else np.repeat(x.scales, x.block, axis=0)
        scale_values(x)  # range check of the scale codes (FpspecError)
        scale_zero = None
        if model.scale_placement == "block":  # block terms align by their scales (applies())
            scale_zero = ZERO_ALIGNMENT_EXPONENT if model.zero_alignment == "emin" else NO_TERMS
        tables = _block_tables(x.payload_format, x.scale_format, zero, zero_terms, scale_zero)
        fits = float32 and _block_fits_float32(x.payload_format, x.scale_format)
        return block_values_and_spans(x.codes, np.ascontiguousarray(grid), *tables,
                                      block_pieces(plan.start, plan.stop, x.block), plan.start.size,
                                      np.empty(x.codes.shape, dtype=np.float32 if fits else np.float64))
    name = operand_formats(fmt)[side]
    codes = np.asarray(x)
    emin = code_format(name).emin
    if name == "tf32":
        v = code_values_of(codes, name)
        return v, group_spans(v, plan.start, plan.stop, emin, zero, zero_terms), int((~np.isfinite(v)).sum())
    tables = _tables(code_values(code_format(name).name), emin, zero, zero_terms)
    fits = float32 and _fits_float32(tables[0])
    return values_and_spans(codes, *tables, plan.start, plan.stop,
                            np.empty(codes.shape, dtype=np.float32 if fits else np.float64))
