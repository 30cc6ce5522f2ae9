"""Fast GEMM: dispatch, the Numba twin of :mod:`fpspec.exact.accumulate` (FPS-GEMM-10).

Bit-equal to the exact reference by test (tests/test_gemm_equality.py).  The fast path
is laid out like the exact spec, so the two can be read side by side:

============================================  ==========================================
exact spec                                     fast path
============================================  ==========================================
``gemm_exact``                                 this module: :func:`gemm_fast`,
                                               :func:`rowdot_fast`
``operand_from_codes``,                        :mod:`fpspec.fast.operands`: operands as
``operand_from_quantized``                     integer significands and exponents
step 1 ``product_terms``, ``block_terms``      :mod:`fpspec.fast.kernels`; exact group
                                               sums through BLAS: :mod:`fpspec.fast.partials`
steps 2-7 ``chain``, ``group_step``, ...       :mod:`fpspec.fast.chain`
``round_fp32``, ``round_acc``                  :mod:`fpspec.fast.fp32`
step 8 ``round_bf16``                          :func:`round_bf16_bits` (here)
============================================  ==========================================

Every value is carried as an integer significand and a power-of-two exponent; the only
floating-point numbers are FP32 results held in float64 (exact) and, in the narrow window
kernel, float32 products proved exact (:func:`float_products`).  The exactness
argument, step by step, is in docs/gemm.rst ("The fast path").  A product of two operand
terms is ``(sa sb) 2^(la+lb)`` with ``sa sb < 2^60``: exact in int64.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..exact.binary32 import FP32_EMIN
from ..gemm_operands import operand_formats
from ..models import NAN_BITS, GemmModel
from ..quantized import QuantizedTensor
from .chain import Plan, chain_plan, chain_spec, finish_spec
from .fp32 import FLOAT32_BITS, FP32_BITS
from .kernels import (E2M1_PRODUCT_MAX, KEPT_SUM_BITS, AlignedOperand, TermOperand, gemm_block_sums_rows, gemm_blocks,
                      gemm_fp32_rows, gemm_products, gemm_scaled_blocks, gemm_window_narrow_rows, gemm_window_rows)
from .operands import (LOCAL_SCALE_BITS, ValueRange, aligned_codes, aligned_operand, aligned_values, block_operand,
                       code_operand, code_values_of, fp32_exact, narrow_lanes, payload_ints, quantized_operand,
                       quantized_values, scale_values, scaled_block_operand, transposed)
from .parallel import run_rows
from .partials import applies, gemm_partials
from .rounding import encode_fast

__all__ = ["gemm_fast", "rowdot_fast", "exact_only_reason", "fast_kernel", "narrow_window", "float_products",
           "payload_ints", "round_bf16_bits", "LARGEST_INT32_BLOCK", "LOCAL_SCALE_BITS"]

#: The largest scale block whose payload sums stay in int32 lanes (E2M1_PRODUCT_MAX x B < 2^31).
LARGEST_INT32_BLOCK = 1024
#: The one output NaN (FPS-GEMM-2).
OUTPUT_NAN_BITS = 0x7FC00000


def exact_only_reason(a, bt, model: GemmModel) -> str | None:
    """Why the exact spec, not this twin, computes ``a @ bt^T`` under ``model`` (None: this twin
    does): the one place the fast path says which GEMMs are not its own (:func:`fpspec.matmul.gemm_path`
    asks it once per call).  Checked, in order:

    * a window's kept sum must fit int64 (F + 2 + bitlen(G + 1) <= 62, G the largest group;
      with ``block_exponent="scales"`` a product is below 2^(E + 4) and a block term of T
      E2M1 products below 144 T 2^E, so F + 4, or F + bitlen(144 T) + bitlen(G/T + 1), in
      place of F + 2), and a join's cut sums too;
    * alpha must be an FP32 value (not ``alpha_rounding="exact"``);
    * block terms under a window (``scale_placement="block"``) need E2M1 payloads, and planned
      groups that hold whole block terms of at most :data:`LARGEST_INT32_BLOCK` products, unless
      whole finite scale blocks of the term size take the block-sum kernel.
    """
    k = a.shape[1]
    if model.window_bits is not None:
        g = min(model.group_size or k, model.k_tile or k, max(model.slice_lengths(k) or [1]), max(k, 1))
        head = 2
        width = (g + 2).bit_length()
        if model.block_exponent == "scales":
            head = 4
            if model.scale_placement == "block":
                t = model.block_term_size or g
                head = (144 * t).bit_length()
                width = (g // t + 2).bit_length()
        if model.window_bits + head + width > 62 or model.window_bits < -60:
            return (f"a window of F = {model.window_bits} bits over groups of {g} terms may not fit the fast "
                    "path's int64 sums")
        if model.join_sum_bits is not None:
            js, jc = model.join_sum_bits, model.join_c_bits
            if max(js, jc) + abs(js - jc) + 4 + width > 62 or model.window_bits > js + 20:  # type: ignore[operator]
                return f"the join's cut sums (S = {js}, C = {jc} bits) may not fit the fast path's int64 sums"
    if model.alpha_rounding == "exact" and model.alpha_source != "none":
        return "alpha is applied exactly (alpha_rounding='exact'), not as an FP32 value"
    if isinstance(a, QuantizedTensor) and model.operand_domain == "encoded" and model.scale_placement == "block" \
            and model.window_bits is not None:
        if a.payload_format != "e2m1" or bt.payload_format != "e2m1":
            return f"block terms under a window of {a.payload_format} x {bt.payload_format} payloads (E2M1 only)"
        plan = chain_plan(k, model)
        term = model.block_term_size or a.block
        if not (_whole_terms(plan, term) and term <= LARGEST_INT32_BLOCK) and not (
                term == a.block and model.block_exponent == "value" and _whole_blocks(plan, a, bt)
                and _finite_scales(a, bt)):
            return f"planned groups cut block terms of {term} products"
    return None


def _finite_scales(a: QuantizedTensor, bt: QuantizedTensor) -> bool:
    return bool(np.isfinite(scale_values(a)).all() and np.isfinite(scale_values(bt)).all())


# =================================================================== dispatch
def _sequential_fp32(model: GemmModel, plan: Plan) -> bool:
    """The chain is IEEE float32 arithmetic: one product per group; p, c + p and the
    promotion FP32 RNE."""
    return (model.window_bits is None and plan.longest <= 1 and not model.fused
            and model.group_rounding == "rne" and model.accumulate_rounding == "rne"
            and model.accumulate_bits == FP32_BITS and model.promotion_rounding == "rne"
            and model.operand_domain != "decoded-exact")


def _whole_blocks(plan: Plan, a, bt) -> bool:
    """Every planned group holds whole scale blocks of one size that int32 lanes carry."""
    b = a.block
    return (b == bt.block and b <= LARGEST_INT32_BLOCK and plan.start.size > 0
            and not (plan.start % b).any() and not (plan.stop % b).any())


def _row_window(model: GemmModel) -> bool:
    """Whether the row-vectorised window kernel computes this model's groups: a plain window
    (no lanes, no join, no product overflow) with ``product_exponent="operands"``."""
    return (model.window_bits is not None and model.product_exponent == "operands" and model.window_lanes == 1
            and model.join_sum_bits is None and model.product_overflow == "none")


#: The largest group sum the int32 lanes of :func:`~fpspec.fast.kernels.gemm_window_narrow_rows`
#: hold: 2^31 - 1.
NARROW_MAX_SUM = 2 ** 31 - 1
#: Widest window of the narrow kernel: kept c below 2^(F + 1) and a kept sum below 2^31
#: add below 2^53 (``accumulate_row``).
NARROW_MAX_WINDOW = 50
#: Largest alignment exponent magnitude of the narrow kernel's operands: E - eb - ea - shift
#: stays in int32, also for E = NO_TERMS (-2^30).
NARROW_EXPONENTS = 1 << 20


def narrow_window(model: GemmModel, longest: int, wa: int, pa: int, wb: int, pb: int,
                  exponents: int) -> bool:
    """Whether a group's kept sum fits the int32 lanes of the narrow window kernel for
    operands on one scale (widths wa, wb with wa + wb >= F; largest m of pa and pb bits;
    groups of at most ``longest`` products; alignment exponents of magnitude at most
    ``exponents``): a kept term is at most a product, at most (2^pa - 1)(2^pb - 1) in
    magnitude, so G of them sum to at most G (2^pa - 1)(2^pb - 1), which must be at most
    2^31 - 1 (FPS-GEMM-10; BF16 and FP16 under a 25-bit window with G = 16 fit, by 0.4 %
    and 0.05 %)."""
    f = model.window_bits
    floor = abs(model.align_exponent_floor or 0)
    return (wa + wb >= f and f <= NARROW_MAX_WINDOW and max(exponents, floor) <= NARROW_EXPONENTS
            and max(longest, 1) * ((1 << pa) - 1) * ((1 << pb) - 1) <= NARROW_MAX_SUM)


def float_products(model: GemmModel, ra: ValueRange, rb: ValueRange) -> bool:
    """Whether the narrow window kernel may form every product's kept part as
    trunc(va vb 2^(F - E)) in float32 (FPS-GEMM-10), given the operands' value ranges
    (:func:`~fpspec.fast.operands.aligned_values`): the window truncates toward zero;
    every value is a float32 number; a product's significand has at most 24 bits (so va vb
    is exact where it is normal) and is normal (floor(log2|va|) + floor(log2|vb|) in
    [-126, 125]: |va vb| in [2^-126, 2^127)); and 2^(F - E) is a float32 number for every
    E a nonzero product can have (E >= ea + eb, so F - least ea - least eb <= 127).  Then
    va vb 2^(F - E) is exact where it is at least 2^-126, and below 1 (a kept 0) where not."""
    if model.below_window != "truncate" or not (ra.float32 and rb.float32):
        return False
    return (ra.bits + rb.bits <= FLOAT32_BITS and ra.low + rb.low >= FP32_EMIN and ra.high + rb.high <= 125
            and model.window_bits - ra.least_exponent - rb.least_exponent <= 127)


def _narrow(bt: tuple, aligned_a, model: GemmModel, plan: Plan):
    """The narrow window kernel and its operands, given BT on one scale (``bt``: the
    AlignedOperand, its width and bits, from :func:`~fpspec.fast.operands.aligned_operand`)
    and ``aligned_a(width)`` putting A on one scale of at least that width; None where a
    group's kept sum may not fit int32 (:func:`narrow_window`) or an exponent does not fit
    the narrowest lanes' widths (:data:`~fpspec.fast.kernels.LANE_WIDTHS`); the float32
    products where :func:`float_products` proves them exact."""
    ab, wb, pb = bt
    if ab is None:
        return None
    aa, wa, pa = aligned_a(model.window_bits - wb)  # wa + wb >= F: every product cut by a right shift
    if aa is None:
        return None
    exponents = max(int(np.abs(x.e).max(initial=0)) for x in (aa, ab))
    if not narrow_window(model, plan.longest, wa, pa, wb, pb, exponents):
        return None
    (va, ra), (vb, rb) = aligned_values(aa, wa), aligned_values(ab, wb)
    products = va is not None and vb is not None and float_products(model, ra, rb)
    zero_terms = model.zero_alignment == "emin"
    la = narrow_lanes(aa, zero_terms, va if products else None, exponents)
    lb = narrow_lanes(ab, zero_terms, vb if products else None, exponents)
    if la is None or lb is None:
        return None
    if products:  # pass 2 reads the float32 values only: A's integers as int32 placeholders
        aa = AlignedOperand(np.zeros((1, 1), dtype=np.int32), np.zeros((1, 1), dtype=np.int32))
    else:  # A is read one value at a time: int32 (its values' range unknown to the compiler,
        # which then keeps the products in int32 lanes)
        aa = AlignedOperand(aa.m.astype(np.int32), aa.e.astype(np.int32))
    return gemm_window_narrow_rows, (aa, ab, la, lb, model.window_bits - wa - wb, products)


def _product_kernel(opa: TermOperand, opb: TermOperand, model: GemmModel, plan: Plan):
    """Product terms: the row-vectorised window kernel where it applies (in int32 lanes
    where a group's kept sum fits them), else the general one."""
    finite = not opa.special.any() and not opb.special.any()
    if _row_window(model) and finite:
        bt = transposed(opb)
        narrow = _narrow(aligned_operand(bt), lambda w: aligned_operand(opa, w), model, plan)
        if narrow is not None:
            return narrow
        return gemm_window_rows, (opa, bt)
    return gemm_products, (opa, opb, model.product_exponent == "exact")


def _code_kernel(a: np.ndarray, bt: np.ndarray, fmt, model: GemmModel, plan: Plan):
    """Product terms of code operands: the narrow window kernel straight from the formats'
    code tables where it applies (no per-element split), else :func:`_product_kernel`."""
    fa, fb = operand_formats(fmt)
    a, bt = np.asarray(a), np.asarray(bt)
    if _row_window(model):
        narrow = _narrow(aligned_codes(np.ascontiguousarray(bt.T), fb, model),
                         lambda w: aligned_codes(a, fa, model, w), model, plan)
        if narrow is not None:
            return narrow
    return _product_kernel(code_operand(a, fa, model), code_operand(bt, fb, model), model, plan)


def _whole_terms(plan: Plan, size: int) -> bool:
    """Every planned group holds whole block terms of ``size`` products."""
    return plan.start.size > 0 and not (plan.start % size).any() and not (plan.stop % size).any()



def _block_kernel(a, bt, model: GemmModel, plan: Plan):
    """Step 1 for E2M1 QuantizedTensors in the encoded domain where a block kernel applies
    (None: the product kernels take them; :func:`exact_only_reason` has left the block terms no
    kernel here takes to the exact spec)."""
    e2m1 = a.payload_format == "e2m1" and bt.payload_format == "e2m1"
    block = model.scale_placement == "block" and model.window_bits is not None
    if not e2m1:
        return None
    sva, svb = scale_values(a), scale_values(bt)
    finite = bool(np.isfinite(sva).all() and np.isfinite(svb).all())
    whole = _whole_blocks(plan, a, bt)
    if finite and whole and model.window_bits is None:
        return gemm_block_sums_rows, (block_operand(a, sva, plan, False), block_operand(bt, svb, plan, True),
                                      a.block)
    if not block:
        return None
    term = model.block_term_size or a.block
    if finite and whole and term == a.block and model.block_exponent == "value":
        return gemm_blocks, (block_operand(a, sva, None, False), block_operand(bt, svb, None, False), a.block)
    return gemm_scaled_blocks, (scaled_block_operand(a, model), scaled_block_operand(bt, model), term,
                                a.block, bt.block, model.block_exponent == "scales")


def _terms_kernel(a, bt, model: GemmModel, fmt, plan: Plan):
    """Step 1: the kernel that forms the terms of each planned group, and its operands."""
    quantized = isinstance(a, QuantizedTensor)
    if _sequential_fp32(model, plan):
        if quantized:
            va, vb = quantized_values(a, model), quantized_values(bt, model)
        else:
            fa, fb = operand_formats(fmt)
            va, vb = code_values_of(a, fa), code_values_of(bt, fb)
        # every operand value is an FP32 value here (FP8/16 codes, E2M1 x scale with <= 6
        # significant bits and |exponent| < 127 + 17 + 3, FP32-decoded values); checked
        if fp32_exact(va) and fp32_exact(vb):
            return gemm_fp32_rows, (va.astype(np.float32), np.ascontiguousarray(vb.astype(np.float32).T))
    if quantized and model.operand_domain == "encoded":
        kernel = _block_kernel(a, bt, model, plan)
        if kernel is not None:
            return kernel
    if quantized:
        return _product_kernel(quantized_operand(a, model), quantized_operand(bt, model), model, plan)
    return _code_kernel(a, bt, fmt, model, plan)


def fast_kernel(a, bt, model: GemmModel, fmt=None) -> tuple[bool, str]:
    """How this twin computes a GEMM that is its own (:func:`exact_only_reason` None): whether
    exact group sums through BLAS are tried first (:func:`fpspec.fast.partials.applies`; its
    exactness guard may still hand outputs back), and the name of the step-1 term kernel
    otherwise.  What ``fpspec gemm --explain`` prints; it builds the kernel's operands."""
    plan = chain_plan(a.shape[1], model)
    kernel, _ = _terms_kernel(a, bt, model, fmt, plan)
    return applies(a, bt, model, plan), getattr(kernel, "__name__", str(kernel))


def _canonical_nan(y: np.ndarray, model: GemmModel) -> np.ndarray:
    """Every NaN as the one output NaN of ``nan_encoding`` (FPS-GEMM-2, FPS-GEMM-17)."""
    nan = np.isnan(y)
    if nan.any():
        view = np.uint16 if y.dtype == np.float16 else np.uint32
        y.view(view)[nan] = NAN_BITS[(model.nan_encoding, model.output_format)]
    return y


def round_bf16_bits(y: np.ndarray) -> np.ndarray:
    """Step 8, ``output_format="bf16"`` (FPS-GEMM-12): RNE of FP32 values to BF16 on the
    bits (the sign kept, also of a zero; NaN quiet), back to float32 (exact:
    ``round_bf16``)."""
    bits = y.astype(np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(y)
    r = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    r = np.where(nan, OUTPUT_NAN_BITS, r).astype(np.uint32)
    return r.view(np.float32)


def round_fp16_bits(y: np.ndarray) -> np.ndarray:
    """Step 8, ``output_format="fp16"`` (FPS-GEMM-19): RNE of FP32 values to FP16 with
    fpspec's own conversion (:func:`fpspec.fast.rounding.encode_fast`, tested against the
    exact rounding), signs of zeros kept, IEEE overflow to Inf (exact: ``round_fp16``).  The
    values of an FP16 accumulator convert exactly."""
    return encode_fast(y.astype(np.float32), "fp16", "rne").view(np.float16)


def gemm_fast(a, bt, model: GemmModel, *, fmt=None,
              alpha: Fraction | None = None) -> np.ndarray:
    """The fast GEMM (bit-equal to :func:`fpspec.exact.accumulate.gemm_exact`).

    Arguments are already validated by :func:`fpspec.matmul.gemm`; ``alpha`` is the FP32
    alpha (a Fraction) or None.  A GEMM for which :func:`exact_only_reason` gives a reason is
    not this function's (:func:`fpspec.matmul.gemm` sends it to the exact spec).
    """
    k = a.shape[1]
    plan = chain_plan(k, model)
    out = gemm_partials(a, bt, model, fmt, plan, alpha)  # BLAS partial sums (fast/partials.py); None: not there
    if out is None:
        kernel, operands = _terms_kernel(a, bt, model, fmt, plan)
        m, n = a.shape[0], bt.shape[0]
        out = np.empty((m, n), dtype=np.float64)
        run_rows(kernel, m, (*operands, plan, chain_spec(model), finish_spec(model, alpha), out),
                 m * n * max(k, 1))
    y = out.astype(np.float32)  # exact: every entry is an FP32 value
    if model.output_format == "bf16":
        y = round_bf16_bits(y)
    elif model.output_format == "fp16":
        y = round_fp16_bits(y)
    return _canonical_nan(y, model)


def _row(x, i: int):
    return np.asarray(x)[i:i + 1]


def rowdot_fast(a, bt, model: GemmModel, *, fmt=None,
                alpha: Fraction | None = None) -> np.ndarray:
    """The diagonal of :func:`gemm_fast`, y[i] = A[i] . BT[i] (M,): one 1 x 1 GEMM per row
    pair for code arrays; for quantized operands (whose 2-D tiles span rows) the diagonal
    of the whole GEMM."""
    if isinstance(a, QuantizedTensor):
        return np.diagonal(gemm_fast(a, bt, model, fmt=fmt, alpha=alpha)).copy()
    out = np.empty(a.shape[0], dtype=np.float16 if model.output_format == "fp16" else np.float32)
    for i in range(a.shape[0]):
        out[i] = gemm_fast(_row(a, i), _row(bt, i), model, fmt=fmt, alpha=alpha)[0, 0]
    return out

