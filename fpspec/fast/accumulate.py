"""Fast GEMM: operand preparation and dispatch, the Numba twin of
:mod:`fpspec.exact.accumulate` (FPS-GEMM-10).

Bit-equal to the exact reference by test (tests/test_gemm_equality.py).  The fast path
is laid out like the exact spec, so the two can be read side by side:

============================================  ==========================================
exact spec                                     fast path
============================================  ==========================================
``gemm_exact``, ``operand_from_codes``,        this module: :func:`gemm_fast`,
``operand_from_quantized``                     :func:`rowdot_fast`, operands as integers
step 1 ``product_terms``, ``block_terms``      :mod:`fpspec.fast.kernels`
steps 2-7 ``chain``, ``group_step``, ...       :mod:`fpspec.fast.chain`
``round_fp32``, ``round_acc``                  :mod:`fpspec.fast.fp32`
step 8 ``round_bf16``                          :func:`round_bf16_bits` (here)
============================================  ==========================================

Every value is carried as an integer significand and a power-of-two exponent; the only
floating-point numbers are FP32 results held in float64 (exact).  The exactness
argument, step by step, is in docs/gemm.rst ("The fast path"); for the operands:

* A decoded code is ``sig * 2^lsb`` with ``sig`` odd (trailing zeros stripped): at most
  11 bits (fp16), 8 (bf16), 4 (e4m3), 3 (e5m2), 2 x 4 = 6 bits for an E2M1 payload times
  an E4M3/UE5M3 scale, 30 bits for an exactly dequantized value (3 x 15 x (2^24 - 1) <
  2^30), 24 bits for an FP32-decoded one.  A product is ``(sa sb) 2^(la+lb)`` with
  ``sa sb < 2^60``: exact in int64.
* E2M1 payloads are held as the integers 2q in [-12, 12] (:func:`payload_ints`).
"""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np

from ..errors import FpspecError
from ..exact.binary32 import FP32_EMIN
from ..formats import get_format
from ..gemm_operands import code_format, operand_formats, tf32_truncate
from ..models import NAN_BITS, ZERO_ALIGNMENT_EXPONENT, GemmModel
from ..quantized import QuantizedTensor
from .chain import NO_TERMS, Plan, chain_plan, chain_spec, finish_spec
from .kernels import (FINITE, NAN, NEG_INF, POS_INF, SPAN_TOO_WIDE, BlockOperand, ScaledBlockOperand, TermOperand,
                      gemm_block_sums_rows, gemm_blocks, gemm_fp32_rows, gemm_products, gemm_scaled_blocks,
                      gemm_window_rows)
from .parallel import run_rows
from .partials import gemm_partials
from .rounding import decode_fast, decode_table, encode_fast

__all__ = ["gemm_fast", "rowdot_fast", "supports", "FastPathUnsupported", "payload_ints", "round_bf16_bits",
           "LARGEST_INT32_BLOCK", "LOCAL_SCALE_BITS"]

#: The largest scale block whose payload sums stay in int32 lanes (144 B < 2^31).
LARGEST_INT32_BLOCK = 1024
#: Widest local block-scale integers of a group (beyond: the exact term-by-term path).
LOCAL_SCALE_BITS = 40
#: The one output NaN (FPS-GEMM-2).
OUTPUT_NAN_BITS = 0x7FC00000


class FastPathUnsupported(Exception):
    """Raised for a configuration the fast path leaves to the exact one."""


def supports(model: GemmModel, k: int) -> bool:
    """Whether the fast path covers this model at this K (else gemm uses the exact path):
    a window's kept sum must fit int64 (F + 2 + bitlen(G + 1) <= 62, G the largest group;
    with ``block_exponent="scales"`` a product is below 2^(E + 4) and a block term of T
    E2M1 products below 144 T 2^E, so F + 4, or F + bitlen(144 T) + bitlen(G/T + 1), in
    place of F + 2); a join's cut sums must fit too; and alpha must be an FP32 value (not
    ``alpha_rounding="exact"``)."""
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
            return False
        if model.join_sum_bits is not None:
            js, jc = model.join_sum_bits, model.join_c_bits
            if max(js, jc) + abs(js - jc) + 4 + width > 62 or model.window_bits > js + 20:  # type: ignore[operator]
                return False
    return model.alpha_rounding != "exact" or model.alpha_source == "none"


# =================================================================== operands
def _zero_exponent(model: GemmModel) -> int:
    """Alignment exponent of a zero operand: -126 under ``zero_alignment="emin"``; else 0,
    never read (zero products are left out) (FPS-GEMM-16)."""
    return ZERO_ALIGNMENT_EXPONENT if model.zero_alignment == "emin" else 0


def _split_values(v: np.ndarray, emin: int | None, zero: int = 0) -> TermOperand:
    """float64 values -> TermOperand (odd sig, lsb, alignment exponent max(floor(log2|v|),
    emin) (``zero`` for a zero), special code)."""
    v = np.asarray(v, dtype=np.float64)
    special = np.full(v.shape, FINITE, dtype=np.int8)
    special[np.isposinf(v)] = POS_INF
    special[np.isneginf(v)] = NEG_INF
    special[np.isnan(v)] = NAN
    fin = np.where(special == FINITE, v, 0.0)
    m, e = np.frexp(fin)
    sig = np.ldexp(m, 53).astype(np.int64)
    lsb = (e.astype(np.int64) - 53)
    aexp = e.astype(np.int64) - 1
    if emin is not None:
        aexp = np.maximum(aexp, emin)
    nz = sig != 0
    for _ in range(53):
        even = nz & ((sig & 1) == 0)
        if not even.any():
            break
        sig = np.where(even, sig >> 1, sig)
        lsb = np.where(even, lsb + 1, lsb)
    if np.abs(sig).max(initial=0) >= (1 << 31):
        raise FpspecError("operand significand wider than 31 bits (internal)")
    lsb = np.where(nz, lsb, 0)
    aexp = np.where(nz, aexp, zero)
    return TermOperand(sig.astype(np.int32), lsb.astype(np.int32), aexp.astype(np.int32), special)


@functools.lru_cache(maxsize=None)
def _code_values(name: str) -> np.ndarray:
    """float64 value of every code of a plain format (exact): fp16 and bf16 from their
    bits, 8-bit formats from the exact decode table."""
    if name == "fp16":
        t = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    elif name == "bf16":
        with np.errstate(invalid="ignore"):  # NaN patterns widen to NaN
            t = (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32).astype(np.float64)
    else:
        t = decode_table(name)
    t.setflags(write=False)
    return t


@functools.lru_cache(maxsize=None)
def _code_terms(name: str, emin: int, zero: int) -> TermOperand:
    """:func:`_split_values` of every code of a plain format (cached per format)."""
    op = _split_values(_code_values(name), emin, zero)
    for x in op:
        x.setflags(write=False)
    return op


def _code_operand(codes: np.ndarray, name: str, model: GemmModel) -> TermOperand:
    """Code array (rows, K) of operand format ``name`` -> TermOperand: exact decoded values,
    alignment exponent with the input format's emin (FP32's for ``decoded-fp32``), a zero's
    per ``zero_alignment`` (exact: ``operand_from_codes``).  ``tf32``: the FP32 codes with
    their low 13 bits cleared, split directly (no table of 2^32 codes)."""
    fmt = code_format(name)
    emin = FP32_EMIN if model.operand_domain == "decoded-fp32" else fmt.emin
    if name == "tf32":
        return _split_values(decode_fast(tf32_truncate(codes), fmt), emin, _zero_exponent(model))
    table = _code_terms(fmt.name, emin, _zero_exponent(model))
    idx = codes.astype(np.intp)
    return TermOperand(*(x[idx] for x in table))


def payload_ints(qt) -> np.ndarray:
    """2 x E2M1 value of every payload code, int8 (exact: E2M1 values are multiples of 1/2)."""
    table = decode_table(get_format(qt.payload_format))
    lut = (table * 2).astype(np.int8)
    if qt.codes.max(initial=0) >= len(lut):
        raise FpspecError(f"payload code out of range for {qt.payload_format}")
    return lut[qt.codes.astype(np.intp)]


def _scale_values(qt) -> np.ndarray:
    """float64 block scale per (row, block) (2-D tiles repeated over their rows)."""
    fmt = get_format(qt.scale_format)
    if qt.scales.max(initial=0) >= fmt.num_codes:
        bad = int(np.argmax(qt.scales.reshape(-1) >= fmt.num_codes))
        raise FpspecError(f"scale code {int(qt.scales.reshape(-1)[bad])} out of range for {fmt.name}",
                          tuple(int(x) for x in np.unravel_index(bad, qt.scales.shape)))
    grid = qt.scales if qt.tile == "1xB" else np.repeat(qt.scales, qt.block, axis=0)
    return decode_table(fmt)[grid.astype(np.intp)]


def _quantized_values(qt, model: GemmModel) -> np.ndarray:
    """float64 operand values of a QuantizedTensor in the model's domain (exact; exact:
    ``operand_from_quantized``)."""
    p = decode_table(get_format(qt.payload_format))[qt.codes.astype(np.intp)]
    s = np.repeat(_scale_values(qt), qt.block, axis=1)
    with np.errstate(invalid="ignore"):
        v = p * s  # exact: 2-bit x 4-bit significands (or x 1 for E8M0), in float64 range
    if model.operand_domain == "encoded":
        return v
    d = float(np.float32(qt.decode_scale))
    if model.operand_domain == "decoded-fp32":
        with np.errstate(invalid="ignore", over="ignore"):
            w = v * d  # exact in float64: <= 6 + 24 significant bits, exponents within range
            return w.astype(np.float32).astype(np.float64)  # one IEEE rounding, RNE
    with np.errstate(invalid="ignore"):
        return v * d  # exact: < 2^30 significand, exponent >= -149 - 17 - 1


def _floor_log2_table(table: np.ndarray, emin: int, zero: int) -> np.ndarray:
    """max(floor(log2|v|), emin) of every finite nonzero entry of a decode table, ``zero``
    for a zero, NO_TERMS for a special (float64 frexp: exact)."""
    fin = np.where(np.isfinite(table), table, 0.0)
    _, e = np.frexp(fin)
    out = np.maximum(e.astype(np.int64) - 1, emin)
    out = np.where(fin == 0.0, zero, out)
    return np.where(np.isfinite(table), out, NO_TERMS).astype(np.int64)


def _quantized_operand(qt, model: GemmModel) -> TermOperand:
    """A QuantizedTensor as a TermOperand of its values in the model's domain; under
    ``block_exponent="scales"`` the alignment exponent is e(payload) + e(scale), each with
    its own format's emin (exact: ``operand_from_quantized``)."""
    zero = _zero_exponent(model)
    op = _split_values(_quantized_values(qt, model), FP32_EMIN if model.operand_domain == "decoded-fp32" else None,
                       zero)
    if model.block_exponent != "scales":
        return op
    pf, sf = get_format(qt.payload_format), get_format(qt.scale_format)
    ep = _floor_log2_table(decode_table(pf), pf.emin, zero)[qt.codes.astype(np.intp)]
    grid = qt.scales if qt.tile == "1xB" else np.repeat(qt.scales, qt.block, axis=0)
    es = np.repeat(_floor_log2_table(decode_table(sf), sf.emin, zero)[grid.astype(np.intp)], qt.block, axis=1)
    aexp = np.where((ep == NO_TERMS) | (es == NO_TERMS), 0, ep + es)
    return op._replace(aexp=aexp.astype(np.int32))


def _scaled_block_operand(qt, model: GemmModel) -> ScaledBlockOperand:
    """An E2M1 QuantizedTensor as a ScaledBlockOperand (per (row, block) scale: sig, lsb,
    alignment exponent with the scale format's emin, special code)."""
    sf = get_format(qt.scale_format)
    sv = _scale_values(qt)
    split = _split_values(sv, None)
    grid = qt.scales if qt.tile == "1xB" else np.repeat(qt.scales, qt.block, axis=0)
    zero = ZERO_ALIGNMENT_EXPONENT if model.zero_alignment == "emin" else NO_TERMS
    aexp = _floor_log2_table(decode_table(sf), sf.emin, zero)[grid.astype(np.intp)]
    return ScaledBlockOperand(payload_ints(qt), split.sig, split.lsb, aexp.astype(np.int32), split.special)


def _bitlen_np(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.int64)
    n = np.zeros(x.shape, dtype=np.int64)
    for b in range(62, -1, -1):
        hit = (n == 0) & (x >= (np.int64(1) << b))
        n = np.where(hit, b + 1, n)
    return n


def _block_operand(qt, scales: np.ndarray, plan: Plan | None, transposed: bool) -> BlockOperand:
    """A QuantizedTensor as a BlockOperand; with a plan, its block scales per planned group
    as integers relative to the group's smallest scale exponent (width SPAN_TOO_WIDE
    where they need more than LOCAL_SCALE_BITS)."""
    sv = _split_values(scales, None)
    sig, lsb = sv.sig.astype(np.int64), sv.lsb.astype(np.int64)
    if plan is None:
        local = base = width = np.zeros((1, 1), dtype=np.int64)
    else:
        first = plan.start // qt.block
        blocks = (plan.stop - plan.start) // qt.block
        far = np.int64(1 << 40)
        base = np.minimum.reduceat(np.where(sig != 0, lsb, far), first, axis=1)
        base = np.where(base == far, 0, base)
        shift = np.where(sig != 0, lsb - np.repeat(base, blocks, axis=1), 0)
        width = np.maximum.reduceat(np.where(sig != 0, _bitlen_np(np.abs(sig)) + shift, 0), first, axis=1)
        fits = width <= LOCAL_SCALE_BITS
        local = np.where(np.repeat(fits, blocks, axis=1) & (sig != 0), sig << np.clip(shift, 0, 62), 0)
        width = np.where(fits, width, SPAN_TOO_WIDE)
    arrays = (payload_ints(qt), sig.astype(np.int32), lsb.astype(np.int32), local, base, width)
    if transposed:
        arrays = tuple(np.ascontiguousarray(x.T) if x.shape != (1, 1) else x for x in arrays)
    return BlockOperand(*arrays)


def _transposed(op: TermOperand) -> TermOperand:
    return TermOperand(*(np.ascontiguousarray(x.T) for x in op))


def _fp32_exact(v: np.ndarray) -> bool:
    """Whether every value is an FP32 value (NaN and Inf included)."""
    with np.errstate(invalid="ignore", over="ignore"):
        w = v.astype(np.float32).astype(np.float64)
    return bool(np.array_equal(w, v, equal_nan=True))


# =================================================================== dispatch
def _sequential_fp32(model: GemmModel, plan: Plan) -> bool:
    """The chain is IEEE float32 arithmetic: one product per group; p, c + p and the
    promotion FP32 RNE."""
    return (model.window_bits is None and plan.longest <= 1 and not model.fused
            and model.group_rounding == "rne" and model.accumulate_rounding == "rne"
            and model.accumulate_bits == 23 and model.promotion_rounding == "rne"
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


def _product_kernel(opa: TermOperand, opb: TermOperand, model: GemmModel):
    """Product terms: the row-vectorised window kernel where it applies, else the general one."""
    finite = not opa.special.any() and not opb.special.any()
    if _row_window(model) and finite:
        return gemm_window_rows, (opa, _transposed(opb))
    return gemm_products, (opa, opb, model.product_exponent == "exact")


def _whole_terms(plan: Plan, size: int) -> bool:
    """Every planned group holds whole block terms of ``size`` products."""
    return plan.start.size > 0 and not (plan.start % size).any() and not (plan.stop % size).any()


def _code_values_of(codes: np.ndarray, name: str) -> np.ndarray:
    """float64 values of a code array of operand format ``name`` (exact)."""
    if name == "tf32":
        return decode_fast(tf32_truncate(codes), code_format(name))
    return _code_values(code_format(name).name)[np.asarray(codes).astype(np.intp)]


def _block_kernel(a, bt, model: GemmModel, plan: Plan):
    """Step 1 for E2M1 QuantizedTensors in the encoded domain where a block kernel applies
    (None: the product kernels take them)."""
    e2m1 = a.payload_format == "e2m1" and bt.payload_format == "e2m1"
    block = model.scale_placement == "block" and model.window_bits is not None
    if not e2m1:
        if block:
            raise FastPathUnsupported()  # FP8 payloads in block terms under a window
        return None
    sva, svb = _scale_values(a), _scale_values(bt)
    finite = bool(np.isfinite(sva).all() and np.isfinite(svb).all())
    whole = _whole_blocks(plan, a, bt)
    if finite and whole and model.window_bits is None:
        return gemm_block_sums_rows, (_block_operand(a, sva, plan, False), _block_operand(bt, svb, plan, True),
                                      a.block)
    if not block:
        return None
    term = model.block_term_size or a.block
    if finite and whole and term == a.block and model.block_exponent == "value":
        return gemm_blocks, (_block_operand(a, sva, None, False), _block_operand(bt, svb, None, False), a.block)
    if _whole_terms(plan, term) and term <= LARGEST_INT32_BLOCK:
        return gemm_scaled_blocks, (_scaled_block_operand(a, model), _scaled_block_operand(bt, model), term,
                                    a.block, bt.block, model.block_exponent == "scales")
    raise FastPathUnsupported()  # block terms that planned groups cut


def _terms_kernel(a, bt, model: GemmModel, fmt, plan: Plan):
    """Step 1: the kernel that forms the terms of each planned group, and its operands."""
    quantized = isinstance(a, QuantizedTensor)
    if _sequential_fp32(model, plan):
        if quantized:
            va, vb = _quantized_values(a, model), _quantized_values(bt, model)
        else:
            fa, fb = operand_formats(fmt)
            va, vb = _code_values_of(a, fa), _code_values_of(bt, fb)
        # every operand value is an FP32 value here (FP8/16 codes, E2M1 x scale with <= 6
        # significant bits and |exponent| < 127 + 17 + 3, FP32-decoded values); checked
        if _fp32_exact(va) and _fp32_exact(vb):
            return gemm_fp32_rows, (va.astype(np.float32), np.ascontiguousarray(vb.astype(np.float32).T))
    if quantized and model.operand_domain == "encoded":
        kernel = _block_kernel(a, bt, model, plan)
        if kernel is not None:
            return kernel
    if quantized:
        return _product_kernel(_quantized_operand(a, model), _quantized_operand(bt, model), model)
    fa, fb = operand_formats(fmt)
    return _product_kernel(_code_operand(np.asarray(a), fa, model), _code_operand(np.asarray(bt), fb, model), model)


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
    alpha (a Fraction) or None.  Raises :class:`FastPathUnsupported` for configurations
    left to the exact path.
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

