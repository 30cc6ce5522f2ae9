"""What a GEMM accepts, checked once (FPS-GEMM-4, FPS-GEMM-9).

:func:`fpspec.matmul.gemm` and :func:`fpspec.exact.accumulate.gemm_exact` both call
:func:`check_operands`; the fast path receives operands already checked.
"""

from __future__ import annotations

import numpy as np

from .errors import FpspecError
from .formats import get_format
from .models import GemmModel
from .quantized import QuantizedTensor

__all__ = ["CODE_FORMATS", "QUANTIZED_PAYLOADS", "TF32_DROPPED_BITS", "operand_formats", "code_format",
           "tf32_truncate", "check_operands", "check_code_pair", "check_quantized_pair", "check_codes_in_range"]

#: Plain operand formats accepted as code arrays (FPS-GEMM-4); ``tf32`` is an operand
#: format, not a format of its own: FP32 codes (uint32) of which the instruction keeps the
#: top 19 bits (FPS-GEMM-20).
CODE_FORMATS = ("e4m3", "e5m2", "fp16", "bf16", "e4m3fnuz", "e5m2fnuz", "tf32")
#: Payload formats of quantized operands: E2M1 (FP4 block scaling) and the FP8 payloads of
#: MXFP8 (OCP MX v1.0; ``kind::mxf8f6f4``) (FPS-GEMM-4).
QUANTIZED_PAYLOADS = ("e2m1", "e4m3", "e5m2")
#: The low FP32 bits a TF32 operand drops: the instruction truncates them (MMA-Sim
#: ``truncate_to_tf32``: the code with its low 13 bits cleared), it does not round.
TF32_DROPPED_BITS = 13


def operand_formats(fmt) -> tuple[str, str]:
    """``fmt`` of code-array operands as (A's format, BT's format): one name for both, or
    a pair of names (mixed operand formats, e.g. ``("e4m3", "e5m2")``) (FPS-GEMM-4)."""
    pair = (fmt, fmt) if isinstance(fmt, str) else fmt
    if not isinstance(pair, (tuple, list)) or len(pair) != 2 or not all(isinstance(f, str) for f in pair):
        raise FpspecError(f"code-array operands need fmt, one of {', '.join(CODE_FORMATS)} or a pair of them "
                          f"(A's, BT's); got {fmt!r}")
    for f in pair:
        if f not in CODE_FORMATS:
            raise FpspecError(f"code-array operands need fmt, one of {', '.join(CODE_FORMATS)} or a pair of them "
                              f"(A's, BT's); got {fmt!r}")
    return pair[0], pair[1]


def code_format(name: str):
    """The FloatFormat that decodes an operand format's codes (``tf32``: FP32, after
    :func:`tf32_truncate`)."""
    return get_format("fp32" if name == "tf32" else name)


def tf32_truncate(codes: np.ndarray) -> np.ndarray:
    """FP32 codes as a TF32 operand reads them: the low 13 bits cleared (FPS-GEMM-20).  An FP32
    NaN whose payload lies only in those bits becomes an Inf, as the truncation says."""
    return np.asarray(codes, dtype=np.uint32) & np.uint32(~((1 << TF32_DROPPED_BITS) - 1) & 0xFFFFFFFF)


def check_operands(a, bt, model: GemmModel, fmt):
    """Validate a GEMM's operand pair (FPS-GEMM-4): both QuantizedTensors, or both code
    arrays of ``fmt`` (one format, or a pair: A's, BT's), with matching K that the model
    accepts.

    Returns ``(a, bt, quantized)``, code arrays as ndarrays.
    """
    quantized = isinstance(a, QuantizedTensor)
    if quantized != isinstance(bt, QuantizedTensor):
        raise FpspecError("A and BT must both be QuantizedTensors or both code arrays")
    if quantized:
        check_quantized_pair(a, bt, model)
    else:
        a = np.asarray(a)
        bt = np.asarray(bt)
        check_code_pair(a, bt, fmt)
    model.check_k(a.shape[1])
    return a, bt, quantized


def check_code_pair(a: np.ndarray, bt: np.ndarray, fmt) -> None:
    """Shapes and dtypes of code-array operands (FPS-GEMM-9)."""
    fa, fb = operand_formats(fmt)
    for name, x, f in (("A", a, fa), ("BT", bt, fb)):
        want = code_format(f).storage_dtype
        if x.ndim != 2:
            raise FpspecError(f"{name} must be a 2-D code array, got shape {x.shape}")
        if x.dtype != np.dtype(want):
            raise FpspecError(f"{name} codes for {f} must be {want}, got {x.dtype}")
    if a.shape[1] != bt.shape[1]:
        raise FpspecError(f"K mismatch: A is {a.shape[0]}x{a.shape[1]}, BT is {bt.shape[0]}x{bt.shape[1]} "
                          "(BT holds the N columns of B as rows)")


def check_quantized_pair(a, bt, model: GemmModel) -> None:
    """Shapes, payload formats and block compatibility of quantized operands (FPS-GEMM-9)."""
    if a.shape[1] != bt.shape[1]:
        raise FpspecError(f"K mismatch: A is {a.shape[0]}x{a.shape[1]}, BT is {bt.shape[0]}x{bt.shape[1]} "
                          "(BT holds the N columns of B as rows)")
    for name, q in (("A", a), ("BT", bt)):
        if q.payload_format not in QUANTIZED_PAYLOADS:
            raise FpspecError(f"{name}: payload format {q.payload_format!r} is not supported "
                              f"({', '.join(QUANTIZED_PAYLOADS)})")
    if model.split_k is not None:
        for name, q in (("A", a), ("BT", bt)):
            if model.split_k % q.block:
                raise FpspecError(f"split_k={model.split_k} must be a multiple of {name}'s block size {q.block} "
                                  "(slices hold whole scale blocks)")
    for name, q in (("A", a), ("BT", bt)):
        for what, sizes in (("slice_plan", model.slice_plan or ()), ("k_tile", (model.k_tile,) if model.k_tile else ())):
            if any(v % q.block for v in sizes):
                raise FpspecError(f"{what}={sizes if what == 'slice_plan' else sizes[0]} must hold multiples of "
                                  f"{name}'s block size {q.block} (slices and tiles hold whole scale blocks)")
    if model.scale_placement == "block" and model.operand_domain == "encoded":
        for name, q in (("A", a), ("BT", bt)):
            if model.block_term_size is not None and q.block % model.block_term_size:
                raise FpspecError(f"block_term_size={model.block_term_size} must divide {name}'s scale block "
                                  f"{q.block} (a block term has one scale per operand)")
        if a.block != bt.block and model.block_term_size is None:
            raise FpspecError(f"scale_placement=block needs equal block sizes (or a block_term_size), A has "
                              f"{a.block}, BT {bt.block}")
        term = model.block_term_size or a.block
        if model.group_size is not None and model.group_size % term:
            raise FpspecError(f"scale_placement=block needs group_size a multiple of the block term "
                              f"{term}, got {model.group_size}")


def check_codes_in_range(q, name: str) -> None:
    """Every payload and scale code of a quantized operand lies in its format (FPS-GEMM-9)."""
    pf = get_format(q.payload_format)
    if q.codes.size and int(q.codes.max()) >= pf.num_codes:
        flat = int(np.argmax(q.codes.reshape(-1) >= pf.num_codes))
        raise FpspecError(f"{name}: payload code {int(q.codes.reshape(-1)[flat])} out of range for "
                          f"{pf.name}", tuple(int(x) for x in np.unravel_index(flat, q.codes.shape)))
    sf = get_format(q.scale_format)
    if q.scales.size and int(q.scales.max()) >= sf.num_codes:
        flat = int(np.argmax(q.scales.reshape(-1) >= sf.num_codes))
        raise FpspecError(f"{name}: scale code {int(q.scales.reshape(-1)[flat])} out of range for "
                          f"{sf.name}", tuple(int(x) for x in np.unravel_index(flat, q.scales.shape)))
