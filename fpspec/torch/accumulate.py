"""Torch GEMM: operands, dispatch and the output, the torch twin of :mod:`fpspec.fast.accumulate`
(FPS-GEMM-10, docs/gemm.rst, docs/torch.rst).

Bit-equal to the fast twin and to the exact spec (:mod:`fpspec.exact.accumulate`) by test
(``tests/test_torch_gemm.py``).  Laid out like the other twins:

============================================  ==========================================
fast twin                                      torch twin
============================================  ==========================================
``gemm_fast``, ``rowdot_fast``,                this module: :func:`gemm_torch`,
``exact_only_reason``, ``fast_kernel``         :func:`rowdot_torch`, :func:`gemm_declines_torch`,
                                               :func:`gemm_kernel_torch`
:mod:`fpspec.fast.operands`                    the operands here: :class:`CodeOperand`,
                                               :class:`QuantizedOperand`, :class:`E2M1Operand`
step 1 :mod:`fpspec.fast.kernels`              :mod:`fpspec.torch.kernels`
steps 2-7 :mod:`fpspec.fast.chain`             :mod:`fpspec.torch.chain`
step 8 ``round_bf16_bits``,                    :func:`round_bf16_bits`, :func:`round_fp16_bits`,
``round_fp16_bits``, ``_canonical_nan``        :func:`canonical_nan` (here, on bits)
============================================  ==========================================

How a GEMM runs: the outputs are cut into tiles (rows x columns, so that a group's terms of a
tile, ``rows x cols x G`` int64 values, stay within :data:`TERM_ELEMENTS`: no M x N x K
temporary), and each tile runs the chain's loop (:mod:`fpspec.torch.chain`) over the planned
groups, every step an elementwise int64 / float64 torch operation on the whole tile.  The
operands stay as the caller's codes; each group's slice is decoded to integers on the way
(:class:`CodeOperand` and the others: tables of every code, built once per call on the
device from the torch twin's exact decoder, :func:`fpspec.torch.rounding.decode_torch`).

Exactness of the operands (the chain's and step 1's arguments are in their modules):

* A decoded code, payload or scale is a float64 (exact); its integers ``sig 2^lsb`` (sig odd)
  and floor(log2|v|) are read from the float64 bit pattern (:func:`split_values`).
* A quantized operand's value is ``payload x scale`` (x the FP32 decode scale in the decoded
  domains), formed as IEEE float64 products: exact, since the factors' significands have at most
  4 + 24 + 24 < 53 bits together and every exponent stays inside float64's normal range (and an
  Inf or NaN factor gives the IEEE product, as the fast twin's float64 products do);
  ``decoded-fp32`` then rounds it to FP32 with RNE on its integers (:func:`fpspec.torch.chain.round_acc_int`).
* The sequential FP32 chain (``decoded-fp32``: one product per group, every rounding FP32 RNE)
  runs as IEEE float32 ``*`` and ``+``, one torch elementwise operation each, on operand values
  checked to be FP32 values, as the fast twin's ``gemm_fp32_rows``: each is the correctly rounded
  operation the spec names (no FMA forms across two torch operations; torch flushes no
  subnormals unless ``torch.set_flush_denormal(True)`` was called).
* Step 8 is done on bits: BF16 by the integer RNE of the float32 bit pattern, FP16 by
  :func:`~fpspec.torch.chain.round_acc_int` to the binary16 lattice, NaN made canonical.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
import torch

from ..arraykind import describe_array, is_torch
from ..errors import FpspecError
from ..formats import get_format
from ..gemm_operands import code_format, operand_formats
from ..models import NAN_BITS, ZERO_ALIGNMENT_EXPONENT, GemmModel
from ..quantized import QuantizedTensor
from .chain import (CONTINUE, END_SLICE, FP32_BITS, FP32_EMIN, FP32_LATTICE, NO_TERMS, PROMOTE, RNE, ChainSpec,
                    FinishSpec, GroupTerms, Lattice, Plan, after_group, bitlen, chain_plan, chain_spec, finish,
                    finish_spec, group_step, round_acc_int, split_fp32)
from .kernels import (E2M1_PRODUCT_MAX, FINITE, NAN, NEG_INF, POS_INF, TermOperand, block_sums, product_terms,
                      scaled_block_terms)
from .rounding import decode_torch

__all__ = ["gemm_torch", "rowdot_torch", "gemm_declines_torch", "gemm_kernel_torch", "split_values",
           "CodeOperand", "QuantizedOperand", "E2M1Operand", "ProductSource", "BlockSource", "round_bf16_bits",
           "round_fp16_bits", "canonical_nan", "TERM_ELEMENTS", "OUTPUT_NAN_BITS", "KEPT_SUM_BITS"]

#: The most int64 terms of one group a tile holds at once (32 MiB per term tensor; a group step
#: keeps a few of them alive, well under 256 MiB in all).
TERM_ELEMENTS = 1 << 22
#: The one output NaN of the BF16 rounding (FPS-GEMM-2).
OUTPUT_NAN_BITS = 0x7FC00000
#: The most bits of magnitude an int64 sum of kept terms may take (room for the sign and a carry).
KEPT_SUM_BITS = 62
#: The binary16 lattice of step 8's FP16 output (IEEE overflow: Inf under RNE).
_FP16_OUTPUT = Lattice(10, -14, 16, False)

_F64_FRACTION = (1 << 52) - 1
_F64_IMPLICIT = 1 << 52


# ==================================================================== operands
def split_values(v: torch.Tensor, emin: int | None, zero: int) -> TermOperand:
    """float64 values -> :class:`~fpspec.torch.kernels.TermOperand` from their bit patterns: odd
    sig and lsb (v = sig 2^lsb), alignment exponent max(floor(log2|v|), emin) (``zero`` for a
    zero and a special), special code (fast: ``split_values``)."""
    b = v.view(torch.int64)
    field = (b >> 52) & 0x7FF
    frac = b & _F64_FRACTION
    nonfinite = field == 0x7FF
    special = torch.where(frac != 0, torch.full_like(b, NAN),
                          torch.where(b < 0, torch.full_like(b, NEG_INF), torch.full_like(b, POS_INF)))
    special = torch.where(nonfinite, special, torch.full_like(b, FINITE))
    m = torch.where(field == 0, frac, frac | _F64_IMPLICIT)
    ex = torch.where(field == 0, torch.ones_like(field), field) - 1075  # v = m 2^ex
    live = ~nonfinite & (m != 0)
    m = torch.where(live, m, torch.zeros_like(m))
    tz = (bitlen(m & -m) - 1).clamp(min=0)
    sig = m >> tz
    sig = torch.where(b < 0, -sig, sig)
    lsb = torch.where(live, ex + tz, torch.zeros_like(ex))
    aexp = ex + bitlen(m) - 1
    if emin is not None:
        aexp = aexp.clamp(min=emin)
    aexp = torch.where(live, aexp, torch.full_like(aexp, zero))
    return TermOperand(sig, lsb, aexp, special)


def _floor_log2(v: torch.Tensor, emin: int, zero: int) -> torch.Tensor:
    """max(floor(log2|v|), emin) of finite nonzero values, ``zero`` for a zero, NO_TERMS for a
    special (fast: ``floor_log2_table``)."""
    op = split_values(v, emin, zero)
    return torch.where(op.special == FINITE, op.aexp, torch.full_like(op.aexp, NO_TERMS))


def _decode_table(fmt, device) -> torch.Tensor:
    """float64 value of every code of a format of at most 16 bits, on ``device``."""
    return decode_torch(torch.arange(fmt.num_codes, dtype=torch.int64, device=device), fmt)


def zero_exponent(model: GemmModel) -> int:
    """Alignment exponent of a zero operand: -126 under ``zero_alignment="emin"``, else 0 (never
    read) (FPS-GEMM-16; fast: ``zero_exponent``)."""
    return ZERO_ALIGNMENT_EXPONENT if model.zero_alignment == "emin" else 0


def _round_fp32_values(w: torch.Tensor) -> torch.Tensor:
    """RNE32 of exact float64 values on their integers (Inf on overflow; Inf and NaN pass)."""
    op = split_values(w, None, 0)
    r = round_acc_int(op.sig, op.lsb, RNE, FP32_LATTICE)
    return torch.where(torch.isfinite(w), r, w)


def _check_torch(x: Any, what: str) -> None:
    if not is_torch(x):
        raise FpspecError(f"the torch twin computes on torch tensors; {what} is {describe_array(x)}")


class CodeOperand:
    """A code tensor (rows, K) of one operand format as integers, decoded group slice by group
    slice through a table of every code (fast: ``code_operand``): exact values, alignment
    exponent with the input format's emin (FP32's for ``decoded-fp32``), a zero's per
    ``zero_alignment``.  ``tf32``: FP32 codes with their low 13 bits cleared, decoded directly
    (no table of 2^32 codes)."""

    def __init__(self, codes: torch.Tensor, name: str, model: GemmModel):
        _check_torch(codes, "a code operand")
        self.codes = codes
        self.name = name
        self.fmt = code_format(name)
        self.emin = FP32_EMIN if model.operand_domain == "decoded-fp32" else self.fmt.emin
        self.zero = zero_exponent(model)
        self.table = None if name == "tf32" else split_values(_decode_table(self.fmt, codes.device), self.emin,
                                                                self.zero)

    def _codes(self, rows, k0: int, k1: int) -> torch.Tensor:
        c = self.codes[rows, k0:k1].to(torch.int64)
        if self.name == "tf32":
            c = (c & 0xFFFFFFFF) & ~((1 << 13) - 1)
        return c

    def terms(self, rows, k0: int, k1: int) -> TermOperand:
        c = self._codes(rows, k0, k1)
        if self.table is None:
            return split_values(decode_torch(c, self.fmt), self.emin, self.zero)
        return TermOperand(*(t[c] for t in self.table))

    def values(self) -> torch.Tensor:
        """float64 values (rows, K) (exact)."""
        c = self._codes(slice(None), 0, self.codes.shape[1])
        if self.table is None:
            return decode_torch(c, self.fmt)
        return _decode_table(self.fmt, c.device)[c]

    def has_specials(self) -> bool:
        if self.table is None:
            c = self._codes(slice(None), 0, self.codes.shape[1])
            return bool((((c >> 23) & 0xFF) == 0xFF).any())
        bad = self.table.special != FINITE
        return any(bool(bad[self.codes[r0:r0 + 4096].to(torch.int64)].any())
                   for r0 in range(0, self.codes.shape[0], 4096))


class _Scales:
    """The block scales of a QuantizedTensor: the scale code that applies to elements
    (rows, k0 .. k1 - 1 step ``unit``), gathered from the (rows or rows / B, K / B) grid."""

    def __init__(self, qt: QuantizedTensor):
        self.qt = qt
        self.fmt = get_format(qt.scale_format)

    def codes(self, rows, k0: int, k1: int, unit: int = 1) -> torch.Tensor:
        qt = self.qt
        dev = qt.scales.device
        n = qt.codes.shape[0]
        r = torch.arange(n, device=dev)[rows]
        if qt.tile == "BxB":
            r = torch.div(r, qt.block, rounding_mode="floor")
        k = torch.div(torch.arange(k0, k1, unit, device=dev), qt.block, rounding_mode="floor")
        return qt.scales[r][:, k].to(torch.int64)

    def any_special(self, table_special: torch.Tensor) -> bool:
        return bool((table_special[self.qt.scales.to(torch.int64)] != FINITE).any())


class QuantizedOperand:
    """A QuantizedTensor's values in the model's domain as integers, slice by slice (fast:
    ``quantized_operand``, ``quantized_values``): payload x block scale (``encoded``), RNE32 of
    that times the FP32 decode scale (``decoded-fp32``), or the exact product (``decoded-exact``);
    under ``block_exponent="scales"`` the alignment exponent is e(payload) + e(scale), each with
    its own format's emin."""

    def __init__(self, qt: QuantizedTensor, model: GemmModel):
        _check_torch(qt.codes, "a QuantizedTensor's codes")
        self.qt = qt
        self.domain = model.operand_domain
        self.d = float(np.float32(qt.decode_scale))
        self.pf = get_format(qt.payload_format)
        self.scales = _Scales(qt)
        dev = qt.codes.device
        self.pv = _decode_table(self.pf, dev)
        self.sv = _decode_table(self.scales.fmt, dev)
        self.zero = zero_exponent(model)
        self.emin = FP32_EMIN if self.domain == "decoded-fp32" else None
        self.apart = model.block_exponent == "scales"
        if self.apart:
            self.ep = _floor_log2(self.pv, self.pf.emin, self.zero)
            self.es = _floor_log2(self.sv, self.scales.fmt.emin, self.zero)

    def _parts(self, rows, k0: int, k1: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.qt.codes[rows, k0:k1].to(torch.int64), self.scales.codes(rows, k0, k1)

    def _values(self, pc: torch.Tensor, sc: torch.Tensor) -> torch.Tensor:
        v = self.pv[pc] * self.sv[sc]  # exact: <= 4 + 24 significant bits
        if self.domain == "encoded":
            return v
        w = v * self.d  # exact: < 53 significant bits
        return _round_fp32_values(w) if self.domain == "decoded-fp32" else w

    def values(self) -> torch.Tensor:
        pc, sc = self._parts(slice(None), 0, self.qt.codes.shape[1])
        return self._values(pc, sc)

    def terms(self, rows, k0: int, k1: int) -> TermOperand:
        pc, sc = self._parts(rows, k0, k1)
        op = split_values(self._values(pc, sc), self.emin, self.zero)
        if not self.apart:
            return op
        ep, es = self.ep[pc], self.es[sc]
        aexp = torch.where((ep == NO_TERMS) | (es == NO_TERMS), torch.zeros_like(ep), ep + es)
        return op._replace(aexp=aexp)

    def has_specials(self) -> bool:
        if self.domain == "decoded-fp32":
            return True  # (an FP32 rounding may overflow: taken as possible)
        bad_p = split_values(self.pv, None, 0).special != FINITE
        if bool(bad_p[self.qt.codes.to(torch.int64)].any()):
            return True
        return self.scales.any_special(split_values(self.sv, None, 0).special)


class E2M1Operand:
    """An E2M1 QuantizedTensor for block terms (fast: ``scaled_block_operand``, ``block_operand``):
    payloads as the integers 2q, and per block term the scale's sig, lsb, alignment exponent
    (the scale format's emin; a zero scale -126 under ``zero_alignment="emin"``, else NO_TERMS)
    and special code."""

    def __init__(self, qt: QuantizedTensor, model: GemmModel):
        _check_torch(qt.codes, "a QuantizedTensor's codes")
        self.qt = qt
        dev = qt.codes.device
        pv = _decode_table(get_format(qt.payload_format), dev)
        self.payload_ints = (pv * 2).to(torch.int64)  # exact: E2M1 values are multiples of 1/2
        self.scales = _Scales(qt)
        sv = _decode_table(self.scales.fmt, dev)
        split = split_values(sv, None, 0)
        zero = ZERO_ALIGNMENT_EXPONENT if model.zero_alignment == "emin" else NO_TERMS
        self.table = split._replace(aexp=_floor_log2(sv, self.scales.fmt.emin, zero))

    def payload(self, rows, k0: int, k1: int) -> torch.Tensor:
        return self.payload_ints[self.qt.codes[rows, k0:k1].to(torch.int64)]

    def term_scales(self, rows, k0: int, k1: int, unit: int) -> TermOperand:
        c = self.scales.codes(rows, k0, k1, unit)
        return TermOperand(*(t[c] for t in self.table))

    def finite_scales(self) -> bool:
        return not self.scales.any_special(self.table.special)


# =================================================================== step-1 sources
def _outer(op: TermOperand, axis: int) -> TermOperand:
    return TermOperand(*(x.unsqueeze(axis) for x in op))


class ProductSource:
    """Step 1 from product terms (:func:`~fpspec.torch.kernels.product_terms`) of two operands."""

    name = "fpspec.torch.kernels.product_terms (one int64 term per product, any values)"

    def __init__(self, a, b, model: GemmModel, spec: ChainSpec):
        self.a, self.b = a, b
        self.exact_exponent = model.product_exponent == "exact"
        self.spec = spec
        self.specials = a.has_specials() or b.has_specials()

    def cost(self, plan: Plan) -> int:
        return max(plan.longest, 1)

    def group(self, rows, cols, k0: int, k1: int) -> GroupTerms:
        ta = self.a.terms(rows, k0, k1)
        if cols is None:  # a row-wise dot: pairs (i, i)
            tb = self.b.terms(rows, k0, k1)
        else:
            ta, tb = _outer(ta, 1), _outer(self.b.terms(cols, k0, k1), 0)
        return product_terms(ta, tb, self.exact_exponent, self.spec, self.specials)


class BlockSource:
    """Step 1 from E2M1 block terms of ``size`` products (:func:`~fpspec.torch.kernels.block_sums`,
    :func:`~fpspec.torch.kernels.scaled_block_terms`): the block terms of ``scale_placement="block"``,
    or, without a window and with finite scales, terms whose exact sum is the group's (units that
    every scale block and planned group holds whole)."""

    name = "fpspec.torch.kernels.scaled_block_terms (E2M1 payload sums by float64 torch.bmm, exact)"

    def __init__(self, a: E2M1Operand, b: E2M1Operand, size: int, scale_exponent: bool, spec: ChainSpec,
                 specials: bool):
        self.a, self.b = a, b
        self.size = size
        self.scale_exponent = scale_exponent
        self.spec = spec
        self.specials = specials

    def cost(self, plan: Plan) -> int:
        return max(plan.longest // self.size, 1) + 1

    def group(self, rows, cols, k0: int, k1: int) -> GroupTerms:
        pa = self.a.payload(rows, k0, k1)
        sa = self.a.term_scales(rows, k0, k1, self.size)
        if cols is None:
            pb, sb = self.b.payload(rows, k0, k1), self.b.term_scales(rows, k0, k1, self.size)
        else:
            pb, sb = self.b.payload(cols, k0, k1), self.b.term_scales(cols, k0, k1, self.size)
            sa, sb = _outer(sa, 1), _outer(sb, 0)
        acc = block_sums(pa, pb, self.size, gemm=cols is not None)
        return scaled_block_terms(acc, sa, sb, self.scale_exponent, self.spec, self.specials)


class Fp32Rows(NamedTuple):
    """The sequential FP32 chain's operands: float32 values (rows, K) of A and of BT."""

    va: torch.Tensor
    vb: torch.Tensor
    name: str = "IEEE float32 rows (the sequential FP32 chain, fast: gemm_fp32_rows)"


# ==================================================================== declines
def _sequential_fp32(model: GemmModel, plan: Plan) -> bool:
    """The chain is IEEE float32 arithmetic: one product per group, every rounding FP32 RNE
    (fast: ``_sequential_fp32``)."""
    return (model.window_bits is None and plan.longest <= 1 and not model.fused
            and model.group_rounding == "rne" and model.accumulate_rounding == "rne"
            and model.accumulate_bits == FP32_BITS and model.promotion_rounding == "rne"
            and model.operand_domain != "decoded-exact")


def _e2m1_encoded(a, bt, model: GemmModel) -> bool:
    return (isinstance(a, QuantizedTensor) and model.operand_domain == "encoded"
            and a.payload_format == "e2m1" and bt.payload_format == "e2m1")


def _whole(plan: Plan, size: int) -> bool:
    return all(s % size == 0 for s in plan.start) and all(s % size == 0 for s in plan.stop)


def gemm_declines_torch(a, bt, model: GemmModel) -> str | None:
    """Why this twin does not compute ``a @ bt^T`` under ``model`` (None: it does); asked once per
    call by :func:`fpspec.matmul.gemm_path`.  The fast twin's reasons
    (:func:`fpspec.fast.accumulate.exact_only_reason`: the int64 bounds of a window's and a join's
    kept sums, an exact alpha, block terms under a window of other payloads than E2M1 or cut by
    the planned groups), and this twin's own int64 bounds: the product of two operand
    significands, and of a block term's payload sum and its two scale significands; and
    ``product_overflow="inf"`` on E2M1 operands in the encoded domain other than as product
    terms under a window (the fast twin's block sums leave it out)."""
    k = a.shape[1]
    if model.window_bits is not None:
        g = min(model.group_size or k, model.k_tile or k, max(model.slice_lengths(k) or [1]), max(k, 1))
        head = 2
        width = (g + 2).bit_length()
        if model.block_exponent == "scales":
            head = 4
            if model.scale_placement == "block":
                t = model.block_term_size or g
                head = (E2M1_PRODUCT_MAX * t).bit_length()
                width = (g // t + 2).bit_length()
        if model.window_bits + head + width > KEPT_SUM_BITS or model.window_bits < -60:
            return (f"a window of F = {model.window_bits} bits over groups of {g} terms may not fit the torch "
                    "twin's int64 sums")
        if model.join_sum_bits is not None:
            js, jc = model.join_sum_bits, model.join_c_bits
            if max(js, jc) + abs(js - jc) + 4 + width > KEPT_SUM_BITS or model.window_bits > js + 20:  # type: ignore[operator]
                return f"the join's cut sums (S = {js}, C = {jc} bits) may not fit the torch twin's int64 sums"
    if model.alpha_rounding == "exact" and model.alpha_source != "none":
        return "alpha is applied exactly (alpha_rounding='exact'), not as an FP32 value"
    quantized = isinstance(a, QuantizedTensor)
    if quantized and model.operand_domain == "encoded" and model.scale_placement == "block" \
            and model.window_bits is not None:
        if a.payload_format != "e2m1" or bt.payload_format != "e2m1":
            return f"block terms under a window of {a.payload_format} x {bt.payload_format} payloads (E2M1 only)"
        term = model.block_term_size or a.block
        if not _whole(chain_plan(k, model), term):
            return f"planned groups cut block terms of {term} products"
    if _e2m1_encoded(a, bt, model):
        if model.product_overflow == "inf" and (model.scale_placement == "block" or model.window_bits is None):
            return ("product_overflow='inf' on E2M1 operands is carried only on product terms under a window "
                    "(block terms and exact block sums leave it out)")
        term = (model.block_term_size or a.block) if model.scale_placement == "block" else max(a.block, bt.block)
        sbits = get_format(a.scale_format).man_bits + get_format(bt.scale_format).man_bits + 2
        if (E2M1_PRODUCT_MAX * term).bit_length() + sbits > KEPT_SUM_BITS:
            return f"block terms of {term} products with {a.scale_format} scales may not fit int64"
    if quantized and _sig_bits(a, model) + _sig_bits(bt, model) > KEPT_SUM_BITS:
        return (f"operand significands of {_sig_bits(a, model)} and {_sig_bits(bt, model)} bits: their products "
                "may not fit int64")
    return None


def _sig_bits(qt: QuantizedTensor, model: GemmModel) -> int:
    pf, sf = get_format(qt.payload_format), get_format(qt.scale_format)
    bits = pf.man_bits + sf.man_bits + 2
    if model.operand_domain == "decoded-fp32":
        return FP32_BITS + 1
    d = float(np.float32(qt.decode_scale))
    if model.operand_domain == "decoded-exact" and d != 0.0 and math.isfinite(d):
        m, _ = math.frexp(d)
        s = int(math.ldexp(m, 53))
        bits += (s >> ((s & -s).bit_length() - 1)).bit_length()
    return bits


# ==================================================================== dispatch
def _fp32_exact(v: torch.Tensor) -> bool:
    """Every value is an FP32 value (NaN and Inf included): the float32 conversion gives it back."""
    w = v.to(torch.float32).to(torch.float64)
    return bool(((w == v) | torch.isnan(v)).all())


def _terms_kernel(a, bt, model: GemmModel, fmt, plan: Plan, spec: ChainSpec):
    """Step 1: the source of each planned group's terms (fast: ``_terms_kernel``)."""
    quantized = isinstance(a, QuantizedTensor)
    if quantized:
        oa, ob = QuantizedOperand(a, model), QuantizedOperand(bt, model)
    else:
        fa, fb = operand_formats(fmt)
        oa, ob = CodeOperand(a, fa, model), CodeOperand(bt, fb, model)
    if _sequential_fp32(model, plan):
        va, vb = oa.values(), ob.values()
        if _fp32_exact(va) and _fp32_exact(vb):
            return Fp32Rows(va.to(torch.float32), vb.to(torch.float32))
    if _e2m1_encoded(a, bt, model):
        ea, eb = E2M1Operand(a, model), E2M1Operand(bt, model)
        if model.scale_placement == "block" and model.window_bits is not None:
            finite = ea.finite_scales() and eb.finite_scales()
            return BlockSource(ea, eb, model.block_term_size or a.block, model.block_exponent == "scales", spec,
                               not finite)
        if model.window_bits is None and ea.finite_scales() and eb.finite_scales():
            unit = math.gcd(a.block, bt.block, *plan.start, *plan.stop)
            return BlockSource(ea, eb, unit, False, spec, False)
    return ProductSource(oa, ob, model, spec)


def gemm_kernel_torch(a, bt, model: GemmModel, fmt=None) -> dict:
    """How this twin computes a GEMM that is its own (what ``fpspec gemm --explain`` prints):
    ``blas_partials``, whether exact group partial sums come from a library matrix product (here:
    E2M1 payload sums by float64 ``torch.bmm``, exact for every output, no guard needed), and the
    step-1 ``kernel``."""
    plan = chain_plan(a.shape[1], model)
    kernel = _terms_kernel(a, bt, model, fmt, plan, chain_spec(model))
    return {"blas_partials": isinstance(kernel, BlockSource), "kernel": kernel.name}


# ==================================================================== the chain per tile
def _chain(source, rows, cols, shape, device, plan: Plan, spec: ChainSpec, fin: FinishSpec) -> torch.Tensor:
    """The chain's loop (steps 1-7) for one tile of outputs."""
    c = torch.zeros(shape, dtype=torch.float64, device=device)
    big = torch.zeros_like(c)
    total = torch.zeros_like(c)
    for g in range(len(plan.start)):
        terms = source.group(rows, cols, plan.start[g], plan.stop[g])   # step 1
        c = group_step(c, terms, spec)                                  # steps 3-4
        c, big, total = after_group(c, big, total, plan.action[g], spec)  # step 5
    return finish(total, fin)                                           # steps 6-7


def _fp32_chain(kernel: Fp32Rows, rows, cols, plan: Plan, spec: ChainSpec, fin: FinishSpec) -> torch.Tensor:
    """The sequential FP32 chain for one tile (fast: ``gemm_fp32_rows``): group kk is product kk;
    c = c + a b, the promotion and the slice sums as IEEE float32 operations."""
    va = kernel.va[rows]
    if cols is None:
        vb = kernel.vb[rows]
        shape = va.shape[:1]
    else:
        vb = kernel.vb[cols]
        shape = (va.shape[0], vb.shape[0])
    c = torch.zeros(shape, dtype=torch.float32, device=va.device)
    big = torch.zeros_like(c)
    total = torch.zeros_like(c)
    for kk in range(len(plan.start)):
        p = va[:, kk] * vb[:, kk] if cols is None else va[:, kk, None] * vb[None, :, kk]  # RNE32(a b)
        c = c + p                                                                        # RNE32(c + p)
        action = plan.action[kk]
        if action == PROMOTE:
            big, c = big + c, torch.zeros_like(c)
        elif action == END_SLICE:
            r = big + c if spec.promotes else c
            total = total + r
            c, big = torch.zeros_like(c), torch.zeros_like(big)
    return finish(total.to(torch.float64), fin)


def _results(a, bt, model: GemmModel, fmt, alpha: Fraction | None, pairs: bool) -> torch.Tensor:
    """FP32 results (float64, before step 8): (M, N), or (M,) for the pairs (i, i)."""
    device = (a.codes if isinstance(a, QuantizedTensor) else a).device
    plan = chain_plan(a.shape[1], model)
    spec, fin = chain_spec(model), finish_spec(model, alpha)
    kernel = _terms_kernel(a, bt, model, fmt, plan, spec)
    m, n = a.shape[0], bt.shape[0]
    out = torch.empty((m,) if pairs else (m, n), dtype=torch.float64, device=device)
    if isinstance(kernel, Fp32Rows):
        cost = 1

        def run(rows, cols):
            return _fp32_chain(kernel, rows, cols, plan, spec, fin)
    else:
        cost = kernel.cost(plan)

        def run(rows, cols):
            shape = (rows.stop - rows.start,) if cols is None else (rows.stop - rows.start, cols.stop - cols.start)
            return _chain(kernel, rows, cols, shape, device, plan, spec, fin)
    if pairs:
        step = max(1, TERM_ELEMENTS // cost)
        for r0 in range(0, m, step):
            rows = slice(r0, min(m, r0 + step))
            out[rows] = run(rows, None)
        return out
    cstep = min(max(n, 1), max(1, TERM_ELEMENTS // cost))
    rstep = max(1, TERM_ELEMENTS // (cstep * cost))
    for r0 in range(0, m, rstep):
        rows = slice(r0, min(m, r0 + rstep))
        for c0 in range(0, n, cstep):
            cols = slice(c0, min(n, c0 + cstep))
            out[rows, cols] = run(rows, cols)
    return out


# ==================================================================== step 8
def round_bf16_bits(y: torch.Tensor) -> torch.Tensor:
    """Step 8, ``output_format="bf16"`` (FPS-GEMM-12): RNE of float32 values to BF16 on the bits
    (the sign kept, also of a zero; Inf stays, the largest values round to Inf), NaN quiet, back to
    float32 (fast: ``round_bf16_bits``)."""
    bits = y.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    r = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    r = torch.where(torch.isnan(y), torch.full_like(r, OUTPUT_NAN_BITS), r)
    r = torch.where(r >= (1 << 31), r - (1 << 32), r)
    return r.to(torch.int32).view(torch.float32)


def round_fp16_bits(y: torch.Tensor) -> torch.Tensor:
    """Step 8, ``output_format="fp16"`` (FPS-GEMM-19): RNE of FP32 values (float64 carriers) to
    binary16 on their integers (:func:`~fpspec.torch.chain.round_acc_int` to the FP16 lattice,
    IEEE overflow to Inf), a zero keeping the sign; Inf and NaN pass; the exact FP16 values then
    convert to float16 exactly (fast: ``round_fp16_bits``)."""
    fin = torch.isfinite(y)
    sig, lsb = split_fp32(torch.where(fin, y, torch.zeros_like(y)))
    r = round_acc_int(sig, lsb, RNE, _FP16_OUTPUT)
    neg = y.view(torch.int64) < 0
    r = torch.where(r == 0, torch.where(neg, torch.full_like(y, -0.0), torch.zeros_like(y)), r)
    return torch.where(fin, r, y).to(torch.float16)


def canonical_nan(y: torch.Tensor, model: GemmModel) -> torch.Tensor:
    """Every NaN as the one output NaN of ``nan_encoding`` (FPS-GEMM-2, FPS-GEMM-17)."""
    bits = NAN_BITS[(model.nan_encoding, model.output_format)]
    if y.dtype == torch.float16:
        view = y.view(torch.int16)
        return torch.where(torch.isnan(y), torch.full_like(view, bits), view).view(torch.float16)
    view = y.view(torch.int32)
    return torch.where(torch.isnan(y), torch.full_like(view, bits), view).view(torch.float32)


def _output(out: torch.Tensor, model: GemmModel) -> torch.Tensor:
    """Step 8 and the canonical NaN on the FP32 results (float64 carriers)."""
    if model.output_format == "fp16":
        y = round_fp16_bits(out)
    else:
        y = out.to(torch.float32)  # exact: every entry is an FP32 value
        if model.output_format == "bf16":
            y = round_bf16_bits(y)
    return canonical_nan(y, model)


def gemm_torch(a, bt, model: GemmModel, *, fmt=None, alpha: Fraction | None = None) -> torch.Tensor:
    """The torch GEMM ``A (M x K) @ BT (N x K)^T`` (bit-equal to :func:`fpspec.fast.accumulate.gemm_fast`
    and :func:`fpspec.exact.accumulate.gemm_exact`): float32 (M, N) (float16 for ``output_format=
    "fp16"``) on the operands' device.  Operands as :func:`fpspec.matmul.gemm` validated them: two
    torch code tensors of ``fmt`` (a format name or the pair (A's, BT's)) or two QuantizedTensors
    holding torch codes and scales; ``alpha`` the FP32 alpha (a Fraction) or None.  A GEMM for
    which :func:`gemm_declines_torch` gives a reason is not this function's."""
    return _output(_results(a, bt, model, fmt, alpha, pairs=False), model)


def rowdot_torch(a, bt, model: GemmModel, *, fmt=None, alpha: Fraction | None = None) -> torch.Tensor:
    """The diagonal of :func:`gemm_torch`, y[i] = A[i] . BT[i] (M,), for A and BT of one shape,
    computed for the pairs (i, i) only."""
    if a.shape[0] != bt.shape[0]:
        raise FpspecError(f"rowdot needs A and BT of one shape, got {a.shape[0]}x{a.shape[1]} and "
                          f"{bt.shape[0]}x{bt.shape[1]}")
    return _output(_results(a, bt, model, fmt, alpha, pairs=True), model)
