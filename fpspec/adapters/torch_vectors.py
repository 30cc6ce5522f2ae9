"""torch adapter for the vector harness: tensors on any device in, bit patterns out (FPS-CHK-9).

torch is imported only when a function here runs; without it the error says
how to install it.  Bit patterns travel through ``Tensor.view`` (no value
conversion), so a tensor on CUDA gives exactly the bits the device wrote.
Importing this module registers :func:`torch_to_bits` with the harness
(:func:`fpspec.vectors.harness.register_converter`), which then takes tensors
as submitted outputs; the harness never imports this adapter.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..errors import FpspecError
from ..vectors.declare import Declaration
from ..vectors.harness import Harness, register_converter
from .release import major_minor

__all__ = ["require_torch", "torch_dtype", "bits_to_torch", "torch_to_bits", "torch_cast_outputs",
           "TORCH_FLOAT8_SETS", "TORCH_FLOAT8_DECLARATION", "TORCH_211_FLOAT8_DECLARATION",
           "torch_float8_declaration", "check_torch_casts", "write_torch_cast_results", "is_tensor"]


def require_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise FpspecError("the torch adapter needs PyTorch: pip install 'fpspec[torch]' (or any torch >= 2.1)") from None
    return torch


#: fpspec format -> torch dtype name (formats torch can hold one element per byte).
_TORCH_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "e4m3": "float8_e4m3fn",
                "e5m2": "float8_e5m2", "ue8m0": "float8_e8m0fnu"}
_INT_FOR_BITS = {8: "uint8", 16: "int16", 32: "int32"}


def torch_dtype(fmt: str) -> Any:
    torch = require_torch()
    try:
        return getattr(torch, _TORCH_NAMES[fmt])
    except (KeyError, AttributeError):
        raise FpspecError(f"torch has no dtype for fpspec format {fmt!r} in this version") from None


def bits_to_torch(bits: np.ndarray, fmt: str, device: str = "cpu") -> Any:
    """Bit patterns (uint8/16/32) -> a torch tensor of the format's dtype on ``device``."""
    torch = require_torch()
    b = np.ascontiguousarray(bits)
    nbits = b.dtype.itemsize * 8
    signed_view = b.view(np.dtype(_INT_FOR_BITS[nbits])) if nbits > 8 else b
    t = torch.from_numpy(signed_view.copy()).to(device)
    return t.view(torch_dtype(fmt))


def torch_to_bits(t: Any) -> np.ndarray:
    """Any tensor -> its bit patterns as a NumPy uint8/uint16/uint32 array (copied to the CPU)."""
    torch = require_torch()
    size = t.element_size()
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32}
    if size not in ints:
        raise FpspecError(f"cannot take bit patterns of a {t.dtype} tensor ({size} bytes per element)")
    a = t.detach().contiguous().view(ints[size]).cpu().numpy()
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[size])


def torch_cast_outputs(meta: dict, inputs: dict[str, np.ndarray], outputs: dict[str, dict],
                       device: str = "cpu") -> dict[str, Any]:
    """torch's own casts as the implementation under test, for decode and encode sets.

    decode: codes viewed as the float8 dtype, ``.to(torch.float32)``;
    encode: the input viewed as fp16/bf16/fp32, ``.to(<float8 dtype>)``.  Every
    requested output gets torch's one cast; the declaration says which
    rounding and policies that cast is claimed to implement.
    """
    torch = require_torch()
    out: dict[str, Any] = {}
    if meta["operation"] == "decode":
        fmt = meta["inputs"]["code"]["format"]
        t = bits_to_torch(inputs["code"], fmt, device)
        for name in outputs:
            out[name] = t.to(torch.float32)
    elif meta["operation"] == "encode":
        x = bits_to_torch(inputs["x"], meta["inputs"]["x"]["format"], device)
        for name, spec in outputs.items():
            out[name] = x.to(torch_dtype(spec["format"]))
    else:
        raise FpspecError(f"torch casts implement decode and encode sets, not {meta['operation']}")
    return out


#: The sets torch's float8 casts implement (decode and encode of E4M3, E5M2, UE8M0; FP16 and
#: BF16 widening), as a ``--select`` value of ``fpspec check``.
TORCH_FLOAT8_SETS = ("decode-e4m3,decode-e5m2,decode-ue8m0,decode-fp16,decode-bf16,"
                     "encode-*-e4m3-*,encode-*-e5m2-*,encode-*-ue8m0-*")

_TORCH_FLOAT8_COMMON: dict[str, Any] = {
    "operations": ["decode", "encode"],
    "formats": ["e4m3", "e5m2", "ue8m0", "fp16", "bf16", "fp32"],
    "rounding": {"e4m3": ["rne"], "e5m2": ["rne"], "ue8m0": ["rne-bits"]},
    # torch keeps NaN payloads when widening (FP16, BF16, and the float8 NaN codes, e.g.
    # E4M3 0x7F -> 0x7FF00000) instead of writing the canonical quiet NaN.
    "nan_payloads": ["fp16", "bf16", "e4m3", "e5m2", "ue8m0"],
}

#: torch >= 2.12 (measured on 2.13 CPU; pytorch#178817): E4M3 saturates, +-Inf included;
#: E8M0 rounds on binary32 bits (rne-bits), maps 0.0 to 0x00 and a negative x to the code of |x|.
#: The same as vectors/declarations/torch-2.13.yaml.
TORCH_FLOAT8_DECLARATION: dict[str, Any] = {
    "name": "torch-2.13-float8-casts", **_TORCH_FLOAT8_COMMON,
    "policies": {"e4m3": {"overflow": "sat"}, "ue8m0": {"zero": "min", "negative": "abs"}},
}

#: torch 2.11 (CPU and CUDA alike): E4M3 past 464 and +-Inf give NaN (fpspec's default
#: ``nonfinite``); otherwise as 2.13.  The same as vectors/declarations/torch-2.11.yaml.
TORCH_211_FLOAT8_DECLARATION: dict[str, Any] = {
    "name": "torch-2.11-float8-casts", **_TORCH_FLOAT8_COMMON,
    "policies": {"ue8m0": {"zero": "min", "negative": "abs"}},
}


def torch_float8_declaration(version: str | None = None) -> dict[str, Any]:
    """The float8 declaration for a torch version (default: the one installed): 2.11 and older
    give NaN on E4M3 overflow, 2.12 and newer saturate (pytorch#178817)."""
    if version is None:
        version = require_torch().__version__
    return TORCH_FLOAT8_DECLARATION if major_minor("torch", version) >= (2, 12) else TORCH_211_FLOAT8_DECLARATION


def check_torch_casts(pack: Any, device: str = "cpu", select: str | None = None,
                      declaration: dict | None = None):
    """Run torch's casts through the harness and return the checker's report (the declaration
    defaults to :func:`torch_float8_declaration` of the installed torch)."""
    decl = Declaration.from_mapping(declaration or torch_float8_declaration())
    h = Harness(pack, decl, select, to_bits=torch_to_bits)
    for s in h.sets():
        s.submit(torch_cast_outputs(s.meta, s.inputs, s.outputs, device))
    return h.report(), h


def write_torch_cast_results(pack: Any, out: Any, device: str = "cpu", select: str = TORCH_FLOAT8_SETS) -> int:
    """torch's one cast per set, written under *every* output name of the selected sets as a
    results folder for ``fpspec check`` (which a declaration then narrows to what torch claims).
    Returns the number of sets written."""
    h = Harness(pack, None, select, to_bits=torch_to_bits)
    n = 0
    for s in h.sets():
        s.submit(torch_cast_outputs(s.meta, s.inputs, s.outputs, device))
        n += 1
    h.save(out)
    return n


def is_tensor(obj: Any) -> bool:
    """True for a torch tensor (torch is already loaded when one exists; nothing is imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


register_converter(is_tensor, torch_to_bits)
