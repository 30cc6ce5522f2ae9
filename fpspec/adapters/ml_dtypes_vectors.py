"""ml_dtypes' casts as an implementation under test of the decode and encode sets (FPS-CHK-9).

What they implement depends on the ml_dtypes version: vectors/declarations/ml_dtypes-0.6.yaml
(:data:`ML_DTYPES_06_DECLARATION`, releases before 0.7) and ml_dtypes-0.7.yaml
(:data:`ML_DTYPES_07_DECLARATION`); :func:`ml_dtypes_declaration` picks one for a version.
tests/test_declarations_float8.py runs the installed release on the pack.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FpspecError
from .release import major_minor

__all__ = ["ML_DTYPES_SETS", "ML_DTYPES_06_DECLARATION", "ML_DTYPES_07_DECLARATION", "ml_dtypes_declaration",
           "ml_dtypes_cast_outputs", "write_ml_dtypes_cast_results"]

#: The sets ml_dtypes' types implement, as a ``--select`` value of ``fpspec check``.
ML_DTYPES_SETS = ("decode-e2m1,decode-e4m3,decode-e5m2,decode-ue8m0,decode-fp16,decode-bf16,"
                  "encode-*-e2m1-*,encode-*-e4m3-*,encode-*-e5m2-*,encode-*-ue8m0-*")

_ML_DTYPES_COMMON: dict[str, Any] = {
    "operations": ["decode", "encode"],
    "formats": ["e2m1", "e4m3", "e5m2", "ue8m0", "fp16", "bf16", "fp32"],
    "policies": {"e2m1": {"nan": "flipped-zero"}, "e5m2": {"nan": "quiet"}},
    # widening FP16 / BF16 to float32 (numpy, ml_dtypes) keeps NaN payloads, unquieted
    "nan_payloads": ["fp16", "bf16"],
}

#: Measured on ml_dtypes 0.5.4 and 0.6.0: RNE everywhere (rne-bits in E8M0: ties up, the
#: float32 subnormals in (2^-127, 2^-126) up to 2^-126), E2M1 NaN -> a zero of the opposite
#: sign, E5M2 NaN -> the quiet NaN 0x7E/0xFE; E4M3 past 464 -> NaN and E8M0 0.0 / negatives
#: -> NaN are fpspec's vector defaults.
ML_DTYPES_06_DECLARATION: dict[str, Any] = {
    "name": "ml_dtypes-0.6", **_ML_DTYPES_COMMON,
    "rounding": {"e2m1": ["rne"], "e4m3": ["rne"], "e5m2": ["rne"], "ue8m0": ["rne-bits"]},
}

#: Measured on ml_dtypes 0.7.0: as 0.6 except E8M0, which rounds every input by its value
#: with ties up (fpspec ``rna``), the float32 subnormals in (2^-127, 1.5 2^-127) included
#: (down to 2^-127 now).  0.7.0 also casts float64 in one rounding (0.6 narrowed it to
#: float32 first); the pack's encode inputs are FP16, BF16 and FP32, so the declaration is
#: the same for both input paths.
ML_DTYPES_07_DECLARATION: dict[str, Any] = {
    "name": "ml_dtypes-0.7", **_ML_DTYPES_COMMON,
    "rounding": {"e2m1": ["rne"], "e4m3": ["rne"], "e5m2": ["rne"], "ue8m0": ["rna"]},
}


def ml_dtypes_declaration(version: str | None = None) -> dict[str, Any]:
    """The declaration for an ml_dtypes version (default: the one installed): 0.7 and newer
    round E8M0 by value (``rna``), older releases by the binary32 bits (``rne-bits``;
    measured on 0.5.4 and 0.6.0)."""
    if version is None:
        import ml_dtypes

        version = ml_dtypes.__version__
    return ML_DTYPES_07_DECLARATION if major_minor("ml_dtypes", version) >= (0, 7) else ML_DTYPES_06_DECLARATION


def _types() -> dict[str, Any]:
    import ml_dtypes

    return {"e2m1": ml_dtypes.float4_e2m1fn, "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
            "ue8m0": ml_dtypes.float8_e8m0fnu, "fp16": np.float16, "bf16": ml_dtypes.bfloat16,
            "fp32": np.float32}


def _view(bits: np.ndarray, fmt: str) -> np.ndarray:
    t = _types()
    if fmt not in t:
        raise FpspecError(f"ml_dtypes has no type for fpspec format {fmt!r}")
    return np.ascontiguousarray(bits).view(t[fmt])


def ml_dtypes_cast_outputs(meta: dict, inputs: dict[str, np.ndarray], outputs: dict[str, dict]) -> dict[str, np.ndarray]:
    """decode: the codes viewed as the ml_dtypes type, ``astype(float32)``; encode: the input
    viewed as float16 / bfloat16 / float32, ``astype(<type>)``.  Every requested output gets
    the one cast, as bit patterns."""
    out: dict[str, np.ndarray] = {}
    with np.errstate(invalid="ignore", over="ignore"):  # NaN and overflow casts are intended
        if meta["operation"] == "decode":
            v = _view(inputs["code"], meta["inputs"]["code"]["format"]).astype(np.float32).view(np.uint32)
            for name in outputs:
                out[name] = v
        elif meta["operation"] == "encode":
            x = _view(inputs["x"], meta["inputs"]["x"]["format"])
            for name, spec in outputs.items():
                out[name] = x.astype(_types()[spec["format"]]).view(np.uint8)
        else:
            raise FpspecError(f"ml_dtypes casts implement decode and encode sets, not {meta['operation']}")
    return out


def write_ml_dtypes_cast_results(pack: Any, out: str | Path, select: str = ML_DTYPES_SETS) -> int:
    """ml_dtypes' one cast per set under every output name of the selected sets, written as a
    results folder for ``fpspec check``.  Returns the number of sets written."""
    from ..vectors.harness import Harness

    h = Harness(pack, None, select)
    n = 0
    for s in h.sets():
        s.submit(ml_dtypes_cast_outputs(s.meta, s.inputs, s.outputs))
        n += 1
    h.save(out)
    return n
