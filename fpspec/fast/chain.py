"""The chain of a GEMM output, written once for every fast kernel: steps 2-7 of
FPS-GEMM-1, the twin of :mod:`fpspec.exact.accumulate` (docs/gemm.rst).

A kernel (:mod:`fpspec.fast.kernels`, or the BLAS partials of
:mod:`fpspec.fast.partials`) only produces step 1, the terms of a group (or their exact
sum); everything after that is here, with the exact spec's names:

====================================  ===============================================
exact spec (:mod:`~fpspec.exact.accumulate`)  fast twin (this module)
====================================  ===============================================
step 2 groups, split K (``chain``,    :func:`chain_plan`: the groups as data (a
``chain_slice``)                      :class:`Plan`), made once per GEMM
step 3 ``align_group``                :func:`align_group` (the kept sum of a term buffer)
steps 3-4 ``group_step``              :func:`group_step` (a group's terms)
step 4 (after the sum)                :func:`accumulate` (a group's exact kept sum)
step 5 promotion, slice sums          :func:`after_group`
step 6 ``snap``, 7 alpha              :func:`snap`, :func:`scale_by_alpha`, :func:`finish`
====================================  ===============================================

Every kernel runs the same loop per output (the row kernels per row of outputs)::

    c = big = total = 0.0
    for g in range(plan.start.size):                     # step 2: the planned groups
        <the terms of products plan.start[g] .. plan.stop[g] - 1>     # step 1
        c = group_step(c, terms..., spec)                # steps 3-4 (or accumulate)
        c, big, total = after_group(c, big, total, plan.action[g], spec)  # step 5
    y = finish(total, fin)                               # steps 6-7

which each kernel writes out around its own step 1, and the BLAS partials
(:func:`fpspec.fast.partials.chain_partials`, ``chain_partials_seed``) around their
exactness guard: written once, as a driver taking the kernel's step by the type of a
source tuple, it ran slower, kernel by kernel (by 2 to 24 %, and three times slower for
the sequential FP32 chain; the measurements are in :mod:`fpspec.fast.kernels` and
:mod:`fpspec.fast.partials`).

The faster forms of the steps
(a row at a time, branch-free, on bit patterns, on float64 group sums) are the
chain-step variants of :mod:`fpspec.fast.steps`, each listed there with the step of
this module it equals and the test that pins them.

The plan is the only place that knows where groups, promotions and K slices fall
(:func:`chain_plan`); a different cut of K (slices of any length, partial first
groups) is a different plan, not a different kernel.  The model's choices reach the
compiled code as two named tuples, :class:`ChainSpec` (steps 3-5) and
:class:`FinishSpec` (steps 6-7), with a named code for every choice and sentinel.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ..models import ACCUMULATOR_FORMATS, ZERO_ALIGNMENT_EXPONENT, GemmModel
from .fp32 import (FP32_LATTICE, MODE_CODES, RNE, Lattice, add_round, add_round_fp32, add_round_int, add_specials,
                   lattice, round_acc_int, round_acc_terms, round_fp32_int, split_fp32)
from .jit import gemm_jit

__all__ = ["ChainSpec", "FinishSpec", "Plan", "chain_spec", "finish_spec", "chain_plan", "keep", "float_bits",
           "bits_float", "align_group", "lane_window", "join", "accumulator_exponent", "group_step", "accumulate",
           "after_group", "snap", "scale_by_alpha", "finish",
           "NO_ROUNDING", "TRUNCATE", "FLOOR", "NO_WINDOW", "NO_EXPONENT_FLOOR", "NO_TERMS", "NO_SNAP",
           "NO_SPECIAL", "NO_DROP", "CONTINUE", "PROMOTE", "END_SLICE"]

# ----------------------------------------------------------- named codes
#: ``group_rounding="none"``: the group's sum joins the accumulator exactly.
NO_ROUNDING = 2
#: ``below_window`` codes: magnitude truncation, and truncation toward minus infinity.
TRUNCATE = 0
FLOOR = 1
#: ``window_bits=None``: no alignment window (every bit of a term is kept).
NO_WINDOW = -(1 << 30)
#: ``align_exponent_floor=None``: the group's alignment exponent is not raised.
NO_EXPONENT_FLOOR = -(1 << 30)
#: Alignment exponent of a group with no nonzero term (below every real exponent).
NO_TERMS = -(1 << 30)
#: ``snap_bits=None``: no output lattice.
NO_SNAP = -(1 << 30)
#: The special value of a group whose terms are all finite.
NO_SPECIAL = 0.0
#: ``join_drop_bits=None``: the join never drops c.
NO_DROP = -(1 << 30)
#: What follows a planned group (step 5): nothing, a promotion, or the end of a K slice
#: (the pending partial promoted, the slice's result added into the output).
CONTINUE = 0
PROMOTE = 1
END_SLICE = 2


class ChainSpec(NamedTuple):
    """Steps 3-5 of a :class:`~fpspec.models.GemmModel` for the compiled chain."""

    fused: bool
    window: int                 # F = window_bits, or NO_WINDOW
    below: int                  # TRUNCATE or FLOOR
    exponent_floor: int         # align_exponent_floor, or NO_EXPONENT_FLOOR
    group_rounding: int         # RNE, RTZ or NO_ROUNDING
    accumulate_rounding: int    # RNE or RTZ
    lattice: Lattice            # accumulate_bits in the accumulator format, accumulate_overflow
    promotes: bool              # promotion_interval is set
    promotion_rounding: int     # RNE or RTZ
    zero_terms: bool            # zero_alignment="emin": zero terms and c = 0 take part in step 3
    acc_emin: int               # emin of c's alignment exponent (FP32 -126, FP16 -14)
    lanes: int                  # window_lanes
    join: bool                  # join_sum_bits is set
    join_sum: int               # join_sum_bits
    join_c: int                 # join_c_bits
    join_drop: int              # join_drop_bits, or NO_DROP
    join_below: int             # TRUNCATE or FLOOR
    product_overflow: bool      # product_overflow="inf"
    signed_zero: bool           # chain_zero="signed"
    fp32_lattice: bool          # the lattice is FP32_LATTICE (rounded by round_fp32_int, no lattice call)


class FinishSpec(NamedTuple):
    """Steps 6-7 for the compiled chain (step 8, the output format, is applied to the
    whole output array)."""

    snap_bits: int              # L, or NO_SNAP
    scaled: bool                # an alpha applies (quantized operands, encoded domain)
    alpha: float                # the FP32 alpha (0.0 when not scaled)


class Plan(NamedTuple):
    """Step 2 as data: group g holds products ``start[g] .. stop[g] - 1`` of K and is
    followed by ``action[g]`` (CONTINUE, PROMOTE or END_SLICE); ``longest`` is the
    most products a group holds (kernels size their term buffers with it)."""

    start: np.ndarray           # int64 (groups,)
    stop: np.ndarray            # int64 (groups,)
    action: np.ndarray          # int8 (groups,)
    longest: int


def chain_spec(model: GemmModel) -> ChainSpec:
    """The compiled form of the model's steps 3-5."""
    emin, top, _ = ACCUMULATOR_FORMATS[model.accumulator_format]
    join = model.join_sum_bits is not None
    return ChainSpec(
        fused=model.fused,
        window=NO_WINDOW if model.window_bits is None else model.window_bits,
        below=FLOOR if model.below_window == "floor" else TRUNCATE,
        exponent_floor=NO_EXPONENT_FLOOR if model.align_exponent_floor is None else model.align_exponent_floor,
        group_rounding=NO_ROUNDING if model.group_rounding == "none" else MODE_CODES[model.group_rounding],
        accumulate_rounding=MODE_CODES[model.accumulate_rounding],
        lattice=lattice(model.accumulate_bits, emin, top, model.accumulate_overflow == "inf"),
        promotes=model.promotion_interval is not None,
        promotion_rounding=MODE_CODES[model.promotion_rounding],
        zero_terms=model.zero_alignment == "emin",
        acc_emin=emin,
        lanes=model.window_lanes,
        join=join,
        join_sum=model.join_sum_bits if join else 0,
        join_c=model.join_c_bits if join else 0,
        join_drop=NO_DROP if model.join_drop_bits is None else model.join_drop_bits,
        join_below=FLOOR if model.join_below == "floor" else TRUNCATE,
        product_overflow=model.product_overflow == "inf",
        signed_zero=model.chain_zero == "signed",
        fp32_lattice=lattice(model.accumulate_bits, emin, top, model.accumulate_overflow == "inf") == FP32_LATTICE)


def finish_spec(model: GemmModel, alpha: Fraction | None) -> FinishSpec:
    """The compiled form of steps 6-7; ``alpha`` is the FP32 alpha (or None)."""
    return FinishSpec(snap_bits=NO_SNAP if model.snap_bits is None else model.snap_bits,
                      scaled=alpha is not None, alpha=0.0 if alpha is None else float(alpha))


def _tile_bounds(s0: int, s1: int, model: GemmModel) -> np.ndarray:
    """The K tiles of one slice as their start positions plus the slice end (exact:
    ``tile_groups``): tiles of ``k_tile`` (else ``group_size``, else the slice), the
    partial one last or, with ``slice_residue="first"``, first (FPS-GEMM-23)."""
    n = s1 - s0
    unit = model.k_tile or model.group_size or max(n, 1)
    r = n % unit
    head = r if (r and model.slice_residue == "first") else 0
    cuts = np.arange(s0 + head, s1, unit, dtype=np.int64)
    if head:
        cuts = np.concatenate([np.array([s0], dtype=np.int64), cuts])
    return np.concatenate([cuts, np.array([s1], dtype=np.int64)])


def chain_plan(k: int, model: GemmModel) -> Plan:
    """Step 2 and the K slices of step 5 (FPS-GEMM-1, FPS-GEMM-6, FPS-GEMM-14,
    FPS-GEMM-23) for K products: K is cut into the slices of
    :meth:`~fpspec.models.GemmModel.slice_lengths` (``slice_plan``, or slices of
    ``split_k``, or one slice); each slice into K tiles (:func:`_tile_bounds`), each tile
    into groups of ``group_size`` counted from the tile start (one group without it), the
    last ones possibly shorter; a group after which the slice has done a multiple of
    ``promotion_interval`` products is followed by a promotion, the last group of a
    slice by the end of the slice."""
    starts, stops, actions = [], [], []
    s0 = 0
    for length in model.slice_lengths(k):
        s1 = s0 + length
        bounds = _tile_bounds(s0, s1, model)
        tile_starts, tile_stops = [], []
        for t0, t1 in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            g = model.group_size or (t1 - t0)
            start = np.arange(t0, t1, g, dtype=np.int64)
            tile_starts.append(start)
            tile_stops.append(np.minimum(start + g, t1))
        start, stop = np.concatenate(tile_starts), np.concatenate(tile_stops)
        action = np.full(start.size, CONTINUE, dtype=np.int8)
        if model.promotion_interval is not None:
            interval = min(model.promotion_interval, length + 1)  # longer: only the slice end
            action[(stop - s0) % interval == 0] = PROMOTE
        action[-1] = END_SLICE
        starts.append(start)
        stops.append(stop)
        actions.append(action)
        s0 = s1
    if not starts:
        return Plan(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int8), 0)
    start, stop = np.concatenate(starts), np.concatenate(stops)
    return Plan(start, stop, np.concatenate(actions), int((stop - start).max()))


# ================================================================ step 3
@gemm_jit(inline=True)
def keep(s, d, below):
    """Step 3 for one term s 2^lsb: its kept part in quanta of the window, d = lsb - the
    quantum's exponent (``below``: TRUNCATE the magnitude, or FLOOR toward -inf)."""
    if s == 0:
        return np.int64(0)
    if d >= 0:
        return s << d
    neg = s < 0
    mag = -s if neg else s
    sh = -d
    if below == TRUNCATE or not neg:
        t = np.int64(0) if sh >= 63 else (mag >> sh)
        return -t if neg else t
    t = np.int64(1) if sh >= 62 else ((mag + (np.int64(1) << sh) - 1) >> sh)
    return -t


@intrinsic
def float_bits(typingctx, x):
    """The IEEE binary64 bit pattern of a float64 as an int64 (a reinterpretation, no
    conversion)."""
    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def bits_float(typingctx, b):
    """The float64 whose IEEE binary64 bit pattern is the int64 b (inverse of
    :func:`float_bits`)."""
    if b != types.int64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@gemm_jit(inline=True)
def accumulator_exponent(c, spec):
    """Alignment exponent of a finite accumulator c: max(floor(log2|c|), emin of the
    accumulator format); for c = 0, -126 with ``zero_terms`` (zero_alignment="emin"), else
    NO_TERMS (no part in the alignment) (exact: ``accumulator_exponent``)."""
    if c == 0.0:
        return ZERO_ALIGNMENT_EXPONENT if spec.zero_terms else NO_TERMS
    m, ex = math.frexp(c)
    e = ex - 1
    return e if e > spec.acc_emin else spec.acc_emin


@gemm_jit(inline=True)
def align_group(sigs, lsbs, aexps, n, c, spec):
    """Step 3 (FPS-GEMM-5) on n finite terms ``sigs[i] 2^lsbs[i]`` with alignment
    exponents ``aexps[i]``: E is the largest exponent of a term (and of c when fused),
    raised to ``exponent_floor``; returns (the sum of the terms' kept multiples of
    2^(E - F) in those quanta, E - F).  A term takes part through its exponent: a zero
    term is handed over only where it aligns (``zero_terms``), a term with exponent
    NO_TERMS takes no part.  c's own kept part is added by :func:`accumulate`.  With
    nothing to align the sum is 0."""
    e_max = NO_TERMS
    for i in range(n):
        if aexps[i] > e_max:
            e_max = aexps[i]
    if spec.fused:
        ec = accumulator_exponent(c, spec)
        if ec > e_max:
            e_max = ec
    if e_max == NO_TERMS:
        return np.int64(0), 0
    if e_max < spec.exponent_floor:
        e_max = spec.exponent_floor
    ql = e_max - spec.window
    acc = np.int64(0)
    for i in range(n):
        acc += keep(sigs[i], lsbs[i] - ql, spec.below)
    return acc, ql


@gemm_jit(inline=True)
def lane_window(sigs, lsbs, aexps, n, spec):
    """Step 3 of a non-fused group in ``lanes`` interleaved lanes (FPS-GEMM-18; exact:
    ``lane_window``): term i (one per product of the group, in order) is in lane
    i mod lanes; each lane keeps its terms' multiples of 2^(E_l - F) at its own largest
    exponent E_l, and each lane's sum is cut (``join_below``) to multiples of 2^(E - F),
    E = max E_l.  Returns (the kept sum in quanta 2^(E - F), E - F, E); E = NO_TERMS when
    no term takes part."""
    lanes = spec.lanes
    e_all = NO_TERMS
    for i in range(n):
        if aexps[i] > e_all:
            e_all = aexps[i]
    if e_all == NO_TERMS:
        return np.int64(0), 0, NO_TERMS
    if e_all < spec.exponent_floor:
        e_all = spec.exponent_floor
    ql = e_all - spec.window
    total = np.int64(0)
    for lane in range(lanes):
        e_l = NO_TERMS
        for i in range(lane, n, lanes):
            if aexps[i] > e_l:
                e_l = aexps[i]
        if e_l == NO_TERMS:
            continue
        if e_l < spec.exponent_floor:
            e_l = spec.exponent_floor
        q_l = e_l - spec.window
        part = np.int64(0)
        for i in range(lane, n, lanes):
            part += keep(sigs[i], lsbs[i] - q_l, spec.below)
        total += keep(part, q_l - ql, spec.join_below) if lanes > 1 else part
    return total, ql, e_all


@gemm_jit(inline=True)
def _signed_zero(r, negative, spec):
    """A zero accumulator result keeps the sign of a negative exact value under
    ``chain_zero="signed"`` (a join model; exact: ``round_accumulator``)."""
    if r == 0.0 and negative and spec.signed_zero:
        return -0.0
    return r


@gemm_jit
def join(c, acc, ql, e, spec):
    """Step 4 with a join (FPS-GEMM-18; exact: ``join``): c (finite) meets the group's kept
    sum acc 2^ql (alignment exponent e) at M = max(e, e_c); the sum is cut to 2^(M -
    join_sum) and c to 2^(M - join_c) (``join_below``), c dropped when e_c < M - join_drop;
    the exact sum rounded once to the accumulator lattice.  acc is below 2^(F + 2 +
    bitlen(G)) and c below 2^(e_c + 1), so both cut values stay far inside int64 for the
    join widths :func:`fpspec.fast.accumulate.supports` admits."""
    ec = accumulator_exponent(c, spec)
    m = e if e > ec else ec
    if m == NO_TERMS:
        return 0.0
    q_s = m - spec.join_sum
    q_c = m - spec.join_c
    base = q_s if q_s < q_c else q_c
    s2 = keep(acc, ql - q_s, spec.join_below)
    c2 = np.int64(0)
    if c != 0.0 and not (spec.join_drop != NO_DROP and ec < m - spec.join_drop):
        sc, lc = split_fp32(c)
        c2 = keep(sc, lc - q_c, spec.join_below)
    total = (s2 << (q_s - base)) + (c2 << (q_c - base))
    return _signed_zero(round_acc_int(total, base, spec.accumulate_rounding, spec.lattice), total < 0, spec)


# ================================================================ step 4
@gemm_jit(inline=True)
def accumulate(c, acc, e, spec):
    """Step 4 (FPS-GEMM-1, FPS-GEMM-13) given a group's exact sum of (kept) terms
    acc 2^e: the new accumulator.

    Fused: c' = round(c + sum) with ``accumulate_rounding`` to the accumulator lattice; with
    a window c is in it too (its kept multiples of 2^e, so e = E - F must count c's
    exponent).  Not fused: p = the sum rounded to FP32 with ``group_rounding`` (exact
    for NO_ROUNDING), then c' = round(c + p).  An Inf or NaN c absorbs finite terms
    that join it exactly (FPS-GEMM-2); a rounded p follows IEEE addition."""
    if spec.fused or spec.group_rounding == NO_ROUNDING:
        if not math.isfinite(c):
            return c
        if spec.fused and spec.window != NO_WINDOW:
            if c != 0.0:
                sc, lc = split_fp32(c)
                acc += keep(sc, lc - e, spec.below)
            if spec.fp32_lattice:
                return round_fp32_int(acc, e, spec.accumulate_rounding)
            return round_acc_int(acc, e, spec.accumulate_rounding, spec.lattice)
        return add_round_int(c, acc, e, spec.accumulate_rounding, spec.lattice)
    if acc == 0:
        return c  # p = +0: c is already on the accumulator's lattice
    p = round_fp32_int(acc, e, spec.group_rounding)
    if spec.fp32_lattice:
        return add_round_fp32(c, p, spec.accumulate_rounding)
    return add_round(c, p, spec.accumulate_rounding, spec.lattice)


@gemm_jit
def group_step(c, sigs, lsbs, aexps, n, special, overflow, spec):
    """Steps 3-4 for one group (FPS-GEMM-5): the new accumulator after its n finite
    terms ``sigs[i] 2^lsbs[i]`` (alignment exponents ``aexps[i]``) and ``special``, the
    IEEE sum of its non-finite terms (NO_SPECIAL when there are none), join c; then
    ``overflow``, the IEEE sum of the products >= 2^128 under ``product_overflow``
    (FPS-GEMM-18).  The buffers need room for one more term (c).  Twin of the exact
    ``group_step``."""
    if special != NO_SPECIAL:
        return add_specials(c, special)
    if overflow != NO_SPECIAL:
        return c if not math.isfinite(c) else overflow
    if not math.isfinite(c) and (spec.fused or spec.group_rounding == NO_ROUNDING):
        return c
    if spec.join:
        acc, ql, e = lane_window(sigs, lsbs, aexps, n, spec)
        return join(c, acc, ql, e, spec)
    if spec.window != NO_WINDOW:
        if spec.lanes > 1:
            acc, ql, e = lane_window(sigs, lsbs, aexps, n, spec)
        else:
            acc, ql = align_group(sigs, lsbs, aexps, n, c, spec)
        return accumulate(c, acc, ql, spec)
    if spec.fused or spec.group_rounding == NO_ROUNDING:
        # the terms and c summed exactly, rounded once
        m = n
        if c != 0.0:
            sigs[m], lsbs[m] = split_fp32(c)
            m += 1
        return round_acc_terms(sigs, lsbs, m, spec.accumulate_rounding, spec.lattice)
    p = round_acc_terms(sigs, lsbs, n, spec.group_rounding, FP32_LATTICE)
    return add_round(c, p, spec.accumulate_rounding, spec.lattice)


# ================================================================ step 5
@gemm_jit(inline=True)
def after_group(c, big, total, action, spec):
    """Step 5 after a group (FPS-GEMM-6, FPS-GEMM-14): PROMOTE adds the partial c into
    the FP32 accumulator (``promotion_rounding``) and restarts c; END_SLICE ends the
    slice's chain (its result: the accumulator with c promoted, or c) and adds it into
    the output's total with FP32 RNE, in order of k.  Returns (c, big, total)."""
    if action == PROMOTE:
        return 0.0, add_round(big, c, spec.promotion_rounding, FP32_LATTICE), total
    if action == END_SLICE:
        r = add_round(big, c, spec.promotion_rounding, FP32_LATTICE) if spec.promotes else c
        # +0 + r is r exactly (r, a chain result, is -0 only under chain_zero="signed", which
        # has one slice): the first slice skips the add
        return 0.0, 0.0, (r if total == 0.0 else add_round(total, r, RNE, FP32_LATTICE))
    return c, big, total


# ============================================================ steps 6-7
@gemm_jit
def snap(y, bits):
    """Step 6 (FPS-GEMM-7): round_half_even(y 2^L) / 2^L on an FP32 value held in float64
    (exact: y 2^L is a float64); a negative y that snaps to zero gives -0."""
    if not math.isfinite(y):
        return y
    x = math.ldexp(y, bits)
    f = np.floor(x)  # float (numba's math.floor returns int64 and would overflow)
    d = x - f
    if d > 0.5 or (d == 0.5 and (f % 2.0) != 0.0):
        f += 1.0
    r = math.ldexp(f, -bits)
    return r if r != 0.0 else math.copysign(0.0, y)


@gemm_jit(inline=True)
def scale_by_alpha(y, alpha):
    """Step 7 (FPS-GEMM-8): RNE32(alpha y).  y and alpha are FP32 values, so their float64
    product is exact (48 bits, exponents far inside float64's range) and one IEEE
    conversion rounds it; IEEE signs: a zero or underflowing result keeps the sign of
    alpha y."""
    return float(np.float32(y * alpha))


@gemm_jit
def finish(y, fin):
    """Steps 6-7 on the chain's FP32 result (FinishSpec ``fin``)."""
    if fin.snap_bits != NO_SNAP:
        y = snap(y, fin.snap_bits)
    if fin.scaled:
        y = scale_by_alpha(y, fin.alpha)
    return y
