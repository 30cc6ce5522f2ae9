"""The chain-step variants of the fast GEMM: faster forms of the scalar steps of
:mod:`fpspec.fast.chain` (steps 3-7 of FPS-GEMM-1, docs/gemm.rst), each bit-equal to a
scalar twin by a test, all listed in one table, :data:`VARIANTS`.

A variant does a step's job in another shape: for a whole row of outputs at once
(``*_row``), without branches on the values (so that a row goes through in vector
lanes), on a float64 bit pattern, in binary32 lanes, or on a group sum carried as a
float64 (the BLAS partials of :mod:`fpspec.fast.partials`).  It never decides
anything the scalar step does not: each equals its twin wherever its kernel calls it,
and the table says which twin and which test pins the two together.  The chain's loop,
the steps' order and their numbers are drawn once, in :mod:`fpspec.fast.chain`.

==========  ==================================  =======================================
step        variant (this module)               scalar twin
==========  ==================================  =======================================
3 window    :func:`keep_magnitude`,             ``chain.keep`` (TRUNCATE, FLOOR)
            :func:`keep_floor`
3 window    :func:`accumulator_exponent_row`    ``chain.accumulator_exponent``
3 window    :func:`bits_below`                  ``spans.lsb_of`` (c's lsb below 2^q)
4 sum       :func:`accumulate_rtz_bits`,        ``chain.accumulate``
            :func:`accumulate_row`,
            :func:`accumulate_exact64`,
            :func:`accumulate_row_rne_rtz`,
            :func:`accumulate_row_window`
5 promote   :func:`after_group_row`,            ``chain.after_group``
            :func:`after_group_fp32`
5 promote   :func:`add_rne32`                   ``fp32.add_round`` (RNE, FP32)
6-7 finish  :func:`finish_row`                  ``chain.finish``
==========  ==================================  =======================================

``tests/test_gemm_steps.py`` walks :data:`VARIANTS`: every compiled function of this
module is a listed variant (or a listed helper, :data:`HELPERS`), every twin and every
pinning test exists, so the table cannot fall behind the code.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from ..models import ZERO_ALIGNMENT_EXPONENT
from .chain import (CONTINUE, END_SLICE, FLOOR, NO_ROUNDING, NO_SNAP, NO_TERMS, NO_WINDOW, PROMOTE, accumulate,
                    after_group, bits_float, float_bits, scale_by_alpha)
from .fp32 import (FLOAT64_BITS, POW2, POW2_HI, POW2_LO, RNE, RTZ, add_round, add_round_fp32, round_fp32_pair)
from .jit import gemm_jit

__all__ = ["ChainVariant", "VARIANTS", "HELPERS", "keep_magnitude", "keep_floor", "accumulator_exponent_row",
           "bits_below", "accumulate_rtz_bits", "accumulate_row", "accumulate_exact64", "accumulate_row_rne_rtz",
           "is_seed_pair", "accumulate_row_window", "after_group_fp32", "add_rne32", "after_group_row",
           "finish_row"]


# ================================================================ step 3
@gemm_jit(inline=True)
def keep_magnitude(s, r):
    """:func:`~fpspec.fast.chain.keep` (s, -r, TRUNCATE) without branches, for an int32 s with abs(s) < 2^31
    and r >= 0: the magnitude shifted right by r (a count clamped to [0, 31]: a magnitude
    below 2^31 shifted by 31 or more is 0, as keep's), the sign put back.  Everything
    stays in int32 (a right shift only: no bit leaves the top), so a loop of it vectorises
    to 16 lanes; a zero s keeps 0 whatever r is."""
    neg = np.int32(s >> 31)  # -1 for a negative s, else 0
    mag = np.int32((s ^ neg) - neg)
    t = np.int32(mag >> np.int32(min(max(r, 0), 31)))
    return np.int32((t ^ neg) - neg)


@gemm_jit(inline=True)
def keep_floor(s, r):
    """:func:`~fpspec.fast.chain.keep` (s, -r, FLOOR) without branches, for an int32 s and r >= 0: s shifted
    arithmetically right by r (floor toward -inf; a count clamped to [0, 31]: -1 or 0
    beyond, as keep's); a zero s keeps 0 whatever r is."""
    return np.int32(s >> np.int32(min(max(r, 0), 31)))


#: Fields of an IEEE binary64 bit pattern (:func:`~fpspec.fast.chain.float_bits`).
_F64_FRACTION = (1 << 52) - 1
_F64_IMPLICIT = 1 << 52
_F64_MAGNITUDE = (1 << 63) - 1
_F64_BIAS = 1023
_F64_NONFINITE = 1024  # the unbiased exponent field of Inf and NaN


@gemm_jit(inline=True)
def _f64_exponent(b):
    """The unbiased exponent field of a float64 bit pattern b (floor(log2|v|) for a normal v)."""
    return ((b >> 52) & 0x7FF) - _F64_BIAS


@gemm_jit
def accumulator_exponent_row(c, emax, spec):
    """``emax[j] = accumulator_exponent(c[j], spec)`` for every finite c[j] and NO_TERMS for
    an Inf or NaN (which takes no part in step 3), for a row of accumulators, without
    branches: c[j] is an FP32 value held in float64, so a finite nonzero one is a normal
    float64 whose exponent field is floor(log2|c|)."""
    none = NO_TERMS
    zero = ZERO_ALIGNMENT_EXPONENT if spec.zero_terms else none
    for j in range(c.size):
        b = float_bits(c[j])
        ex = _f64_exponent(b)
        e = ex if ex > spec.acc_emin else spec.acc_emin
        e = zero if (b & _F64_MAGNITUDE) == 0 else e
        emax[j] = none if ex == _F64_NONFINITE else e


@gemm_jit(inline=True)
def bits_below(b, q):
    """Whether the float64 with bit pattern b, finite and zero or normal (a binary32 value
    held in float64), has a set significand bit below 2^q, without branches: its 53-bit
    significand m (0 for a zero) weighs 2^(x - 52), so the bits below 2^q are m's lowest
    q - (x - 52) (clamped to [0, 63]; m < 2^53)."""
    m = ((b & _F64_FRACTION) | _F64_IMPLICIT) & -np.int64((b & _F64_MAGNITUDE) != 0)
    below = min(max(q - (_f64_exponent(b) - 52), 0), 63)
    return (m & ((np.int64(1) << below) - 1)) != 0


# ================================================================ step 4
@gemm_jit(inline=True)
def accumulate_rtz_bits(c, acc, e, spec):
    """:func:`~fpspec.fast.chain.accumulate` (c, acc, e, spec) for a fused window model with RTZ accumulation
    as a float64 bit pattern, without branches, and whether that lane must take
    :func:`~fpspec.fast.chain.accumulate` instead (c not finite, or the result at or above 2^(top - 1) of the
    lattice, where overflow rules apply).  Requires abs(acc) + 2^(F + 1) < 2^53 and, for a
    finite nonzero c, e + F >= its alignment exponent (E counts c, as in a fused window),
    so that c's kept part is below 2^(F + 1).

    c = (-1)^s m 2^(x - 52) from its bit pattern (m the 53-bit significand, 0 for c = 0);
    its kept part keep(+-m, x - 52 - e, below) is the shifted m (rounded up in magnitude
    for a negative c under FLOOR; a shift count of at least 62 leaves 0, or 1 so rounded,
    as keep's).  The exact sum t = acc + kept c is below 2^53, so float64(|t|) is exact;
    its exponent field gives p = floor(log2|t|) + e, the lattice quantum is
    2^(max(p, emin) - bits), and RTZ to it clears the float64 fraction bits below it:
    52 - bits + max(emin - p, 0) of them (all of t when that is 53 or more: the result is
    +0, as round_acc_int's).  Adding e to the exponent field scales the result by 2^e
    (a normal float64: it is at least 2^(emin - bits)); the sign is t's; a zero is +0."""
    lat = spec.lattice
    b = float_bits(c)
    x = _f64_exponent(b)
    m = ((b & _F64_FRACTION) | _F64_IMPLICIT) & -np.int64((b & _F64_MAGNITUDE) != 0)
    cneg = -np.int64(b < 0)  # -1 for a negative c, else 0
    dc = x - 52 - e
    left = min(max(dc, 0), 62)
    right = min(max(-dc, 0), 62)
    up = ((np.int64(1) << right) - 1) & (cneg & -np.int64(spec.below == FLOOR))
    kept = ((m << left) + up) >> right
    t = np.int64(acc) + ((kept ^ cneg) - cneg)
    neg = -np.int64(t < 0)
    mag = (t ^ neg) - neg
    fb = float_bits(np.float64(mag))
    p = _f64_exponent(fb) + e
    clear = 52 - lat.bits + max(lat.emin - p, 0)
    kept_bits = fb & (np.int64(-1) << min(clear, 62))
    out = ((kept_bits + (e << 52)) | (neg << 63)) & -np.int64((clear <= 52) & (mag != 0))
    return out, (x == _F64_NONFINITE) | ((mag != 0) & (p >= lat.top - 1))


@gemm_jit
def accumulate_row(c, acc, emax, spec, fresh):
    """``c[j] = accumulate(c[j], acc[j], emax[j] - F, spec)`` for a row of outputs (acc[j]
    the kept sum of output j's group in quanta 2^(emax[j] - F)).  A fused window model
    with RTZ accumulation (requiring abs(acc) + 2^(F + 1) < 2^53 and emax[j] >= c[j]'s
    alignment exponent) takes the branch-free
    :func:`accumulate_rtz_bits` across the row (into ``fresh``, int64 scratch of the row's
    length), then :func:`~fpspec.fast.chain.accumulate` for the few lanes near overflow or with a non-finite
    c; every other model takes :func:`~fpspec.fast.chain.accumulate` lane by lane."""
    window = spec.window
    if not (spec.fused and window != NO_WINDOW and spec.accumulate_rounding == RTZ):
        for j in range(c.size):
            c[j] = accumulate(c[j], np.int64(acc[j]), np.int64(emax[j]) - window, spec)
        return
    left = 0
    for j in range(c.size):
        r, hard = accumulate_rtz_bits(c[j], acc[j], np.int64(emax[j]) - window, spec)
        fresh[j] = r
        left += hard
    if left:
        for j in range(c.size):
            r, hard = accumulate_rtz_bits(c[j], acc[j], np.int64(emax[j]) - window, spec)
            if hard:
                fresh[j] = float_bits(accumulate(c[j], np.int64(acc[j]), np.int64(emax[j]) - window, spec))
    for j in range(c.size):
        c[j] = bits_float(fresh[j])


@gemm_jit(inline=True)
def accumulate_exact64(c, x, low, spec):
    """:func:`fpspec.fast.chain.accumulate` of a group's exact sum held as the float64 x, a
    multiple of 2^low below 2^(low + 53): the same step, with the sum carried as a float64
    where accumulate would turn it back into one.  Not fused with a group rounding, accumulate
    rounds its integer s 2^e (|s| < 2^53, e in range) by ``round_fp32_int``, which is
    ``round_fp32_pair(s 2^e, 0)``, i.e. ``round_fp32_pair(x, 0)``; every other model takes
    accumulate itself with s = x 2^-low (exact)."""
    if not spec.fused and spec.group_rounding != NO_ROUNDING:
        if x == 0.0:
            return c  # p = +0: c is already on the accumulator's lattice (as accumulate)
        p = round_fp32_pair(x, 0.0, spec.group_rounding)
        if spec.fp32_lattice:
            return add_round_fp32(c, p, spec.accumulate_rounding)
        return add_round(c, p, spec.accumulate_rounding, spec.lattice)
    if x == 0.0:
        return accumulate(c, np.int64(0), 0, spec)
    return accumulate(c, np.int64(x * POW2[-low - POW2_LO]), low, spec)


#: binary32 constants of :func:`accumulate_row_rne_rtz`: the largest finite value, 1 - 2^-24
#: (|f| times it, rounded, is the binary32 value below a normal |f|), the smallest subnormal.
_F32_MAX = np.float32(3.4028234663852886e38)
_F32_BELOW = np.float32(1.0 - 2.0 ** -24)
_F32_TINY = np.float32(2.0 ** -149)
_F32_ZERO = np.float32(0.0)
_F32_INF = np.float32(np.inf)


@gemm_jit(inline=True)
def accumulate_row_rne_rtz(c, x):
    """:func:`accumulate_exact64` for a row of outputs under the seed models' rounding pair
    (not fused, group RNE to FP32, accumulator RTZ to FP32 with IEEE overflow): c[j] =
    RTZ32(c[j] + RNE32(x[j])), each x[j] an exact float64 and each c[j] a binary32 value
    held as a float64, written in binary32 arithmetic without branches so that the row's
    outputs go through together (16 lanes of a 512-bit vector).

    1. p = RNE32(x) by conversion (``round_fp32_pair`` of an exact value).
    2. s = RNE32(c + p) and its error e (TwoSum in binary32: s + e = c + p exactly, when s
       is finite).
    3. RTZ32(c + p) is s where e is zero or of s's sign (s is not above the exact sum in
       magnitude), else the binary32 value one step toward zero from s: the smaller of
       RNE32(|s| (1 - 2^-24)) (exact step below a normal |s|: |s| 2^-24 lies between half
       a step and a step below it) and RNE32(|s| - 2^-149) (exact step below a subnormal one).
    4. Overflow: s = Inf from finite c and p means |c + p| is past the largest finite value,
       which RTZ gives; an Inf p (x overflowed in step 1) or an Inf c stands, as IEEE
       addition gives it (e is NaN then, never of the other sign).
    5. The result, with s's sign (+0 for a zero: c + 0.0), back to the row: a binary32
       value, stored exactly in a float64 or a float32 row (float32 c and x keep every
       step in binary32 lanes, twice as many per vector as with float64 rows: 0.52 against
       1.3 ns per output in one session).

    Equal to ``accumulate`` by test (``tests/test_gemm_partials.py``)."""
    for j in range(c.size):
        p = np.float32(x[j])                                   # 1.
        cj = np.float32(c[j])
        s = cj + p                                             # 2.
        bp = s - cj
        e = (cj - (s - bp)) + (p - bp)
        a = abs(s)                                             # 3.
        inward = ((e < _F32_ZERO) & (s > _F32_ZERO)) | ((e > _F32_ZERO) & (s < _F32_ZERO))
        r = min(a * _F32_BELOW, a - _F32_TINY) if inward else a
        overflow = (a == _F32_INF) & (abs(cj) < _F32_INF) & (abs(p) < _F32_INF)  # 4.
        r = _F32_MAX if overflow else r
        c[j] = math.copysign(r, s) + _F32_ZERO                 # 5.


@gemm_jit
def is_seed_pair(spec):
    """Whether the chain is the seed models' rounding pair (no window, not fused, group RNE
    to FP32, accumulator RTZ on the FP32 lattice): the chain :func:`accumulate_row_rne_rtz`
    computes, whose state c is always a binary32 value, held in a float32 array by
    :func:`~fpspec.fast.partials.chain_partials_seed`."""
    return (spec.window == NO_WINDOW and not spec.fused and spec.group_rounding == RNE
            and spec.accumulate_rounding == RTZ and spec.fp32_lattice)


@gemm_jit
def accumulate_row_window(c, x, low_i, low_b, ae_i, ae_b, spec, emax, left):
    """Step 4 of a fused window model with RTZ accumulation for a row of outputs whose
    partials ``x[j]`` are exact (the float64 half of the guard holds for the row), on the
    float64 bit pattern (:func:`accumulate_rtz_bits`), with the window
    half of the guard per lane.  ``low_i``, ``ae_i``: the row's smallest lsb exponent and
    largest alignment exponent in the group; ``low_b``, ``ae_b``: the columns'.  Sets
    ``c[j]`` where the lane is done and ``left[j] = 1`` where it is not (c not finite,
    nothing aligns, a product or c with bits below the window, a sum too wide for the bit
    pattern's step, or a result near overflow): those take the pair's own step
    (:func:`~fpspec.fast.partials.chain_partials`), which decides between accumulate and the fallback.  The same
    guard and the same results, lane by lane, as that step (``tests/test_gemm_partials.py``).

    1. ec = c's alignment exponent (NO_TERMS for an Inf or NaN c);
    2. E = max(AEA + AEB, ec), raised to the exponent floor (NO_TERMS: nothing aligns, left);
    3. q = E - F; every product whole in the window (LA + LB >= q), and c's kept part
       whole: no set bit of c's significand below 2^q (the same test as c's lsb >= q);
    4. x 2^-q (2^-q from its bit pattern, q in the pair step's range) is an integer (3.);
       below 2^53 - 2^(F + 1) it is ``accumulate_rtz_bits``'s acc;
    5. the bit pattern's sum rounded RTZ is c, unless it is near the lattice's top.
    No branch on the values: the row goes through together."""
    accumulator_exponent_row(c, emax, spec)                                     # 1.
    window = spec.window
    wide = math.ldexp(1.0, FLOAT64_BITS) - math.ldexp(1.0, window + 1)
    for j in range(c.size):
        ec = emax[j]
        none = (ae_i == NO_TERMS) | (ae_b[j] == NO_TERMS)
        e = max(NO_TERMS if none else ae_i + np.int64(ae_b[j]), ec)            # 2.
        bad = e == NO_TERMS
        e = max(e, spec.exponent_floor)
        q = e - window                                                          # 3.
        bad |= not math.isfinite(c[j])
        bad |= bits_below(float_bits(c[j]), q)
        bad |= low_i + np.int64(low_b[j]) < q
        bad |= (q < -POW2_HI) | (q > -POW2_LO)                                  # 4.
        qq = min(max(q, -POW2_HI), -POW2_LO)
        a = x[j] * bits_float(np.int64(1023 - qq) << 52)
        bad |= abs(a) >= wide
        r, hard = accumulate_rtz_bits(c[j], np.int64(0.0 if bad else a), q, spec)  # 5. (a select, not a branch)
        bad |= hard
        left[j] = bad
        c[j] = c[j] if bad else bits_float(r)


# ================================================================ step 5
@gemm_jit(inline=True)
def after_group_fp32(c, big, total, action, promotes):
    """:func:`~fpspec.fast.chain.after_group` on np.float32 values when every addition of the chain is FP32
    RNE (promotion_rounding ``rne``): IEEE float32 ``+`` is exactly that addition, so
    the sequential FP32 kernel keeps its chain in native float32 arithmetic."""
    if action == PROMOTE:
        return np.float32(0.0), big + c, total
    if action == END_SLICE:
        r = big + c if promotes else c
        return np.float32(0.0), np.float32(0.0), total + r
    return c, big, total


@gemm_jit(inline=True)
def add_rne32(x, y):
    """``add_round(x, y, RNE, FP32_LATTICE)`` for two FP32 values held in float64, without
    branches: RNE32 of their float64 sum.  Rounding the sum of two binary32 numbers to
    binary64 and then to binary32 equals rounding it to binary32 once (double rounding of
    a sum is innocuous when the wider format has at least 2p + 1 bits, 53 >= 2 x 24 + 1;
    Figueroa, "When is double rounding innocuous?", 1995), so TwoSum's error never changes
    this rounding; Inf and NaN follow IEEE addition, which is ``add_specials``; a zero sum
    is +0."""
    return np.float64(np.float32(x + y)) + 0.0


@gemm_jit
def after_group_row(c, big, total, action, spec):
    """:func:`~fpspec.fast.chain.after_group` for a row of outputs (arrays c, big, total); a promotion with
    ``promotion_rounding`` RNE through the branch-free :func:`add_rne32`."""
    if action == CONTINUE:
        return
    if action == PROMOTE and spec.promotion_rounding == RNE:
        for j in range(c.size):
            big[j] = add_rne32(big[j], c[j])
            c[j] = 0.0
        return
    for j in range(c.size):
        c[j], big[j], total[j] = after_group(c[j], big[j], total[j], action, spec)


# ============================================================ steps 6-7
@gemm_jit(inline=True)
def finish_row(total, out, fin):
    """:func:`~fpspec.fast.chain.finish` for a row of outputs: ``out[j] = finish(total[j], fin)``, with no
    branch on the values, so that the row goes through together.  Step 6 as ``rint(y 2^L) 2^-L``: y
    2^L and the product by 2^-L are exact (y is an FP32 value, L small), IEEE rint rounds
    half to even and keeps the sign of a zero (-0.4 -> -0, as :func:`~fpspec.fast.chain.snap`), and passes
    Inf and NaN through; step 7 is :func:`~fpspec.fast.chain.scale_by_alpha` itself.  Equal to ``finish`` by
    test (``tests/test_gemm_chain.py``)."""
    snapped = fin.snap_bits != NO_SNAP
    up = math.ldexp(1.0, fin.snap_bits) if snapped else 1.0
    down = math.ldexp(1.0, -fin.snap_bits) if snapped else 1.0
    for j in range(total.size):
        y = total[j]
        if snapped:
            y = np.rint(y * up) * down
        if fin.scaled:
            y = scale_by_alpha(y, fin.alpha)
        out[j] = y


# ================================================================ the table
class ChainVariant(NamedTuple):
    """One chain-step variant and what pins it: ``fast``, the compiled variant (this
    module); ``twin``, the scalar step of the fast chain it equals (a dotted name);
    ``exact``, the step of the exact spec (:mod:`fpspec.exact.accumulate`) both twin;
    ``step``, the step number(s) of FPS-GEMM-1; ``where``, when a kernel takes it;
    ``test``, the pytest node id of the test that checks ``fast`` against ``twin`` (or,
    where it says so, against the exact spec through its kernel)."""

    fast: Callable
    twin: str
    exact: str
    step: str
    where: str
    test: str

    @property
    def name(self) -> str:
        """The variant's function name."""
        return self.fast.__name__


_NARROW = "tests/test_gemm_narrow.py::"
_PARTIALS = "tests/test_gemm_partials.py::"
_STEPS = "tests/test_gemm_steps.py::"
_ACCUMULATE = "fpspec.fast.chain.accumulate"
_GROUP_STEP = "fpspec.exact.accumulate.group_step"
_PROMOTE = "fpspec.exact.accumulate.promote"

#: Every chain-step variant, its scalar twin and the test that pins the two together.
VARIANTS: tuple[ChainVariant, ...] = (
    ChainVariant(keep_magnitude, "fpspec.fast.chain.keep", "fpspec.exact.accumulate.align_group", "3",
                 "int32 kept terms, below_window truncate (narrow window kernel)",
                 _NARROW + "test_fpsgemm10_branch_free_keep_equals_keep"),
    ChainVariant(keep_floor, "fpspec.fast.chain.keep", "fpspec.exact.accumulate.align_group", "3",
                 "int32 kept terms, below_window floor (narrow window kernel)",
                 _NARROW + "test_fpsgemm10_branch_free_keep_equals_keep"),
    ChainVariant(accumulator_exponent_row, "fpspec.fast.chain.accumulator_exponent",
                 "fpspec.exact.accumulate.accumulator_exponent", "3",
                 "a row of accumulators (narrow window kernel, accumulate_row_window)",
                 _NARROW + "test_fpsgemm10_accumulator_exponent_row"),
    ChainVariant(bits_below, "fpspec.fast.spans.lsb_of", "fpspec.exact.accumulate.align_group", "3",
                 "c's kept part whole in the window, a row at once (accumulate_row_window)",
                 _STEPS + "test_fpsgemm24_bits_below_equals_lsb_of"),
    ChainVariant(accumulate_rtz_bits, _ACCUMULATE, _GROUP_STEP, "4",
                 "fused window, RTZ accumulation, away from overflow (accumulate_row, accumulate_row_window)",
                 _NARROW + "test_fpsgemm10_accumulate_row_equals_accumulate"),
    ChainVariant(accumulate_row, _ACCUMULATE, _GROUP_STEP, "4", "a row of kept sums (narrow window kernel)",
                 _NARROW + "test_fpsgemm10_accumulate_row_equals_accumulate"),
    ChainVariant(accumulate_exact64, _ACCUMULATE, _GROUP_STEP, "4",
                 "a group sum carried as an exact float64, no window (BLAS partials)",
                 _STEPS + "test_fpsgemm24_accumulate_exact64_equals_accumulate"),
    ChainVariant(accumulate_row_rne_rtz, _ACCUMULATE, _GROUP_STEP, "4",
                 "the seed models' rounding pair (is_seed_pair), a row of exact partials",
                 _PARTIALS + "test_fpsgemm23_row_rounding_equals_accumulate"),
    ChainVariant(accumulate_row_window, _ACCUMULATE, _GROUP_STEP, "3-4",
                 "fused window, RTZ accumulation, a row of exact partials (BLAS partials)",
                 _PARTIALS + "test_fpsgemm23_window_row_equals_accumulate"),
    ChainVariant(after_group_row, "fpspec.fast.chain.after_group", _PROMOTE, "5", "a row of outputs (row kernels)",
                 _NARROW + "test_fpsgemm6_add_rne32_equals_add_round"),
    ChainVariant(after_group_fp32, "fpspec.fast.chain.after_group", _PROMOTE, "5",
                 "every addition FP32 RNE, the chain in float32 (gemm_fp32_rows)",
                 _STEPS + "test_fpsgemm6_after_group_fp32_equals_after_group"),
    ChainVariant(add_rne32, "fpspec.fast.fp32.add_round", _PROMOTE, "5",
                 "a promotion with promotion_rounding rne (after_group_row)",
                 _NARROW + "test_fpsgemm6_add_rne32_equals_add_round"),
    ChainVariant(finish_row, "fpspec.fast.chain.finish", "fpspec.exact.accumulate.finish", "6-7",
                 "a row of outputs (row kernels, BLAS partials)",
                 "tests/test_gemm_chain.py::test_fpsgemm10_finish_row_equals_finish"),
)

#: The compiled functions of this module that are no variant: the test of where
#: :func:`accumulate_row_rne_rtz` applies, and a bit-field read the variants share.
HELPERS: tuple[Callable, ...] = (is_seed_pair, _f64_exponent)
