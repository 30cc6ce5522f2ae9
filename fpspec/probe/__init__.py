"""Probe a black-box GEMM, fit its accumulation model, accept it (docs/probe.rst, FPS-PRB-*).

``probe_gemm(target, fmt=...)`` runs the recipes of :mod:`fpspec.probe.recipes`
against any GEMM (see :mod:`fpspec.probe.targets` for what a target is), fits a
:class:`~fpspec.models.GemmModel` (:mod:`fpspec.probe.fit`) and, unless told not
to, runs the random acceptance test (:mod:`fpspec.probe.accept`).
"""

from __future__ import annotations

from typing import Any

from .accept import DEFAULT_SHAPES, SMALL_SHAPES, AcceptanceResult, check_samples, collect_samples
from .fit import FittedModel, fit, nearest_preset
from .recipes import ProbeContext, run_recipes
from .report import ProbeReport
from .targets import as_target

__all__ = ["probe_gemm", "probe_at", "accept", "DEFAULT_PROBE_SHAPE", "ProbeReport", "FittedModel", "DEFAULT_SHAPES", "SMALL_SHAPES"]


#: Every probe GEMM of one run has this (M, N) unless told otherwise: libraries pick
#: kernels by shape, so one run must not mix shapes (FPS-PRB-2).
DEFAULT_PROBE_SHAPE = (256, 256)


def probe_gemm(target: Any, fmt: str | None = None, *, K: int = 1024, shape: tuple[int, int] | None | str = "auto",
               scan_k: int = 512, acceptance_shapes=DEFAULT_SHAPES, seed: int = 2026,
               accept_model=None, epilogue: bool = True, determinism: bool = True) -> ProbeReport:
    """Probe ``target``, fit its model, and (with ``acceptance_shapes``) accept it.

    Args:
        target: an object with ``matmul(a, bt)`` (see :mod:`fpspec.probe.targets`) or a
            function ``f(a_codes, bt_codes) -> float32 (M, N)``.
        fmt: operand format (``e4m3``, ``e5m2``, ``fp16``, ``bf16``); read from the
            target's ``operand_format`` when omitted.
        K: reduction length of the probe GEMMs.
        shape: run every probe GEMM at exactly (M, N) (kernel selection depends on
            shape); "auto": DEFAULT_PROBE_SHAPE, or the target's ``rowdot`` when it has
            one (fpspec's models); None: M = N = the number of probes of each batch.
        scan_k: how far the group-membership scan looks (FPS-PRB-4).
        acceptance_shapes: (M, N, K, rows, cols) tuples, or None/() to skip.
        accept_model: a FittedModel to accept instead of the fitted one.
    """
    target = as_target(target, fmt)
    fmt = fmt or getattr(target, "operand_format", None)
    if fmt is None:
        raise ValueError("probe_gemm needs fmt= or a target with operand_format")
    if shape == "auto":
        shape = None if hasattr(target, "rowdot") else DEFAULT_PROBE_SHAPE
    ctx = ProbeContext(target=target, fmt=fmt, K=K, shape=shape, scan_k=scan_k)
    findings = run_recipes(ctx, epilogue=epilogue, determinism=determinism)
    fitted = fit(findings, fmt)
    report = ProbeReport(target=dict(getattr(target, "info", lambda: {"target": "?"})()),
                         operand_format=fmt, K=K, findings=findings, fitted=fitted.to_dict(),
                         nearest_preset=nearest_preset(fitted), calls=ctx.log.calls, raw=ctx.raw)
    if acceptance_shapes:
        model = accept_model or fitted
        samples = collect_samples(target, fmt, acceptance_shapes, seed, ctx.log)
        report.acceptance = check_samples(samples, fmt, model).to_dict()
    return report


def accept(target: Any, fitted: FittedModel, fmt: str, shapes=DEFAULT_SHAPES, seed: int = 2026) -> AcceptanceResult:
    """The acceptance test alone (FPS-PRB-15)."""
    target = as_target(target, fmt)
    return check_samples(collect_samples(target, fmt, shapes, seed), fmt, fitted)


def probe_at(target: Any, fmt: str, M: int, N: int, K: int, scan_k: int = 512) -> tuple[dict, FittedModel, list]:
    """The recipes at exactly one GEMM shape (M, N, K): findings, fitted model, calls
    (FPS-PRB-9: a library's reduction over K may change with the shape)."""
    target = as_target(target, fmt)
    ctx = ProbeContext(target=target, fmt=fmt, K=K, shape=(M, N), scan_k=min(K, scan_k))
    findings = run_recipes(ctx, epilogue=False, determinism=False)
    return findings, fit(findings, fmt), ctx.log.calls
