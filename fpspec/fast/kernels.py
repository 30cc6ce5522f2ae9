"""Step 1 of FPS-GEMM-1 for the fast path: the terms of each planned group, handed to
the chain (:mod:`fpspec.fast.chain`) (FPS-GEMM-10).

Twins of the exact spec's term producers: :func:`product_terms` (``product_terms``) and
:func:`block_terms` (``block_terms``).  Each kernel computes the outputs of rows
``r0 .. r1 - 1`` (it releases the GIL; :func:`fpspec.fast.parallel.run_rows` runs row
ranges on threads) with the chain's loop; they differ only in how a group's terms are
formed:

* :func:`gemm_products`: one term per product, any operand (specials included), one
  output at a time;
* :func:`gemm_blocks`: one term per E2M1 scale block (``scale_placement="block"``);
* :func:`gemm_scaled_blocks`: one term per E2M1 block term (``block_term_size``), any
  scales (NaN included), exponents from the value or from the scales (``block_exponent``);
* :func:`gemm_window_rows`: product terms of finite operands under a window with
  ``product_exponent="operands"``, the window's kept sums formed for a whole row of
  outputs at once;
* :func:`gemm_window_narrow_rows`: the same where a group's kept sum fits int32, in
  narrow lanes (int8 or int16 exponents; the kept terms from float32 products where
  those are exact);
* :func:`gemm_block_sums_rows`: E2M1 operands without a window, where a group's exact
  sum does not depend on the per-product exponents: integer block sums for a whole row;
* :func:`gemm_fp32_rows`: the sequential FP32 chain (G = 1, every rounding FP32 RNE) as
  IEEE float32 arithmetic.

Every kernel writes the chain's loop over the planned groups out (its step 1 inside it),
because one loop for them cost time.  Written once as a driver with the kernel's step
picked at compile time by the type of a named source tuple (a Numba overload, inlined;
a compiled function passed as an argument instead would miss Numba's disk cache in every
process), the kernels ran, one thread, 256 x 256 x 512, alternating runs against their
own loops: ``gemm_products`` 429-437 ms against 404-414, ``gemm_blocks`` 92 against
74-76, ``gemm_scaled_blocks`` 186-189 against 162-170 (one output at a time), and
``gemm_window_narrow_rows`` 7.3-7.7 against 6.8-6.9, ``gemm_window_rows`` 53.6-58.2
against 52.5-53.9, ``gemm_block_sums_rows`` 27.5-29.9 against 25.7-29.9, the FP32
chain 37-42 against 12-15 (rows of outputs).  What the kernels share is the chain's
steps (:mod:`fpspec.fast.chain`, :mod:`fpspec.fast.steps`), and the group of one output
from a term source, :func:`term_group`, is also the BLAS partials' fallback.

Operands are integers: a value is ``sig 2^lsb`` with ``sig`` odd (:class:`TermOperand`,
also carrying the alignment exponent and a special-value code), or an E2M1 payload as
the integer 2q (value q = 2q 2^-1) with per-block scales ``sig 2^lsb``
(:class:`BlockOperand`); the narrow window kernel also reads float32 values
(:class:`NarrowLanes`) where their products are proved exact.  The exactness argument
of each is in docs/gemm.rst ("The fast path").
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import types
from numba.extending import overload

from .chain import (CONTINUE, FLOOR, NO_EXPONENT_FLOOR, NO_SPECIAL, NO_TERMS, accumulate, accumulator_exponent,
                    after_group, bits_float, finish, group_step, keep)
from .fp32 import add_specials, bitlen
from .jit import gemm_jit
from .steps import (accumulate_row, accumulator_exponent_row, after_group_fp32, after_group_row, finish_row, keep_floor,
                    keep_magnitude)

__all__ = ["TermOperand", "AlignedOperand", "NarrowLanes", "BlockOperand", "ScaledBlockOperand", "FINITE", "POS_INF",
           "NEG_INF", "NAN", "LANE_WIDTHS", "lane_sum", "E2M1_LSB", "E2M1_PRODUCT_MAX", "KEPT_SUM_BITS",
           "SPAN_TOO_WIDE", "OVERFLOW_EXPONENT", "ProductTerms", "ScaledBlockTerms", "group_terms", "term_group",
           "product_terms", "block_terms", "scaled_block_terms", "gemm_products", "gemm_blocks", "gemm_scaled_blocks",
           "gemm_window_rows", "gemm_window_narrow_rows", "gemm_block_sums_rows", "gemm_fp32_rows"]

#: Special-value code of an operand element (:class:`TermOperand` ``special``).
FINITE = 0
POS_INF = 1
NEG_INF = 2
NAN = 3
#: Exponent of the last bit of an E2M1 value held as the integer 2q: value = 2q 2^-1.
E2M1_LSB = -1
#: The largest magnitude of a product of two E2M1 payloads held as 2q: 12 x 12 (|q| <= 6).
E2M1_PRODUCT_MAX = 144
#: The most bits of magnitude an int64 sum of kept terms may take (room for the sign and a carry).
KEPT_SUM_BITS = 62
#: Width of a group's local block scales that no int64 dot can carry: such groups take
#: the exact term-by-term path.
SPAN_TOO_WIDE = 63
#: A product of magnitude >= 2^128 is an Inf term under ``product_overflow="inf"``.
OVERFLOW_EXPONENT = 128


class TermOperand(NamedTuple):
    """An operand as per-element integers (rows, K), or (K, rows) for a transposed BT:
    value = sig 2^lsb (sig odd, 0 for zero), alignment exponent ``aexp`` (step 3),
    ``special`` FINITE / POS_INF / NEG_INF / NAN."""

    sig: np.ndarray     # int32
    lsb: np.ndarray     # int32
    aexp: np.ndarray    # int32
    special: np.ndarray  # int8


class AlignedOperand(NamedTuple):
    """An operand of finite values as integers on one scale: value = m 2^(e - w) with w
    one width for the whole operand (:func:`fpspec.fast.operands.aligned_operand`),
    m = sig 2^(lsb - aexp + w) (0 for a zero), e the alignment exponent ``aexp``; arrays
    (rows, K), or (K, rows) for a transposed BT, of the narrowest integer type that
    holds them."""

    m: np.ndarray
    e: np.ndarray


class NarrowLanes(NamedTuple):
    """What :func:`gemm_window_narrow_rows` reads besides an :class:`AlignedOperand` (same
    layout): ``ez`` the alignment exponent of every value that takes part in step 3, in
    int8 or int16 lanes (:data:`LANE_WIDTHS`), ``absent`` for a zero that does not; ``v``
    (float32) the values where their float32 products are used (else a 1 x 1
    placeholder); ``lowest`` (the lane type's least value) and ``absent_sums`` (lane sums
    at or below it hold an absent value) from :data:`LANE_WIDTHS`."""

    ez: np.ndarray  # int8 or int16
    v: np.ndarray   # float32
    absent: np.integer
    lowest: np.integer
    absent_sums: int


#: The pass-1 lanes of :func:`gemm_window_narrow_rows`, narrowest first: (lane type, the
#: largest alignment exponent magnitude L it holds, ``absent``, ``absent_sums``).  A sum of
#: two real exponents lies in [-2L, 2L] and a sum with ``absent`` in [absent - L, absent + L]:
#: below ``absent_sums`` < -2L, and inside the lane type (no sum wraps).  int8 lanes (L = 31)
#: hold every FP8 and FP16 exponent, int16 (L = 2000) every format's (FP32-decoded: 149).
LANE_WIDTHS: tuple[tuple[type, int, int, int], ...] = (
    (np.int8, 31, -97, -64),
    (np.int16, 2000, -30000, -20000),
)
#: Rows of A that :func:`gemm_window_narrow_rows` takes through one group before the next,
#: so that the group's K slice of B (G x N values and exponents: 160 KB at G = 32, N =
#: 1024) serves them from the core's L2 instead of coming again from L3 for every row.
#: 16 ran 1.32x the products/s of one row at a time (``km-h100-fp8-promote128``, 1024^3
#: and 2048^3, one thread, one session); 8 1.33x, 32 1.25x, 64 1.15x.
NARROW_ROW_BLOCK = 16


def lane_sum(a, b):
    """a + b in the integer type of a (the pass-1 lanes keep every sum in range)."""
    return type(a)(a + b)


@overload(lane_sum, inline="always")
def _lane_sum(a, b):
    if isinstance(a, types.Integer):
        cast = getattr(np, a.name)

        def impl(a, b):
            return cast(a + b)

        return impl
    return None


class BlockOperand(NamedTuple):
    """An E2M1 operand with block scales: ``payload`` 2q per element (rows, K) int8; per
    (row, block): the scale ``scale_sig 2^scale_lsb``; per (row, planned group): the
    scales as integers ``local = scale_sig 2^(scale_lsb - base)`` relative to the
    group's smallest scale exponent ``base``, and their width in bits (SPAN_TOO_WIDE
    when they do not fit).  BT's arrays are transposed (row index last)."""

    payload: np.ndarray     # int8
    scale_sig: np.ndarray   # int32
    scale_lsb: np.ndarray   # int32
    local: np.ndarray       # int64
    base: np.ndarray        # int64
    width: np.ndarray       # int64


class ScaledBlockOperand(NamedTuple):
    """An E2M1 operand for :func:`scaled_block_terms`: ``payload`` 2q per element (rows, K)
    int8; per (row, scale block): the scale ``scale_sig 2^scale_lsb`` (0 for a zero scale),
    its alignment exponent ``scale_aexp`` (max(floor(log2 s), emin of the scale format);
    -126 for a zero scale under zero_alignment="emin", else NO_TERMS) and ``scale_special``
    (FINITE / POS_INF / NEG_INF / NAN)."""

    payload: np.ndarray         # int8
    scale_sig: np.ndarray       # int32
    scale_lsb: np.ndarray       # int32
    scale_aexp: np.ndarray      # int32
    scale_special: np.ndarray   # int8


# ======================================================================= step 1
@gemm_jit(inline=True)
def _special_product(xa, sa, xb, sb):
    """IEEE product of two operand elements of which one is not finite: NaN for a NaN
    or 0 x Inf, else an Inf with the product's sign."""
    if xa == NAN or xb == NAN:
        return math.nan
    if (xa == FINITE and sa == 0) or (xb == FINITE and sb == 0):
        return math.nan
    neg = (xa == NEG_INF or (xa == FINITE and sa < 0)) != (xb == NEG_INF or (xb == FINITE and sb < 0))
    return -math.inf if neg else math.inf


@gemm_jit(inline=True)
def product_terms(a, i, b, j, k0, k1, exact_exponent, spec, sigs, lsbs, aexps):
    """Step 1 with ``scale_placement="product"`` (FPS-GEMM-4): the finite products
    a[i, k] b[j, k], k0 <= k < k1, into the term buffers (exponent ``ea + eb``, or
    floor(log2|p|) when ``exact_exponent``).  A zero product is handed over with ea + eb
    under ``spec.zero_terms`` (a zero operand's exponent is -126, FPS-GEMM-16) and left out
    otherwise; with ``spec.lanes`` > 1 every product has a slot (a left-out one with
    exponent NO_TERMS), so that slot i is product k0 + i.  Returns (n, special, overflow):
    the number of slots, the IEEE sum of the non-finite products (NO_SPECIAL when none),
    and under ``spec.product_overflow`` the IEEE sum of the finite products >= 2^128
    (FPS-GEMM-18), which are left out of the terms."""
    n = 0
    special = NO_SPECIAL
    overflow = NO_SPECIAL
    dense = spec.lanes > 1
    for kk in range(k0, k1):
        xa = a.special[i, kk]
        xb = b.special[j, kk]
        if xa != FINITE or xb != FINITE:
            v = _special_product(xa, a.sig[i, kk], xb, b.sig[j, kk])
            special = v if special == NO_SPECIAL else add_specials(special, v)
            if dense:
                sigs[n] = 0
                lsbs[n] = 0
                aexps[n] = NO_TERMS
                n += 1
            continue
        s = np.int64(a.sig[i, kk]) * np.int64(b.sig[j, kk])
        if s == 0:
            if spec.zero_terms or dense:
                sigs[n] = 0
                lsbs[n] = 0
                aexps[n] = (np.int64(a.aexp[i, kk]) + np.int64(b.aexp[j, kk])) if spec.zero_terms else NO_TERMS
                n += 1
            continue
        lsb = np.int64(a.lsb[i, kk]) + np.int64(b.lsb[j, kk])
        if spec.product_overflow and lsb + bitlen(s if s > 0 else -s) - 1 >= OVERFLOW_EXPONENT:
            v = -math.inf if s < 0 else math.inf
            overflow = v if overflow == NO_SPECIAL else add_specials(overflow, v)
            if dense:
                sigs[n] = 0
                lsbs[n] = 0
                aexps[n] = NO_TERMS
                n += 1
            continue
        sigs[n] = s
        lsbs[n] = lsb
        if exact_exponent:
            aexps[n] = lsb + bitlen(s if s > 0 else -s) - 1
        else:
            aexps[n] = np.int64(a.aexp[i, kk]) + np.int64(b.aexp[j, kk])
        n += 1
    return n, special, overflow


@gemm_jit(inline=True)
def block_terms(a, i, b, j, b0, b1, bsz, sigs, lsbs, aexps):
    """Step 1 with ``scale_placement="block"``: one term per scale block b0 <= blk < b1,
    the exact sum of its payload products times both block scales, exponent
    floor(log2|term|).  Payload sums are int32 (|2q| <= 12: at most 144 B).  Returns
    the number of nonzero terms."""
    n = 0
    arow = a.payload[i]
    brow = b.payload[j]
    for blk in range(b0, b1):
        acc = np.int32(0)
        base = blk * bsz
        for kk in range(base, base + bsz):
            acc += np.int32(arow[kk]) * np.int32(brow[kk])
        if acc == 0:
            continue
        s = np.int64(acc) * (np.int64(a.scale_sig[i, blk]) * np.int64(b.scale_sig[j, blk]))
        if s == 0:
            continue
        sigs[n] = s
        lsbs[n] = np.int64(a.scale_lsb[i, blk]) + np.int64(b.scale_lsb[j, blk]) + 2 * E2M1_LSB
        aexps[n] = lsbs[n] + bitlen(s if s > 0 else -s) - 1
        n += 1
    return n


@gemm_jit(inline=True)
def scaled_block_terms(a, i, b, j, k0, k1, tsz, bsz_a, bsz_b, scale_exponent, spec, sigs, lsbs, aexps):
    """Step 1 with ``scale_placement="block"`` for :class:`ScaledBlockOperand` operands: one
    term per ``tsz`` products k0 <= k < k1 (a block term inside one scale block of each
    operand, sizes ``bsz_a``, ``bsz_b``), the exact sum of its payload products times both
    scales.  Exponent: the scales' alignment exponents ea_s + eb_s when ``scale_exponent``
    (``block_exponent="scales"``; a zero term keeps it under ``spec.zero_terms``), else
    floor(log2|term|).  A non-finite scale makes the term NaN (or an Inf of the term's sign
    for a nonzero sum and an infinite scale).  Payload sums are int32 (|2q| <= 12).
    Returns (n, special) (exact: ``block_terms``)."""
    n = 0
    special = NO_SPECIAL
    arow = a.payload[i]
    brow = b.payload[j]
    for t0 in range(k0, k1, tsz):
        acc = np.int32(0)
        for kk in range(t0, t0 + tsz):
            acc += np.int32(arow[kk]) * np.int32(brow[kk])
        ja = t0 // bsz_a
        jb = t0 // bsz_b
        xa = a.scale_special[i, ja]
        xb = b.scale_special[j, jb]
        if xa != FINITE or xb != FINITE:
            # the term is payload sum x s_a x s_b: a NaN, or an Inf scale with a zero among the
            # finite factors, is NaN; else an Inf with the product's sign
            if xa == NAN or xb == NAN or acc == 0 or (xa == FINITE and a.scale_sig[i, ja] == 0) \
                    or (xb == FINITE and b.scale_sig[j, jb] == 0):
                v = math.nan
            else:
                neg = (acc < 0) != (xa == NEG_INF or (xa == FINITE and a.scale_sig[i, ja] < 0)) \
                    != (xb == NEG_INF or (xb == FINITE and b.scale_sig[j, jb] < 0))
                v = -math.inf if neg else math.inf
            special = v if special == NO_SPECIAL else add_specials(special, v)
            continue
        s = np.int64(acc) * (np.int64(a.scale_sig[i, ja]) * np.int64(b.scale_sig[j, jb]))
        lsb = np.int64(a.scale_lsb[i, ja]) + np.int64(b.scale_lsb[j, jb]) + 2 * E2M1_LSB
        if scale_exponent:
            ea = np.int64(a.scale_aexp[i, ja])
            eb = np.int64(b.scale_aexp[j, jb])
            # a zero scale out of the alignment (NO_TERMS) makes the term zero: left out
            if ea == NO_TERMS or eb == NO_TERMS or (s == 0 and not spec.zero_terms):
                continue
            e = ea + eb
        else:
            if s == 0:
                continue
            e = lsb + bitlen(s if s > 0 else -s) - 1
        sigs[n] = s
        lsbs[n] = lsb
        aexps[n] = e
        n += 1
    return n, special


# ================================================ a group from its term source
class ProductTerms(NamedTuple):
    """Step 1 with one term per product (:func:`product_terms`): TermOperand a (rows, K),
    b (N, K), any values (specials included); ``exact_exponent``: product_exponent="exact"."""

    a: TermOperand
    b: TermOperand
    exact_exponent: bool


class ScaledBlockTerms(NamedTuple):
    """Step 1 with one term per E2M1 block term of ``size`` products
    (:func:`scaled_block_terms`): ScaledBlockOperand a (rows, K), b (N, K), any scales, scale
    blocks of ``block_a`` and ``block_b`` products; ``scale_exponent``: block_exponent="scales";
    every planned group whole block terms."""

    a: ScaledBlockOperand
    b: ScaledBlockOperand
    size: int
    block_a: int
    block_b: int
    scale_exponent: bool


def group_terms(src, i, j, k0, k1, spec, sigs, lsbs, aexps):
    """Step 1 for products k0 .. k1 - 1 of output (i, j) from a term source
    (:class:`ProductTerms`, :class:`ScaledBlockTerms`) into the term buffers: (n, special,
    overflow) as :func:`product_terms` returns them (NO_SPECIAL where the source has none).
    Compiled code only: the source's type picks the producer."""
    raise TypeError("group_terms runs in compiled code only")


@overload(group_terms, inline="always")
def _group_terms(src, i, j, k0, k1, spec, sigs, lsbs, aexps):
    kind = getattr(src, "instance_class", None)
    if kind is ProductTerms:
        def products(src, i, j, k0, k1, spec, sigs, lsbs, aexps):
            return product_terms(src.a, i, src.b, j, k0, k1, src.exact_exponent, spec, sigs, lsbs, aexps)
        return products
    if kind is ScaledBlockTerms:
        def scaled(src, i, j, k0, k1, spec, sigs, lsbs, aexps):
            n, special = scaled_block_terms(src.a, i, src.b, j, k0, k1, src.size, src.block_a, src.block_b,
                                            src.scale_exponent, spec, sigs, lsbs, aexps)
            return n, special, NO_SPECIAL
        return scaled
    return None


@gemm_jit(inline=True)
def term_group(c, src, i, j, k0, k1, spec, sigs, lsbs, aexps):
    """Steps 1 and 3-4 of one planned group of output (i, j): the terms of products k0 ..
    k1 - 1 from ``src`` (:func:`group_terms`) through :func:`~fpspec.fast.chain.group_step`;
    the new accumulator.  Also the fallback of the BLAS partials
    (:func:`fpspec.fast.partials.fallback_group`)."""
    n, special, overflow = group_terms(src, i, j, k0, k1, spec, sigs, lsbs, aexps)
    return group_step(c, sigs, lsbs, aexps, n, special, overflow, spec)


# ============================================================= one output at a time
@gemm_jit
def gemm_products(a, b, exact_exponent, plan, spec, fin, out, r0, r1):
    """The general kernel: one term per product (:func:`product_terms`) for any operands
    (TermOperand a (rows, K), b (N, K)), specials included."""
    n_rows = b.sig.shape[0]
    room = plan.longest + 2
    sigs = np.empty(room, dtype=np.int64)
    lsbs = np.empty(room, dtype=np.int64)
    aexps = np.empty(room, dtype=np.int64)
    for i in range(r0, r1):
        for j in range(n_rows):
            c = big = total = 0.0
            for g in range(plan.start.size):
                n, special, overflow = product_terms(a, i, b, j, plan.start[g], plan.stop[g], exact_exponent,
                                                     spec, sigs, lsbs, aexps)
                c = group_step(c, sigs, lsbs, aexps, n, special, overflow, spec)
                c, big, total = after_group(c, big, total, plan.action[g], spec)
            out[i, j] = finish(total, fin)


@gemm_jit
def gemm_scaled_blocks(a, b, tsz, bsz_a, bsz_b, scale_exponent, plan, spec, fin, out, r0, r1):
    """E2M1 operands with one term per block term (:func:`scaled_block_terms`):
    ScaledBlockOperand a (rows, K), b (N, K), any scales; every planned group holds whole
    block terms."""
    n_rows = b.payload.shape[0]
    room = plan.longest // tsz + 2
    sigs = np.empty(room, dtype=np.int64)
    lsbs = np.empty(room, dtype=np.int64)
    aexps = np.empty(room, dtype=np.int64)
    for i in range(r0, r1):
        for j in range(n_rows):
            c = big = total = 0.0
            for g in range(plan.start.size):
                n, special = scaled_block_terms(a, i, b, j, plan.start[g], plan.stop[g], tsz, bsz_a, bsz_b,
                                                scale_exponent, spec, sigs, lsbs, aexps)
                c = group_step(c, sigs, lsbs, aexps, n, special, NO_SPECIAL, spec)
                c, big, total = after_group(c, big, total, plan.action[g], spec)
            out[i, j] = finish(total, fin)


@gemm_jit
def gemm_blocks(a, b, bsz, plan, spec, fin, out, r0, r1):
    """E2M1 operands with one term per scale block (:func:`block_terms`): BlockOperand a
    (rows, K), b (N, K), finite scales; every planned group holds whole blocks."""
    n_rows = b.payload.shape[0]
    room = plan.longest // bsz + 2
    sigs = np.empty(room, dtype=np.int64)
    lsbs = np.empty(room, dtype=np.int64)
    aexps = np.empty(room, dtype=np.int64)
    for i in range(r0, r1):
        for j in range(n_rows):
            c = big = total = 0.0
            for g in range(plan.start.size):
                n = block_terms(a, i, b, j, plan.start[g] // bsz, plan.stop[g] // bsz, bsz, sigs, lsbs, aexps)
                c = group_step(c, sigs, lsbs, aexps, n, NO_SPECIAL, NO_SPECIAL, spec)
                c, big, total = after_group(c, big, total, plan.action[g], spec)
            out[i, j] = finish(total, fin)


# ============================================================= a row at a time
@gemm_jit
def gemm_window_rows(a, bt, plan, spec, fin, out, r0, r1):
    """Product terms of finite operands under a window with ``product_exponent="operands"``,
    for a whole row of outputs at once (TermOperand a (rows, K), bt transposed (K, N)).

    Per group and output j: E[j] = max(ea + eb) over the nonzero products (every product
    under ``spec.zero_terms``; and c's exponent when fused), raised to the exponent floor; then every product's kept
    multiples of 2^(E - F) summed in int64 (|sum| < 2^(F + 2 + bitlen(G + 1)) <= 2^62,
    :func:`fpspec.fast.accumulate.supports`); :func:`~fpspec.fast.chain.accumulate`
    takes it from there."""
    n = bt.sig.shape[1]
    emax = np.empty(n, dtype=np.int64)
    acc = np.empty(n, dtype=np.int64)
    c = np.zeros(n, dtype=np.float64)
    big = np.zeros(n, dtype=np.float64)
    total = np.zeros(n, dtype=np.float64)
    window = spec.window
    for i in range(r0, r1):
        c[:] = 0.0
        big[:] = 0.0
        total[:] = 0.0
        for g in range(plan.start.size):
            k0, k1 = plan.start[g], plan.stop[g]
            # step 3: each output's alignment exponent E
            for j in range(n):
                emax[j] = NO_TERMS
                acc[j] = 0
                if spec.fused and math.isfinite(c[j]):
                    emax[j] = accumulator_exponent(c[j], spec)
            if spec.zero_terms:  # zero products align too (zero operands at -126)
                for kk in range(k0, k1):
                    e_a = np.int64(a.aexp[i, kk])
                    erow = bt.aexp[kk]
                    for j in range(n):
                        cand = e_a + np.int64(erow[j])
                        if cand > emax[j]:
                            emax[j] = cand
            else:
                for kk in range(k0, k1):
                    if a.sig[i, kk] == 0:
                        continue
                    e_a = np.int64(a.aexp[i, kk])
                    erow = bt.aexp[kk]
                    srow = bt.sig[kk]
                    for j in range(n):
                        cand = e_a + np.int64(erow[j]) if srow[j] != 0 else NO_TERMS
                        if cand > emax[j]:
                            emax[j] = cand
            for j in range(n):
                if emax[j] != NO_TERMS and emax[j] < spec.exponent_floor:
                    emax[j] = spec.exponent_floor
            # ... and the kept multiples of 2^(E - F) of every product
            for kk in range(k0, k1):
                s_a = np.int64(a.sig[i, kk])
                if s_a == 0:
                    continue
                l_a = np.int64(a.lsb[i, kk]) + window  # d = la + lb - (E - F)
                lrow = bt.lsb[kk]
                srow = bt.sig[kk]
                for j in range(n):
                    acc[j] += keep(s_a * np.int64(srow[j]), l_a + np.int64(lrow[j]) - emax[j], spec.below)
            # step 4
            for j in range(n):
                c[j] = accumulate(c[j], acc[j], emax[j] - window, spec)
            after_group_row(c, big, total, plan.action[g], spec)
        finish_row(total, out[i], fin)


@gemm_jit
def gemm_window_narrow_rows(a, bt, lanes_a, lanes_bt, shift, float_products, plan, spec, fin, out, r0, r1):
    """:func:`gemm_window_rows` in narrow lanes, for operands on one scale each
    (AlignedOperand a (rows, K) of width wa, bt transposed (K, N) of width wb, wa + wb >=
    F) where a group's kept sum provably fits int32
    (:func:`fpspec.fast.accumulate.narrow_window`); ``lanes_a``, ``lanes_bt``: their
    :class:`NarrowLanes`.

    Step 3 runs as two straight passes over the row:

    1. each output's alignment exponent E: the largest ea + eb in int8 or int16 lanes
       over the operands' ``ez`` (``absent`` for a zero that takes no part, so that no test
       of the value is needed), then c's (fused) and the exponent floor in int32;
    2. the kept multiples of 2^(E - F) of every product, summed in int32 lanes:

       * ``float_products`` (:func:`fpspec.fast.accumulate.float_products` proved it
         exact): trunc(va vb 2^(F - E)), a float32 product of the float32 values
         (exact: their significands have at most 24 bits together and the product is a
         normal number), scaled by the power of two 2^(F - E) (exact, or below 2^-126
         and so below 1) and truncated toward zero by the conversion to int32; four
         products of an output at a time (1.17x the products/s of one, one session);
       * else keep(ma mb, -r) with r = E - ea - eb - ``shift``, shift = F - wa - wb <= 0:
         a product is ma mb 2^(ea + eb - wa - wb) and E >= ea + eb for every nonzero
         product, so r >= 0, and a kept term is the product cut by a right shift
         (the branch-free :func:`~fpspec.fast.chain.keep_magnitude` or
         :func:`~fpspec.fast.chain.keep_floor`);

       a kept term is at most abs(ma mb) <= (2^pa - 1)(2^pb - 1) (pa, pb: the bits of the
       largest abs(m)), and G of them sum to at most 2^31 - 1 (the guard).

    Step 4 runs as :func:`~fpspec.fast.steps.accumulate_row`.  The rows go through in
    blocks of :data:`NARROW_ROW_BLOCK`, group by group, each row with its own chain state
    (the rows' chains are independent, so the order across rows changes no result)."""
    n = bt.m.shape[1]
    prod = np.empty(n, dtype=lanes_bt.ez.dtype)
    emax = np.empty(n, dtype=np.int32)
    acc = np.empty(n, dtype=np.int32)
    scale = np.empty(n, dtype=np.float32)
    rows = NARROW_ROW_BLOCK
    cs = np.zeros((rows, n), dtype=np.float64)
    bigs = np.zeros((rows, n), dtype=np.float64)
    totals = np.zeros((rows, n), dtype=np.float64)
    fresh = np.empty(n, dtype=np.int64)
    none = np.int32(NO_TERMS)
    floor = spec.exponent_floor
    window = spec.window
    for i0 in range(r0, r1, rows):
        i1 = min(i0 + rows, r1)
        cs[:] = 0.0
        bigs[:] = 0.0
        totals[:] = 0.0
        for g in range(plan.start.size):
            k0, k1 = plan.start[g], plan.stop[g]
            for i in range(i0, i1):
                c, big, total = cs[i - i0], bigs[i - i0], totals[i - i0]
                # step 3, pass 1: the products' largest ea + eb in narrow lanes ...
                prod[:] = lanes_bt.lowest
                for kk in range(k0, k1):
                    e_a = lanes_a.ez[i, kk]
                    if e_a == lanes_a.absent:
                        continue
                    erow = lanes_bt.ez[kk]
                    for j in range(n):
                        prod[j] = max(prod[j], lane_sum(e_a, erow[j]))
                # ... then c's (fused) and the floor: each output's E
                if spec.fused:
                    accumulator_exponent_row(c, emax, spec)
                else:
                    emax[:] = none
                for j in range(n):
                    p = np.int32(prod[j])
                    e = max(emax[j], p if p > lanes_bt.absent_sums else none)
                    emax[j] = floor if (floor != NO_EXPONENT_FLOOR) & (e != none) & (e < floor) else e
                # pass 2: the kept multiples of 2^(E - F) of every product
                acc[:] = 0
                if float_products:
                    for j in range(n):  # 2^(F - E) from its float64 bit pattern; E < F - 127 has no nonzero product
                        x = window - min(max(np.int64(emax[j]), window - 127), window + 149)  # in [-149, 127]
                        scale[j] = np.float32(bits_float((x + 1023) << 52))
                    # four products per output at a time (a zero value's terms are 0: 0 vb and
                    # then 0 2^(F - E) are finite zeros), one load and store of acc for them
                    kk = k0
                    while kk + 4 <= k1:
                        a0, a1 = lanes_a.v[i, kk], lanes_a.v[i, kk + 1]
                        a2, a3 = lanes_a.v[i, kk + 2], lanes_a.v[i, kk + 3]
                        b0, b1, b2, b3 = lanes_bt.v[kk], lanes_bt.v[kk + 1], lanes_bt.v[kk + 2], lanes_bt.v[kk + 3]
                        for j in range(n):
                            s = scale[j]
                            acc[j] += (np.int32(a0 * b0[j] * s) + np.int32(a1 * b1[j] * s)
                                       + np.int32(a2 * b2[j] * s) + np.int32(a3 * b3[j] * s))
                        kk += 4
                    for kk in range(kk, k1):
                        v_a = lanes_a.v[i, kk]
                        vrow = lanes_bt.v[kk]
                        for j in range(n):
                            acc[j] += np.int32(v_a * vrow[j] * scale[j])
                else:
                    for kk in range(k0, k1):
                        m_a = a.m[i, kk]
                        if m_a == 0:
                            continue
                        r_a = a.e[i, kk] + shift  # r = E - eb - r_a
                        erow = bt.e[kk]
                        mrow = bt.m[kk]
                        if spec.below == FLOOR:
                            for j in range(n):
                                acc[j] += keep_floor(np.int32(m_a * mrow[j]), np.int32(emax[j] - erow[j] - r_a))
                        else:
                            for j in range(n):
                                acc[j] += keep_magnitude(np.int32(m_a * mrow[j]), np.int32(emax[j] - erow[j] - r_a))
                # step 4
                accumulate_row(c, acc, emax, spec, fresh)
                after_group_row(c, big, total, plan.action[g], spec)
        for i in range(i0, i1):
            finish_row(totals[i - i0], out[i], fin)


@gemm_jit
def gemm_block_sums_rows(a, bt, bsz, plan, spec, fin, out, r0, r1):
    """E2M1 operands without a window, for a whole row of outputs at once (BlockOperand
    a (rows, K), bt transposed (K, N)); every planned group holds whole blocks.

    Without a window a group's exact sum is the sum of its blocks' payload sums times
    their scales: block sums of payload integers (|2q| <= 12, so |sum| <= 144 B < 2^31)
    accumulate in int32 lanes across the row; with the group's local scale integers
    the group sum is one int64 dot when bitlen(144 B) + bitlen(blocks) + both widths
    <= 62, else the block terms go through the chain's exact path
    (:func:`~fpspec.fast.chain.group_step`)."""
    n = bt.payload.shape[1]
    gb_max = plan.longest // bsz
    bs = np.zeros((max(gb_max, 1), n), dtype=np.int32)
    c = np.zeros(n, dtype=np.float64)
    big = np.zeros(n, dtype=np.float64)
    total = np.zeros(n, dtype=np.float64)
    sigs = np.empty(gb_max + 2, dtype=np.int64)
    lsbs = np.empty(gb_max + 2, dtype=np.int64)
    for i in range(r0, r1):
        c[:] = 0.0
        big[:] = 0.0
        total[:] = 0.0
        for g in range(plan.start.size):
            b0 = plan.start[g] // bsz
            nb = plan.stop[g] // bsz - b0
            bs[:nb, :] = 0
            for bl in range(nb):
                row = bs[bl]
                for kk in range((b0 + bl) * bsz, (b0 + bl + 1) * bsz):
                    av = np.int32(a.payload[i, kk])
                    if av != 0:
                        brow = bt.payload[kk]
                        for j in range(n):
                            row[j] += av * np.int32(brow[j])
            sum_bits = bitlen(E2M1_PRODUCT_MAX * bsz) + bitlen(nb)
            for j in range(n):
                if a.width[i, g] + bt.width[g, j] + sum_bits <= KEPT_SUM_BITS:
                    acc = np.int64(0)
                    for bl in range(nb):
                        acc += np.int64(bs[bl, j]) * a.local[i, b0 + bl] * bt.local[b0 + bl, j]
                    c[j] = accumulate(c[j], acc, a.base[i, g] + bt.base[g, j] + 2 * E2M1_LSB, spec)
                else:
                    m = 0
                    for bl in range(nb):
                        s = np.int64(bs[bl, j]) * (np.int64(a.scale_sig[i, b0 + bl]) *
                                                   np.int64(bt.scale_sig[b0 + bl, j]))
                        if s != 0:
                            sigs[m] = s
                            lsbs[m] = (np.int64(a.scale_lsb[i, b0 + bl]) + np.int64(bt.scale_lsb[b0 + bl, j])
                                       + 2 * E2M1_LSB)
                            m += 1
                    c[j] = group_step(c[j], sigs, lsbs, lsbs, m, NO_SPECIAL, NO_SPECIAL, spec)
            after_group_row(c, big, total, plan.action[g], spec)
        finish_row(total, out[i], fin)


@gemm_jit
def gemm_fp32_rows(va, vbt, plan, spec, fin, out, r0, r1):
    """The sequential FP32 chain (G = 1: each planned group one product; the product,
    c + p, the promotion and the slice sums all rounded to FP32 with RNE; no window), for
    a whole row of outputs at once, on operands that are FP32 values (va (rows, K), vbt
    transposed (K, N), float32).

    IEEE float32 ``*`` and ``+`` are correctly rounded RNE with subnormals (no fast-math,
    no FMA contraction), which is exactly p = RNE32(a b), c = RNE32(c + p) and step 5
    (:func:`~fpspec.fast.steps.after_group_fp32`); Inf and NaN follow IEEE as in
    FPS-GEMM-2, and c is never -0 (it starts at +0 and x + y is -0 only for -0 + -0)."""
    n = vbt.shape[1]
    c = np.zeros(n, dtype=np.float32)
    big = np.zeros(n, dtype=np.float32)
    total = np.zeros(n, dtype=np.float32)
    for i in range(r0, r1):
        c[:] = 0.0
        big[:] = 0.0
        total[:] = 0.0
        for kk in range(plan.start.size):  # group kk is product kk
            a = va[i, kk]
            row = vbt[kk]
            for j in range(n):
                c[j] = c[j] + a * row[j]
            action = plan.action[kk]
            if action != CONTINUE:
                for j in range(n):
                    c[j], big[j], total[j] = after_group_fp32(c[j], big[j], total[j], action, spec.promotes)
        for j in range(n):
            out[i, j] = finish(np.float64(total[j]), fin)
