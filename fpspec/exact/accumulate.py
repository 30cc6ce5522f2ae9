"""The executable spec of the GEMM accumulation family (docs/gemm.rst, FPS-GEMM-*).

Everything here is exact: operand values are :class:`fractions.Fraction` (every
decoded code, and every product of two of them, is a dyadic rational
``integer * 2^e``), and the only roundings are the ones a :class:`~fpspec.models.GemmModel`
names, each done by :func:`fpspec.exact.binary32.round_fp32` /
:func:`~fpspec.exact.binary32.round_acc`.  One dot product at a time;
:func:`gemm_exact` loops over the M x N outputs.

The steps are numbered as in :mod:`fpspec.models` (FPS-GEMM-1), one function each:

1. terms: :func:`product_terms`, :func:`block_terms`;
2. groups: :func:`groups`;
3. alignment window: :func:`align_group`;
4. group sum and accumulator update: :func:`group_step`;
5. promotion: :func:`promote` (in :func:`chain_slice`, the chain of one K slice);
   split K: :func:`k_slices`, :func:`chain`;
6. snap: :func:`snap`;
7. alpha: :func:`scale_by_alpha` (alpha itself: :func:`alpha_exact`);
8. output conversion: :func:`convert_output`.

:func:`dot_exact` is steps 2-8 for one output.  The fast twin is :mod:`fpspec.fast`
(``accumulate``: operands and dispatch, ``kernels``: step 1, ``chain``: steps 2-7,
``fp32``: the roundings).

Special values (FPS-GEMM-2) are Python floats ``inf``, ``-inf``, ``nan`` flowing
through the same steps; finite values are Fractions, and a zero inside the chain
(steps 1-5) is +0.  Steps 6-8 follow IEEE 754's sign rules and may give the float
``-0.0`` (a negative value that snaps, scales or converts to zero).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np

from ..errors import FpspecError
from ..formats import BF16, FP16, FloatFormat, get_format
from ..gemm_operands import check_operands, code_format, operand_formats, tf32_truncate
from ..models import ACCUMULATOR_FORMATS, NAN_BITS, ZERO_ALIGNMENT_EXPONENT, GemmModel
from .binary32 import FP32_EMIN, f32, f32_div, f32_mul, f64, floor_log2, fp32_exponent, round_acc, round_fp32
from .rounding import round_to_code

__all__ = [
    "Term",
    "Operand",
    "add_specials",
    "round_fp32",
    "round_acc",
    "product_terms",
    "block_terms",
    "groups",
    "align_group",
    "lane_window",
    "join",
    "overflowed_products",
    "round_accumulator",
    "accumulator_exponent",
    "group_step",
    "promote",
    "chain_slice",
    "tile_groups",
    "k_slices",
    "chain",
    "snap",
    "scale_by_alpha",
    "convert_output",
    "round_bf16",
    "round_fp16",
    "finish",
    "dot_exact",
    "operand_from_codes",
    "operand_from_quantized",
    "alpha_exact",
    "tensor_alpha",
    "to_float32",
    "gemm_exact",
    "rowdot_exact",
    "canonical_nan",
]

Value = Fraction | float  # float only for inf / nan, and -0.0 after step 6

@dataclass(frozen=True)
class Term:
    """One term entering a group: its exact value and its alignment exponent (None for
    specials, and for a zero that takes no part in the alignment: ``zero_alignment=
    "excluded"``).  ``products`` is how many products it stands for (1, or the block term
    size for ``scale_placement="block"``)."""

    value: Value
    exponent: int | None
    products: int = 1


# ------------------------------------------------------------------ helpers
def _is_special(v: Value) -> bool:
    return isinstance(v, float)


def _negative(v: Value) -> bool:
    """The sign bit of a value (-0.0 and -inf included)."""
    return math.copysign(1.0, v) < 0 if isinstance(v, float) else v < 0


def _zero(negative: bool) -> Value:
    """A zero of steps 6-8: +0 (Fraction 0) or the float -0.0."""
    return -0.0 if negative else Fraction(0)


def add_specials(values: Sequence[Value]) -> Value | None:
    """IEEE combination of the special values among ``values`` (None when all finite):
    NaN if any NaN or both infinities, else the one infinity."""
    pos = neg = False
    for v in values:
        if _is_special(v):
            if math.isnan(v):
                return math.nan
            if v > 0:
                pos = True
            else:
                neg = True
    if pos and neg:
        return math.nan
    if pos:
        return math.inf
    if neg:
        return -math.inf
    return None


def _mul(a: Value, b: Value) -> Value:
    """Exact product with IEEE special rules (0 x Inf = NaN)."""
    if _is_special(a) or _is_special(b):
        if (not _is_special(a) and a == 0) or (not _is_special(b) and b == 0):
            return math.nan
        return float(a) * float(b)  # inf * nonzero, or nan
    return a * b  # type: ignore[operator]


def _add_round(x: Value, y: Value, mode: str) -> Value:
    """round_fp32(x + y) with IEEE special rules (the promotion and the split-K sum)."""
    special = add_specials([x, y])
    if special is not None:
        return special
    return round_fp32(x + y, mode)  # type: ignore[operator]


# ------------------------------------------------------- step 3: alignment
def _truncate(v: Fraction, quantum: Fraction, rule: str) -> Fraction:
    q = v / quantum
    if rule == "floor":
        k = q.numerator // q.denominator
    else:  # "truncate": magnitude truncation
        k = abs(q.numerator) // q.denominator
        k = -k if v < 0 else k
    return k * quantum


def align_group(values: Sequence[Fraction], exponents: Sequence[int], model: GemmModel) -> list[Fraction]:
    """Step 3 (FPS-GEMM-5): keep each finite value's multiples of 2^(E - F), E the largest
    alignment exponent (raised to ``align_exponent_floor``), F = window_bits."""
    if model.window_bits is None or not values:
        return list(values)
    e_max = max(exponents)
    if model.align_exponent_floor is not None and e_max < model.align_exponent_floor:
        e_max = model.align_exponent_floor
    quantum = Fraction(2) ** (e_max - model.window_bits)
    return [_truncate(v, quantum, model.below_window) for v in values]


def _aligned(t: Term) -> bool:
    """Whether a finite term takes part in the alignment: a nonzero one always, a zero one
    when it carries an exponent (``zero_alignment="emin"``, FPS-GEMM-16)."""
    return t.value != 0 or t.exponent is not None


def lane_window(terms: Sequence[Term], model: GemmModel) -> tuple[Fraction, int | None]:
    """Step 3 for a non-fused group (FPS-GEMM-5, FPS-GEMM-18): the exact sum of the kept
    terms and the group's alignment exponent E (None when no term takes part).

    With ``window_lanes`` L > 1 the term at position i of the group belongs to lane i mod L;
    each lane is windowed at its own largest exponent E_l, then each lane's kept sum is cut
    (``join_below``) to a multiple of 2^(E - F) with E = max E_l.  One lane is the plain
    window; without a window the sum is exact."""
    lanes = model.window_lanes
    sums: list[Fraction] = []
    exps: list[int] = []
    for lane in range(lanes):
        live = [t for pos, t in enumerate(terms) if pos % lanes == lane and _aligned(t)]
        if not live:
            continue
        vals = [t.value for t in live]
        if model.window_bits is None:
            sums.append(sum(vals, Fraction(0)))  # type: ignore[arg-type]
            continue
        e_lane = max(t.exponent for t in live)  # type: ignore[type-var]
        if model.align_exponent_floor is not None and e_lane < model.align_exponent_floor:
            e_lane = model.align_exponent_floor
        exps.append(e_lane)
        sums.append(sum(align_group(vals, [t.exponent for t in live], model), Fraction(0)))  # type: ignore[arg-type]
    if model.window_bits is None or not exps:
        return sum(sums, Fraction(0)), None
    e = max(exps)
    if lanes > 1:
        quantum = Fraction(2) ** (e - model.window_bits)
        sums = [_truncate(v, quantum, model.join_below) for v in sums]
    return sum(sums, Fraction(0)), e


def accumulator_exponent(c: Fraction, model: GemmModel) -> int | None:
    """Alignment exponent of the accumulator c: max(floor(log2|c|), emin) of the accumulator
    format (-126 for FP32, -14 for FP16); for c = 0, -126 under ``zero_alignment="emin"``,
    else None (no part in the alignment) (FPS-GEMM-16, FPS-GEMM-19)."""
    if c == 0:
        return ZERO_ALIGNMENT_EXPONENT if model.zero_alignment == "emin" else None
    return fp32_exponent(c, ACCUMULATOR_FORMATS[model.accumulator_format][0])


def round_accumulator(x: Fraction, model: GemmModel) -> Value:
    """The accumulator rounding of step 4 (FPS-GEMM-13, FPS-GEMM-17, FPS-GEMM-19):
    ``accumulate_rounding`` to ``accumulate_bits`` fraction bits in the accumulator format's
    range, overflow per ``accumulate_overflow``; a zero result is +0, or -0 for a negative
    x under ``chain_zero="signed"``."""
    emin, top, _ = ACCUMULATOR_FORMATS[model.accumulator_format]
    r = round_acc(x, model.accumulate_rounding, model.accumulate_bits, emin=emin, top=top,
                  overflow_inf=model.accumulate_overflow == "inf")
    if model.chain_zero == "signed" and not _is_special(r) and r == 0 and x < 0:
        return -0.0
    return r


def overflowed_products(terms: Sequence[Term], model: GemmModel) -> Value | None:
    """``product_overflow="inf"`` (FPS-GEMM-18): the finite terms of magnitude >= 2^128 count
    as infinities of their sign (both signs: NaN); None when there is none (or the rule is
    off)."""
    if model.product_overflow != "inf":
        return None
    big = [math.inf if t.value > 0 else -math.inf for t in terms
           if not _is_special(t.value) and abs(t.value) >= Fraction(2) ** 128]
    return add_specials(big)


def join(c: Value, s: Fraction, e: int | None, model: GemmModel) -> Value:
    """Step 4 with a join (FPS-GEMM-18): c meets the group's kept sum s (alignment exponent e)
    at M = max(e, e_c); s is cut to 2^(M - join_sum_bits) and c to 2^(M - join_c_bits)
    (``join_below``), c replaced by 0 when e_c < M - join_drop_bits; the exact sum is
    rounded once with the accumulator rounding.  An Inf or NaN c stays."""
    if _is_special(c):
        return c
    ec = accumulator_exponent(c, model)  # type: ignore[arg-type]
    cands = [x for x in (e, ec) if x is not None]
    if not cands:
        return round_accumulator(s, model)  # no term and c = 0 take part: s is 0
    m = max(cands)
    s2 = _truncate(s, Fraction(2) ** (m - model.join_sum_bits), model.join_below)  # type: ignore[operator]
    if c != 0 and model.join_drop_bits is not None and ec < m - model.join_drop_bits:  # type: ignore[operator]
        c2 = Fraction(0)
    else:
        c2 = _truncate(c, Fraction(2) ** (m - model.join_c_bits), model.join_below)  # type: ignore[arg-type,operator]
    return round_accumulator(s2 + c2, model)


# ---------------------------------------------- step 4: one group's update
def group_step(c: Value, terms: Sequence[Term], model: GemmModel) -> Value:
    """Steps 3-4 for one group: the new accumulator after adding ``terms`` to ``c``.

    Fused: an Inf or NaN among c and the terms decides alone.  Not fused: the group's
    p is formed first (an Inf term, or a rounding that overflows, makes it Inf), then
    c + p follows IEEE (Inf + finite = Inf, Inf - Inf = NaN) (FPS-GEMM-2).  Then a
    product of magnitude >= 2^128 under ``product_overflow="inf"`` (FPS-GEMM-18); a join
    (``join_sum_bits``) takes c after the window."""
    if isinstance(c, float) and c == 0:
        c = Fraction(0)  # a signed zero (chain_zero="signed") joins as a zero
    term_special = add_specials([t.value for t in terms])
    if model.fused or term_special is not None:
        special = add_specials([c] + ([] if term_special is None else [term_special]))
        if special is not None:
            return special
    overflow = overflowed_products(terms, model)
    if overflow is not None:
        return c if _is_special(c) else overflow
    if model.fused:
        live = [t for t in terms if _aligned(t)]
        vals = [t.value for t in live]
        exps = [t.exponent for t in live]
        ec = accumulator_exponent(c, model)  # type: ignore[arg-type]
        if ec is not None:
            vals.append(c)  # type: ignore[arg-type]
            exps.append(ec)
        if not vals:
            return Fraction(0)
        kept = align_group(vals, exps, model)  # type: ignore[arg-type]
        return round_accumulator(sum(kept, Fraction(0)), model)
    s, e = lane_window(terms, model)
    if model.join_sum_bits is not None:
        return join(c, s, e, model)
    p = s if model.group_rounding == "none" else round_fp32(s, model.group_rounding)
    if _is_special(p) or _is_special(c):
        return add_specials([c, p])  # type: ignore[return-value]
    return round_accumulator(c + p, model)  # type: ignore[operator]


# ------------------------------------------------ steps 2 and 5: the chain
def groups(terms: Sequence[Term], size: int) -> list[list[Term]]:
    """Step 2 (FPS-GEMM-6): the terms in order of k, cut into groups of ``size`` products
    (a term stands for ``term.products`` of them); the last group may be shorter."""
    out: list[list[Term]] = []
    group: list[Term] = []
    n = 0
    for t in terms:
        group.append(t)
        n += t.products
        if n > size:
            raise FpspecError(f"a term of {t.products} products does not fit groups of {size}")
        if n == size:
            out.append(group)
            group, n = [], 0
    if group:
        out.append(group)
    return out


def promote(big: Value, c: Value, model: GemmModel) -> Value:
    """Step 5 (FPS-GEMM-1): the partial c added into the FP32 accumulator,
    round_fp32(C + c) with ``promotion_rounding``."""
    return _add_round(big, c, model.promotion_rounding)


def tile_groups(terms: Sequence[Term], model: GemmModel) -> list[list[Term]]:
    """Step 2 within one K slice (FPS-GEMM-6, FPS-GEMM-23): the slice's L products cut into
    K tiles of ``k_tile`` products (without it: of ``group_size``, or the whole slice
    without that), the partial tile of L mod T products last or, with
    ``slice_residue="first"``, first; each tile cut into groups of ``group_size`` from its
    start (:func:`groups`)."""
    n = sum(t.products for t in terms)
    unit = model.k_tile or model.group_size or max(n, 1)
    size = model.group_size or unit
    lengths = [unit] * (n // unit)
    if n % unit:
        lengths = [n % unit] + lengths if model.slice_residue == "first" else lengths + [n % unit]
    out: list[list[Term]] = []
    for part in _cut(terms, lengths, "K tile"):
        out.extend(groups(part, size))
    return out


def _cut(terms: Sequence[Term], lengths: Sequence[int], what: str) -> list[list[Term]]:
    """The terms cut into consecutive runs of ``lengths`` products (a term stands for
    ``term.products``); FpspecError where a term straddles two runs."""
    out: list[list[Term]] = []
    it = iter(terms)
    for length in lengths:
        part: list[Term] = []
        n = 0
        while n < length:
            t = next(it, None)
            if t is None:
                raise FpspecError(f"the {what}s hold {sum(lengths)} products, more than the terms")
            part.append(t)
            n += t.products
        if n != length:
            raise FpspecError(f"a term of {part[-1].products} products straddles a {what} of {length} products")
        out.append(part)
    return out


def chain_slice(terms: Sequence[Term], model: GemmModel) -> Value:
    """Steps 2-5 for one K slice: groups in order of k (:func:`tile_groups`), the running
    accumulator, the partial promoted after every ``promotion_interval`` products of the
    slice and at its end (FPS-GEMM-6); the slice's result is C (or c without promotion)."""
    c: Value = Fraction(0)
    big: Value = Fraction(0)
    pending = False  # c holds products not yet promoted
    done = 0
    for group in tile_groups(terms, model):
        c = group_step(c, group, model)
        done += sum(t.products for t in group)
        pending = True
        if model.promotion_interval is not None and done % model.promotion_interval == 0:
            big, c, pending = promote(big, c, model), Fraction(0), False
    if model.promotion_interval is None:
        return c
    return promote(big, c, model) if pending else big


def k_slices(terms: Sequence[Term], model: GemmModel) -> list[list[Term]]:
    """Step 5's cut of K (FPS-GEMM-14, FPS-GEMM-23): the slices of
    :meth:`~fpspec.models.GemmModel.slice_lengths` - ``slice_plan``'s lengths, or
    contiguous slices of ``split_k`` products (the last may be shorter), or one slice
    holding all of K."""
    k = sum(t.products for t in terms)
    if model.split_k is None and model.slice_plan is None:
        return [list(terms)] if terms else []
    return _cut(terms, model.slice_lengths(k), "K slice")


def chain(terms: Sequence[Term], model: GemmModel) -> Value:
    """Steps 2-5 over all of K: each K slice is a chain of its own (:func:`chain_slice`)
    and the slice results are added in order with FP32 RNE, from +0 (FPS-GEMM-14; with
    one slice the sum is its result, exactly)."""
    parts = k_slices(terms, model)
    if len(parts) == 1:
        return chain_slice(parts[0], model)  # +0 + r is r (r may be -0 under chain_zero="signed")
    total: Value = Fraction(0)
    for part in parts:
        total = _add_round(total, chain_slice(part, model), "rne")
    return total


# ------------------------------------------------- steps 6-8: the output
def snap(y: Value, bits: int) -> Value:
    """Step 6 (FPS-GEMM-7): round_half_even(y * 2^L) / 2^L; a negative y that snaps to
    zero gives -0 (as the seed's ``torch.round`` does)."""
    if _is_special(y):
        return y
    scale = Fraction(2) ** bits
    r = Fraction(round(y * scale)) / scale  # Python round() of a Fraction is ties-to-even
    return _zero(y < 0) if r == 0 else r


def scale_by_alpha(y: Value, alpha: Fraction) -> Value:
    """Step 7 (FPS-GEMM-8): RNE32(alpha y), an IEEE binary32 product: a zero result (a zero
    y, alpha 0, or an underflow) carries the product's sign; 0 x Inf is NaN."""
    negative = _negative(y) != (alpha < 0)
    if _is_special(y):
        if math.isnan(y) or y != 0:
            return _mul(alpha, y)
        return _zero(negative)
    r = round_fp32(alpha * y, "rne")  # type: ignore[operator]
    return _zero(negative) if r == 0 else r


def round_bf16(x: Value) -> Value:
    """RNE to BF16, IEEE overflow to Inf; a negative value that rounds to zero gives -0."""
    if _is_special(x):
        return x
    r = BF16.decode_exact(round_to_code(x, BF16, "rne"))
    return _zero(x < 0) if r == 0 else r


def round_fp16(x: Value) -> Value:
    """RNE to FP16 (binary16), IEEE overflow to Inf; a negative value that rounds to zero
    gives -0.  An FP16 accumulator's value is returned unchanged (it is an FP16 value)."""
    if _is_special(x):
        return x
    r = FP16.decode_exact(round_to_code(x, FP16, "rne"))
    return _zero(x < 0) if r == 0 else r


def convert_output(y: Value, model: GemmModel) -> Value:
    """Step 8 (FPS-GEMM-12, FPS-GEMM-19): ``fp32`` as is, ``bf16`` rounded to BF16
    (:func:`round_bf16`), ``fp16`` rounded to FP16 (:func:`round_fp16`)."""
    if model.output_format == "bf16":
        return round_bf16(y)
    if model.output_format == "fp16":
        return round_fp16(y)
    return y


def finish(y: Value, model: GemmModel, alpha: Fraction | None) -> Value:
    """Steps 6-8: snap, alpha (already formed per ``alpha_rounding``; None: no alpha),
    output conversion."""
    if model.snap_bits is not None:
        y = snap(y, model.snap_bits)
    if alpha is not None:
        y = scale_by_alpha(y, alpha)
    return convert_output(y, model)


def dot_exact(terms: Sequence[Term], model: GemmModel, alpha: Fraction | None = None) -> Value:
    """One output element: the chain of steps 2-5, then steps 6-8."""
    return finish(chain(terms, model), model, alpha)


# ---------------------------------------------------------------- operands
@dataclass(frozen=True)
class Operand:
    """One GEMM operand in the model's domain, row-major (rows, K).

    ``values[r][k]`` is the operand value (step 1's ``operand_domain``) and
    ``exponents[r][k]`` its alignment exponent (None for a special, and for a zero outside
    the alignment).  For ``scale_placement="block"`` ``payload`` and ``scales`` hold the
    payload values and per-(row, block) scale values, ``scale_exponents`` the scales'
    alignment exponents (FPS-GEMM-16).  ``amax``, ``target``, ``decode_scale`` and
    ``payload_max`` are the operand's share of alpha (None for code arrays).
    """

    values: list[list[Value]]
    exponents: list[list[int | None]]
    block: int | None = None
    payload: list[list[Fraction]] | None = None
    scales: list[list[Value]] | None = None
    scale_exponents: list[list[int | None]] | None = None
    amax: Fraction | None = None
    target: Fraction | None = None
    decode_scale: Fraction | None = None
    payload_max: Fraction | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.values), len(self.values[0]) if self.values else 0)


def _zero_exponent(model: GemmModel) -> int | None:
    """Alignment exponent of a zero operand or scale: -126 under ``zero_alignment="emin"``,
    else None (FPS-GEMM-16)."""
    return ZERO_ALIGNMENT_EXPONENT if model.zero_alignment == "emin" else None


def _exponent(v: Value, emin: int | None, zero: int | None = None) -> int | None:
    """max(floor(log2|v|), emin); ``zero`` for v = 0; None for a special."""
    if _is_special(v):
        return None
    if v == 0:
        return zero
    e = floor_log2(abs(v))  # type: ignore[arg-type]
    return e if emin is None else max(e, emin)


def _decode_map(codes: np.ndarray, fmt: FloatFormat) -> dict[int, Value]:
    return {int(c): fmt.decode_exact(int(c)) for c in np.unique(codes)}


def operand_from_codes(codes: np.ndarray, fmt: FloatFormat | str, model: GemmModel) -> Operand:
    """Code array (rows, K) of one operand format (:data:`~fpspec.gemm_operands.CODE_FORMATS`):
    exact decoded values (``tf32``: the FP32 code with its low 13 bits cleared, FPS-GEMM-20);
    alignment exponent max(floor(log2|v|), emin) of the input format (subnormals sit in the
    lowest binade, Khattak & Mikaitis), or of FP32 for ``operand_domain="decoded-fp32"``; a
    zero per ``zero_alignment`` (FPS-GEMM-16)."""
    name = fmt if isinstance(fmt, str) else fmt.name
    f = code_format(name)
    codes = tf32_truncate(codes) if name == "tf32" else np.asarray(codes)
    table = _decode_map(codes, f)
    emin = FP32_EMIN if model.operand_domain == "decoded-fp32" else f.emin
    zero = _zero_exponent(model)
    values = [[table[int(c)] for c in row] for row in codes]
    exps = [[_exponent(v, emin, zero) for v in row] for row in values]
    return Operand(values=values, exponents=exps)


def _target(qt) -> Fraction | None:
    target = qt.params.get("target", qt.params.get("T"))
    return None if target is None else Fraction(target)


def operand_from_quantized(qt, model: GemmModel) -> Operand:
    """A :class:`~fpspec.quantized.QuantizedTensor`: operand values per ``operand_domain``.

    * ``encoded``: payload x block scale, exact (the tensor scale is left to alpha);
      alignment exponent floor(log2|v|), or under ``block_exponent="scales"`` e(payload) +
      e(scale), each max(floor(log2), its format's emin) (FPS-GEMM-16).
    * ``decoded-fp32``: RNE32(payload x block scale x decode_scale), exponent in FP32.
    * ``decoded-exact``: payload x block scale x decode_scale, exact.
    """
    payload_fmt = get_format(qt.payload_format)
    scale_fmt = get_format(qt.scale_format)
    pmap = _decode_map(qt.codes, payload_fmt)
    smap = _decode_map(qt.scales, scale_fmt)
    scale_el = qt.scale_code_per_element()
    d = Fraction(float(np.float32(qt.decode_scale)))
    zero = _zero_exponent(model)
    apart = model.block_exponent == "scales"
    payload = [[pmap[int(c)] for c in row] for row in qt.codes]
    values: list[list[Value]] = []
    exps: list[list[int | None]] = []
    for prow, srow in zip(payload, scale_el):
        vrow: list[Value] = []
        erow: list[int | None] = []
        for p, s in zip(prow, srow):
            sv = smap[int(s)]
            v = _mul(p, sv)
            if model.operand_domain == "decoded-fp32":
                v = round_fp32(_mul(v, d), "rne")
            elif model.operand_domain == "decoded-exact":
                v = _mul(v, d)
            vrow.append(v)
            if apart:
                ep, es = _exponent(p, payload_fmt.emin, zero), _exponent(sv, scale_fmt.emin, zero)
                erow.append(None if _is_special(v) or ep is None or es is None else ep + es)
            else:
                erow.append(_exponent(v, FP32_EMIN if model.operand_domain == "decoded-fp32" else None, zero))
        values.append(vrow)
        exps.append(erow)
    grid = qt.scales if qt.tile == "1xB" else np.repeat(qt.scales, qt.block, axis=0)
    scales = [[smap[int(s)] for s in row] for row in grid]
    scale_exps = [[_exponent(v, scale_fmt.emin, zero) for v in row] for row in scales]
    return Operand(values=values, exponents=exps, block=qt.block, payload=payload, scales=scales,
                   scale_exponents=scale_exps, amax=Fraction(float(np.float32(qt.amax))), target=_target(qt),
                   decode_scale=d, payload_max=payload_fmt.max_finite)


def _alpha_factor(op: Operand, model: GemmModel) -> tuple[Fraction, Fraction, Fraction]:
    """One operand's share of alpha as (numerator, denominator, denominator in binary64):
    ``amax`` with a target T: (amax, payload_max T, fl64(fl64(T) payload_max)); else the
    FP32 decode scale d: (d, 1, 1)."""
    if model.alpha_source == "amax" and op.target is not None:
        den = op.payload_max * op.target  # type: ignore[operator]
        return op.amax, den, f64(f64(op.target) * op.payload_max)  # type: ignore[arg-type,operator]
    return op.decode_scale, Fraction(1), Fraction(1)  # type: ignore[return-value]


def _alpha_fp32_order(num_a: Fraction, num_b: Fraction, den64: Fraction, rounding: str) -> Fraction:
    """The seed's FP32 order (FPS-GEMM-8): n = RNE32(num_a num_b) (a binary32 product of
    the FP32 amaxes), d = RNE32(den64) (the binary64 denominator (6 T_a)(6 T_b) made
    binary32); ``fp32-divide``: RNE32(n / d); ``fp32-reciprocal``: RNE32(n RNE32(1 / d))."""
    n = f32_mul(float(num_a), float(num_b))
    d = f32(den64)
    if math.isinf(d):
        return Fraction(0)  # n / inf and n (1 / inf) are +0
    if rounding == "fp32-divide":
        r = f32_div(n, d)
    else:
        r = f32_mul(n, f32_div(1.0, d))
    return Fraction(r) if math.isfinite(r) else r  # type: ignore[return-value]


def alpha_exact(a: Operand, b: Operand, model: GemmModel) -> Fraction | None:
    """Step 7's alpha, rounded as ``alpha_rounding`` says (None: no alpha) (FPS-GEMM-8).

    Per operand f = n / d: ``amax`` with a target T: amax / (payload_max T) (an operand
    without a target, e.g. MXFP4, has no tensor scale: its f is its decode scale, 1);
    ``decode-scales``: its FP32 decode scale.  ``exact``: f_a f_b; ``once``:
    RNE32(f_a f_b); ``twice``: RNE32(RNE32(f_a) RNE32(f_b)); ``fp32-divide`` and
    ``fp32-reciprocal``: the seed's binary32 order (:func:`_alpha_fp32_order`).
    """
    if model.alpha_source == "none" or model.operand_domain != "encoded" or a.decode_scale is None:
        return None
    na, da, da64 = _alpha_factor(a, model)
    nb, db, db64 = _alpha_factor(b, model)
    if model.alpha_rounding == "exact":
        return na * nb / (da * db)
    if model.alpha_rounding == "once":
        r = round_fp32(na * nb / (da * db), "rne")
    elif model.alpha_rounding == "twice":
        r = round_fp32(_mul(round_fp32(na / da, "rne"), round_fp32(nb / db, "rne")), "rne")
    else:
        r = _alpha_fp32_order(na, nb, f64(da64 * db64), model.alpha_rounding)
    if _is_special(r):
        raise FpspecError(f"alpha overflows FP32 ({float(na * nb / (da * db))!r})")
    return r  # type: ignore[return-value]


def tensor_alpha(qa, qb, model: GemmModel) -> Fraction | None:
    """Step 7's alpha straight from two QuantizedTensors (FPS-GEMM-8); see :func:`alpha_exact`."""
    ops = []
    for q in (qa, qb):
        ops.append(Operand(values=[], exponents=[], amax=Fraction(float(np.float32(q.amax))), target=_target(q),
                           decode_scale=Fraction(float(np.float32(q.decode_scale))),
                           payload_max=get_format(q.payload_format).max_finite))
    return alpha_exact(ops[0], ops[1], model)


# ------------------------------------------------------------ step 1: terms
def product_terms(a: Operand, ra: int, b: Operand, rb: int, model: GemmModel) -> list[Term]:
    """Step 1 with ``scale_placement="product"``: one term per k (FPS-GEMM-4); a zero product
    keeps ea + eb under ``zero_alignment="emin"`` (a zero operand's exponent is -126,
    FPS-GEMM-16)."""
    out = []
    for va, ea, vb, eb in zip(a.values[ra], a.exponents[ra], b.values[rb], b.exponents[rb]):
        p = _mul(va, vb)
        if _is_special(p):
            out.append(Term(p, None))
        elif p == 0:
            emin = model.zero_alignment == "emin" and ea is not None and eb is not None
            out.append(Term(p, ea + eb if emin else None))  # type: ignore[operator]
        elif model.product_exponent == "operands":
            out.append(Term(p, ea + eb))  # type: ignore[operator]
        else:
            out.append(Term(p, floor_log2(abs(p))))  # type: ignore[arg-type]
    return out


def block_terms(a: Operand, ra: int, b: Operand, rb: int, model: GemmModel) -> list[Term]:
    """Step 1 with ``scale_placement="block"``: one term per ``block_term_size`` products (the
    scale block when None), the exact sum of their payload products times both block
    scales; exponent floor(log2|term|), or under ``block_exponent="scales"`` e(s_a) + e(s_b),
    the scales' exponents alone, for a zero term too under ``zero_alignment="emin"``
    (FPS-GEMM-16)."""
    assert a.payload is not None and b.payload is not None and a.scales is not None and b.scales is not None
    size = model.block_term_size or a.block
    out = []
    pa, pb = a.payload[ra], b.payload[rb]
    for j in range(len(pa) // size):  # type: ignore[operator]
        k0 = j * size
        s = sum((pa[k] * pb[k] for k in range(k0, k0 + size)), Fraction(0))  # type: ignore[operator]
        ja, jb = k0 // a.block, k0 // b.block  # type: ignore[operator]
        v = _mul(_mul(s, a.scales[ra][ja]), b.scales[rb][jb])
        if _is_special(v):
            e = None
        elif model.block_exponent == "scales":
            ea, eb = a.scale_exponents[ra][ja], b.scale_exponents[rb][jb]  # type: ignore[index]
            e = None if ea is None or eb is None or (v == 0 and model.zero_alignment != "emin") else ea + eb
        else:
            e = None if v == 0 else floor_log2(abs(v))  # type: ignore[arg-type]
        out.append(Term(v, e, size))
    return out


# ---------------------------------------------------------------- the GEMM
def to_float32(v: Value) -> np.float32:
    """An FP32-representable exact value as np.float32 (a zero keeps its sign)."""
    if _is_special(v):
        return np.float32(v)
    return np.float32(float(v))  # exact: v is an FP32 (or BF16) value


def _output_dtype(model: GemmModel):
    return np.float16 if model.output_format == "fp16" else np.float32


def _operands(a, bt, model: GemmModel, fmt):
    a, bt, quantized = check_operands(a, bt, model, fmt)
    if quantized:
        opa, opb = operand_from_quantized(a, model), operand_from_quantized(bt, model)
    else:
        fa, fb = operand_formats(fmt)
        opa, opb = operand_from_codes(a, fa, model), operand_from_codes(bt, fb, model)
    alpha = alpha_exact(opa, opb, model) if quantized else None
    terms = block_terms if quantized and model.scale_placement == "block" and model.operand_domain == "encoded" \
        else product_terms
    return opa, opb, alpha, terms


def gemm_exact(a, bt, model: GemmModel, *, fmt=None) -> np.ndarray:
    """The exact reference GEMM ``A (M x K) @ BT (N x K)^T`` -> float32 (M, N), float16 for
    ``output_format="fp16"`` (FPS-GEMM-1).

    ``a`` and ``bt`` are both code arrays (with ``fmt`` one of :data:`CODE_FORMATS`, or a
    pair of them: A's, BT's) or both QuantizedTensors.  Shape and K checks are done here
    too, so this function can be called directly.
    """
    opa, opb, alpha, terms = _operands(a, bt, model, fmt)
    dtype = _output_dtype(model)
    out = np.empty((opa.shape[0], opb.shape[0]), dtype=dtype)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = dtype(float(to_float32(dot_exact(terms(opa, i, opb, j, model), model, alpha))))
    return canonical_nan(out, model)


def rowdot_exact(a, bt, model: GemmModel, *, fmt=None) -> np.ndarray:
    """The diagonal of :func:`gemm_exact`: y[i] = A[i] . BT[i] -> float32 (M,) (float16 for
    ``output_format="fp16"``)."""
    opa, opb, alpha, terms = _operands(a, bt, model, fmt)
    dtype = _output_dtype(model)
    out = np.array([dtype(float(to_float32(dot_exact(terms(opa, i, opb, i, model), model, alpha))))
                    for i in range(min(opa.shape[0], opb.shape[0]))], dtype=dtype)
    return canonical_nan(out, model)


def canonical_nan(y: np.ndarray, model: GemmModel) -> np.ndarray:
    """Every NaN as the one output NaN of ``nan_encoding`` (FPS-GEMM-2, FPS-GEMM-17):
    0x7FC00000 or 0x7FFFFFFF (FP16 output: 0x7E00 or 0x7FFF)."""
    nan = np.isnan(y)
    if nan.any():
        bits = NAN_BITS[(model.nan_encoding, model.output_format)]
        view = np.uint16 if y.dtype == np.float16 else np.uint32
        y.view(view)[nan] = bits
    return y
