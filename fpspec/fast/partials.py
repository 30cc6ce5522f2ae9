"""Exact group partial sums through BLAS, behind an exactness guard (FPS-GEMM-24,
docs/gemm.rst "BLAS partial sums").

Step 1 and the group sum of step 3-4 of FPS-GEMM-1 for product-placed models, computed
as float64 matrix products of K slices: for every planned group g (products
``plan.start[g] .. plan.stop[g] - 1``) one BLAS call gives ``P[i, j] = sum_k a[i, k]
b[j, k]`` for all outputs at once.  The per-output chain (steps 3-7) then runs over
these partials with :mod:`fpspec.fast.chain`'s own step functions (``accumulate``,
``after_group``) and their variants for a row of exact partials (:mod:`fpspec.fast.steps`:
``accumulate_exact64``, ``accumulate_row_rne_rtz``, ``accumulate_row_window``,
``finish_row``); nothing of the chain is written here.  The loop over the groups
(:func:`chain_partials`, :func:`chain_partials_seed`) is the chain's, over a chunk of
groups at a time whose partials BLAS has just written (:data:`PARTIAL_BYTES`), the state
carried from chunk to chunk and the guard decided per (output, group) inside it.  It is
written here rather than as row sources of one loop over rows of outputs (the driver
:mod:`fpspec.fast.kernels` measured): so written (the guard and step per row and group
a function of their own, since Numba's inlining of an overload silently dropped their
writes to the per-row counters), the seed chain ran 46.5 ms against 37.5 and
``sm100-mxf4nvf4`` 140 against 132 at 1024^3 on one thread (``fpspec bench gemm``,
alternating runs).

Why a partial is exact, and when it is not trusted (the guard):

* every operand value is ``odd 2^L`` and below ``2^T`` in magnitude (T = floor(log2|v|)
  + 1); per (row, group) :func:`group_spans` records the smallest L and the largest T of
  the nonzero values;
* a product of the group is then a multiple of ``2^(LA + LB)`` below ``2^(TA + TB)``, so
  every partial sum BLAS forms (in any order, with or without FMA) is a multiple of
  ``2^(LA + LB)`` below ``n 2^(TA + TB)``; it is a float64 number, hence computed exactly,
  when ``TA + TB + ceil(log2 n) - (LA + LB) <= 53`` (:data:`~fpspec.fast.fp32.FLOAT64_BITS`);
* with a window (step 3) the sum of the kept terms equals the exact sum when no term
  has a bit below the window's quantum ``2^(E - F)``.  E is at most the bound
  ``max(AEA + AEB, e(c) when fused, align_exponent_floor)`` (AE: the largest alignment
  exponent of the row's group), so ``LA + LB >= bound - F`` (and, fused, c a multiple of
  ``2^(bound - F)``) proves it; the rounding after the window depends only on the value
  of the kept sum plus kept c, so the chain continues from the exact sum in quanta of
  ``2^(bound - F)``.
* the same argument holds for float32 partials with 24 bits for 53, when every value is a
  float32 number and every partial sum lies in float32's range (a multiple of 2^L, L >=
  -149, below 2^128): float32 BLAS runs at about 1.5 times float64's rate.  The partials
  are float32 (:func:`partial_dtype`) for the seed models' chain when a sample of outputs
  says few pairs fail the 24-bit bound; a pair that does (and passes the 53-bit one) is
  summed again exactly in float64 from the operands' values (:func:`resum`).

An (output, group) that fails the guard is recomputed from its terms exactly as the term
kernels compute them (:func:`fpspec.fast.kernels.term_group`: step 1, then
:func:`fpspec.fast.chain.group_step`): the fallback.  :func:`gemm_partials` reports the
share of (output, group) pairs that fell back.

Specials (NaN, Inf operands or scales) never reach BLAS: such GEMMs take the term
kernels (:func:`applies` says no).  Memory: the group partials are produced a chunk of
groups at a time (:data:`PARTIAL_BYTES`), so no M x N x K temporary exists.
"""

from __future__ import annotations

import contextlib
import math
from fractions import Fraction
from typing import Iterator, NamedTuple

import numpy as np

from ..gemm_operands import operand_formats
from ..models import ZERO_ALIGNMENT_EXPONENT, GemmModel
from ..quantized import QuantizedTensor
from .chain import (CONTINUE, NO_TERMS, NO_WINDOW, Plan, accumulate, accumulator_exponent, after_group, chain_spec,
                    finish_spec)
from .fp32 import FLOAT32_BITS, FLOAT64_BITS, FP32_BITS, FP32_QUANTUM_EXP, FP32_TOP, POW2, POW2_HI, POW2_LO, RTZ
from .jit import gemm_jit
from .kernels import ProductTerms, ScaledBlockOperand, ScaledBlockTerms, TermOperand, term_group
from .operands import code_operand, quantized_operand, scaled_block_operand
from .parallel import _pool, threads
from .spans import NO_VALUES, lsb_of, operand_spans
from .steps import accumulate_exact64, accumulate_row_rne_rtz, accumulate_row_window, finish_row, is_seed_pair

__all__ = ["PartialStats", "applies", "gemm_partials", "blas_partials", "blas_threads", "float32_partials",
           "last_stats", "estimated_share", "partial_dtype", "chain_partials", "chain_partials_seed", "fallback_group",
           "fallback_scratch", "Resum", "resum", "resum_row", "ACC_BITS", "BLAS_MIN_WORK", "BLAS_MIN_GROUP",
           "MAX_FALLBACK_SHARE", "RESUM_MAX_SHARE", "SAMPLE_OUTPUTS", "ROW_BLOCK", "ROW_BLOCK_MIN", "PARTIAL_BYTES"]

#: The partials are float32 only when a sample of outputs estimates at most this share of
#: (output, group) pairs failing the 24-bit bound (:func:`partial_dtype`): such a pair is
#: summed again in float64 (:func:`resum`: 52 ns for G = 64 on one thread), while float32
#: BLAS saves about 1.1 ns per pair of 64 products (64-wide K slices at 30 against 20 G
#: products/s, one thread, one session), so up to 1/64 (0.8 ns per pair) the sums again
#: cost less than float32 saves.
RESUM_MAX_SHARE = 1 / 64
#: GEMMs with fewer products (M N K) take the term kernels: the BLAS path's set-up (operand
#: values, spans, one BLAS call per group) does not pay off below this, and the term
#: kernels stay exercised by the small GEMMs of the test suite.
BLAS_MIN_WORK = 1 << 22
#: Groups shorter than this take the term kernels: the partials array would be written
#: and read once per G products, more memory traffic than the products themselves.
BLAS_MIN_GROUP = 16
#: Rows of outputs a worker takes at a time: all of K for them (BLAS partials of a chunk of
#: groups, then the chain), so that the chain state and the partials stay per block.  A
#: GEMM's block is M / (2 x threads), clamped to [ROW_BLOCK_MIN, ROW_BLOCK] (two blocks
#: per worker at least; tall blocks make the BLAS calls of 64-wide K slices efficient:
#: 256 rows ran 1.4x the products/s of 64 on one thread at 1024^3).
ROW_BLOCK = 256
ROW_BLOCK_MIN = 64
#: Bytes of group partials a worker holds at once (a chunk of groups of row block x N
#: float64): bounds the path's memory whatever K is.  1 MiB (one group at a time from N =
#: 512 at 256 rows) lets the chain read a group's partials right after BLAS wrote them,
#: from the core's cache: the seed model at 1024^3 on 2 threads ran 35 ms against 42-47 ms
#: with 8 MiB chunks (4 groups).
PARTIAL_BYTES = 1 << 20
#: The BLAS path declines a GEMM (the term kernels take it) when more than this share of
#: (output, group) pairs is estimated to fail the guard (:func:`estimated_share`): a fallback
#: pair costs about as much as the term kernels' whole group, so past this share the BLAS
#: calls no longer pay for themselves.
MAX_FALLBACK_SHARE = 0.25
#: Rows and columns sampled for that estimate (at most SAMPLE_OUTPUTS^2 outputs).
SAMPLE_OUTPUTS = 64
#: Fraction bits of the widest accumulator value (FP32): a nonzero accumulator c is a
#: multiple of 2^(e(c) - ACC_BITS), e(c) its alignment exponent.
ACC_BITS = FP32_BITS

_FORCED: bool | None = None  # blas_partials(): None = the size rules decide
_FORCED_FLOAT32: bool | None = None  # float32_partials(): None = partial_dtype decides


@contextlib.contextmanager
def blas_partials(enabled: bool | None) -> Iterator[None]:
    """Force the BLAS path on (True: wherever :func:`applies` allows it, any size) or off
    (False), or leave it to the size rules (None), inside the ``with`` block (tests and
    benchmarks)."""
    global _FORCED
    before = _FORCED
    _FORCED = enabled
    try:
        yield
    finally:
        _FORCED = before


@contextlib.contextmanager
def float32_partials(enabled: bool | None) -> Iterator[None]:
    """Force float32 partials (True: wherever they are exact in range, whatever the
    estimated share of pairs summed again) or float64 (False), or leave it to
    :func:`partial_dtype` (None), inside the ``with`` block (tests and benchmarks)."""
    global _FORCED_FLOAT32
    before = _FORCED_FLOAT32
    _FORCED_FLOAT32 = enabled
    try:
        yield
    finally:
        _FORCED_FLOAT32 = before


def _openblas():
    """(get, set) of the thread count of the OpenBLAS that numpy bundles, or None (another
    BLAS, or not found): ctypes on numpy's own library, as threadpoolctl would."""
    import ctypes
    import glob
    import os

    here = os.path.dirname(np.__file__)
    for path in sorted(glob.glob(os.path.join(here, "..", "numpy.libs", "*openblas*"))
                       + glob.glob(os.path.join(here, ".libs", "*openblas*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_openblas", "64_"), ("openblas", "64_"), ("scipy_openblas", ""),
                               ("openblas", "")):
            get = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
            put = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
            if get is not None and put is not None:
                return get, put
    return None


_OPENBLAS: list = []


@contextlib.contextmanager
def blas_threads(n: int | None) -> Iterator[bool]:
    """Run BLAS on ``n`` threads inside the block (None: leave it), restoring the count after;
    yields whether the count is now ``n`` (False where numpy's BLAS cannot be told).  The
    BLAS path sets 1 and runs its row blocks on fpspec's own workers: one BLAS thread per
    worker, no nested thread pools (BLAS threads spinning beside fpspec's run far slower on
    a loaded machine)."""
    if n is None:
        yield False
        return
    if not _OPENBLAS:
        _OPENBLAS.append(_openblas())
    fns = _OPENBLAS[0]
    if fns is None:
        yield False
        return
    get, put = fns
    before = int(get())
    put(n)
    try:
        yield True
    finally:
        put(before)


class PartialStats(NamedTuple):
    """What the last :func:`gemm_partials` call did."""

    pairs: int       # (output, group) pairs
    fallback: int    # pairs recomputed from product terms (failed the guard)
    dtype: str = "float64"  # the partials' BLAS type (partial_dtype)
    resummed: int = 0  # pairs of float32 partials summed again in float64 (resum)

    @property
    def share(self) -> float:
        """Fraction of pairs that fell back."""
        return self.fallback / self.pairs if self.pairs else 0.0

    @property
    def resum_share(self) -> float:
        """Fraction of pairs summed again in float64."""
        return self.resummed / self.pairs if self.pairs else 0.0


_LAST: list[PartialStats | None] = [None]


def last_stats() -> PartialStats | None:
    """Statistics of the last GEMM that took the BLAS path (None: none did)."""
    return _LAST[0]


# ======================================================================== applies
def _window_ok(model: GemmModel) -> bool:
    """Window models the guard covers: one lane, no join, products aligned at ea + eb, no
    product overflow rule (FPS-GEMM-18 joins and lanes keep the term kernels)."""
    return (model.window_lanes == 1 and model.join_sum_bits is None and model.product_exponent == "operands"
            and model.product_overflow == "none")


def applies(a, bt, model: GemmModel, plan: Plan) -> bool:
    """Whether :func:`gemm_partials` computes this GEMM: terms in the encoded domain, groups
    of at least :data:`BLAS_MIN_GROUP` products, a supported window (or none), and at least
    :data:`BLAS_MIN_WORK` products (unless forced by :func:`blas_partials`).  Terms are
    products (``scale_placement="product"``), or block terms of E2M1 operands aligned by
    their scales (:func:`_block_terms_ok`).  A window on product terms only for code
    operands (a block-scaled value's alignment exponent may come from its scales,
    FPS-GEMM-22)."""
    if _FORCED is False:
        return False
    if model.operand_domain != "encoded" or plan.longest < BLAS_MIN_GROUP:
        return False
    quantized = isinstance(a, QuantizedTensor)
    if quantized and (a.payload_format != "e2m1" or bt.payload_format != "e2m1"):
        return False
    if model.scale_placement == "block":
        if not (quantized and _block_terms_ok(a, bt, model, plan)):
            return False
    elif model.scale_placement != "product" or model.window_bits is not None and quantized:
        return False
    if model.window_bits is not None and not _window_ok(model):
        return False
    if _FORCED is None and a.shape[0] * bt.shape[0] * a.shape[1] < BLAS_MIN_WORK:
        return False
    return True


def _block_terms_ok(a, bt, model: GemmModel, plan: Plan) -> bool:
    """Block terms (FPS-GEMM-22) the BLAS path computes: aligned by the scales' exponents
    (``block_exponent="scales"``: E is at most the largest scale exponent of A's row in the
    group plus B's, the bound the guard needs), each term inside one scale block of both
    operands (its products share their scales, so the group's sum of products is the sum of
    its terms), and every planned group made of whole terms."""
    term = model.block_term_size or a.block
    return (model.block_exponent == "scales" and a.block % term == 0 and bt.block % term == 0
            and not (plan.start % term).any() and not (plan.stop % term).any())


# ======================================================================== chain
class Resum(NamedTuple):
    """What :func:`resum` needs to sum a pair of float32 partials again: the operands'
    values ``va`` (M, K) and ``vb`` (N, K), the partials' significand bits ``bits``
    (FLOAT32_BITS, or FLOAT64_BITS where nothing is summed again), and per group B's column
    spans T - L (``span``, groups x N) with the columns in order of decreasing span
    (``order``)."""

    va: np.ndarray
    vb: np.ndarray
    bits: int
    span: np.ndarray
    order: np.ndarray


@gemm_jit
def resum(rs, i, j, k0, k1):
    """The exact sum of products k0 .. k1 - 1 of output (i, j) from the operands' values
    (float32, or float64), in float64: every partial sum is a multiple of 2^(LA + LB) below
    2^(TA + TB + ceil(log2 n)), exact in float64 in any order where that span is at most 53
    (the float64 half of the guard)."""
    s = 0.0
    for k in range(k0, k1):  # float32 values: their float64 product is exact (24 + 24 bits)
        s += np.float64(rs.va[i, k]) * np.float64(rs.vb[j, k])
    return s


@gemm_jit
def resum_row(x, rs, i, g, k0, k1, room):
    """Sum again, in float64, the pairs of row i in group g whose float32 partial ``x[j]``
    may be inexact (B's column span above ``room``, the bits the row's span leaves), walking
    the columns in order of decreasing span until one fits; returns how many.  Each is
    stored in x's type: RNE32 of the exact sum for float32 partials, the first step of
    :func:`accumulate_row_rne_rtz`, so that step's result is that of the exact sum."""
    n = 0
    for t in range(x.size):
        j = rs.order[g, t]
        if rs.span[g, j] <= room:
            break
        x[j] = resum(rs, i, j, k0, k1)
        n += 1
    return n


class Fallback(NamedTuple):
    """What the fallback of an (output, group) needs (:func:`fallback_group`): the term source
    of the kernels that compute it, the block terms' ``scaled``
    (:class:`~fpspec.fast.kernels.ScaledBlockTerms`) where ``blocks``
    (``scale_placement="block"``), else the product terms' ``products``
    (:class:`~fpspec.fast.kernels.ProductTerms`); the other is a placeholder
    (:func:`no_fallback`)."""

    blocks: bool
    products: ProductTerms
    scaled: ScaledBlockTerms


@gemm_jit
def fallback_group(c, fb, i, j, k0, k1, spec, sigs, lsbs, aexps):
    """The fallback of one (output, group): its terms through ``group_step`` exactly as the
    term kernels compute them (:func:`~fpspec.fast.kernels.term_group`, steps 1 and 3-4;
    kept out of line: it is the rare case)."""
    if fb.blocks:
        return term_group(c, fb.scaled, i, j, k0, k1, spec, sigs, lsbs, aexps)
    return term_group(c, fb.products, i, j, k0, k1, spec, sigs, lsbs, aexps)


@gemm_jit(inline=True)
def fallback_scratch(plan):
    """The term buffers :func:`fallback_group` fills (significands, lsbs, alignment
    exponents): room for the longest planned group and two more terms (c, a join)."""
    room = plan.longest + 2
    return (np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int64))


@gemm_jit
def chain_partials(p, g0, ng, plan, logn, sa, sbt, widest_b, fb, spec, fin, c, big, total, last, out, fallback,
                   r0, r1):
    """Steps 3-7 for rows r0 .. r1 - 1 over the partials ``p[gl, i - r0, j]`` of planned
    groups g0 .. g0 + ng - 1 (gl = g - g0), continuing the chain state c, big, total (rows
    r0 .. r1 - 1, local index i - r0, as p); ``last``: the chunk ends K, so the outputs are
    finished into ``out`` (M, N).

    ``sa = (TA, LA, AEA)`` (M, groups) (:func:`group_spans`), ``sbt`` B's, transposed
    (groups, N), ``widest_b[g]`` the largest T - L of B's columns in group g;
    ``logn[g]`` = ceil(log2(products of group g)); ``fb``: the operands for the fallback
    (:class:`Fallback`).  ``fallback[i]`` counts row i's (output, group) pairs that
    failed the guard.  The seed models' chain takes :func:`chain_partials_seed`."""
    n_cols = c.shape[1]
    sigs, lsbs, aexps = fallback_scratch(plan)
    top_a, low_a, ae_a = sa
    top_b, low_b, ae_b = sbt
    windowed = spec.window != NO_WINDOW
    window_rows = windowed and spec.fused and spec.accumulate_rounding == RTZ
    emax = np.empty(n_cols, dtype=np.int64)
    left = np.ones(n_cols, dtype=np.bool_)
    for i in range(r0, r1):
        nfall = 0
        li = i - r0
        # group outer, output inner: the outputs' chains are independent, so their steps
        # overlap in the CPU instead of waiting on one chain's latency
        for gl in range(ng):
            g = g0 + gl
            top_i = np.int64(top_a[i, g]) + logn[g]
            low_i = np.int64(low_a[i, g])
            # the float64 half of the guard for the whole row at once: A's span plus B's widest
            row_ok = top_i - low_i + widest_b[g] <= FLOAT64_BITS
            ae_i = np.int64(ae_a[i, g])
            action = plan.action[g]
            by_row = row_ok and window_rows
            if by_row:
                accumulate_row_window(c[li], p[gl, li], low_i, low_b[g], ae_i, ae_b[g], spec, emax, left)
            for j in range(n_cols):
                ci = c[li, j]
                if by_row and not left[j]:  # done by accumulate_row_window
                    if action != CONTINUE:
                        c[li, j], big[li, j], total[li, j] = after_group(ci, big[li, j], total[li, j], action, spec)
                    continue
                low = low_i + np.int64(low_b[g, j])
                ok = row_ok or top_i + np.int64(top_b[g, j]) - low <= FLOAT64_BITS
                x = p[gl, li, j]
                if ok and windowed:
                    eb = ae_i + np.int64(ae_b[g, j])
                    if ae_i == NO_TERMS or ae_b[g, j] == NO_TERMS:
                        eb = NO_TERMS
                    ec = NO_TERMS
                    if spec.fused and math.isfinite(ci):
                        ec = accumulator_exponent(ci, spec)
                        if ec > eb:
                            eb = ec
                    if eb == NO_TERMS:
                        q = 0  # nothing aligns: every product is zero and c is 0 (align_group's 0, 0)
                    else:
                        if eb < spec.exponent_floor:
                            eb = spec.exponent_floor
                        q = eb - spec.window
                        if low < q:  # a nonzero product has bits below the window (cancelling ones too)
                            ok = False
                        # c's lsb is at least ec - 23 (an accumulator value has <= 24 significant
                        # bits, and both accumulator formats' subnormal quantum is >= emin - 23)
                        if spec.fused and ci != 0.0 and math.isfinite(ci) and ec - ACC_BITS < q \
                                and lsb_of(ci) < q:
                            ok = False
                    if ok and -POW2_HI <= q <= -POW2_LO:
                        # exact: x is a multiple of 2^q below 2^(q + 62) (supports())
                        ci = accumulate(ci, np.int64(x * POW2[-q - POW2_LO]), q, spec)
                    else:
                        ok = False
                elif ok and (x == 0.0 or -POW2_HI <= low <= -POW2_LO):
                    ci = accumulate_exact64(ci, x, low, spec)
                else:
                    ok = False
                if not ok:
                    nfall += 1
                    ci = fallback_group(ci, fb, i, j, plan.start[g], plan.stop[g], spec, sigs, lsbs, aexps)
                if action == CONTINUE:
                    c[li, j] = ci
                else:
                    c[li, j], big[li, j], total[li, j] = after_group(ci, big[li, j], total[li, j], action, spec)
        if last:
            finish_row(total[li], out[i], fin)
        fallback[i] += nfall


@gemm_jit
def chain_partials_seed(p, g0, ng, plan, logn, sa, sbt, widest_b, fb, rs, spec, fin, c, big, total, last, out,
                        fallback, resummed, r0, r1):
    """:func:`chain_partials` for the seed models' chain (:func:`is_seed_pair`), its state c a
    float32 array (binary32 values, :func:`accumulate_row_rne_rtz` in binary32 lanes), over
    float64 or float32 partials (``rs``, :class:`Resum`; ``rs.bits`` their significand bits).

    A row whose span passes the float64 half of the guard with B's widest column takes
    :func:`accumulate_row_rne_rtz`, after :func:`resum_row` has summed again, in float64, the
    float32 partials over the 24-bit bound.  Any other row goes pair by pair: a pair over
    the float64 bound through the fallback, one over ``rs.bits`` summed again, the others
    from the partial, each through :func:`accumulate_exact64`.  ``resummed[i]`` counts row
    i's pairs summed again, ``fallback[i]`` those that fell back."""
    n_cols = c.shape[1]
    sigs, lsbs, aexps = fallback_scratch(plan)
    top_a, low_a, _ = sa
    top_b, low_b, _ = sbt
    bits = rs.bits
    for i in range(r0, r1):
        nfall = 0
        nresum = 0
        li = i - r0
        for gl in range(ng):  # group outer, output inner (as chain_partials)
            g = g0 + gl
            k0, k1 = plan.start[g], plan.stop[g]
            top_i = np.int64(top_a[i, g]) + logn[g]
            low_i = np.int64(low_a[i, g])
            row_span = top_i - low_i
            if row_span + widest_b[g] <= FLOAT64_BITS:
                if row_span + widest_b[g] > bits:
                    nresum += resum_row(p[gl, li], rs, i, g, k0, k1, bits - row_span)
                accumulate_row_rne_rtz(c[li], p[gl, li])
            else:
                for j in range(n_cols):
                    low = low_i + np.int64(low_b[g, j])
                    span = top_i + np.int64(top_b[g, j]) - low
                    ci = np.float64(c[li, j])
                    if span > FLOAT64_BITS:
                        nfall += 1
                        ci = fallback_group(ci, fb, i, j, k0, k1, spec, sigs, lsbs, aexps)
                    elif span > bits:
                        nresum += 1
                        ci = accumulate_exact64(ci, resum(rs, i, j, k0, k1), low, spec)
                    else:
                        ci = accumulate_exact64(ci, np.float64(p[gl, li, j]), low, spec)
                    c[li, j] = ci  # a binary32 value: exact
            action = plan.action[g]
            if action != CONTINUE:
                for j in range(n_cols):
                    c[li, j], big[li, j], total[li, j] = after_group(np.float64(c[li, j]), big[li, j], total[li, j],
                                                                     action, spec)
        if last:
            finish_row(total[li], out[i], fin)
        fallback[i] += nfall
        resummed[i] += nresum


@gemm_jit
def _products_fail(sa, i, sb, j, g, logn, window, floor, bits):
    """The products' part of the guard fails for output (i, j), group g: the span in
    ``bits`` (FLOAT64_BITS, or FLOAT32_BITS for float32 partials), and with a window
    (``window`` != NO_WINDOW) a product bit below 2^(max(AEA + AEB, floor) - F) (c's
    exponent, known only in the chain, can only raise that quantum)."""
    top_a, low_a, ae_a = sa
    top_b, low_b, ae_b = sb
    low = np.int64(low_a[i, g]) + np.int64(low_b[j, g])
    if np.int64(top_a[i, g]) + np.int64(top_b[j, g]) + logn[g] - low > bits:
        return True
    if window == NO_WINDOW or ae_a[i, g] == NO_TERMS or ae_b[j, g] == NO_TERMS:
        return False
    e = np.int64(ae_a[i, g]) + np.int64(ae_b[j, g])
    if e < floor:
        e = floor
    return low < e - window


@gemm_jit
def estimated_share(sa, sb, logn, window, floor, samples, bits=FLOAT64_BITS):
    """Share of (output, group) pairs failing the products' part of the guard on a grid of
    at most ``samples`` x ``samples`` outputs (rows and columns evenly spaced): a lower
    bound of the fallback share of a fused window, the share itself otherwise; with
    ``bits`` = FLOAT32_BITS, the share of pairs float32 partials would sum again (or
    send back)."""
    m = sa[0].shape[0]
    n = sb[0].shape[0]
    si = min(m, samples)
    sj = min(n, samples)
    fail = 0
    for a in range(si):
        i = a * m // si
        for b in range(sj):
            j = b * n // sj
            for g in range(logn.size):
                if _products_fail(sa, i, sb, j, g, logn, window, floor, bits):
                    fail += 1
    return fail / max(1, si * sj * logn.size)


@gemm_jit
def _may_fail(sa, sb, logn, windowed, fused):
    """Whether any (output, group) could fail the guard: per group the largest span of A's
    rows plus B's (without a window); with a window, or a fused one, the c-dependent part
    is only known in the chain, so True."""
    if windowed:
        return True
    top_a, low_a, _ = sa
    top_b, low_b, _ = sb
    for g in range(logn.size):
        wa = -(1 << 40)
        for i in range(top_a.shape[0]):
            if top_a[i, g] != -NO_VALUES and top_a[i, g] - low_a[i, g] > wa:
                wa = top_a[i, g] - low_a[i, g]
        wb = -(1 << 40)
        for j in range(top_b.shape[0]):
            if top_b[j, g] != -NO_VALUES and top_b[j, g] - low_b[j, g] > wb:
                wb = top_b[j, g] - low_b[j, g]
        if wa + wb + logn[g] > FLOAT64_BITS:
            return True
    return False


# ======================================================================= operands
def _empty_terms() -> TermOperand:
    z = np.zeros((1, 1), dtype=np.int32)
    return TermOperand(z, z, z, np.zeros((1, 1), dtype=np.int8))


def _empty_blocks() -> ScaledBlockOperand:
    z = np.zeros((1, 1), dtype=np.int32)
    return ScaledBlockOperand(np.zeros((1, 1), dtype=np.int8), z, z, z, np.zeros((1, 1), dtype=np.int8))


def no_fallback(model: GemmModel) -> Fallback:
    """A :class:`Fallback` of placeholders (no pair can fail the guard)."""
    return Fallback(False, ProductTerms(_empty_terms(), _empty_terms(), model.product_exponent == "exact"),
                    ScaledBlockTerms(_empty_blocks(), _empty_blocks(), 1, 1, 1, False))


def _fallback(a, bt, model: GemmModel, fmt) -> Fallback:
    """The operands of the fallback: block terms' (``scale_placement="block"``) or product
    terms'."""
    empty = no_fallback(model)
    if model.scale_placement == "block":
        return empty._replace(blocks=True, scaled=ScaledBlockTerms(
            scaled_block_operand(a, model), scaled_block_operand(bt, model), model.block_term_size or a.block,
            a.block, bt.block, model.block_exponent == "scales"))
    if isinstance(a, QuantizedTensor):
        ta, tb = quantized_operand(a, model), quantized_operand(bt, model)
    else:
        fa, fb = operand_formats(fmt)
        ta, tb = code_operand(np.asarray(a), fa, model), code_operand(np.asarray(bt), fb, model)
    return empty._replace(products=empty.products._replace(a=ta, b=tb))


def partial_dtype(va: np.ndarray, vb: np.ndarray, sa, sb, logn: np.ndarray, spec, floor: int) -> type:
    """The partials' BLAS type, np.float32 or np.float64.  Float32 partials are exact wherever
    the 24-bit bound holds when every value is a float32 number (the operands' values came
    as float32, :func:`~fpspec.fast.spans.operand_spans`) and every pair's sum lies in float32's range (smallest lsb
    exponents LA + LB >= -149, largest tops TA + TB + ceil(log2 n) <= 128: then a multiple of
    2^L below 2^(L + 24) is a float32 number).  They are taken for the seed models' chain
    (:func:`is_seed_pair`), whose row step and state then run in binary32 lanes; other chains
    keep float64 partials (a window's row step needs a whole row of exact partials, and each
    type pair is one more compiled chain).  They are worth it where a sample of outputs
    (:func:`estimated_share` with FLOAT32_BITS) puts at most :data:`RESUM_MAX_SHARE` of pairs
    over the bound (:func:`float32_partials` overrides this last test)."""
    top_a, low_a, _ = sa
    top_b, low_b, _ = sb
    if (_FORCED_FLOAT32 is False or not is_seed_pair(spec) or va.dtype != np.float32 or vb.dtype != np.float32
            or va.size == 0 or vb.size == 0
            or int(low_a.min()) + int(low_b.min()) < FP32_QUANTUM_EXP
            or int(top_a.max()) + int(top_b.max()) + int(logn.max()) > FP32_TOP):
        return np.float64
    if _FORCED_FLOAT32 is None and estimated_share(sa, sb, logn, NO_WINDOW, floor, SAMPLE_OUTPUTS,
                                                   FLOAT32_BITS) > RESUM_MAX_SHARE:
        return np.float64
    return np.float32


def _resum_operands(va: np.ndarray, vb: np.ndarray, span_b: np.ndarray, dtype: type) -> Resum:
    """The :class:`Resum` of partials of ``dtype``, given B's column spans T - L (groups x
    N): float64 partials sum nothing again."""
    if dtype == np.float64:
        z = np.zeros((1, 1), dtype=np.int32)
        return Resum(va, vb, FLOAT64_BITS, z, z)
    span = span_b.astype(np.int32)
    order = np.ascontiguousarray(np.argsort(-span, axis=1, kind="stable").astype(np.int32))
    return Resum(va, vb, FLOAT32_BITS, span, order)


def gemm_partials(a, bt, model: GemmModel, fmt, plan: Plan, alpha: Fraction | None) -> np.ndarray | None:
    """The GEMM's FP32 results (float64 (M, N), before step 8) through BLAS partial sums,
    or None where :func:`applies` says no or an operand holds a NaN or an Inf (those take
    the term kernels).  Records :func:`last_stats`."""
    if not applies(a, bt, model, plan):
        return None
    spec, fin = chain_spec(model), finish_spec(model, alpha)
    zero = ZERO_ALIGNMENT_EXPONENT if spec.zero_terms else 0
    sides = ((a, 0), (bt, 1))
    seed = bool(is_seed_pair(spec))
    want32 = seed and _FORCED_FLOAT32 is not False  # float32 values where the tables allow (partial_dtype)
    if threads() > 1:  # the two operands' passes release the GIL: one per worker
        ops = list(_pool(threads()).map(
            lambda xs: operand_spans(xs[0], fmt, xs[1], model, plan, zero, spec.zero_terms, want32), sides))
    else:
        ops = [operand_spans(x, fmt, side, model, plan, zero, spec.zero_terms, want32) for x, side in sides]
    (va, sa, bad_a), (vb, sb, bad_b) = ops
    if bad_a or bad_b:
        return None
    m, n = va.shape[0], vb.shape[0]
    sizes = plan.stop - plan.start
    logn = np.array([(int(s) - 1).bit_length() for s in sizes], dtype=np.int64)
    window = NO_WINDOW if model.window_bits is None else model.window_bits
    floor = spec.exponent_floor
    if _FORCED is None and estimated_share(sa, sb, logn, window, floor, SAMPLE_OUTPUTS) > MAX_FALLBACK_SHARE:
        return None  # mostly fallback: the term kernels are faster
    fb = no_fallback(model)
    if _may_fail(sa, sb, logn, model.window_bits is not None, model.fused):
        fb = _fallback(a, bt, model, fmt)
    ngroups = plan.start.size
    sbt = tuple(np.ascontiguousarray(x.T) for x in sb)
    span_b = sbt[0].astype(np.int64) - sbt[1]  # B's column spans T - L (groups x N)
    widest_b = span_b.max(axis=1, initial=-2 * NO_VALUES)
    dtype = partial_dtype(va, vb, sa, sb, logn, spec, floor)
    if dtype == np.float64:  # float32 values (exact) as float64 for float64 BLAS
        va, vb = va.astype(np.float64, copy=False), vb.astype(np.float64, copy=False)
    rs = _resum_operands(va, vb, span_b, dtype)
    out = np.empty((m, n), dtype=np.float64)
    fallback = np.zeros(m, dtype=np.int64)
    resummed = np.zeros(m, dtype=np.int64)
    rb = min(ROW_BLOCK, max(ROW_BLOCK_MIN, m // (2 * threads())))
    chunk = max(1, min(ngroups, PARTIAL_BYTES // max(1, np.dtype(dtype).itemsize * rb * n)))

    def rows(r0: int, r1: int) -> None:
        """Rows r0 .. r1 - 1, all of K: BLAS partials of a chunk of groups, then their chain."""
        c = np.zeros((r1 - r0, n), dtype=np.float32 if seed else np.float64)
        big, total = (np.zeros((r1 - r0, n), dtype=np.float64) for _ in range(2))
        p = np.empty((chunk, r1 - r0, n), dtype=dtype)
        for g0 in range(0, ngroups, chunk):
            ng = min(chunk, ngroups - g0)
            for gl in range(ng):
                s0, s1 = int(plan.start[g0 + gl]), int(plan.stop[g0 + gl])
                np.matmul(va[r0:r1, s0:s1], vb[:, s0:s1].T, out=p[gl])  # exact under the guard (docstring)
            last = g0 + ng == ngroups
            if seed:
                chain_partials_seed(p, g0, ng, plan, logn, sa, sbt, widest_b, fb, rs, spec, fin, c, big, total,
                                    last, out, fallback, resummed, r0, r1)
            else:
                chain_partials(p, g0, ng, plan, logn, sa, sbt, widest_b, fb, spec, fin, c, big, total, last, out,
                               fallback, r0, r1)

    blocks = [(r, min(r + rb, m)) for r in range(0, m, rb)]
    nt = min(threads(), len(blocks))
    # several workers: one BLAS thread each; one worker (one row block, or set_threads(1)):
    # BLAS on the fpspec thread count
    with blas_threads(1 if nt > 1 else threads()) as told:
        if nt > 1 and told:
            list(_pool(nt).map(lambda rr: rows(*rr), blocks))
        else:  # (a BLAS that cannot be told keeps its own threads: the blocks run in turn)
            for rr in blocks:
                rows(*rr)
    _LAST[0] = PartialStats(m * n * ngroups, int(fallback.sum()), np.dtype(dtype).name, int(resummed.sum()))
    return out
