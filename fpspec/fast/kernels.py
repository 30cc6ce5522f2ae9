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
* :func:`gemm_window_rows`: product terms of finite operands under a window with
  ``product_exponent="operands"``, the window's kept sums formed for a whole row of
  outputs at once;
* :func:`gemm_block_sums_rows`: E2M1 operands without a window, where a group's exact
  sum does not depend on the per-product exponents: integer block sums for a whole row;
* :func:`gemm_fp32_rows`: the sequential FP32 chain (G = 1, every rounding FP32 RNE) as
  IEEE float32 arithmetic.

Operands are integers: a value is ``sig 2^lsb`` with ``sig`` odd (:class:`TermOperand`,
also carrying the alignment exponent and a special-value code), or an E2M1 payload as
the integer 2q (value q = 2q 2^-1) with per-block scales ``sig 2^lsb``
(:class:`BlockOperand`).  The exactness argument of each is in docs/gemm.rst ("The
fast path").
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .chain import (CONTINUE, NO_SPECIAL, NO_TERMS, accumulate, after_group, after_group_fp32, after_group_row, finish,
                    group_step, keep)
from .fp32 import add_specials, bitlen, fp32_exponent
from .jit import gemm_jit

__all__ = ["TermOperand", "BlockOperand", "FINITE", "POS_INF", "NEG_INF", "NAN", "E2M1_LSB", "SPAN_TOO_WIDE",
           "product_terms", "block_terms", "gemm_products", "gemm_blocks", "gemm_window_rows",
           "gemm_block_sums_rows", "gemm_fp32_rows"]

#: Special-value code of an operand element (:class:`TermOperand` ``special``).
FINITE = 0
POS_INF = 1
NEG_INF = 2
NAN = 3
#: Exponent of the last bit of an E2M1 value held as the integer 2q: value = 2q 2^-1.
E2M1_LSB = -1
#: Width of a group's local block scales that no int64 dot can carry: such groups take
#: the exact term-by-term path.
SPAN_TOO_WIDE = 63


class TermOperand(NamedTuple):
    """An operand as per-element integers (rows, K), or (K, rows) for a transposed BT:
    value = sig 2^lsb (sig odd, 0 for zero), alignment exponent ``aexp`` (step 3),
    ``special`` FINITE / POS_INF / NEG_INF / NAN."""

    sig: np.ndarray     # int32
    lsb: np.ndarray     # int32
    aexp: np.ndarray    # int32
    special: np.ndarray  # int8


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
def product_terms(a, i, b, j, k0, k1, exact_exponent, sigs, lsbs, aexps):
    """Step 1 with ``scale_placement="product"`` (FPS-GEMM-4): the finite nonzero products
    a[i, k] b[j, k], k0 <= k < k1, into the term buffers (exponent ``ea + eb``, or
    floor(log2|p|) when ``exact_exponent``).  Returns (n, special): the number of
    terms and the IEEE sum of the non-finite products (NO_SPECIAL when none)."""
    n = 0
    special = NO_SPECIAL
    for kk in range(k0, k1):
        xa = a.special[i, kk]
        xb = b.special[j, kk]
        if xa != FINITE or xb != FINITE:
            v = _special_product(xa, a.sig[i, kk], xb, b.sig[j, kk])
            special = v if special == NO_SPECIAL else add_specials(special, v)
            continue
        s = np.int64(a.sig[i, kk]) * np.int64(b.sig[j, kk])
        if s == 0:
            continue
        sigs[n] = s
        lsbs[n] = np.int64(a.lsb[i, kk]) + np.int64(b.lsb[j, kk])
        if exact_exponent:
            aexps[n] = lsbs[n] + bitlen(s if s > 0 else -s) - 1
        else:
            aexps[n] = np.int64(a.aexp[i, kk]) + np.int64(b.aexp[j, kk])
        n += 1
    return n, special


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
                n, special = product_terms(a, i, b, j, plan.start[g], plan.stop[g], exact_exponent,
                                           sigs, lsbs, aexps)
                c = group_step(c, sigs, lsbs, aexps, n, special, spec)
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
                c = group_step(c, sigs, lsbs, aexps, n, NO_SPECIAL, spec)
                c, big, total = after_group(c, big, total, plan.action[g], spec)
            out[i, j] = finish(total, fin)


# ============================================================= a row at a time
@gemm_jit
def gemm_window_rows(a, bt, plan, spec, fin, out, r0, r1):
    """Product terms of finite operands under a window with ``product_exponent="operands"``,
    for a whole row of outputs at once (TermOperand a (rows, K), bt transposed (K, N)).

    Per group and output j: E[j] = max(ea + eb) over the nonzero products (and c's FP32
    exponent when fused), raised to the exponent floor; then every product's kept
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
                if spec.fused and c[j] != 0.0 and math.isfinite(c[j]):
                    emax[j] = fp32_exponent(c[j])
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
        for j in range(n):
            out[i, j] = finish(total[j], fin)


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
            sum_bits = bitlen(144 * bsz) + bitlen(nb)
            for j in range(n):
                if a.width[i, g] + bt.width[g, j] + sum_bits <= 62:
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
                    c[j] = group_step(c[j], sigs, lsbs, lsbs, m, NO_SPECIAL, spec)
            after_group_row(c, big, total, plan.action[g], spec)
        for j in range(n):
            out[i, j] = finish(total[j], fin)


@gemm_jit
def gemm_fp32_rows(va, vbt, plan, spec, fin, out, r0, r1):
    """The sequential FP32 chain (G = 1: each planned group one product; the product,
    c + p, the promotion and the slice sums all rounded to FP32 with RNE; no window), for
    a whole row of outputs at once, on operands that are FP32 values (va (rows, K), vbt
    transposed (K, N), float32).

    IEEE float32 ``*`` and ``+`` are correctly rounded RNE with subnormals (no fast-math,
    no FMA contraction), which is exactly p = RNE32(a b), c = RNE32(c + p) and step 5
    (:func:`~fpspec.fast.chain.after_group_fp32`); Inf and NaN follow IEEE as in
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
