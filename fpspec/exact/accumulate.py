"""The executable spec of the GEMM accumulation family (docs/gemm.rst, FPS-GEMM-*).

Everything here is exact: operand values are :class:`fractions.Fraction` (every
decoded code, and every product of two of them, is a dyadic rational
``integer * 2^e``), and the only roundings are the ones a :class:`~fpspec.models.GemmModel`
names, each done by :func:`fpspec.exact.rounding.round_to_code`.  One dot product
at a time; :func:`gemm_exact` loops over the M x N outputs.

The steps are numbered as in :mod:`fpspec.models` (FPS-GEMM-1):

1. terms (:func:`product_terms`, :func:`block_terms`), 2. groups, 3. alignment
window (:func:`align_group`), 4. group sum and accumulator update
(:func:`group_step`), 5. promotion, 6. snap, 7. alpha, 8. output conversion
(:func:`dot_exact`, :func:`finish`).

Special values (FPS-GEMM-2) are Python floats ``inf``, ``-inf``, ``nan`` flowing
through the same steps; finite values are always Fractions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np

from ..errors import FpspecError
from ..formats import BF16, FP32, FloatFormat, get_format
from ..gemm_operands import check_operands
from ..models import GemmModel
from .binary32 import FP32_EMIN, floor_log2
from .rounding import round_to_code

__all__ = [
    "Term",
    "Operand",
    "round_fp32",
    "round_bf16",
    "snap",
    "align_group",
    "group_step",
    "chain",
    "chain_slice",
    "round_acc",
    "dot_exact",
    "finish",
    "operand_from_codes",
    "operand_from_quantized",
    "alpha_exact",
    "tensor_alpha",
    "gemm_exact",
]

Value = Fraction | float  # float only for inf / nan

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


def round_fp32(x: Value, mode: str) -> Value:
    """Round an exact value to FP32 (``rne`` or ``rz``) with IEEE 754 overflow: Inf under
    RNE, max finite under RZ.  Zero results are +0 (Fraction 0)."""
    if _is_special(x):
        return x
    code = round_to_code(x, FP32, "rne" if mode == "rne" else "rtz")
    return FP32.decode_exact(code)


def round_acc(x: Value, mode: str, bits: int = 23) -> Value:
    """Round an exact value to ``bits`` fraction bits in FP32's exponent range (the
    accumulator rounding, FPS-GEMM-13): quantum 2^(max(floor(log2|x|), -126) - bits),
    ``rne`` (ties to even) or ``rz``; a result of magnitude >= 2^128 is Inf under RNE
    and (2 - 2^-bits) 2^127 under RZ.  With bits = 23 this is :func:`round_fp32`."""
    if bits == 23 or _is_special(x):
        return round_fp32(x, mode)
    if x == 0:
        return Fraction(0)
    e = max(floor_log2(abs(x)), FP32_EMIN)  # type: ignore[arg-type]
    quantum = Fraction(2) ** (e - bits)
    q = x / quantum
    if mode == "rne":
        k = round(q)  # ties to even
    else:
        k = abs(q.numerator) // q.denominator
        k = -k if x < 0 else k
    r = k * quantum
    if abs(r) >= 2 ** 128:
        big = math.inf if mode == "rne" else (2 - Fraction(1, 2 ** bits)) * Fraction(2) ** 127
        return big if r > 0 else -big
    return r


def round_bf16(x: Value) -> Value:
    """RNE to BF16 (output conversion ``bf16``), IEEE overflow to Inf."""
    if _is_special(x):
        return x
    return BF16.decode_exact(round_to_code(x, BF16, "rne"))


def fp32_exponent(c: Fraction) -> int:
    """Alignment exponent of a nonzero FP32 accumulator: max(floor(log2|c|), -126)."""
    return max(floor_log2(abs(c)), FP32_EMIN)


def _add_specials(values: Sequence[Value]) -> Value | None:
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
    term_special = _add_specials([t.value for t in terms])
    if model.fused or term_special is not None:
        special = _add_specials([c] + ([] if term_special is None else [term_special]))
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
        return _add_specials([c, p])  # type: ignore[return-value]
    return round_acc(c + p, model.accumulate_rounding, model.accumulate_bits)  # type: ignore[operator]


def _add_round(x: Value, y: Value, mode: str) -> Value:
    special = _add_specials([x, y])
    if special is not None:
        return special
    return round_fp32(x + y, mode)  # type: ignore[operator]


# ------------------------------------------------ steps 2 and 5: the chain
def chain(terms: Sequence[Term], model: GemmModel) -> Value:
    """Steps 2-5b: with ``split_k`` the terms are cut into slices of that many products,
    each slice is a chain of its own (:func:`chain_slice`), and the slice results are
    added in order with FP32 RNE (FPS-GEMM-14); else one chain over all of K."""
    if model.split_k is None:
        return chain_slice(terms, model)
    total: Value | None = None
    part: list[Term] = []
    n = 0
    for t in list(terms) + [None]:  # type: ignore[list-item]
        if t is None or n == model.split_k:
            if part or total is None:
                r = chain_slice(part, model)
                total = r if total is None else _add_round(total, r, "rne")
            part, n = [], 0
            if t is None:
                break
        part.append(t)
        n += t.products
        if n > model.split_k:
            raise FpspecError(f"a term of {t.products} products straddles a split_k={model.split_k} slice")
    assert total is not None
    return total


def chain_slice(terms: Sequence[Term], model: GemmModel) -> Value:
    """Steps 2-5: groups in order of k, the running accumulator, promotion (FPS-GEMM-6).

    ``terms`` are in order of k; each stands for ``term.products`` products.  A group
    holds ``group_size`` products (all of them when group_size is None); the partial
    is promoted after every ``promotion_interval`` products and at the end.
    """
    total = sum(t.products for t in terms)
    g = model.group_size or max(total, 1)
    c: Value = Fraction(0)
    big: Value = Fraction(0)
    pending = False  # c holds products not yet promoted
    done = 0
    i = 0
    while i < len(terms):
        group: list[Term] = []
        n = 0
        while i < len(terms) and n < g:
            group.append(terms[i])
            n += terms[i].products
            i += 1
        if n > g:
            raise FpspecError(f"a term of {terms[i - 1].products} products does not fit groups of {g}")
        c = group_step(c, group, model)
        done += n
        pending = True
        if model.promotion_interval is not None and done % model.promotion_interval == 0:
            big = _add_round(big, c, model.promotion_rounding)
            c = Fraction(0)
            pending = False
    if model.promotion_interval is None:
        return c
    if pending:
        big = _add_round(big, c, model.promotion_rounding)
    return big


# ------------------------------------------------- steps 6-8: the output
def snap(y: Value, bits: int) -> Value:
    """Step 6: round_half_even(y * 2^L) / 2^L (FPS-GEMM-7)."""
    if _is_special(y):
        return y
    scale = Fraction(2) ** bits
    return Fraction(round(y * scale)) / scale  # Python round() of a Fraction is ties-to-even


def finish(y: Value, model: GemmModel, alpha: Fraction | None) -> Value:
    """Steps 6-8: snap, alpha (already formed per ``alpha_rounding``, None for no alpha),
    output conversion."""
    if model.snap_bits is not None:
        y = snap(y, model.snap_bits)
    if alpha is not None:
        y = round_fp32(_mul(alpha, y), "rne")
    if model.output_format == "bf16":
        y = round_bf16(y)
    return y


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
    per-(row, block) scale values.  ``alpha_factor`` is the operand's share of alpha:
    (amax, target, decode_scale) or None for code arrays.
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
    target = qt.params.get("target", qt.params.get("T"))
    return Operand(values=values, exponents=exps, block=qt.block, payload=payload, scales=scales,
                   amax=Fraction(float(np.float32(qt.amax))),
                   target=None if target is None else Fraction(target),
                   decode_scale=d, payload_max=payload_fmt.max_finite)


def alpha_exact(a: Operand, b: Operand, model: GemmModel) -> Fraction | None:
    """Step 7's alpha, rounded as ``alpha_rounding`` says (None: no alpha) (FPS-GEMM-8).

    ``amax``: f = amax / (payload_max * T) per operand (an operand without a target T,
    e.g. MXFP4, has no tensor scale: its f is its decode scale, 1); ``decode-scales``:
    f = the operand's FP32 decode scale.  ``exact``: f_a f_b; ``once``: RNE32(f_a f_b);
    ``twice``: RNE32(RNE32(f_a) RNE32(f_b)).
    """
    if model.alpha_source == "none" or model.operand_domain != "encoded" or a.decode_scale is None:
        return None
    factors = []
    for op, name in ((a, "A"), (b, "B")):
        if model.alpha_source == "amax" and op.target is not None:
            factors.append(op.amax / (op.payload_max * op.target))  # type: ignore[operator]
        else:
            factors.append(op.decode_scale)
    fa, fb = factors
    if model.alpha_rounding == "exact":
        return fa * fb
    if model.alpha_rounding == "once":
        r = round_fp32(fa * fb, "rne")
    else:
        r = round_fp32(_mul(round_fp32(fa, "rne"), round_fp32(fb, "rne")), "rne")
    if _is_special(r):
        raise FpspecError(f"alpha overflows FP32 ({float(fa * fb)!r})")
    return r  # type: ignore[return-value]


def tensor_alpha(qa, qb, model: GemmModel) -> Fraction | None:
    """Step 7's alpha straight from two QuantizedTensors (FPS-GEMM-8); see :func:`alpha_exact`."""
    ops = []
    for q in (qa, qb):
        target = q.params.get("target", q.params.get("T"))
        ops.append(Operand(values=[], exponents=[], amax=Fraction(float(np.float32(q.amax))),
                           target=None if target is None else Fraction(target),
                           decode_scale=Fraction(float(np.float32(q.decode_scale))),
                           payload_max=get_format(q.payload_format).max_finite))
    return alpha_exact(ops[0], ops[1], model)


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


def to_float32(v: Value) -> np.float32:
    """An FP32-representable exact value as np.float32 (+0 for zero, canonical NaN)."""
    if _is_special(v):
        return np.float32(v)
    return np.float32(float(v))  # exact: v is an FP32 (or BF16) value


def gemm_exact(a, bt, model: GemmModel, *, fmt: str | None = None) -> np.ndarray:
    """The exact reference GEMM ``A (M x K) @ BT (N x K)^T`` -> float32 (M, N) (FPS-GEMM-1).

    ``a`` and ``bt`` are both code arrays (with ``fmt`` one of :data:`CODE_FORMATS`:
    uint8 for e4m3/e5m2, uint16 for fp16/bf16) or both QuantizedTensors.  Shape and
    K checks are done here too, so this function can be called directly.
    """
    a, bt, quantized = check_operands(a, bt, model, fmt)
    if quantized:
        opa, opb = operand_from_quantized(a, model), operand_from_quantized(bt, model)
    else:
        opa, opb = operand_from_codes(a, fmt, model), operand_from_codes(bt, fmt, model)
    m, n = opa.shape[0], opb.shape[0]
    alpha = alpha_exact(opa, opb, model) if quantized else None
    use_block = quantized and model.scale_placement == "block" and model.operand_domain == "encoded"
    out = np.empty((m, n), dtype=np.float32)
    for i in range(m):
        for j in range(n):
            terms = (block_terms if use_block else product_terms)(opa, i, opb, j, model)
            out[i, j] = to_float32(dot_exact(terms, model, alpha))
    return out
