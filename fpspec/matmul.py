"""Public GEMM API over the accumulation family (docs/gemm.rst, FPS-GEMM-*).

``gemm(a, bt, model)`` computes ``A (M x K) @ BT (N x K)^T`` -> float32 (M, N) under a
:class:`~fpspec.models.GemmModel` (a preset name or a model, with overrides).  The
operands are both :class:`~fpspec.quantized.QuantizedTensor` (E2M1 payloads with any
scale format, 1-D or 2-D tiles; BT quantized rowwise from the N x K matrix) or both
code arrays of one plain format (``fmt``: e4m3 / e5m2 as uint8, fp16 / bf16 as uint16).

``impl="exact"`` runs the executable spec (:mod:`fpspec.exact.accumulate`);
``impl="fast"`` (default) the Numba twin (:mod:`fpspec.fast.accumulate`), which is
bit-equal; the few configurations it does not carry go to the exact spec.  Which one
computes a call, and why, is decided once, by :func:`gemm_path` (``fpspec gemm --explain``
prints it).
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np

from .arraykind import is_torch, same_device
from .errors import FpspecError
from .exact.accumulate import tensor_alpha
from .gemm_operands import (CODE_FORMATS, WHAT_IF_HINT, GemmWhatIfWarning, check_codes_in_range, check_operands,
                            contract_violation, operand_formats, place_tensor_scales)
from .io import native_byte_order
from .cublas.library import LIBRARY_PRESETS
from .models import GemmModel, contract_of
from .named_models import get_model
from .quantized import QuantizedTensor
from .twins import TORCH_TWINS, Twin, choose_twin

__all__ = ["gemm", "rowdot", "gemm_path", "gemm_and_path", "explain_gemm", "GemmPath", "CODE_FORMATS",
           "GemmWhatIfWarning"]


class GemmPath(NamedTuple):
    """How one GEMM call is computed (FPS-GEMM-10), decided once by :func:`gemm_path`.

    ``model``: the concrete model (a library preset resolved at the GEMM's shape, overrides
    and the contract's tensor-scale epilogue applied); ``twin``: ``"fast"`` or ``"exact"``;
    ``reason``: why that twin; ``resolution``: for a library preset, the kernel it stands for and
    where that answer comes from (:class:`fpspec.cublas.library.Resolution`: a recorded call,
    the rule, or a nearest-shape guess), else None."""

    model: GemmModel
    twin: str
    reason: str
    resolution: Any = None


class _Call(NamedTuple):
    path: GemmPath
    a: Any
    bt: Any
    fmt: Any
    quantized: bool


def gemm(a: Any, bt: Any, model: "str | GemmModel", *, fmt: str | None = None, impl: "str | None" = None,
         shape: "tuple[int, int, int] | None" = None, allow_what_if: bool = False, **overrides: Any) -> np.ndarray:
    """``A @ BT^T`` under an accumulation model, float32 (M, N) (FPS-GEMM-1).

    Args:
        a: M x K operand: a QuantizedTensor, or a code array (with ``fmt``).
        bt: N x K operand (the columns of B as rows), of the same kind as ``a``.
        model: a preset name (:data:`fpspec.presets.PRESETS`) or a GemmModel.
        fmt: the code format of code-array operands: e4m3, e5m2, fp16, bf16.
        impl: "fast" (Numba), "exact" (the executable spec) or "torch" (torch tensors on their
            device; a torch float32 result there); None (default): "torch" for torch operands,
            "fast" otherwise.
        shape: (M, N, K) of the GEMM a library preset (``cublas-h200-*``) is resolved at
            (FPS-CUB-6): the operands may be sampled rows of A and of BT of a larger GEMM
            (K equal, M and N at least the rows given); default: the operands' shape.
        allow_what_if: run operands outside the preset's operand contract (FPS-GEMM-25) as a
            hypothetical; the run is flagged with a :class:`GemmWhatIfWarning`.
        **overrides: model parameters to change (names or aliases G, F, N_C, L, neab).

    Quantized operands with a tensor scale (ue5m3, nvfp4) are scaled by alpha: the model's
    own, or the epilogue of the preset's contract where the model's chain has none (the
    instruction presets: TransformerEngine's FP32 alpha after the MMA); a model that would
    drop them is refused (FPS-GEMM-25).

    Raises:
        FpspecError: shape or dtype mismatch, operands outside the preset's operand contract
            (the message names the operand, the model and the rule), tensor scales that would
            be dropped, K not a multiple of G where the model requires whole groups, unknown
            preset or parameter, out-of-range codes.
    """
    return _run(_prepared(a, bt, model, fmt, impl, overrides, shape, allow_what_if), "gemm")


def rowdot(a: Any, bt: Any, model: "str | GemmModel", *, fmt: str | None = None, impl: "str | None" = None,
           shape: "tuple[int, int, int] | None" = None, allow_what_if: bool = False,
           **overrides: Any) -> np.ndarray:
    """The diagonal of :func:`gemm`: ``y[i] = A[i] . BT[i]``, float32 (M,), for A and BT of
    the same shape (M x K) (FPS-GEMM-1).  Arguments as for :func:`gemm`.

    This is what a probe needs (one dot product per probe row): M outputs instead of M^2.
    """
    call = _prepared(a, bt, model, fmt, impl, overrides, shape, allow_what_if)
    if call.a.shape != call.bt.shape:
        raise FpspecError(f"rowdot needs A and BT of one shape, got {call.a.shape[0]}x{call.a.shape[1]} and "
                          f"{call.bt.shape[0]}x{call.bt.shape[1]}")
    return _run(call, "rowdot")


def gemm_path(a: Any, bt: Any, model: "str | GemmModel", *, fmt: str | None = None, impl: "str | None" = None,
              shape: "tuple[int, int, int] | None" = None, allow_what_if: bool = False,
              **overrides: Any) -> GemmPath:
    """How :func:`gemm` with these arguments computes (the same checks, nothing computed): the
    concrete model, the twin and why, and a library preset's resolution (FPS-GEMM-10)."""
    return _prepared(a, bt, model, fmt, impl, overrides, shape, allow_what_if).path


def gemm_and_path(a: Any, bt: Any, model: "str | GemmModel", *, fmt: str | None = None, impl: "str | None" = None,
                  shape: "tuple[int, int, int] | None" = None, allow_what_if: bool = False,
                  **overrides: Any) -> tuple[np.ndarray, GemmPath]:
    """:func:`gemm` and the :func:`gemm_path` it took, from one check of the arguments (what
    ``fpspec gemm`` reports a library preset's kernel from)."""
    call = _prepared(a, bt, model, fmt, impl, overrides, shape, allow_what_if)
    return _run(call, "gemm"), call.path


def explain_gemm(a: Any, bt: Any, model: "str | GemmModel", *, fmt: str | None = None, impl: "str | None" = None,
                 shape: "tuple[int, int, int] | None" = None, allow_what_if: bool = False,
                 **overrides: Any) -> dict[str, Any]:
    """:func:`gemm_path` as data (``fpspec gemm --explain``): the model asked for and its concrete
    parameters, the implementation and why, and how that twin computes (``Twin.gemm_kernel``: on
    the fast path whether exact group sums through BLAS are tried first, their exactness guard
    handing outputs it cannot prove back to the term kernel, and that step-1 kernel); for a
    library preset the kernel the output stands for and where that answer comes from (a
    recorded call, the rule, or a nearest-shape guess)."""
    call = _prepared(a, bt, model, fmt, impl, overrides, shape, allow_what_if)
    path = call.path
    out: dict[str, Any] = {"model": model if isinstance(model, str) else "the given model",
                           "parameters": path.model.to_dict(), "implementation": path.twin, "reason": path.reason}
    out.update(choose_twin(path.twin).gemm_kernel(call.a, call.bt, path.model, call.fmt))
    found = path.resolution
    if found is not None:
        out["library"] = {"preset": found.preset, "call_shape": list(found.shape), "kernel": found.choice.describe(),
                          "basis": found.basis, "reason": found.reason}
    return out


def _run(call: _Call, verb: str) -> np.ndarray:
    """The chosen twin on the checked operands; the fast twin with the FP32 alpha of quantized
    operands (the exact spec computes its own)."""
    twin = choose_twin(call.path.twin)
    alpha = tensor_alpha(call.a, call.bt, call.path.model) if call.quantized and twin.name != "exact" else None
    fn = twin.gemm if verb == "gemm" else twin.rowdot
    return fn(call.a, call.bt, call.path.model, fmt=call.fmt, alpha=alpha)


def _choose(twin: Twin, a, bt, m: GemmModel) -> tuple[str, str]:
    """The twin that computes, and why: the one asked for, unless it says the GEMM is not its own
    (``Twin.gemm_declines``; the fast path's :func:`fpspec.fast.accumulate.exact_only_reason`):
    then the exact spec, which computes every GEMM the door admits."""
    if twin.name == "exact":
        return "exact", "impl='exact' asks for the executable spec"
    why = twin.gemm_declines(a, bt, m)
    if why is not None and twin.name in TORCH_TWINS:  # (the exact spec computes on the host: no silent copy)
        raise FpspecError(f"the {twin.name} twin does not carry this GEMM: {why}; compute it on the host "
                          "(QuantizedTensor.to('numpy') / tensor.cpu().numpy(), impl='fast')")
    if why is not None:
        return "exact", f"the {twin.name} path does not carry it: {why}"
    return twin.name, f"the {twin.name} path carries this model and these operands (bit-equal to the exact spec)"


def _library_model(model, a, bt, shape) -> "tuple[str | GemmModel, Any]":
    """A library preset resolved at the GEMM's shape, with its resolution (FPS-CUB-6); any other
    model as is (no resolution)."""
    if not isinstance(model, str) or model not in LIBRARY_PRESETS:
        if shape is not None:
            raise FpspecError("shape is for library presets (cublas-h200-*), whose model depends on it")
        return model, None
    from .cublas.h200 import call_shape
    from .cublas.library import resolution

    dims = [len(getattr(x, "shape", np.shape(x))) for x in (a, bt)]
    if not isinstance(a, QuantizedTensor) and dims != [2, 2]:
        raise FpspecError(f"A and BT must be 2-D code arrays, got {dims[0]}-D and {dims[1]}-D")
    rows = (a.shape[0], bt.shape[0], a.shape[1]) if isinstance(a, QuantizedTensor) else \
        (getattr(a, "shape", np.shape(a))[0], getattr(bt, "shape", np.shape(bt))[0],
         getattr(a, "shape", np.shape(a))[1])
    if shape is None:
        shape = rows
    try:
        mm, nn, kk = (int(v) for v in shape)
    except (TypeError, ValueError):
        raise FpspecError(f"shape must be (M, N, K), got {shape!r}") from None
    if kk != rows[2] or mm < rows[0] or nn < rows[1]:
        raise FpspecError(f"shape {mm}x{nn}x{kk} does not hold the operands ({rows[0]} rows of A, {rows[1]} of BT, "
                          f"K = {rows[2]}): K must be equal, M and N at least the rows given")
    found = resolution(model, call_shape(model, (mm, nn, kk)))
    return found.model, found


def _prepared(a, bt, model, fmt, impl, overrides, shape=None, allow_what_if=False) -> _Call:
    """Every argument checked once and the path chosen once: the model (a library preset resolved
    at the shape, FPS-CUB-6; overrides applied), the validated operands (FPS-GEMM-9) held to the
    model's contract with their tensor scales placed (FPS-GEMM-25), the twin and why."""
    given = a.codes if isinstance(a, QuantizedTensor) else a
    if not is_torch(given):
        a, bt = native_byte_order(a), native_byte_order(bt)  # '>u2' code arrays are taken by value
    if not isinstance(allow_what_if, bool):
        raise FpspecError(f"allow_what_if must be True or False, got {allow_what_if!r}")
    contract = contract_of(model)
    concrete, found = _library_model(model, a, bt, shape)
    m = get_model(concrete, **overrides)
    twin = choose_twin(impl, given)  # (refused by name, or by the operands' kind, before any is read)
    if isinstance(a, QuantizedTensor) and isinstance(bt, QuantizedTensor):
        same_device("A and BT", a.codes, bt.codes)
    if fmt is not None and isinstance(a, QuantizedTensor):
        raise FpspecError("fmt is only for code-array operands; quantized tensors carry their formats")
    if not isinstance(a, QuantizedTensor) and not isinstance(bt, QuantizedTensor):
        fmt = operand_formats(fmt)  # the code formats, once: (A's, BT's), what every layer below reads
    a, bt, quantized = check_operands(a, bt, m, fmt)
    name = model if isinstance(model, str) else "the given model"
    violation = contract_violation(a, bt, name, contract, fmt)
    if violation is not None:
        if not allow_what_if:
            raise FpspecError(f"{violation} (for {WHAT_IF_HINT})")
        warnings.warn(f"what-if: {violation}; the result is a hypothetical", GemmWhatIfWarning, stacklevel=3)
    m = place_tensor_scales(a, bt, m, name, contract, overrides)
    if quantized:
        check_codes_in_range(a, "A")
        check_codes_in_range(bt, "BT")
    which, why = _choose(twin, a, bt, m)
    return _Call(GemmPath(m, which, why, found), a, bt, fmt, quantized)
