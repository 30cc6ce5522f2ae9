"""Public GEMM API over the accumulation family (docs/gemm.rst, FPS-GEMM-*).

``gemm(a, bt, model)`` computes ``A (M x K) @ BT (N x K)^T`` -> float32 (M, N) under a
:class:`~fpspec.models.GemmModel` (a preset name or a model, with overrides).  The
operands are both :class:`~fpspec.quantized.QuantizedTensor` (E2M1 payloads with any
scale format, 1-D or 2-D tiles; BT quantized rowwise from the N x K matrix) or both
code arrays of one plain format (``fmt``: e4m3 / e5m2 as uint8, fp16 / bf16 as uint16).

``impl="exact"`` runs the executable spec (:mod:`fpspec.exact.accumulate`);
``impl="fast"`` (default) the Numba twin (:mod:`fpspec.fast.accumulate`), which is
bit-equal and falls back to the exact spec for the few configurations it does not cover
(:func:`fpspec.fast.accumulate.supports`).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .errors import FpspecError
from .exact.accumulate import gemm_exact, rowdot_exact, tensor_alpha
from .fast.accumulate import FastPathUnsupported, gemm_fast, rowdot_fast, supports
from .gemm_operands import (CODE_FORMATS, WHAT_IF_HINT, GemmWhatIfWarning, check_codes_in_range, check_operands,
                            contract_violation, place_tensor_scales)
from .io import native_byte_order
from .cublas.library import LIBRARY_PRESETS, resolve
from .models import GemmModel, contract_of
from .presets import get_model
from .quantized import QuantizedTensor
from .twins import choose_twin

__all__ = ["gemm", "rowdot", "CODE_FORMATS", "GemmWhatIfWarning"]


def gemm(a: Any, bt: Any, model: "str | GemmModel", *, fmt: str | None = None, impl: str = "fast",
         shape: "tuple[int, int, int] | None" = None, allow_what_if: bool = False, **overrides: Any) -> np.ndarray:
    """``A @ BT^T`` under an accumulation model, float32 (M, N) (FPS-GEMM-1).

    Args:
        a: M x K operand: a QuantizedTensor, or a code array (with ``fmt``).
        bt: N x K operand (the columns of B as rows), of the same kind as ``a``.
        model: a preset name (:data:`fpspec.presets.PRESETS`) or a GemmModel.
        fmt: the code format of code-array operands: e4m3, e5m2, fp16, bf16.
        impl: "fast" (Numba, default) or "exact" (the executable spec).
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
    m, a, bt, quantized = _checked(a, bt, model, fmt, impl, overrides, shape, allow_what_if)
    return _evaluate(gemm_exact, gemm_fast, a, bt, m, fmt, impl, quantized)


def rowdot(a: Any, bt: Any, model: "str | GemmModel", *, fmt: str | None = None, impl: str = "fast",
           shape: "tuple[int, int, int] | None" = None, allow_what_if: bool = False,
           **overrides: Any) -> np.ndarray:
    """The diagonal of :func:`gemm`: ``y[i] = A[i] . BT[i]``, float32 (M,), for A and BT of
    the same shape (M x K) (FPS-GEMM-1).  Arguments as for :func:`gemm`.

    This is what a probe needs (one dot product per probe row): M outputs instead of M^2.
    """
    m, a, bt, quantized = _checked(a, bt, model, fmt, impl, overrides, shape, allow_what_if)
    if a.shape != bt.shape:
        raise FpspecError(f"rowdot needs A and BT of one shape, got {a.shape[0]}x{a.shape[1]} and "
                          f"{bt.shape[0]}x{bt.shape[1]}")
    return _evaluate(rowdot_exact, rowdot_fast, a, bt, m, fmt, impl, quantized)


def _evaluate(exact, fast, a, bt, m: GemmModel, fmt, impl: str, quantized: bool) -> np.ndarray:
    """The exact spec where asked for or where the fast path does not carry the model, else
    the fast path (bit-equal, FPS-GEMM-10), falling back to the exact one where it declines."""
    if impl == "exact" or not supports(m, a.shape[1]):
        return exact(a, bt, m, fmt=fmt)
    alpha = tensor_alpha(a, bt, m) if quantized else None
    try:
        return fast(a, bt, m, fmt=fmt, alpha=alpha)
    except FastPathUnsupported:
        return exact(a, bt, m, fmt=fmt)


def _library_model(model, a, bt, fmt, shape) -> "str | GemmModel":
    """A library preset resolved at the GEMM's shape (FPS-CUB-6); any other model as is."""
    if not isinstance(model, str) or model not in LIBRARY_PRESETS:
        if shape is not None:
            raise FpspecError("shape is for library presets (cublas-h200-*), whose model depends on it")
        return model
    from .cublas.h200 import call_shape

    if not isinstance(a, QuantizedTensor) and (np.ndim(a) != 2 or np.ndim(bt) != 2):
        raise FpspecError(f"A and BT must be 2-D code arrays, got {np.ndim(a)}-D and {np.ndim(bt)}-D")
    rows = (a.shape[0], bt.shape[0], a.shape[1]) if isinstance(a, QuantizedTensor) else \
        (np.shape(a)[0], np.shape(bt)[0], np.shape(a)[1])
    if shape is None:
        shape = rows
    try:
        mm, nn, kk = (int(v) for v in shape)
    except (TypeError, ValueError):
        raise FpspecError(f"shape must be (M, N, K), got {shape!r}") from None
    if kk != rows[2] or mm < rows[0] or nn < rows[1]:
        raise FpspecError(f"shape {mm}x{nn}x{kk} does not hold the operands ({rows[0]} rows of A, {rows[1]} of BT, "
                          f"K = {rows[2]}): K must be equal, M and N at least the rows given")
    return resolve(model, call_shape(model, (mm, nn, kk)))


def _checked(a, bt, model, fmt, impl, overrides, shape=None, allow_what_if=False):
    """The model (with overrides) and the validated operands (FPS-GEMM-9); a library
    preset resolved at the shape (FPS-CUB-6); the operands held to the model's contract and
    their tensor scales placed (FPS-GEMM-25)."""
    a, bt = native_byte_order(a), native_byte_order(bt)  # '>u2' code arrays are taken by value
    if not isinstance(allow_what_if, bool):
        raise FpspecError(f"allow_what_if must be True or False, got {allow_what_if!r}")
    contract = contract_of(model)
    m = get_model(_library_model(model, a, bt, fmt, shape), **overrides)
    choose_twin(impl)  # (refused by name before any operand is read)
    if fmt is not None and isinstance(a, QuantizedTensor):
        raise FpspecError("fmt is only for code-array operands; quantized tensors carry their formats")
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
    return m, a, bt, quantized
