"""Plain operand v1: a quantized operand as an .npz of plain arrays, for writers outside Python (FPS-OPD-*).

fpspec's own quantized-tensor file (:meth:`fpspec.quantized.QuantizedTensor.to_npz`) carries
its layout in a ``meta`` entry that is a NumPy unicode (``<U``) JSON string, which a C++ team
writing with cnpy cannot easily produce.  A *plain operand v1* file holds the same operand as
arrays of basic types only: uint8 codes and scale codes, integer and float32 numbers, and
names as ASCII bytes (a 1-D uint8 or int8 array, what ``cnpy::npz_save`` writes from a
``std::vector<uint8_t>`` or ``std::vector<char>``).  docs/operands.rst is the normative
description; :data:`ENTRIES` lists the entries.

:func:`read_plain` checks the arrays of such a file entry by entry and gives the fields of the
tensor they hold (:class:`PlainOperand`; every problem an FpspecError naming the entry);
:func:`derived_scales_checked` holds a file's encode and decode scales to the ones its profile
derives; :func:`plain_arrays` gives the arrays of a tensor.  The container builds on this module:
:meth:`~fpspec.quantized.QuantizedTensor.from_npz` tells the two file kinds apart by the
``format`` entry (:func:`is_plain`) and assembles the tensor,
:meth:`~fpspec.quantized.QuantizedTensor.to_plain_npz` writes :func:`plain_arrays`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping, NamedTuple, Protocol

import numpy as np

from .errors import FpspecError
from .exact.blocks import quantize_view_exact
from .schemes import BLOCK_SCHEMES, CODES_SCHEME, SCHEMES, get_profile, resolve_spec

__all__ = ["FORMAT_ID", "FORMAT_PREFIX", "ENTRIES", "PlainOperand", "is_plain", "read_plain",
           "derived_scales_checked", "plain_arrays"]

#: The ``format`` entry of a plain operand v1 file (ASCII).
FORMAT_ID = "fpspec-plain-operand-v1"
#: What every version's ``format`` entry starts with (a later version is refused by name).
FORMAT_PREFIX = "fpspec-plain-operand-"
#: Entry name -> what it holds (FPS-OPD-2), in the order of the table in docs/operands.rst.
ENTRIES = {
    "format": "text, required: fpspec-plain-operand-v1",
    "codes": "uint8 (M, K), required: one payload code per byte (E2M1 in the low nibble, or an FP8 code)",
    "scales": "uint8, required: block scale codes, row-major block order: (M, K/B) for 1xB, (M/B, K/B) for BxB",
    "scheme": "text, required: ue5m3, nvfp4, mxfp4, mxfp8, or codes (no tensor scale)",
    "scale_format": "text, required: ue5m3, ue5m3fnu, ue4m3, ue8m0, ...",
    "block": "integer, required: block length B",
    "tile": "text, optional (default 1xB): 1xB or BxB",
    "profile": "text, optional (default: the scheme's default profile); none for scheme codes",
    "payload_format": "text, optional (default: the scheme's first payload format, e2m1 or e4m3)",
    "columnwise": "integer 0 or 1, optional (default 0): the view is X^T",
    "amax": "float32 or its uint32 bits, required for ue5m3 and nvfp4: the tensor amax",
    "target": "float32 or its uint32 bits, optional for ue5m3 and nvfp4 (default: the profile's T)",
    "encode_scale": "float32 or its uint32 bits, optional: checked against the one derived from amax and T",
    "decode_scale": "float32 or its uint32 bits, optional: checked against the one derived from amax and T",
}
_REQUIRED = ("format", "codes", "scales", "scheme", "scale_format", "block")
#: Longest text entry read (a name, never a document).
_MAX_TEXT = 64


def is_plain(arrays: Mapping[str, np.ndarray]) -> bool:
    """Whether the arrays of an .npz are a plain operand file: a ``format`` entry (FPS-OPD-1)."""
    return "format" in arrays


# ---------------------------------------------------------------- reading entries
def _shape_text(a: np.ndarray) -> str:
    return f"{a.dtype.str} array of shape {a.shape}"


def _text(arrays: Mapping[str, np.ndarray], name: str, default: str | None = None) -> str | None:
    """A text entry: a 1-D uint8 / int8 array (or a NumPy bytes scalar) of printable ASCII (FPS-OPD-3)."""
    if name not in arrays:
        return default
    a = arrays[name]
    if a.dtype.kind == "S" and a.size == 1 and a.ndim <= 1:
        raw = bytes(a.reshape(-1)[0])
    elif a.dtype.kind in "ui" and a.dtype.itemsize == 1 and a.ndim == 1:
        raw = a.astype(np.uint8).tobytes()
    else:
        raise FpspecError(f"entry {name!r}: a text entry is a 1-D uint8 or int8 array of ASCII codes, "
                          f"got {_shape_text(a)}")
    if not raw or len(raw) > _MAX_TEXT:
        raise FpspecError(f"entry {name!r}: a text entry holds 1 to {_MAX_TEXT} characters, got {len(raw)}")
    if not all(0x20 < b < 0x7F for b in raw):
        bad = next(b for b in raw if not 0x20 < b < 0x7F)
        raise FpspecError(f"entry {name!r}: byte 0x{bad:02x} is not a printable ASCII character (no spaces, "
                          "no NUL terminator)")
    return raw.decode("ascii")


def _one(arrays: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    a = arrays[name]
    if a.shape not in ((), (1,)):
        raise FpspecError(f"entry {name!r}: must hold one number (shape () or (1,)), got {_shape_text(a)}")
    return a.reshape(())


def _integer(arrays: Mapping[str, np.ndarray], name: str, default: int | None = None) -> int | None:
    """An integer entry of any integer dtype (bool too), one value (FPS-OPD-4)."""
    if name not in arrays:
        return default
    a = _one(arrays, name)
    if a.dtype.kind not in "uib":
        raise FpspecError(f"entry {name!r}: must be an integer, got {_shape_text(arrays[name])}")
    return int(a)


def _float32(arrays: Mapping[str, np.ndarray], name: str) -> np.float32 | None:
    """A binary32 entry: float32, or uint32 holding its bits (FPS-OPD-4)."""
    if name not in arrays:
        return None
    a = _one(arrays, name)
    if a.dtype.kind == "f" and a.dtype.itemsize == 4:
        return np.float32(a.astype(np.float32))
    if a.dtype.kind == "u" and a.dtype.itemsize == 4:
        return np.array(int(a), dtype=np.uint32).view(np.float32)[()]
    raise FpspecError(f"entry {name!r}: must be float32 or uint32 (the float32's bits), got "
                      f"{_shape_text(arrays[name])}")


def _bits(v: object) -> str:
    return f"0x{int(np.float32(v).view(np.uint32)):08x} ({float(np.float32(v))!r})"


# ---------------------------------------------------------------- the operand
class PlainOperand(NamedTuple):
    """What a plain operand v1 file holds, its entries checked (FPS-OPD-5): ``codes`` (a tensor
    built from codes: ``fields`` are :meth:`~fpspec.quantized.QuantizedTensor.from_codes`'
    arguments) or ``quantized`` (``fields`` are the container's fields, encode and decode scale
    still 1: :func:`derived_scales_checked` gives them once the layout is checked); ``target``:
    T of a quantized operand (None without a tensor scale)."""

    kind: str
    fields: dict[str, Any]
    target: Fraction | None = None


def read_plain(arrays: Mapping[str, np.ndarray]) -> PlainOperand:
    """The fields of a plain operand v1 file's arrays, checked entry by entry (FPS-OPD-5):
    unknown or missing entries, wrong dtypes or shapes and names no scheme knows are refused,
    each naming the entry; the container checks the rest (codes and scales out of range)
    when it builds the tensor, and :func:`derived_scales_checked` the encode / decode scales."""
    fmt = _text(arrays, "format")
    if fmt != FORMAT_ID:
        if fmt is not None and fmt.startswith(FORMAT_PREFIX):
            raise FpspecError(f"entry 'format': {fmt!r} is a plain operand version this fpspec does not read "
                              f"(it reads {FORMAT_ID!r})")
        raise FpspecError(f"entry 'format': expected {FORMAT_ID!r}, got {fmt!r}")
    unknown = sorted(set(arrays) - set(ENTRIES))
    if unknown:
        raise FpspecError(f"unknown entries {unknown} (a plain operand v1 file holds only {', '.join(ENTRIES)})")
    missing = [k for k in _REQUIRED if k not in arrays]
    if missing:
        raise FpspecError(f"missing entries {missing} (required: {', '.join(_REQUIRED)})")
    for name in ("codes", "scales"):
        if arrays[name].dtype != np.uint8:
            raise FpspecError(f"entry {name!r}: must be uint8, got {_shape_text(arrays[name])}")
    if arrays["codes"].ndim != 2:
        raise FpspecError(f"entry 'codes': must be 2-D (M, K), got {_shape_text(arrays['codes'])}")
    scheme = _text(arrays, "scheme")
    if scheme != CODES_SCHEME and scheme not in BLOCK_SCHEMES:
        raise FpspecError(f"entry 'scheme': {scheme!r} is not one of {', '.join([*SCHEMES, CODES_SCHEME])}")
    block = _integer(arrays, "block")
    tile = _text(arrays, "tile", "1xB")
    if tile not in ("1xB", "BxB"):
        raise FpspecError(f"entry 'tile': must be 1xB or BxB, got {tile!r}")
    columnwise = _integer(arrays, "columnwise", 0)
    if columnwise not in (0, 1):
        raise FpspecError(f"entry 'columnwise': must be 0 or 1, got {columnwise}")
    common = dict(codes=np.ascontiguousarray(arrays["codes"]), scales=_scales(arrays, tile, block),
                  scale_format=_text(arrays, "scale_format"), block=block, tile=tile, columnwise=bool(columnwise))
    if scheme == CODES_SCHEME:
        return _codes_tensor(arrays, common)
    return _quantized_tensor(arrays, scheme, common)


def _scales(arrays: Mapping[str, np.ndarray], tile: str, block: int) -> np.ndarray:
    s = arrays["scales"]
    if s.ndim != 2:
        m, k = arrays["codes"].shape
        want = (m // block if tile == "BxB" else m, k // block) if block and block > 0 else "(rows, K/B)"
        raise FpspecError(f"entry 'scales': must be 2-D {want}, got {_shape_text(s)}")
    return np.ascontiguousarray(s)


def _codes_tensor(arrays: Mapping[str, np.ndarray], common: dict) -> PlainOperand:
    for name in ("profile", "target"):
        if name in arrays:
            raise FpspecError(f"entry {name!r}: scheme codes has no {name} (no quantizer, no tensor scale)")
    for name, want in (("amax", 0.0), ("encode_scale", 1.0), ("decode_scale", 1.0)):
        v = _float32(arrays, name)
        if v is not None and float(v) != want:
            raise FpspecError(f"entry {name!r}: scheme codes has no tensor scale, so {name} is {want:g} "
                              f"(or absent), got {_bits(v)}")
    pf = _text(arrays, "payload_format", "e2m1")
    return PlainOperand("codes", {**common, "payload_format": pf})


def _quantized_tensor(arrays: Mapping[str, np.ndarray], scheme: str, common: dict) -> PlainOperand:
    sch = BLOCK_SCHEMES[scheme]
    profile = _text(arrays, "profile", sch.default_profile)
    payload_format = _text(arrays, "payload_format", sch.payload_formats[0])
    try:
        prof = get_profile(scheme, profile)
    except FpspecError as exc:
        raise FpspecError(f"entry 'profile': {exc}") from None
    amax = _float32(arrays, "amax")
    target = _float32(arrays, "target")
    if sch.tensor_scale:
        if amax is None:
            raise FpspecError(f"missing entry 'amax': {scheme} has a tensor scale, computed from the tensor amax")
        if target is not None and not (np.isfinite(target) and target > 0):
            raise FpspecError(f"entry 'target': must be a positive finite float32, got {_bits(target)}")
        t = Fraction(float(target)) if target is not None else prof.target
    else:
        if target is not None:
            raise FpspecError(f"entry 'target': {scheme} has no tensor scale, so no target T")
        t = None
        amax = np.float32(0) if amax is None else amax
    if not np.isfinite(amax) or amax < 0:
        raise FpspecError(f"entry 'amax': must be a finite non-negative float32, got {_bits(amax)}")
    params = {"target": None if t is None else str(t)}
    return PlainOperand("quantized", {**common, "encode_scale": np.float32(1), "decode_scale": np.float32(1),
                                      "amax": np.float32(amax), "scheme": scheme, "profile": profile,
                                      "payload_format": payload_format, "params": params}, t)


def derived_scales_checked(arrays: Mapping[str, np.ndarray], plain: PlainOperand) -> tuple[np.float32, np.float32]:
    """The encode and decode scales of a quantized plain operand (:func:`derived_scales`), and the
    file's own ``encode_scale`` / ``decode_scale`` entries, where given, held to them bit for bit
    (FPS-OPD-5); the container calls it once the operand's layout is checked."""
    f = plain.fields
    scheme, profile, amax = f["scheme"], f["profile"], f["amax"]
    enc, dec = derived_scales(scheme, profile, f, f["payload_format"], plain.target, amax)
    for name, want in (("encode_scale", enc), ("decode_scale", dec)):
        got = _float32(arrays, name)
        if got is not None and np.float32(got).view(np.uint32) != np.float32(want).view(np.uint32):
            raise FpspecError(f"entry {name!r}: {_bits(got)} is not the {name} {scheme}/{profile} derives from "
                              f"amax {_bits(amax)} and T = {plain.target}: {_bits(want)}")
    return np.float32(enc), np.float32(dec)


def derived_scales(scheme: str, profile: str, layout: Mapping, payload_format: str, target: Fraction | None,
                   amax: np.float32) -> tuple[np.float32, np.float32]:
    """The encode and decode scales the profile's quantizer derives from amax and T (FPS-OPD-5):
    those ``quantize`` gives a zero tile with the amax given, from the exact quantizer it runs
    (:func:`fpspec.exact.blocks.quantize_view_exact`) under the settings it resolves."""
    block = layout["block"]
    rows = block if layout["tile"] == "BxB" else 1
    spec = resolve_spec(scheme, profile, block=block, tile=layout["tile"], target=target,
                        scale_format=layout["scale_format"], payload_format=payload_format)
    z = quantize_view_exact(np.zeros((rows, block), np.float32), spec, float(np.float32(amax)))
    return z.encode_scale, z.decode_scale


# ---------------------------------------------------------------- writing
def _ascii(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8).copy()


class Operand(Protocol):
    """What :func:`plain_arrays` reads of a :class:`~fpspec.quantized.QuantizedTensor`."""

    codes: np.ndarray
    scales: np.ndarray
    scale_format: str
    block: int
    tile: str
    encode_scale: np.float32
    decode_scale: np.float32
    amax: np.float32
    scheme: str
    profile: str
    columnwise: bool
    payload_format: str
    params: dict


def plain_arrays(qt: Operand) -> dict[str, np.ndarray]:
    """The entries of ``qt`` as a plain operand v1 file (FPS-OPD-6), in the order written.

    What the format does not hold is left out: the quantizer's settings (rounding, SR bits,
    RHT, zero-scale rule, amax source) and the source and view shapes; a tensor read back
    dequantizes and multiplies to the same bits."""
    out = {"format": _ascii(FORMAT_ID), "scheme": _ascii(qt.scheme)}
    if qt.scheme != CODES_SCHEME:
        out["profile"] = _ascii(qt.profile)
    out.update({"scale_format": _ascii(qt.scale_format), "payload_format": _ascii(qt.payload_format),
                "block": np.int32(qt.block), "tile": _ascii(qt.tile), "columnwise": np.uint8(qt.columnwise),
                "codes": np.ascontiguousarray(qt.codes), "scales": np.ascontiguousarray(qt.scales)})
    if qt.scheme == CODES_SCHEME:
        return out
    out["amax"] = np.float32(qt.amax)
    if qt.params.get("target") is not None:
        out["target"] = np.float32(float(Fraction(str(qt.params["target"]))))
    out["encode_scale"] = np.float32(qt.encode_scale)
    out["decode_scale"] = np.float32(qt.decode_scale)
    return out
