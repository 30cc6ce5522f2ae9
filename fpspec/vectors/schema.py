"""The vector-pack schema, version 1 (docs/vectors.rst, FPS-VEC-*).

A *set* is one uncompressed ``.npz`` whose entries are ``.npy`` (format 1.0,
little-endian, C order) arrays:

* ``__meta__``: uint8, the UTF-8 bytes of a JSON object describing the set
  (keys in :data:`REQUIRED_META`);
* ``tags``: uint32 ``(C,)``, one bitmask per case (bit meanings in :data:`TAGS`,
  repeated in the meta);
* ``key``: uint64 ``(C,)``, the stable per-case key, unless the meta's
  ``key`` field is ``"input:<name>"`` (the key of a case is then the bit
  pattern of that 1-D input, which is unique in the set);
* ``in_<name>``: inputs, bit patterns (uint8/16/32), first axis = case;
* ``out_<name>``: expected outputs, bit patterns, first axis = case.

Results for a set carry the same ``out_<name>`` entries (and optionally
``__pack__``, see :data:`RESULT_PACK_ENTRY`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from ..errors import FpspecError

__all__ = [
    "SCHEMA_VERSION", "GENERATOR_VERSION", "TAGS", "TAG_DOC", "REQUIRED_META", "BIT_DTYPES",
    "META_ENTRY", "RESULT_PACK_ENTRY", "SET_NAME", "tag_mask", "tag_names", "encode_meta",
    "decode_meta", "validate_set_arrays",
]

#: Version of this file layout.  A reader refuses any other (FPS-VEC-1).
SCHEMA_VERSION = 1
#: Version of the generator (coverage models and case lists); bumped whenever a
#: regenerated pack would differ byte-wise for the same spec version.
GENERATOR_VERSION = "1.1"

META_ENTRY = "__meta__"
#: Optional entry of a results file: uint8 UTF-8 JSON {"pack_id", "set", "set_sha256"}.
RESULT_PACK_ENTRY = "__pack__"
#: Set names: lowercase words joined by '-', '_' or '.', no path separators (FPS-VEC-2).
SET_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,120}$")
BIT_DTYPES = ("uint8", "uint16", "uint32", "uint64")

#: Tag bits (FPS-VEC-4).  The same table is stored in every set's meta.
TAG_DOC: dict[str, tuple[int, str]] = {
    "tie": (0, "the exact input lies halfway between two neighbours of the target "
               "(for block sets: some payload element or the scale is a tie)"),
    "inexact": (1, "the input is not exactly representable in the target"),
    "overflow": (2, "|input| exceeds the target's max finite (Inf included): saturation/overflow policy applies"),
    "nan_input": (3, "an input is NaN"),
    "inf_input": (4, "an input is +-Inf"),
    "zero_input": (5, "an input is +-0"),
    "negative_zero": (6, "an input is -0"),
    "subnormal_input": (7, "an input is subnormal in its own format"),
    "subnormal_output": (8, "|input| is nonzero and below the target's min normal"),
    "underflow": (9, "|input| is nonzero and below half the target's min positive (RNE gives zero)"),
    "negative_unsigned": (10, "a negative nonzero input to an unsigned target"),
    "sr_extreme": (11, "stochastic: the random value is 0 or 2^N-1"),
    "sr_threshold": (12, "stochastic: the random value is at, or one off, the decision threshold"),
    "zero_scale": (13, "a block scale rounds to zero (zero-scale rule, or a zero scale)"),
    "subnormal_scale": (14, "a block scale code is subnormal"),
    "saturated_scale": (15, "a block scale saturates at the scale format's max finite"),
    "zero_block": (16, "a block is all zeros"),
    "stale_amax": (17, "the tensor amax used (held) differs from the current one"),
    "profile_dependent": (18, "the expected output changes under another value of a named choice "
                              "listed in the output's depends_on"),
    "guard": (19, "the guard bit (first bit below the target's last kept bit) is set"),
    "sticky": (20, "some bit below the guard bit is set"),
    "saturated_payload": (21, "some payload element saturates at +-6"),
    "order_independent": (22, "GEMM: integer-valued data, every accumulation order gives this output"),
    "wide_range": (23, "GEMM: operands span a wide exponent range (model-specific output)"),
    "bound_edge": (24, "range bounds: a block amax at the edge of a bound (saturation or smallest scale)"),
}
TAGS: dict[str, int] = {k: v[0] for k, v in TAG_DOC.items()}

#: Keys every set's meta must hold (FPS-VEC-3).
REQUIRED_META = (
    "schema_version", "spec_version", "generator_version", "name", "operation", "coverage_model",
    "description", "requirements", "seed", "level", "cases", "key", "tags", "inputs", "outputs",
)
OPERATIONS = ("decode", "encode", "quantize", "gemm")


def tag_mask(*names: str) -> int:
    """Bitmask of the named tags."""
    m = 0
    for n in names:
        m |= 1 << TAGS[n]
    return m


def tag_names(mask: int) -> list[str]:
    """Names of the tags set in ``mask``."""
    return [n for n, b in TAGS.items() if mask >> b & 1]


def encode_meta(meta: dict[str, Any]) -> np.ndarray:
    """Meta as the uint8 UTF-8 JSON entry (sorted keys, no spaces: byte-stable)."""
    text = json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy()


def decode_meta(arr: np.ndarray, where: str) -> dict[str, Any]:
    if not isinstance(arr, np.ndarray) or arr.dtype != np.uint8 or arr.ndim != 1:
        raise FpspecError(f"{where}: {META_ENTRY} must be a 1-D uint8 array of UTF-8 JSON")
    try:
        meta = json.loads(arr.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FpspecError(f"{where}: {META_ENTRY} is not UTF-8 JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise FpspecError(f"{where}: {META_ENTRY} must be a JSON object")
    return meta


def validate_set_arrays(name: str, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Schema check of one loaded set (FPS-VEC-1..4); raises FpspecError naming what is wrong."""
    where = f"set {name}"
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing:
        raise FpspecError(f"{where}: meta lacks {missing}")
    if meta["schema_version"] != SCHEMA_VERSION:
        raise FpspecError(f"{where}: schema_version {meta['schema_version']!r}, this reader knows {SCHEMA_VERSION}")
    if meta["name"] != name:
        raise FpspecError(f"{where}: meta names the set {meta['name']!r}")
    if meta["operation"] not in OPERATIONS:
        raise FpspecError(f"{where}: unknown operation {meta['operation']!r}")
    if meta["tags"] != {k: v for k, v in TAGS.items()}:
        raise FpspecError(f"{where}: tag table differs from schema {SCHEMA_VERSION}")
    cases = meta["cases"]
    expected = {"tags"} | {f"in_{k}" for k in meta["inputs"]} | {f"out_{k}" for k in meta["outputs"]}
    if meta["key"] == "array":
        expected.add("key")
    elif not (isinstance(meta["key"], str) and meta["key"].startswith("input:")
              and meta["key"][6:] in meta["inputs"]):
        raise FpspecError(f"{where}: key must be 'array' or 'input:<input name>', got {meta['key']!r}")
    have = set(arrays) - {META_ENTRY}
    if have != expected:
        raise FpspecError(f"{where}: entries {sorted(have)} differ from those the meta declares {sorted(expected)}")
    for k in sorted(expected):
        a = arrays[k]
        if a.dtype.name not in BIT_DTYPES:
            raise FpspecError(f"{where}: entry {k} has dtype {a.dtype}, expected a bit-pattern dtype {BIT_DTYPES}")
        if a.ndim < 1 or a.shape[0] != cases:
            raise FpspecError(f"{where}: entry {k} has shape {a.shape}, expected {cases} cases on axis 0")
    for section in ("inputs", "outputs"):
        for k, spec in meta[section].items():
            a = arrays[("in_" if section == "inputs" else "out_") + k]
            if spec.get("dtype") != a.dtype.name or list(spec.get("shape", [])) != list(a.shape[1:]):
                raise FpspecError(f"{where}: {section[:-1]} {k} is {a.dtype}{list(a.shape[1:])}, "
                                  f"meta says {spec.get('dtype')}{spec.get('shape')}")
    if arrays["tags"].dtype != np.uint32 or arrays["tags"].ndim != 1:
        raise FpspecError(f"{where}: tags must be uint32 (cases,)")
    if meta["key"] == "array" and (arrays["key"].dtype != np.uint64 or arrays["key"].ndim != 1):
        raise FpspecError(f"{where}: key must be uint64 (cases,)")
