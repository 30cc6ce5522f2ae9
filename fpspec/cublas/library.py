"""The library presets: cuBLAS on the H200 as a GEMM model per shape (docs/cublas-h200.rst, FPS-CUB-6..8).

A library preset (``cublas-h200-bf16``, ``-fp16``, ``-fp8``, ``-fp8-fast``) is a torch call
whose model depends on the GEMM's shape: :func:`resolve` gives the model cuBLAS runs at
(M, N, K) offline, from the kernel :func:`fpspec.cublas.h200.predict` names, and
:func:`resolution` says where that answer comes from (a recorded call, the rule, or a
nearest-shape guess); :func:`model_for_kernel` gives it from the kernel that ran (the
observer).  :func:`fpspec.named_models.get_model` takes these names too (with ``shape=``).

:data:`LIBRARY` (the presets with their provenance) is built on first use: its backing
counts the recorded calls' shapes, which are read then (:func:`fpspec.cublas.h200.recorded_calls`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, Sequence

from ..errors import FpspecError
from ..models import GemmModel
from ..presets import KM_SOURCE, PRESETS, Backing, Preset, preset_model
from . import h200
from .h200 import KernelChoice

__all__ = [
    "LIBRARY",
    "LIBRARY_PRESETS",
    "Resolution",
    "resolve",
    "resolution",
    "kernel_model",
    "model_for_kernel",
    "model_for_shape",
]

#: The H200 cuBLAS runs in the table (vectors/provenance/h200-cublas): the sweep and the first
#: three held-out runs; device and sampled outputs per target (27,243 + 4,249 + 3,928 + 4,968 and
#: 28,527 + 4,400 + 4,096 + 5,248).
_H200_CUBLAS = ("NVIDIA H200 (cuBLAS 13.1 through torch 2.11; vectors/provenance/h200-cublas/sweep.jsonl, "
                "heldout{,2,3}.jsonl and train{1,2,3}.jsonl)")
#: sampled outputs of the table's runs per target (tests/test_gemm_models.py counts them again)
_H200_CUBLAS_OUTPUTS = {"torch-bf16": 131_826, "torch-fp16": 131_826, "torch-scaled-mm": 137_676,
                        "torch-scaled-mm-fast": 137_676}
_CUBLAS_REF = "docs/cublas-h200.rst; vectors/provenance/h200-cublas"

#: The names of the library presets (FPS-CUB-6), in the order ``fpspec models`` lists them
#: (after :data:`fpspec.presets.PRESETS`); each stands for a target of
#: :data:`fpspec.cublas.h200.PRESET_TARGETS`.
LIBRARY_PRESETS: tuple[str, ...] = tuple(h200.PRESET_TARGETS)

#: The summary of each library preset (its call and chain are its target's, h200.TARGETS).
_SUMMARIES: dict[str, str] = {
    "cublas-h200-bf16": "cuBLAS BF16 GEMM with FP32 output on the H200 (torch.mm)",
    "cublas-h200-fp16": "cuBLAS FP16 GEMM with FP32 output on the H200 (torch.mm)",
    "cublas-h200-fp8": "cuBLAS FP8 (e4m3) GEMM with FP32 output on the H200, use_fast_accum=False (promotion every "
                       "128 products)",
    "cublas-h200-fp8-fast": "cuBLAS FP8 (e4m3) GEMM with FP32 output on the H200, use_fast_accum=True",
}


def _library(name: str) -> Preset:
    """A library preset (FPS-CUB-6): the chain of the target's Hopper kernels for any K;
    :func:`resolve` adds the kernel and K slices cuBLAS uses at a shape."""
    target = h200.PRESET_TARGETS[name]
    tg = h200.TARGETS[target]
    chain, summary = tg.preset, _SUMMARIES[name]
    call = tg.call if tg.fmt == "e4m3" else f"{tg.call}, {tg.fmt.upper()}"  # torch.mm's operand type named
    shapes = tuple(sorted({(o.m, o.n, o.k) for o in h200.observations_from_table()[target]}))
    return Preset(name, PRESETS[chain].model.replace(require_full_groups=False),
                  summary + "; the kernel and its K slices follow from the shape (fpspec.cublas.library.resolve)",
                  f"{call} on an NVIDIA H200, measured at {len(shapes)} shapes (docs/cublas-h200.rst); the chain: "
                  f"{chain}, " + KM_SOURCE,
                  Backing("measured", f"{call}: the runs' calls, modelled from each call's kernel and grid "
                                      "(the observer) and from the shape alone (resolve); rates in "
                                      "docs/cublas-h200.rst", _CUBLAS_REF, device=_H200_CUBLAS,
                          outputs=_H200_CUBLAS_OUTPUTS[target], shapes=shapes),
                  library=target)


@cache
def _library_presets() -> dict[str, Preset]:
    return {name: _library(name) for name in LIBRARY_PRESETS}


def __getattr__(name: str) -> Any:
    """:data:`LIBRARY`, built on first use (it reads the recorded calls)."""
    if name == "LIBRARY":
        return _library_presets()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The library presets (FPS-CUB-6) by name, listed by ``fpspec models`` after
#: :data:`fpspec.presets.PRESETS`: a library's GEMM whose model depends on the shape;
#: :func:`resolve` gives it (their ``model`` is the chain of the library's main kernels
#: without a K split).  Built on first use (the module's ``__getattr__``).
LIBRARY: dict[str, Preset]

#: Where an offline resolution comes from (FPS-CUB-6): a recorded call, the rule, or the
#: nearest recorded shapes (a guess); :data:`fpspec.cublas.h200.BASIS`.
OfflineBasis = Literal["recorded", "rule", "nearest"]


@dataclass(frozen=True)
class Resolution:
    """A library preset resolved at a shape, and where the answer comes from (FPS-CUB-6):
    ``basis`` ``"recorded"`` (the shape is one of the recorded calls: what the H200 ran),
    ``"rule"`` (no kernel splits K at this shape: the rule of FPS-CUB-4) or ``"nearest"``
    (a guess from the nearest recorded shapes, FPS-CUB-5: the held-out rates of
    docs/cublas-h200.rst say how often it holds; the observer reads the call's own kernel);
    ``reason`` says it in words (:attr:`fpspec.cublas.h200.KernelChoice.reason`)."""

    preset: str
    shape: tuple[int, int, int]
    model: GemmModel
    choice: KernelChoice
    basis: OfflineBasis
    reason: str


def resolution(name: str, shape: Sequence[int]) -> Resolution:
    """A library preset at (M, N, K), offline, with where the answer comes from (FPS-CUB-6):
    :func:`model_for_shape`'s model and the :class:`~fpspec.cublas.h200.KernelChoice` it
    models.  FpspecError for a name that is no library preset, a bad shape, or a kernel
    that is not modelled (SIMT) or whose slices are not known."""
    if not isinstance(name, str) or name not in LIBRARY_PRESETS:
        raise FpspecError(f"{name!r} is not a library preset ({', '.join(LIBRARY_PRESETS)}): the other "
                          "models do not depend on the shape")
    choice = h200.resolve_choice(name, shape)
    model = kernel_model(choice)
    basis = choice.basis
    assert basis in ("recorded", "rule", "nearest"), basis  # an unknown choice has no model
    return Resolution(name, choice.shape, model, choice, basis, choice.reason)  # type: ignore[arg-type]


def resolve(name: "str | GemmModel", shape: "Sequence[int] | None" = None) -> GemmModel:
    """The concrete model of a preset at a GEMM shape (M, N, K) (FPS-CUB-6).

    A library preset (:data:`LIBRARY_PRESETS`) resolves to the model cuBLAS runs at that
    shape: the instruction chain of the kernel class the shape runs on and its K slices
    (:func:`model_for_shape`; :func:`resolution` says whether that comes from a recorded
    call, the rule or a nearest-shape guess); FpspecError where that kernel is not
    modelled (SIMT kernels).  Any other preset, or a GemmModel, is returned unchanged."""
    if isinstance(name, GemmModel) or not isinstance(name, str) or name not in LIBRARY_PRESETS:
        return preset_model(name)
    if shape is None:
        raise FpspecError(f"{name} is a library preset: its model depends on the GEMM's shape; give shape=(M, N, K)")
    return model_for_shape(name, shape)


def kernel_model(choice: KernelChoice) -> GemmModel:
    """The model of one cuBLAS call whose kernel is known (FPS-CUB-7): the target's chain
    preset without ``require_full_groups``, with the parameters
    :func:`fpspec.cublas.h200.kernel_parameters` gives for the kernel (FpspecError for a
    kernel that is not modelled)."""
    chain, params = h200.kernel_parameters(choice)
    return PRESETS[chain].model.replace(require_full_groups=False, **params)


def model_for_kernel(name: str, shape: Sequence[int], kernel_name: str, grid: Sequence[int]) -> GemmModel:
    """The model of one call from the kernel that ran and its launch grid, what the torch
    profiler shows (FPS-CUB-8): :func:`kernel_model` of
    :func:`fpspec.cublas.h200.choice_for_kernel`.  ``name`` is a library preset
    (``cublas-h200-bf16``, ...) or a target (``torch-bf16``, ...)."""
    return kernel_model(h200.choice_for_kernel(name, shape, kernel_name, grid))


def model_for_shape(name: str, shape: Sequence[int]) -> GemmModel:
    """The model cuBLAS on the H200 runs at (M, N, K), offline (FPS-CUB-6):
    :func:`kernel_model` of :func:`fpspec.cublas.h200.resolve_choice` (the prediction from
    the shape); FpspecError where the predicted kernel is not modelled (SIMT) or its slices
    are not known."""
    return kernel_model(h200.resolve_choice(name, shape))
