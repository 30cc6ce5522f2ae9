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
from ..formats import BF16, FloatFormat, get_format
from ..gemm_operands import check_operands
from ..models import GemmModel
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
    "group_step",
    "promote",
    "chain_slice",
    "k_slices",
    "chain",
    "snap",
    "scale_by_alpha",
    "convert_output",
    "round_bf16",
    "finish",
    "dot_exact",
    "operand_from_codes",
    "operand_from_quantized",
    "alpha_exact",
    "tensor_alpha",
    "to_float32",
    "gemm_exact",
    "rowdot_exact",
]

Value = Fraction | float  # float only for inf / nan, and -0.0 after step 6

@dataclass(frozen=True)
class Term:
    """One term entering a group: its exact value and its alignment exponent
    (None for zero and for specials).  ``products`` is how many products it stands for
    (1, or the block size B for ``scale_placement="block"``)."""

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
    """Step 3 (FPS-GEMM-5): keep each nonzero finite value's multiples of 2^(E - F), E the
    largest alignment exponent (raised to ``align_exponent_floor``), F = window_bits."""
    if model.window_bits is None or not values:
        return list(values)
    e_max = max(exponents)
    if model.align_exponent_floor is not None and e_max < model.align_exponent_floor:
        e_max = model.align_exponent_floor
    quantum = Fraction(2) ** (e_max - model.window_bits)
    return [_truncate(v, quantum, model.below_window) for v in values]


# ---------------------------------------------- step 4: one group's update
def group_step(c: Value, terms: Sequence[Term], model: GemmModel) -> Value:
    """Steps 3-4 for one group: the new FP32 accumulator after adding ``terms`` to ``c``.

    Fused: an Inf or NaN among c and the terms decides alone.  Not fused: the group's
    p is formed first (an Inf term, or a rounding that overflows, makes it Inf), then
    c + p follows IEEE (Inf + finite = Inf, Inf - Inf = NaN) (FPS-GEMM-2)."""
    term_special = add_specials([t.value for t in terms])
    if model.fused or term_special is not None:
        special = add_specials([c] + ([] if term_special is None else [term_special]))
        if special is not None:
            return special
    live = [t for t in terms if t.value != 0]
    vals = [t.value for t in live]
    exps = [t.exponent for t in live]
    if model.fused:
        if c != 0:
            vals.append(c)  # type: ignore[arg-type]
            exps.append(fp32_exponent(c))  # type: ignore[arg-type]
        if not vals:
            return Fraction(0)
        kept = align_group(vals, exps, model)  # type: ignore[arg-type]
        return round_acc(sum(kept, Fraction(0)), model.accumulate_rounding, model.accumulate_bits)
    kept = align_group(vals, exps, model)  # type: ignore[arg-type]
    s = sum(kept, Fraction(0))
    p = s if model.group_rounding == "none" else round_fp32(s, model.group_rounding)
    if _is_special(p) or _is_special(c):
        return add_specials([c, p])  # type: ignore[return-value]
    return round_acc(c + p, model.accumulate_rounding, model.accumulate_bits)  # type: ignore[operator]


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


def chain_slice(terms: Sequence[Term], model: GemmModel) -> Value:
    """Steps 2-5 for one K slice: groups in order of k, the running accumulator, the
    partial promoted after every ``promotion_interval`` products of the slice and at its
    end (FPS-GEMM-6); the slice's result is C (or c without promotion)."""
    size = model.group_size or max(sum(t.products for t in terms), 1)
    c: Value = Fraction(0)
    big: Value = Fraction(0)
    pending = False  # c holds products not yet promoted
    done = 0
    for group in groups(terms, size):
        c = group_step(c, group, model)
        done += sum(t.products for t in group)
        pending = True
        if model.promotion_interval is not None and done % model.promotion_interval == 0:
            big, c, pending = promote(big, c, model), Fraction(0), False
    if model.promotion_interval is None:
        return c
    return promote(big, c, model) if pending else big


def k_slices(terms: Sequence[Term], model: GemmModel) -> list[list[Term]]:
    """Step 5's cut of K (FPS-GEMM-14): contiguous slices of ``split_k`` products (the
    last may be shorter); without ``split_k`` one slice holding all of K."""
    if model.split_k is None:
        return [list(terms)] if terms else []
    out: list[list[Term]] = []
    part: list[Term] = []
    n = 0
    for t in terms:
        part.append(t)
        n += t.products
        if n > model.split_k:
            raise FpspecError(f"a term of {t.products} products straddles a split_k={model.split_k} slice")
        if n == model.split_k:
            out.append(part)
            part, n = [], 0
    if part:
        out.append(part)
    return out


def chain(terms: Sequence[Term], model: GemmModel) -> Value:
    """Steps 2-5 over all of K: each K slice is a chain of its own (:func:`chain_slice`)
    and the slice results are added in order with FP32 RNE, from +0 (FPS-GEMM-14; with
    one slice the sum is its result, exactly)."""
    total: Value = Fraction(0)
    for part in k_slices(terms, model):
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


def convert_output(y: Value, model: GemmModel) -> Value:
    """Step 8 (FPS-GEMM-12): ``fp32`` as is, ``bf16`` rounded to BF16 (:func:`round_bf16`)."""
    return round_bf16(y) if model.output_format == "bf16" else y


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
    ``exponents[r][k]`` its alignment exponent (None for zero / special).  For
    ``scale_placement="block"`` ``payload`` and ``scales`` hold the payload values and
    per-(row, block) scale values.  ``amax``, ``target``, ``decode_scale`` and
    ``payload_max`` are the operand's share of alpha (None for code arrays).
    """

    values: list[list[Value]]
    exponents: list[list[int | None]]
    block: int | None = None
    payload: list[list[Fraction]] | None = None
    scales: list[list[Value]] | None = None
    amax: Fraction | None = None
    target: Fraction | None = None
    decode_scale: Fraction | None = None
    payload_max: Fraction | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.values), len(self.values[0]) if self.values else 0)


def _exponent(v: Value, emin: int | None) -> int | None:
    if _is_special(v) or v == 0:
        return None
    e = floor_log2(abs(v))  # type: ignore[arg-type]
    return e if emin is None else max(e, emin)


def _decode_map(codes: np.ndarray, fmt: FloatFormat) -> dict[int, Value]:
    return {int(c): fmt.decode_exact(int(c)) for c in np.unique(codes)}


def operand_from_codes(codes: np.ndarray, fmt: FloatFormat | str, model: GemmModel) -> Operand:
    """Code array (rows, K) of e4m3 / e5m2 / fp16 / bf16: exact decoded values; alignment
    exponent max(floor(log2|v|), emin) of the input format (subnormals sit in the lowest
    binade, Khattak & Mikaitis), or of FP32 for ``operand_domain="decoded-fp32"``."""
    fmt = get_format(fmt)
    table = _decode_map(codes, fmt)
    emin = FP32_EMIN if model.operand_domain == "decoded-fp32" else fmt.emin
    values = [[table[int(c)] for c in row] for row in np.asarray(codes)]
    exps = [[_exponent(v, emin) for v in row] for row in values]
    return Operand(values=values, exponents=exps)


def _target(qt) -> Fraction | None:
    target = qt.params.get("target", qt.params.get("T"))
    return None if target is None else Fraction(target)


def operand_from_quantized(qt, model: GemmModel) -> Operand:
    """A :class:`~fpspec.quantized.QuantizedTensor`: operand values per ``operand_domain``.

    * ``encoded``: payload x block scale, exact (the tensor scale is left to alpha);
      alignment exponent floor(log2|v|).
    * ``decoded-fp32``: RNE32(payload x block scale x decode_scale), exponent in FP32.
    * ``decoded-exact``: payload x block scale x decode_scale, exact.
    """
    payload_fmt = get_format(qt.payload_format)
    scale_fmt = get_format(qt.scale_format)
    pmap = _decode_map(qt.codes, payload_fmt)
    smap = _decode_map(qt.scales, scale_fmt)
    scale_el = qt.scale_code_per_element()
    d = Fraction(float(np.float32(qt.decode_scale)))
    payload = [[pmap[int(c)] for c in row] for row in qt.codes]
    values: list[list[Value]] = []
    exps: list[list[int | None]] = []
    for prow, srow in zip(payload, scale_el):
        vrow: list[Value] = []
        for p, s in zip(prow, srow):
            v = _mul(p, smap[int(s)])
            if model.operand_domain == "decoded-fp32":
                v = round_fp32(_mul(v, d), "rne")
            elif model.operand_domain == "decoded-exact":
                v = _mul(v, d)
            vrow.append(v)
        values.append(vrow)
        exps.append([_exponent(v, FP32_EMIN if model.operand_domain == "decoded-fp32" else None)
                     for v in vrow])
    grid = qt.scales if qt.tile == "1xB" else np.repeat(qt.scales, qt.block, axis=0)
    scales = [[smap[int(s)] for s in row] for row in grid]
    return Operand(values=values, exponents=exps, block=qt.block, payload=payload, scales=scales,
                   amax=Fraction(float(np.float32(qt.amax))), target=_target(qt),
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
    """Step 1 with ``scale_placement="product"``: one term per k (FPS-GEMM-4)."""
    out = []
    for va, ea, vb, eb in zip(a.values[ra], a.exponents[ra], b.values[rb], b.exponents[rb]):
        p = _mul(va, vb)
        if _is_special(p) or p == 0:
            out.append(Term(p, None))
        elif model.product_exponent == "operands":
            out.append(Term(p, ea + eb))  # type: ignore[operator]
        else:
            out.append(Term(p, floor_log2(abs(p))))  # type: ignore[arg-type]
    return out


def block_terms(a: Operand, ra: int, b: Operand, rb: int, model: GemmModel) -> list[Term]:
    """Step 1 with ``scale_placement="block"``: one term per scale block, the exact sum of
    the payload products times both block scales; exponent floor(log2|term|)."""
    assert a.payload is not None and b.payload is not None and a.scales is not None and b.scales is not None
    bsz = a.block
    out = []
    pa, pb = a.payload[ra], b.payload[rb]
    for j in range(len(pa) // bsz):  # type: ignore[operator]
        s = sum((pa[k] * pb[k] for k in range(j * bsz, (j + 1) * bsz)), Fraction(0))  # type: ignore[operator]
        v = _mul(_mul(s, a.scales[ra][j]), b.scales[rb][j])
        out.append(Term(v, None if _is_special(v) or v == 0 else floor_log2(abs(v)), bsz))  # type: ignore[arg-type]
    return out


# ---------------------------------------------------------------- the GEMM
def to_float32(v: Value) -> np.float32:
    """An FP32-representable exact value as np.float32 (a zero keeps its sign)."""
    if _is_special(v):
        return np.float32(v)
    return np.float32(float(v))  # exact: v is an FP32 (or BF16) value


def _operands(a, bt, model: GemmModel, fmt: str | None):
    a, bt, quantized = check_operands(a, bt, model, fmt)
    if quantized:
        opa, opb = operand_from_quantized(a, model), operand_from_quantized(bt, model)
    else:
        opa, opb = operand_from_codes(a, fmt, model), operand_from_codes(bt, fmt, model)
    alpha = alpha_exact(opa, opb, model) if quantized else None
    terms = block_terms if quantized and model.scale_placement == "block" and model.operand_domain == "encoded" \
        else product_terms
    return opa, opb, alpha, terms


def gemm_exact(a, bt, model: GemmModel, *, fmt: str | None = None) -> np.ndarray:
    """The exact reference GEMM ``A (M x K) @ BT (N x K)^T`` -> float32 (M, N) (FPS-GEMM-1).

    ``a`` and ``bt`` are both code arrays (with ``fmt`` one of :data:`CODE_FORMATS`:
    uint8 for e4m3/e5m2, uint16 for fp16/bf16) or both QuantizedTensors.  Shape and
    K checks are done here too, so this function can be called directly.
    """
    opa, opb, alpha, terms = _operands(a, bt, model, fmt)
    out = np.empty((opa.shape[0], opb.shape[0]), dtype=np.float32)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = to_float32(dot_exact(terms(opa, i, opb, j, model), model, alpha))
    return _canonical_nan(out)


def rowdot_exact(a, bt, model: GemmModel, *, fmt: str | None = None) -> np.ndarray:
    """The diagonal of :func:`gemm_exact`: y[i] = A[i] . BT[i] -> float32 (M,)."""
    opa, opb, alpha, terms = _operands(a, bt, model, fmt)
    out = np.array([to_float32(dot_exact(terms(opa, i, opb, i, model), model, alpha))
                    for i in range(min(opa.shape[0], opb.shape[0]))], dtype=np.float32)
    return _canonical_nan(out)


def _canonical_nan(y: np.ndarray) -> np.ndarray:
    """Every NaN as the one output NaN, 0x7FC00000 (FPS-GEMM-2)."""
    y[np.isnan(y)] = np.uint32(0x7FC00000).view(np.float32)
    return y
