"""fpspec's own implementation of every vector operation, from a set's inputs (FPS-VEC-7).

:func:`compute` reads only the set's meta and inputs and returns the outputs,
so the generator (``impl="exact"`` where the set is small enough, else
``"fast"``) and ``fpspec vectors run-reference`` (``impl="fast"``) share one
dispatch; a reference run that matches the pack shows the fast path equals the
expected outputs.
"""

from __future__ import annotations

from typing import Any, Callable

import ml_dtypes
import numpy as np

from ..choices import Policies
from ..convert import decode, encode
from ..errors import FpspecError
from ..exact.rounding import round_to_code
from ..formats import get_format

__all__ = ["compute", "float_view", "bits_dtype", "register_operation", "FP32_QNAN", "split_impl", "to_twin",
           "from_twin"]

FP32_QNAN = 0x7FC00000
_FLOAT_DTYPES = {"fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "fp32": np.dtype(np.float32)}
_EXTRA: dict[str, Callable[..., dict[str, np.ndarray]]] = {}


def register_operation(name: str, fn: Callable[..., dict[str, np.ndarray]]) -> None:
    """Plug in an operation (block quantization, GEMM) implemented in another module."""
    _EXTRA[name] = fn


def split_impl(impl: str) -> tuple[str, str | None]:
    """A runner's ``impl`` as (the twin's name, the torch device its inputs go to): ``fast`` and
    ``exact`` compute on numpy (device None); ``torch`` on CPU tensors, ``torch:DEVICE`` (e.g.
    ``torch:cuda``) on that device."""
    name, _, device = impl.partition(":")
    if name != "torch":
        if device:
            raise FpspecError(f"impl {impl!r}: only the torch twin takes a device (torch:cuda)")
        return name, None
    return name, device or "cpu"


def to_twin(a: Any, device: str | None) -> Any:
    """A pack's numpy input as the twin reads it: itself (device None), else a torch tensor on
    ``device`` holding the same values (uint16 and uint32 as int32 and int64, which torch computes
    on; bfloat16 through its bits).  The runner's one host-to-device copy, explicit here."""
    if device is None or a is None:
        return a
    import torch

    a = np.ascontiguousarray(a)
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).to(device)
    if a.dtype in (np.uint16, np.uint32):
        a = a.astype(np.int32 if a.dtype == np.uint16 else np.int64)
    return torch.from_numpy(a).to(device)


def from_twin(a: Any) -> Any:
    """A twin's output as the numpy array a results file holds (a torch tensor's host copy)."""
    from ..arraykind import to_numpy

    return to_numpy(a)


def bits_dtype(fmt: str) -> np.dtype:
    return np.dtype(get_format(fmt).storage_dtype)


def float_view(bits: np.ndarray, fmt: str) -> np.ndarray:
    """View bit patterns of fp16 / bf16 / fp32 as the float dtype (no copy)."""
    try:
        return np.ascontiguousarray(bits).view(_FLOAT_DTYPES[fmt])
    except KeyError:
        raise FpspecError(f"format {fmt} is not a float input format (fp16, bf16, fp32)") from None


def fp32_bits_of_values(values: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """float64 values (each exactly an fp32 value) -> fp32 bits; NaN -> 0x7FC00000 | sign << 31.

    ``sign`` is the sign bit of each source code (a decoded NaN float carries no reliable sign).
    """
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = v.astype(np.float32).view(np.uint32).copy()
    nan = np.isnan(v)
    out[nan] = np.uint32(FP32_QNAN) | (sign[nan].astype(np.uint32) << np.uint32(31))
    return out


def _decode(meta: dict[str, Any], inputs: dict[str, np.ndarray], impl: str) -> dict[str, np.ndarray]:
    fmt = meta["inputs"]["code"]["format"]
    codes = inputs["code"]
    if impl == "exact":
        f = get_format(fmt)
        out = np.empty(codes.shape, dtype=np.uint32)
        for i, c in enumerate(codes.reshape(-1)):
            v = f.decode_exact(int(c))
            if isinstance(v, float) and v != v:
                sign = f.split(int(c))[0] if f.signed else 0
                out.reshape(-1)[i] = FP32_QNAN | (sign << 31)
            elif isinstance(v, float):
                out.reshape(-1)[i] = round_to_code(v, "fp32")
            else:
                neg_zero = v == 0 and f.signed and f.split(int(c))[0] == 1
                out.reshape(-1)[i] = 0x80000000 if neg_zero else round_to_code(v, "fp32")
        return {"value": out}
    f = get_format(fmt)
    sign = (codes.astype(np.uint32) >> np.uint32(f.bits - 1)) & np.uint32(1) if f.signed \
        else np.zeros(codes.shape, dtype=np.uint32)
    if fmt in ("fp16", "bf16"):
        # widening to binary32 is exact: fp16 through NumPy's IEEE conversion, bf16 by a 16-bit shift
        with np.errstate(invalid="ignore"):
            values = (codes.astype(np.uint16).view(np.float16).astype(np.float32) if fmt == "fp16"
                      else (codes.astype(np.uint32) << np.uint32(16)).view(np.float32)).astype(np.float64)
        return {"value": fp32_bits_of_values(values, sign)}
    twin, device = split_impl(impl)
    values = from_twin(decode(to_twin(codes, device), fmt, impl=twin))
    return {"value": fp32_bits_of_values(values, sign)}


def _encode(meta: dict[str, Any], inputs: dict[str, np.ndarray], impl: str) -> dict[str, np.ndarray]:
    xspec = meta["inputs"]["x"]
    twin, device = split_impl(impl)
    x = to_twin(float_view(inputs["x"], xspec["format"]), device)
    out: dict[str, np.ndarray] = {}
    for name, o in meta["outputs"].items():
        pol = o["policies"]
        kw: dict[str, Any] = dict(overflow=pol["overflow"], nan=pol["nan"], negative=pol["negative"],
                                  zero=pol["zero"], impl=twin)
        if o.get("sr_bits"):
            kw.update(rbits=to_twin(inputs[o["random_input"]], device), nbits=o["sr_bits"])
        with np.errstate(invalid="ignore"):  # NaN inputs widen to float64 with a harmless warning
            codes = from_twin(encode(x, o["format"], o["rounding"], **kw))
        out[name] = codes.astype(get_format(o["format"]).storage_dtype, copy=False)
    return out


def compute(meta: dict[str, Any], inputs: dict[str, np.ndarray], impl: str = "fast") -> dict[str, np.ndarray]:
    """All outputs of one set from its inputs, by fpspec (``impl`` = "fast", "exact", or "torch" /
    "torch:DEVICE": :func:`split_impl`)."""
    op = meta["operation"]
    if op == "decode":
        return _decode(meta, inputs, impl)
    if op == "encode":
        return _encode(meta, inputs, impl)
    if op not in _EXTRA:  # the block and GEMM operations register when their modules load
        import importlib
        importlib.import_module({"quantize": "fpspec.vectors.blocks", "gemm": "fpspec.vectors.gemm_sets"}
                                .get(op, "fpspec.vectors.ops"))
    if op in _EXTRA:
        return _EXTRA[op](meta, inputs, impl)
    raise FpspecError(f"set {meta.get('name')}: fpspec has no implementation of operation {op!r} loaded")


def policies_dict(p: Policies) -> dict[str, str]:
    return {"overflow": p.overflow.value, "nan": p.nan.value, "negative": p.negative.value, "zero": p.zero.value}
