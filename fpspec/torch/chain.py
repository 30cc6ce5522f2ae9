"""The chain of a GEMM output on torch tensors: steps 2-7 of FPS-GEMM-1, the torch twin of
:mod:`fpspec.fast.chain` (and of the FP32 roundings of :mod:`fpspec.fast.fp32`) (docs/gemm.rst,
docs/torch.rst).

The fast chain runs one output (or one row of outputs) at a time; here every step runs on a
whole tile of outputs at once, a tensor of any shape (``(rows, cols)`` for a GEMM, ``(rows,)``
for a row-wise dot), each output with its own chain state.  The steps keep the fast twin's names
and numbers:

====================================  ===============================================
fast twin (:mod:`fpspec.fast.chain`)  torch twin (this module)
====================================  ===============================================
step 2 :func:`chain_plan`             :func:`chain_plan`: the groups as data (a :class:`Plan`
                                      of host integers), the same cut of K
step 3 ``align_group``,               :func:`align_group`, :func:`lane_window`,
``lane_window``, ``keep``             :func:`keep`, :func:`accumulator_exponent`
steps 3-4 ``group_step``              :func:`group_step` (a group's :class:`GroupTerms`)
step 4 ``accumulate``, ``join``       :func:`accumulate`, :func:`join`
step 5 ``after_group``                :func:`after_group`
steps 6-7 ``snap``,                   :func:`snap`, :func:`scale_by_alpha`, :func:`finish`
``scale_by_alpha``, ``finish``
FP32 roundings (:mod:`fpspec.fast.fp32`)  :func:`round_acc_int`, :func:`round_acc_terms`,
                                      :func:`add_round` (one carrier: an integer s 2^e)
====================================  ===============================================

The loop, drawn once (:func:`fpspec.torch.accumulate.gemm_torch` runs it per tile of outputs)::

    c = big = total = zeros(tile)                            # float64 tensors of FP32 values
    for g in range(len(plan.start)):                         # step 2: the planned groups
        terms = <the terms of products plan.start[g] .. plan.stop[g] - 1>   # step 1 (kernels.py)
        c = group_step(c, terms, spec)                       # steps 3-4
        c, big, total = after_group(c, big, total, plan.action[g], spec)    # step 5
    y = finish(total, fin)                                   # steps 6-7

Why every bit is the spec's (the exactness argument):

* **Carriers.**  A chain value (c, the promotion accumulator C, the slice total, a group's p)
  is an FP32 value, or a value of the accumulator's lattice (<= 24 significant bits), held in a
  float64 tensor: exact.  Every other value is an integer pair ``s 2^e`` in int64 tensors.  A
  float64 carrier is read through its bit pattern (``view(torch.int64)``): the exponent field
  and the 53-bit significand give ``s`` and ``e`` exactly (:func:`split_fp32`: a value of at most
  24 significant bits has its low 29 significand bits zero, so ``s < 2^24``); a result is written
  as a bit pattern (:func:`compose`) from its sign, integer significand and exponent.  No
  float operation decides a bit of the chain.
* **Integers.**  Products, kept terms, shifts and sums are int64 operations; every sum is
  bounded below 2^62 (the window and join bounds of :func:`fpspec.torch.accumulate.gemm_declines_torch`,
  the fast twin's ``exact_only_reason``; an exact group sum is taken in int64 only where its span
  fits, :func:`sum_terms`, and else in 30-bit limbs, exact for any span).  Shift counts are
  clamped to 0..63 and applied only where they are meant (a shift of 64 or more is not defined
  on every device).  ``bitlen`` reads the exponent field of the int64's float64 conversion and
  corrects the one case where that conversion rounded up to the next power of two: exact.
* **Rounding** (:func:`round_acc_int`): the exact value ``s 2^e`` is cut at the lattice's
  quantum 2^(max(floor(log2|x|), emin) - bits) by an integer shift; RNE compares the remainder
  with the half quantum as integers; overflow is a comparison of the rounded exponent with the
  lattice's top.  That is the exact spec's ``round_acc`` (``round_fp32`` for FP32).
* **Specials** (FPS-GEMM-2): where one addend is an Inf or NaN, IEEE float64 ``x + y`` is exactly
  ``add_specials`` (Inf + finite = Inf, Inf - Inf = NaN, NaN absorbs), one IEEE operation whose
  result no rounding touches; a NaN's payload is made canonical at step 8.

Named codes and sentinels have the fast twin's values (``tests/test_torch_gemm.py`` checks them).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import torch

from ..models import ACCUMULATOR_FORMATS, ZERO_ALIGNMENT_EXPONENT, GemmModel

__all__ = ["RNE", "RTZ", "MODE_CODES", "FP32_BITS", "FP32_EMIN", "Lattice", "FP32_LATTICE", "lattice", "ChainSpec",
           "FinishSpec", "Plan", "GroupTerms", "chain_spec", "finish_spec", "chain_plan", "bitlen", "compose",
           "split_fp32", "round_acc_int", "sum_terms", "round_acc_terms", "add_round", "keep", "accumulator_exponent",
           "align_group", "lane_window", "join", "accumulate", "group_step", "after_group", "snap", "scale_by_alpha",
           "finish", "NO_ROUNDING", "TRUNCATE", "FLOOR", "NO_WINDOW", "NO_EXPONENT_FLOOR", "NO_TERMS", "NO_SNAP",
           "NO_SPECIAL", "NO_DROP", "CONTINUE", "PROMOTE", "END_SLICE"]

# ----------------------------------------------------------- named codes (fast.chain, fast.fp32)
#: Rounding-mode codes.
RNE = 0
RTZ = 1
#: Mode name -> code (``rz`` is the GEMM models' alias of ``rtz``).
MODE_CODES: dict[str, int] = {"rne": RNE, "rtz": RTZ, "rz": RTZ}
#: Kept fraction bits and emin of FP32.
FP32_BITS = 23
FP32_EMIN = -126
#: ``group_rounding="none"``: the group's sum joins the accumulator exactly.
NO_ROUNDING = 2
#: ``below_window`` codes: magnitude truncation, and truncation toward minus infinity.
TRUNCATE = 0
FLOOR = 1
#: ``window_bits=None``: no alignment window.
NO_WINDOW = -(1 << 30)
#: ``align_exponent_floor=None``.
NO_EXPONENT_FLOOR = -(1 << 30)
#: Alignment exponent of a term (or group) that takes no part in step 3.
NO_TERMS = -(1 << 30)
#: ``snap_bits=None``.
NO_SNAP = -(1 << 30)
#: The special value of a group whose terms are all finite.
NO_SPECIAL = 0.0
#: ``join_drop_bits=None``.
NO_DROP = -(1 << 30)
#: What follows a planned group (step 5).
CONTINUE = 0
PROMOTE = 1
END_SLICE = 2

#: float64 bit fields.
_F64_FRACTION = (1 << 52) - 1
_F64_IMPLICIT = 1 << 52
_F64_BIAS = 1023
_F64_SIGN = -(1 << 63)
#: Bits below a value of <= 24 significant bits in a float64 significand (53 - 24).
_LOW_BITS = 29
#: Limb width of the wide exact sum.
_LIMB = 30
_LIMB_MASK = (1 << _LIMB) - 1
#: Beyond every real exponent (the empty min / max of a span).
_FAR = 1 << 40


class Lattice(NamedTuple):
    """The values an accumulator rounding produces (``round_acc``'s arguments): ``bits`` fraction
    bits at exponent max(e, ``emin``), magnitudes >= 2^``top`` overflow (Inf under RNE; under RTZ
    Inf when ``overflow_inf``, else the largest lattice value)."""

    bits: int
    emin: int
    top: int
    overflow_inf: bool


#: FP32 with IEEE overflow.
FP32_LATTICE = Lattice(FP32_BITS, FP32_EMIN, 128, False)


def lattice(bits: int = FP32_BITS, emin: int = FP32_EMIN, top: int = 128, overflow_inf: bool = False) -> Lattice:
    return Lattice(int(bits), int(emin), int(top), bool(overflow_inf))


class ChainSpec(NamedTuple):
    """Steps 3-5 of a :class:`~fpspec.models.GemmModel` (the fields of the fast twin's
    ``ChainSpec``)."""

    fused: bool
    window: int                 # F = window_bits, or NO_WINDOW
    below: int                  # TRUNCATE or FLOOR
    exponent_floor: int         # align_exponent_floor, or NO_EXPONENT_FLOOR
    group_rounding: int         # RNE, RTZ or NO_ROUNDING
    accumulate_rounding: int    # RNE or RTZ
    lattice: Lattice            # accumulate_bits in the accumulator format, accumulate_overflow
    promotes: bool              # promotion_interval is set
    promotion_rounding: int     # RNE or RTZ
    zero_terms: bool            # zero_alignment="emin"
    acc_emin: int               # emin of c's alignment exponent (FP32 -126, FP16 -14)
    lanes: int                  # window_lanes
    join: bool                  # join_sum_bits is set
    join_sum: int
    join_c: int
    join_drop: int              # join_drop_bits, or NO_DROP
    join_below: int             # TRUNCATE or FLOOR
    product_overflow: bool      # product_overflow="inf"
    signed_zero: bool           # chain_zero="signed"


class FinishSpec(NamedTuple):
    """Steps 6-7 (step 8 is applied to the whole output)."""

    snap_bits: int              # L, or NO_SNAP
    scaled: bool                # an alpha applies
    alpha: float                # the FP32 alpha (0.0 when not scaled)


class Plan(NamedTuple):
    """Step 2 as data (host integers): group g holds products ``start[g] .. stop[g] - 1`` and is
    followed by ``action[g]``; ``longest`` is the most products a group holds."""

    start: tuple[int, ...]
    stop: tuple[int, ...]
    action: tuple[int, ...]
    longest: int


class GroupTerms(NamedTuple):
    """Step 1's output for one group of a tile of outputs (shape S): ``sig``, ``lsb``, ``aexp``
    int64 (S + (n,)): term i is ``sig 2^lsb`` with alignment exponent ``aexp`` (NO_TERMS: it takes
    no part in step 3; a left-out term has sig 0); ``special`` (S) the IEEE sum of the group's
    non-finite terms (NO_SPECIAL where none; None: no output has one), ``overflow`` (S) the IEEE
    sum of its products >= 2^128 under ``product_overflow`` (NO_SPECIAL / None likewise)."""

    sig: torch.Tensor
    lsb: torch.Tensor
    aexp: torch.Tensor
    special: torch.Tensor | None
    overflow: torch.Tensor | None


def chain_spec(model: GemmModel) -> ChainSpec:
    """The model's steps 3-5 as named codes (as :func:`fpspec.fast.chain.chain_spec`)."""
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
        signed_zero=model.chain_zero == "signed")


def finish_spec(model: GemmModel, alpha: Fraction | None) -> FinishSpec:
    """Steps 6-7; ``alpha`` is the FP32 alpha (or None)."""
    return FinishSpec(snap_bits=NO_SNAP if model.snap_bits is None else model.snap_bits,
                      scaled=alpha is not None, alpha=0.0 if alpha is None else float(alpha))


def _tile_bounds(s0: int, s1: int, model: GemmModel) -> list[int]:
    """The K tiles of one slice as their starts plus the slice end (FPS-GEMM-23; exact:
    ``tile_groups``, fast: ``_tile_bounds``)."""
    n = s1 - s0
    unit = model.k_tile or model.group_size or max(n, 1)
    r = n % unit
    head = r if (r and model.slice_residue == "first") else 0
    cuts = list(range(s0 + head, s1, unit))
    if head:
        cuts = [s0] + cuts
    return cuts + [s1]


def chain_plan(k: int, model: GemmModel) -> Plan:
    """Step 2 and the K slices of step 5 (FPS-GEMM-1, -6, -14, -23) for K products: the slices of
    ``slice_lengths``, each cut into K tiles, each tile into groups of ``group_size`` from the
    tile start; a group after which the slice has done a multiple of ``promotion_interval``
    products is followed by a promotion, a slice's last group by the end of the slice (the same
    plan as :func:`fpspec.fast.chain.chain_plan`, as host integers)."""
    start: list[int] = []
    stop: list[int] = []
    action: list[int] = []
    s0 = 0
    for length in model.slice_lengths(k):
        s1 = s0 + length
        bounds = _tile_bounds(s0, s1, model)
        first = len(start)
        for t0, t1 in zip(bounds[:-1], bounds[1:]):
            g = model.group_size or (t1 - t0)
            for g0 in range(t0, t1, g):
                start.append(g0)
                stop.append(min(g0 + g, t1))
                action.append(CONTINUE)
        if model.promotion_interval is not None:
            interval = min(model.promotion_interval, length + 1)  # longer: only the slice end
            for i in range(first, len(start)):
                if (stop[i] - s0) % interval == 0:
                    action[i] = PROMOTE
        if len(start) > first:
            action[-1] = END_SLICE
        s0 = s1
    longest = max((b - a for a, b in zip(start, stop)), default=0)
    return Plan(tuple(start), tuple(stop), tuple(action), longest)


# ===================================================== bit fields and integer helpers
def _i64(x, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(x, dtype=torch.int64, device=like.device)


def bitlen(x: torch.Tensor) -> torch.Tensor:
    """The bit length of every non-negative int64 (0 for 0): the exponent field of its float64
    conversion plus one, less one where the conversion rounded up to the next power of two
    (x below 2^(estimate - 1)); exact for every x < 2^63."""
    f = x.to(torch.float64)
    est = ((f.view(torch.int64) >> 52) & 0x7FF) - (_F64_BIAS - 1)
    est = torch.where(x == 0, torch.zeros_like(est), est)
    over = (x >> (est - 1).clamp(0, 63)) == 0
    return torch.where((x != 0) & over, est - 1, est)


def compose(neg: torch.Tensor, k: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """The float64 (-1)^neg k 2^e written as its bit pattern, for 0 <= k < 2^53 and k 2^e zero or
    in float64's normal range (every chain value is: 2^-149 .. 2^128); +0 for k = 0."""
    nk = bitlen(k)
    field = (e + nk - 1 + _F64_BIAS).clamp(1, 2046)
    frac = (k << (53 - nk).clamp(0, 53)) & _F64_FRACTION
    bits = (field << 52) | frac
    bits = torch.where(k == 0, torch.zeros_like(bits), bits)
    bits = torch.where(neg & (k != 0), bits | _F64_SIGN, bits)
    return bits.view(torch.float64)


def split_fp32(c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sig, lsb) of finite values of at most 24 significant bits held in float64 (FP32 values,
    accumulator lattice values): c = sig 2^lsb, |sig| < 2^24, read from the bit pattern (its low
    29 significand bits are zero); (0, 0) for a zero (of either sign), and for an Inf or NaN, which
    every caller takes apart (fast: ``split_fp32``)."""
    b = c.view(torch.int64)
    field = (b >> 52) & 0x7FF
    m = ((b & _F64_FRACTION) | _F64_IMPLICIT) >> _LOW_BITS
    zero = ((b & ~_F64_SIGN) == 0) | (field == 0x7FF)
    sig = torch.where(b < 0, -m, m)
    sig = torch.where(zero, torch.zeros_like(sig), sig)
    lsb = torch.where(zero, torch.zeros_like(field), field - (_F64_BIAS + 52 - _LOW_BITS))
    return sig, lsb


def _shift_left(s: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """s 2^n for n >= 0 where the result fits int64 (sign and magnitude apart: no left shift of a
    negative number)."""
    n = n.clamp(0, 62)
    mag = s.abs() << n
    return torch.where(s < 0, -mag, mag)


def _round_at(mag: torch.Tensor, e: torch.Tensor, q: torch.Tensor, mode: int) -> tuple[torch.Tensor, torch.Tensor]:
    """mag 2^e (0 <= mag < 2^63) rounded with ``mode`` to a multiple k 2^q of 2^q, as (k, q'):
    the value k 2^q' (q' = e where it already is a multiple of 2^q).  RNE: the remainder against
    the half quantum, a tie to the even k; a shift of 64 or more leaves k = 0 and a remainder
    below the half quantum (mag < 2^63 <= 2^(shift - 1))."""
    shift = q - e
    sh = shift.clamp(0, 63)
    k = mag >> sh
    if mode == RNE:
        rem = mag - (k << sh)
        half = torch.ones_like(mag) << (sh - 1).clamp(0, 62)
        up = (shift > 0) & (shift <= 63) & ((rem > half) | ((rem == half) & ((k & 1) == 1)))
        k = k + up.to(torch.int64)
    exact = shift <= 0
    return torch.where(exact, mag, k), torch.where(exact, e, q)


def round_acc_int(s: torch.Tensor, e: torch.Tensor, mode: int, lat: Lattice) -> torch.Tensor:
    """s 2^e (|s| < 2^63) rounded to the lattice ``lat`` with ``mode`` (FPS-GEMM-13): the quantum
    2^(max(floor(log2|x|), emin) - bits); a result of magnitude >= 2^top is Inf (RNE, or RTZ
    with ``overflow_inf``) or the largest lattice value (RTZ); a zero is +0.  The twin of
    :func:`fpspec.fast.fp32.round_acc_int` (exact: ``round_acc``, ``round_fp32``)."""
    neg = s < 0
    mag = s.abs()
    top = e + bitlen(mag) - 1
    q = top.clamp(min=lat.emin) - lat.bits
    k, qe = _round_at(mag, e, q, mode)
    over = (k != 0) & (qe + bitlen(k) - 1 >= lat.top)
    value = compose(neg, k, qe.clamp(-1100, 1100))
    if mode == RNE or lat.overflow_inf:
        big = math.inf
    else:
        big = math.ldexp(float((1 << (lat.bits + 1)) - 1), lat.top - 1 - lat.bits)
    big_t = torch.where(neg, torch.full_like(value, -big), torch.full_like(value, big))
    return torch.where(over, big_t, value)


def _limb_sum(sig: torch.Tensor, lsb: torch.Tensor, base: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact sum of the terms sig 2^lsb of P outputs (P, n) of any exponent span, in 30-bit
    limbs from 2^base (fast: ``_round_acc_limbs``): each term's magnitude in 30-bit chunks, each
    chunk shifted by lsb - base mod 30 (below 2^59) and split into two limbs, scatter-added
    (integers: any order); carries propagated, a negative sum negated; returns (s, e) with s 2^e
    the top two non-zero limbs and a sticky bit below them: |s| < 2^61, and s 2^e rounds to <= 24
    significant bits as the sum does (the round and sticky positions lie inside or below the
    >= 31 bits of the head)."""
    nz = sig != 0
    off = torch.where(nz, lsb - base[:, None], torch.zeros_like(lsb))
    li = torch.div(off, _LIMB, rounding_mode="floor")
    sh = off - li * _LIMB
    mag = sig.abs()
    neg = sig < 0
    nl = int(li.max().item()) + 5
    acc = torch.zeros((sig.shape[0], nl), dtype=torch.int64, device=sig.device)
    for part in range(3):
        chunk = (mag >> (_LIMB * part)) & _LIMB_MASK
        v = chunk << sh
        for half, piece in ((0, v & _LIMB_MASK), (1, v >> _LIMB)):
            acc.scatter_add_(1, li + part + half, torch.where(neg, -piece, piece))

    def carry(a: torch.Tensor) -> None:
        for i in range(nl - 1):
            c = a[:, i] >> _LIMB  # floor: the limb left in [0, 2^30)
            a[:, i] -= c * (1 << _LIMB)
            a[:, i + 1] += c

    carry(acc)
    negative = acc[:, -1] < 0
    acc = torch.where(negative[:, None], -acc, acc)
    carry(acc)
    idx = torch.arange(nl, device=sig.device).expand_as(acc)
    hi = torch.where(acc != 0, idx, torch.zeros_like(idx)).amax(1)
    top = acc.gather(1, hi[:, None])[:, 0]
    below = acc.gather(1, (hi - 1).clamp(min=0)[:, None])[:, 0]
    two = hi >= 1
    head = torch.where(two, top * (1 << _LIMB) + below, top)
    e = base + torch.where(two, (hi - 1) * _LIMB, hi * _LIMB)
    sticky = ((acc != 0) & (idx < (hi - 1)[:, None])).any(1)
    head = head * 2 + sticky.to(torch.int64)
    return torch.where(negative, -head, head), e - 1


def sum_terms(sig: torch.Tensor, lsb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The sum of the terms ``sig 2^lsb`` along the last dimension as (s, e), |s| < 2^62: the exact
    sum s 2^e in int64 where the span allows (max(lsb + bitlen|sig|) - min(lsb) + bitlen(n) <= 62,
    fast: ``round_acc_terms``), else the head and sticky bit of the exact limb sum
    (:func:`_limb_sum`); (0, 0) where every term is zero."""
    nz = sig != 0
    mag = sig.abs()
    lo = torch.where(nz, lsb, _i64(_FAR, lsb)).amin(-1)
    hi = torch.where(nz, lsb + bitlen(mag), _i64(-_FAR, lsb)).amax(-1)
    live = nz.any(-1)
    fits = (hi - lo + int(sig.shape[-1]).bit_length()) <= 62
    base = torch.where(live, lo, torch.zeros_like(lo))
    terms = _shift_left(sig, lsb - base[..., None])
    acc = torch.where(nz & fits[..., None], terms, torch.zeros_like(terms)).sum(-1)
    wide = live & ~fits
    if bool(wide.any()):
        flat = wide.reshape(-1).nonzero()[:, 0]
        n = sig.shape[-1]
        head, e = _limb_sum(sig.reshape(-1, n)[flat], lsb.reshape(-1, n)[flat], base.reshape(-1)[flat])
        acc = acc.reshape(-1).index_put((flat,), head).reshape(acc.shape)
        base = base.reshape(-1).index_put((flat,), e).reshape(base.shape)
    return acc, base


def round_acc_terms(sig: torch.Tensor, lsb: torch.Tensor, mode: int, lat: Lattice) -> torch.Tensor:
    """The exact sum of the terms ``sig 2^lsb`` (last dimension) rounded to ``lat`` (fast:
    ``round_acc_terms``; exact: ``round_acc(sum(terms))``)."""
    s, e = sum_terms(sig, lsb)
    return round_acc_int(s, e, mode, lat)


def add_round(x: torch.Tensor, y: torch.Tensor, mode: int, lat: Lattice) -> torch.Tensor:
    """round(x + y) to ``lat`` for two FP32 (or lattice) values (the accumulator update, the
    promotion, the slice sum; fast: ``add_round``): their exact sum as integers; where one is Inf
    or NaN, IEEE x + y (``add_specials``)."""
    sx, lx = split_fp32(x)
    sy, ly = split_fp32(y)
    r = round_acc_terms(torch.stack((sx, sy), -1), torch.stack((lx, ly), -1), mode, lat)
    return torch.where(torch.isfinite(x) & torch.isfinite(y), r, x + y)


# ================================================================ step 3
def keep(s: torch.Tensor, d: torch.Tensor, below: int) -> torch.Tensor:
    """Step 3 for terms s 2^lsb: their kept parts in quanta of the window, d = lsb - the quantum's
    exponent: s 2^d for d >= 0, else s cut by -d bits (TRUNCATE: the magnitude; FLOOR: the
    arithmetic shift, toward -inf); a count of 63 or more leaves 0 (or -1 for a negative s under
    FLOOR), as ``fast.chain.keep``."""
    right = (-d).clamp(0, 63)
    if below == FLOOR:
        cut = s >> right
    else:
        t = s.abs() >> right
        cut = torch.where(s < 0, -t, t)
    return torch.where(d >= 0, _shift_left(s, d), cut)


def accumulator_exponent(c: torch.Tensor, spec: ChainSpec) -> torch.Tensor:
    """Alignment exponent of the accumulators c: max(floor(log2|c|), emin of the accumulator
    format) from the float64 exponent field (a chain value is a normal float64); for c = 0,
    -126 under ``zero_terms``, else NO_TERMS; NO_TERMS for an Inf or NaN (fast:
    ``accumulator_exponent``, ``accumulator_exponent_row``)."""
    b = c.view(torch.int64)
    field = (b >> 52) & 0x7FF
    e = (field - _F64_BIAS).clamp(min=spec.acc_emin)
    zero = ZERO_ALIGNMENT_EXPONENT if spec.zero_terms else NO_TERMS
    e = torch.where((b & ~_F64_SIGN) == 0, _i64(zero, e), e)
    return torch.where(field == 0x7FF, _i64(NO_TERMS, e), e)


def _floor_exponent(e: torch.Tensor, spec: ChainSpec) -> torch.Tensor:
    """E raised to ``align_exponent_floor`` where any term takes part."""
    if spec.exponent_floor == NO_EXPONENT_FLOOR:
        return e
    return torch.where(e == NO_TERMS, e, e.clamp(min=spec.exponent_floor))


def align_group(terms: GroupTerms, c: torch.Tensor, spec: ChainSpec) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 3 (FPS-GEMM-5): E the largest alignment exponent of the group's terms (and of c when
    fused), raised to the floor; returns (the sum of the terms' kept multiples of 2^(E - F), E - F);
    (0, 0) where nothing aligns.  c's own kept part is added by :func:`accumulate`."""
    e = terms.aexp.amax(-1)
    if spec.fused:
        e = torch.maximum(e, accumulator_exponent(c, spec))
    none = e == NO_TERMS
    e = _floor_exponent(e, spec)
    ql = e - spec.window
    acc = keep(terms.sig, terms.lsb - ql[..., None], spec.below).sum(-1)
    zero = torch.zeros_like(acc)
    return torch.where(none, zero, acc), torch.where(none, zero, ql)


def lane_window(terms: GroupTerms, spec: ChainSpec) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Step 3 of a non-fused group in ``lanes`` interleaved lanes (FPS-GEMM-18): term i in lane
    i mod lanes, each lane kept at its own largest exponent E_l, each lane's sum cut
    (``join_below``) to multiples of 2^(E - F), E = max E_l.  Returns (the kept sum in quanta
    2^(E - F), E - F, E); (0, 0, NO_TERMS) where no term takes part."""
    lanes = spec.lanes
    sig, lsb, aexp = terms.sig, terms.lsb, terms.aexp
    n = sig.shape[-1]
    pad = (-n) % lanes
    if pad:
        sig = torch.nn.functional.pad(sig, (0, pad))
        lsb = torch.nn.functional.pad(lsb, (0, pad))
        aexp = torch.nn.functional.pad(aexp, (0, pad), value=NO_TERMS)
    shape = sig.shape[:-1] + ((n + pad) // lanes, lanes)
    sig, lsb, aexp = sig.reshape(shape), lsb.reshape(shape), aexp.reshape(shape)
    e_l = aexp.amax(-2)                                     # (..., lanes)
    e_all = e_l.amax(-1)
    none = e_all == NO_TERMS
    e_all = _floor_exponent(e_all, spec)
    ql = e_all - spec.window
    none_l = e_l == NO_TERMS
    q_l = _floor_exponent(e_l, spec) - spec.window
    part = keep(sig, lsb - q_l[..., None, :], spec.below).sum(-2)
    part = torch.where(none_l, torch.zeros_like(part), part)
    if lanes > 1:
        total = keep(part, q_l - ql[..., None], spec.join_below).sum(-1)
    else:
        total = part[..., 0]
    zero = torch.zeros_like(total)
    return (torch.where(none, zero, total), torch.where(none, zero, ql),
            torch.where(none, _i64(NO_TERMS, e_all), e_all))


# ================================================================ step 4
def join(c: torch.Tensor, acc: torch.Tensor, ql: torch.Tensor, e: torch.Tensor, spec: ChainSpec) -> torch.Tensor:
    """Step 4 with a join (FPS-GEMM-18; exact: ``join``): c meets the group's kept sum acc 2^ql
    (alignment exponent e) at M = max(e, e_c); the sum is cut to 2^(M - join_sum) and c to
    2^(M - join_c) (``join_below``), c dropped when e_c < M - join_drop; the exact sum rounded
    once to the accumulator lattice (a negative one that rounds to zero: -0 under
    ``chain_zero="signed"``).  Both cut values stay inside int64 by the join bound."""
    ec = accumulator_exponent(c, spec)
    m = torch.maximum(e, ec)
    nothing = m == NO_TERMS
    q_s = m - spec.join_sum
    q_c = m - spec.join_c
    base = torch.minimum(q_s, q_c)
    s2 = keep(acc, ql - q_s, spec.join_below)
    sc, lc = split_fp32(c)
    c2 = keep(sc, lc - q_c, spec.join_below)
    drop = sc == 0
    if spec.join_drop != NO_DROP:
        drop = drop | (ec < m - spec.join_drop)
    c2 = torch.where(drop, torch.zeros_like(c2), c2)
    total = _shift_left(s2, q_s - base) + _shift_left(c2, q_c - base)
    r = round_acc_int(total, base, spec.accumulate_rounding, spec.lattice)
    if spec.signed_zero:
        r = torch.where((r == 0) & (total < 0), torch.full_like(r, -0.0), r)
    return torch.where(nothing, torch.zeros_like(r), r)


def accumulate(c: torch.Tensor, acc: torch.Tensor, e: torch.Tensor, spec: ChainSpec) -> torch.Tensor:
    """Step 4 (FPS-GEMM-1, FPS-GEMM-13) given each output's exact sum of (kept) terms acc 2^e
    (fast: ``accumulate``).  Fused with a window: c's kept multiples of 2^e join the sum, rounded
    once with ``accumulate_rounding``; fused or not rounded otherwise: round(c + sum).  Not fused:
    p = the sum rounded to FP32 with ``group_rounding``, then round(c + p).  An Inf or NaN c
    absorbs finite terms (FPS-GEMM-2); a rounded p follows IEEE addition."""
    fin = torch.isfinite(c)
    if spec.fused or spec.group_rounding == NO_ROUNDING:
        if spec.fused and spec.window != NO_WINDOW:
            sc, lc = split_fp32(torch.where(fin, c, torch.zeros_like(c)))
            r = round_acc_int(acc + keep(sc, lc - e, spec.below), e, spec.accumulate_rounding, spec.lattice)
        else:
            sc, lc = split_fp32(torch.where(fin, c, torch.zeros_like(c)))
            r = round_acc_terms(torch.stack((sc, acc), -1), torch.stack((lc, e), -1), spec.accumulate_rounding,
                                spec.lattice)
        return torch.where(fin, r, c)
    p = round_acc_int(acc, e, spec.group_rounding, FP32_LATTICE)
    r = add_round(c, p, spec.accumulate_rounding, spec.lattice)
    return torch.where(acc == 0, c, r)  # p = +0: c is already on the accumulator's lattice


def group_step(c: torch.Tensor, terms: GroupTerms, spec: ChainSpec) -> torch.Tensor:
    """Steps 3-4 for one group (FPS-GEMM-5): the new accumulators after the group's finite terms,
    then ``terms.overflow`` (products >= 2^128 under ``product_overflow``: an Inf c stays, else
    their IEEE sum) and ``terms.special`` (IEEE c + the special sum) where they are set (fast:
    ``group_step``; exact: ``group_step``)."""
    fin = torch.isfinite(c)
    if spec.join:
        acc, ql, e = lane_window(terms, spec)
        r = torch.where(fin, join(torch.where(fin, c, torch.zeros_like(c)), acc, ql, e, spec), c)
    elif spec.window != NO_WINDOW:
        if spec.lanes > 1:
            acc, ql, _ = lane_window(terms, spec)
        else:
            acc, ql = align_group(terms, c, spec)
        r = accumulate(c, acc, ql, spec)
    elif spec.fused or spec.group_rounding == NO_ROUNDING:  # the terms and c summed exactly, rounded once
        sc, lc = split_fp32(torch.where(fin, c, torch.zeros_like(c)))
        r = round_acc_terms(torch.cat((terms.sig, sc[..., None]), -1), torch.cat((terms.lsb, lc[..., None]), -1),
                            spec.accumulate_rounding, spec.lattice)
        r = torch.where(fin, r, c)
    else:
        p = round_acc_terms(terms.sig, terms.lsb, spec.group_rounding, FP32_LATTICE)
        r = add_round(c, p, spec.accumulate_rounding, spec.lattice)
    if terms.overflow is not None:
        r = torch.where(terms.overflow != NO_SPECIAL, torch.where(fin, terms.overflow, c), r)
    if terms.special is not None:
        r = torch.where(terms.special != NO_SPECIAL, c + terms.special, r)
    return r


# ================================================================ step 5
def after_group(c: torch.Tensor, big: torch.Tensor, total: torch.Tensor, action: int,
                spec: ChainSpec) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Step 5 after a group (FPS-GEMM-6, FPS-GEMM-14; fast: ``after_group``): PROMOTE adds c into
    the FP32 accumulator (``promotion_rounding``) and restarts c; END_SLICE ends the slice's chain
    (the accumulator with c promoted, or c) and adds it into the total with FP32 RNE."""
    if action == PROMOTE:
        return torch.zeros_like(c), add_round(big, c, spec.promotion_rounding, FP32_LATTICE), total
    if action == END_SLICE:
        r = add_round(big, c, spec.promotion_rounding, FP32_LATTICE) if spec.promotes else c
        # +0 + r is r exactly: where the total is zero the slice's result is taken as it is
        total = torch.where(total == 0, r, add_round(total, r, RNE, FP32_LATTICE))
        return torch.zeros_like(c), torch.zeros_like(big), total
    return c, big, total


# ============================================================ steps 6-7
def _sign(y: torch.Tensor) -> torch.Tensor:
    return y.view(torch.int64) < 0


def snap(y: torch.Tensor, bits: int) -> torch.Tensor:
    """Step 6 (FPS-GEMM-7): round_half_even(y 2^L) / 2^L on the integers of y = sig 2^lsb (an
    FP32 value): already a multiple of 2^-L where lsb >= -L, else cut at 2^-L with RNE; Inf and
    NaN pass; a negative y that snaps to zero gives -0."""
    fin = torch.isfinite(y)
    sig, lsb = split_fp32(torch.where(fin, y, torch.zeros_like(y)))
    k, q = _round_at(sig.abs(), lsb, torch.full_like(lsb, -bits), RNE)
    neg = _sign(y)
    r = compose(neg, k, q)
    r = torch.where(k == 0, torch.where(neg, torch.full_like(y, -0.0), torch.zeros_like(y)), r)
    return torch.where(fin, r, y)


def scale_by_alpha(y: torch.Tensor, alpha: float) -> torch.Tensor:
    """Step 7 (FPS-GEMM-8): RNE32(alpha y) on integers: y's significand times alpha's (below 2^48)
    rounded to FP32; a zero result (y zero, alpha 0, an underflow) carries the product's sign;
    an Inf or NaN y is IEEE alpha y (0 x Inf is NaN) (fast: ``scale_by_alpha``)."""
    fin = torch.isfinite(y)
    sig, lsb = split_fp32(torch.where(fin, y, torch.zeros_like(y)))
    m, ex = math.frexp(alpha)  # (host arithmetic on the one FP32 scalar: exact)
    a_sig, a_lsb = int(math.ldexp(m, 24)), ex - 24
    r = round_acc_int(sig * a_sig, lsb + a_lsb, RNE, FP32_LATTICE)
    neg = _sign(y) != (math.copysign(1.0, alpha) < 0)
    r = torch.where(r == 0, torch.where(neg, torch.full_like(y, -0.0), torch.zeros_like(y)), r)
    return torch.where(fin, r, y * alpha)


def finish(y: torch.Tensor, fin: FinishSpec) -> torch.Tensor:
    """Steps 6-7 on the chain's FP32 results (fast: ``finish``)."""
    if fin.snap_bits != NO_SNAP:
        y = snap(y, fin.snap_bits)
    if fin.scaled:
        y = scale_by_alpha(y, fin.alpha)
    return y
