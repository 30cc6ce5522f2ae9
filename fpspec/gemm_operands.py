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

__all__ = ["CODE_FORMATS", "check_operands", "check_code_pair", "check_quantized_pair",
           "check_codes_in_range"]

#: Plain operand formats accepted as code arrays (FPS-GEMM-4).
CODE_FORMATS = ("e4m3", "e5m2", "fp16", "bf16")


def check_operands(a, bt, model: GemmModel, fmt: str | None):
    """Validate a GEMM's operand pair (FPS-GEMM-4): both QuantizedTensors, or both code
    arrays of ``fmt``, with matching K that the model accepts.

    Returns ``(a, bt, quantized)``, code arrays as ndarrays.
    """
    quantized = isinstance(a, QuantizedTensor)
    if quantized != isinstance(bt, QuantizedTensor):
        raise FpspecError("A and BT must both be QuantizedTensors or both code arrays")
    if quantized:
        check_quantized_pair(a, bt, model)
    else:
        if fmt is None or fmt not in CODE_FORMATS:
            raise FpspecError(f"code-array operands need fmt, one of {', '.join(CODE_FORMATS)}; got {fmt!r}")
        a = np.asarray(a)
        bt = np.asarray(bt)
        check_code_pair(a, bt, fmt)
    model.check_k(a.shape[1])
    return a, bt, quantized


def check_code_pair(a: np.ndarray, bt: np.ndarray, fmt: str) -> None:
    """Shapes and dtypes of code-array operands (FPS-GEMM-9)."""
    want = get_format(fmt).storage_dtype
    for name, x in (("A", a), ("BT", bt)):
        if x.ndim != 2:
            raise FpspecError(f"{name} must be a 2-D code array, got shape {x.shape}")
        if x.dtype != np.dtype(want):
            raise FpspecError(f"{name} codes for {fmt} must be {want}, got {x.dtype}")
    if a.shape[1] != bt.shape[1]:
        raise FpspecError(f"K mismatch: A is {a.shape[0]}x{a.shape[1]}, BT is {bt.shape[0]}x{bt.shape[1]} "
                          "(BT holds the N columns of B as rows)")


def check_quantized_pair(a, bt, model: GemmModel) -> None:
    """Shapes, payload formats and block compatibility of quantized operands (FPS-GEMM-9)."""
    if a.shape[1] != bt.shape[1]:
        raise FpspecError(f"K mismatch: A is {a.shape[0]}x{a.shape[1]}, BT is {bt.shape[0]}x{bt.shape[1]} "
                          "(BT holds the N columns of B as rows)")
    for name, q in (("A", a), ("BT", bt)):
        if q.payload_format != "e2m1":
            raise FpspecError(f"{name}: payload format {q.payload_format!r} is not supported (e2m1 only)")
    if model.split_k is not None:
        for name, q in (("A", a), ("BT", bt)):
            if model.split_k % q.block:
                raise FpspecError(f"split_k={model.split_k} must be a multiple of {name}'s block size {q.block} "
                                  "(slices hold whole scale blocks)")
    if model.scale_placement == "block" and model.operand_domain == "encoded":
        if a.block != bt.block:
            raise FpspecError(f"scale_placement=block needs equal block sizes, A has {a.block}, BT {bt.block}")
        if model.group_size is not None and model.group_size % a.block:
            raise FpspecError(f"scale_placement=block needs group_size a multiple of the block size "
                              f"{a.block}, got {model.group_size}")


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
