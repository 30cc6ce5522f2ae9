"""What a GEMM accepts, checked once (FPS-GEMM-4, FPS-GEMM-9, FPS-GEMM-25).

:func:`fpspec.matmul.gemm` and :func:`fpspec.exact.accumulate.gemm_exact` both call
:func:`check_operands`; the fast path receives operands already checked.
:func:`fpspec.matmul.gemm` also holds the operands to the model's operand contract
(:func:`contract_violation`, :class:`fpspec.models.OperandContract`) and places their tensor
scales (:func:`place_tensor_scales`): applied as the model's or the contract's alpha, folded
into decoded operands, or refused, never dropped.
"""

from __future__ import annotations

import numpy as np

from .arraykind import is_torch, same_device, to_numpy
from .errors import FpspecError
from .formats import get_format
from .models import GemmModel, OperandContract
from .quantized import QuantizedTensor
from .schemes import BLOCK_SCHEMES, CODES_SCHEME

__all__ = ["CODE_FORMATS", "QUANTIZED_PAYLOADS", "TF32_DROPPED_BITS", "operand_formats", "code_format",
           "tf32_truncate", "check_operands", "check_code_pair", "check_quantized_pair", "check_codes_in_range",
           "GemmWhatIfWarning", "WHAT_IF_HINT", "has_tensor_scale", "describe_operand", "contract_violation",
           "place_tensor_scales"]

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
        same_device("A and BT", a, bt)
        if not is_torch(a):
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
            raise FpspecError(f"{name} must be a 2-D code array, got shape {tuple(x.shape)}")
        dtype = str(x.dtype).replace("torch.", "")
        torch_ok = is_torch(x) and (dtype == np.dtype(want).name or (want != np.uint8 and dtype == "int32"))
        if not torch_ok and (is_torch(x) or x.dtype != np.dtype(want)):
            also = " (torch: or int32)" if is_torch(x) and want != np.uint8 else ""
            raise FpspecError(f"{name} codes for {f} must be {np.dtype(want).name}{also}, got {dtype}")
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
    for what, arr, f in (("payload", q.codes, pf), ("scale", q.scales, get_format(q.scale_format))):
        if _size(arr) and int(arr.max()) >= f.num_codes:
            flags = to_numpy(arr.reshape(-1) >= f.num_codes)  # (refusing: the mask's host copy)
            flat = int(np.argmax(flags))
            raise FpspecError(f"{name}: {what} code {int(arr.reshape(-1)[flat])} out of range for "
                              f"{f.name}", tuple(int(x) for x in np.unravel_index(flat, tuple(arr.shape))))


def _size(arr) -> int:
    return arr.numel() if is_torch(arr) else arr.size


# ------------------------------------------------------------ operand contracts (FPS-GEMM-25)
class GemmWhatIfWarning(UserWarning):
    """A GEMM ran on operands outside its model's operand contract because the caller asked for
    a what-if run (``allow_what_if=True``, ``fpspec gemm --allow-what-if``): the result is a
    hypothetical, no hardware or library computes it (FPS-GEMM-25)."""


#: How a refusal names the way to run the combination anyway (FPS-GEMM-25).
WHAT_IF_HINT = "a hypothetical run: allow_what_if=True, fpspec gemm --allow-what-if"


def has_tensor_scale(q: QuantizedTensor) -> bool:
    """Whether a quantized operand carries a tensor scale (FPS-GEMM-25): its scheme has one
    (ue5m3, nvfp4); MX tensors and tensors built from codes have none; a tensor of a scheme
    fpspec does not know carries one where it has a decode scale other than 1 or a target T."""
    if q.scheme == CODES_SCHEME:
        return False
    scheme = BLOCK_SCHEMES.get(q.scheme)
    if scheme is not None:
        return scheme.tensor_scale
    return float(q.decode_scale) != 1.0 or q.params.get("target", q.params.get("T")) is not None


def describe_operand(q: QuantizedTensor) -> str:
    """A quantized operand in words: ``nvfp4: E2M1 with UE4M3 scales in 1x16 blocks``."""
    tile = f"1x{q.block}" if q.tile == "1xB" else f"{q.block}x{q.block}"
    return f"{q.scheme}: {q.payload_format.upper()} with {q.scale_format.upper()} scales in {tile} blocks"


def contract_violation(a, bt, name: str, contract: OperandContract, fmt) -> str | None:
    """The first rule of ``contract`` the operand pair breaks, as the refusal's text naming the
    model, the rule and the operand (A or BT); None where the pair is accepted (FPS-GEMM-25).
    The operands have passed :func:`check_operands` (shapes, dtypes, formats)."""
    if contract.any_operands:
        return None
    takes = f"{name} takes {contract.rule()}"
    if isinstance(a, QuantizedTensor) and isinstance(bt, QuantizedTensor):
        return _quantized_violation(a, bt, takes, contract)
    if isinstance(a, QuantizedTensor) or isinstance(bt, QuantizedTensor):
        return None  # a mixed pair is refused by check_operands
    fa, fb = operand_formats(fmt)
    if not contract.plain:
        return f"{takes}, not code arrays; A is {fa} codes"
    for who, f in (("A", fa), ("BT", fb)):
        if f not in contract.plain:
            return f"{takes}; {who} is {f} codes"
    if fa != fb and not contract.mixed:
        return f"{takes}; BT is {fb} codes, A {fa}"
    return None


def _quantized_violation(a: QuantizedTensor, bt: QuantizedTensor, takes: str,
                         contract: OperandContract) -> str | None:
    if not contract.quantized:
        return f"{takes}, not quantized tensors; A is quantized ({describe_operand(a)})"
    for who, q in (("A", a), ("BT", bt)):
        why = _form_violation(q, contract)
        if why is not None:
            return f"{takes}; {who} has {why}"
    if (a.scale_format, a.block) != (bt.scale_format, bt.block):
        return (f"{takes}; BT has {bt.scale_format} scales in blocks of {bt.block}, A {a.scale_format} in "
                f"blocks of {a.block}")
    if a.payload_format != bt.payload_format and not contract.mixed:
        return f"{takes}; BT has {bt.payload_format} payloads, A {a.payload_format}"
    return None


def _form_violation(q: QuantizedTensor, contract: OperandContract) -> str | None:
    """What of one operand no form of the contract takes: its scale format, its payload, its
    block or its tile (in that order); None where a form takes it."""
    if any(f.takes(q.payload_format, q.scale_format, q.block, q.tile) for f in contract.quantized):
        return None
    forms = [f for f in contract.quantized if f.scale_format == q.scale_format]
    if not forms:
        return f"{q.scale_format} scales"
    forms = [f for f in forms if q.payload_format in f.payloads]
    if not forms:
        return f"{q.payload_format} payloads"
    if not any(q.block in f.blocks for f in forms):
        return f"{q.scale_format} scales in blocks of {q.block}"
    return f"{q.tile} tiles"


def place_tensor_scales(a, bt, model: GemmModel, name: str, contract: OperandContract,
                        overrides: dict) -> GemmModel:
    """The model that applies the tensor scales of quantized operands (FPS-GEMM-25, FPS-GEMM-8).

    Unchanged where no operand carries a tensor scale, where the model folds them into decoded
    operands, or where its own alpha applies them (:meth:`~fpspec.models.OperandContract.tensor_scales`:
    ``folded``, ``alpha``).  A model without alpha (an instruction's
    chain) takes the contract's epilogue alpha (``alpha_source``, ``alpha_rounding``; an
    ``alpha_rounding`` override is kept).  Anything else would drop them: FpspecError (an
    ``alpha_source=none`` override included)."""
    if not (isinstance(a, QuantizedTensor) and isinstance(bt, QuantizedTensor)):
        return model  # code arrays carry no tensor scale (a mixed pair is refused by check_operands)
    scaled = [who for who, q in (("A", a), ("BT", bt)) if has_tensor_scale(q)]
    if not scaled or contract.tensor_scales(model) in ("folded", "alpha"):
        return model
    if contract.epilogue is not None and "alpha_source" not in overrides:
        source, rounding = contract.epilogue
        return model.replace(alpha_source=source, alpha_rounding=overrides.get("alpha_rounding", rounding))
    q = a if scaled[0] == "A" else bt
    raise FpspecError(f"{name} has alpha_source=none and encoded operands: the tensor scale of {scaled[0]} "
                      f"({q.scheme}, decode scale {float(q.decode_scale)!r}) would be dropped; set alpha_source="
                      "amax or decode-scales, or give operands without a tensor scale")
