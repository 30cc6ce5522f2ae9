"""The one door to a GEMM model by name (FPS-GEMM-3, FPS-CUB-6): the fixed presets of
:mod:`fpspec.presets` and the library presets of :mod:`fpspec.cublas.library`
(``cublas-h200-*``, whose model depends on the GEMM's shape), and the JSON of all of them
(``fpspec models --json``).

It stands above both, so that neither imports the other's door: the presets know nothing of
the cuBLAS predictor, and the predictor builds on the presets.  The library is imported only
for a library preset's name (``import fpspec.named_models`` reads no recorded call).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from .errors import FpspecError
from .models import CONTRACTS, GemmModel, unknown_preset
from .presets import PRESETS, arithmetic_summary, preset_model, with_overrides

__all__ = ["get_model", "presets_json"]


def get_model(model: "str | GemmModel", shape: "Sequence[int] | None" = None, **overrides: Any) -> GemmModel:
    """A preset by name (or a model), with validated overrides (FPS-GEMM-3); a library preset
    (``cublas-h200-*``) resolved at ``shape`` = (M, N, K) (:func:`fpspec.cublas.library.resolve`,
    FPS-CUB-6), which it needs.

    Setting ``window_bits`` (or ``neab``) without ``below_window`` picks "truncate"
    for an integer and "exact" for None, the only consistent companion.
    """
    if isinstance(model, GemmModel) or (isinstance(model, str) and model in PRESETS):
        if shape is not None:
            raise FpspecError("shape is for library presets (cublas-h200-*), whose model depends on it")
        return preset_model(model, **overrides)
    from .cublas import library  # the predictor and its recorded calls, for library presets only

    if not isinstance(model, str) or model not in library.LIBRARY_PRESETS:
        raise unknown_preset(model)
    if shape is None:
        raise FpspecError(f"{model} is a library preset: its model depends on the GEMM's shape; give "
                          f"shape=(M, N, K): get_model({model!r}, shape=(M, N, K)), or gemm(..., shape=(M, N, K))")
    return with_overrides(library.resolve(model, shape), overrides)


def presets_json() -> str:
    """JSON of every preset (``fpspec models --json``) with its operand contract (``operands``,
    FPS-GEMM-25); instruction-level presets also carry their architecture, instruction and
    arithmetic (:func:`~fpspec.presets.arithmetic_summary`)."""
    from .cublas.library import LIBRARY  # the library presets' backing reads the recorded calls

    out = {}
    for name, p in {**PRESETS, **LIBRARY}.items():
        c = CONTRACTS[name]
        entry = {"summary": p.summary, "source": p.source, "backing": p.backing.to_dict(),
                 "parameters": p.model.to_dict(),
                 "operands": {"takes": c.rule(), "tensor_scales": c.tensor_scales(p.model),
                              "tensor_scales_detail": c.tensor_scales_text(p.model), "source": c.source,
                              "epilogue_source": c.epilogue_source}}
        if p.library:
            entry["library"] = p.library
        if p.instruction:
            entry.update(architecture=p.architecture, instruction=p.instruction,
                         arithmetic=arithmetic_summary(p.model))
        out[name] = entry
    return json.dumps(out, indent=2)
