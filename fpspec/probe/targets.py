"""What the probe talks to: a GEMM under test (FPS-PRB-2).

A target is any object with

* ``operand_format``: the fpspec format name of its operand codes
  (``e4m3``, ``e5m2``, ``fp16``, ``bf16``);
* ``name``: a label for reports;
* ``matmul(a, bt) -> np.ndarray``: ``a`` (M x K) and ``bt`` (N x K) code arrays
  (uint8 / uint16), the result the FP32 values of ``A @ BT^T`` as float32 (M, N).

Optional:

* ``rowdot(a, bt) -> np.ndarray``: only the diagonal ``y[i] = A[i] . BT[i]``
  (M,), for targets where the off-diagonal outputs cost real time (fpspec's own
  models); the probe uses it when present;
* ``matmul_scaled(a, bt, scale_a, scale_b)``: the GEMM with FP32 tensor scales
  (``torch._scaled_mm``), used by the epilogue probe (FPS-PRB-12);
* ``info() -> dict``: device, library and version facts for the report.

A plain function ``f(a, bt)`` is wrapped with :func:`as_target`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import FpspecError
from .operands import ProbeRow, ProductSplitter, build_operands

__all__ = ["FunctionTarget", "as_target", "CallLog", "run_rows"]


@dataclass
class FunctionTarget:
    """A GEMM given as a plain function ``f(a_codes, bt_codes) -> float32 (M, N)``."""

    fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
    operand_format: str
    name: str = "function"

    def matmul(self, a: np.ndarray, bt: np.ndarray) -> np.ndarray:
        return self.fn(a, bt)

    def info(self) -> dict:
        return {"target": self.name}


def as_target(obj: Any, operand_format: str | None = None, name: str | None = None) -> Any:
    """``obj`` if it already has ``matmul``, else a :class:`FunctionTarget` around it."""
    if hasattr(obj, "matmul"):
        return obj
    if not callable(obj):
        raise FpspecError("a probe target must be callable f(a, bt) or have a matmul(a, bt) method")
    if operand_format is None:
        raise FpspecError("a plain GEMM function needs fmt= (its operand format)")
    return FunctionTarget(obj, operand_format, name or getattr(obj, "__name__", "function"))


@dataclass
class CallLog:
    """Every GEMM call the probe made: shapes, purpose, wall time (for the report)."""

    calls: list[dict] = field(default_factory=list)

    def add(self, purpose: str, m: int, n: int, k: int, seconds: float, via: str) -> None:
        self.calls.append({"purpose": purpose, "M": m, "N": n, "K": k, "seconds": round(seconds, 4),
                           "via": via})


def _check_output(y: np.ndarray, m: int, n: int, name: str) -> np.ndarray:
    y = np.asarray(y)
    if y.shape != (m, n):
        raise FpspecError(f"target {name} returned shape {y.shape}, expected {(m, n)}")
    if y.dtype != np.float32:
        raise FpspecError(f"target {name} returned {y.dtype}, expected float32 (the FP32 outputs)")
    return y


def run_rows(target: Any, rows: list[ProbeRow], K: int, splitter: ProductSplitter, log: CallLog,
             purpose: str, shape: tuple[int, int] | None = None) -> np.ndarray:
    """Evaluate probes: probe i in row i of A and BT, output read on the diagonal (FPS-PRB-2).

    ``shape = (M, N)`` runs the GEMM at exactly that shape (zero rows and columns
    beyond the probes), several calls when there are more probes than min(M, N);
    otherwise one call of M = N = number of probes (or the target's rowdot).
    Returns the float32 outputs, one per probe.
    """
    out = np.empty(len(rows), dtype=np.float32)
    if shape is None and hasattr(target, "rowdot"):
        a, bt = build_operands(rows, K, splitter)
        t0 = time.perf_counter()
        y = np.asarray(target.rowdot(a, bt))
        log.add(purpose, len(rows), len(rows), K, time.perf_counter() - t0, "rowdot")
        if y.shape != (len(rows),) or y.dtype != np.float32:
            raise FpspecError(f"target rowdot returned {y.dtype} {y.shape}, expected float32 ({len(rows)},)")
        return y
    m, n = shape if shape is not None else (len(rows), len(rows))
    per_call = min(m, n)
    for start in range(0, len(rows), per_call):
        chunk = rows[start:start + per_call]
        a, _ = build_operands(chunk, K, splitter, n_rows=m)
        _, bt = build_operands(chunk, K, splitter, n_rows=n)
        t0 = time.perf_counter()
        y = _check_output(target.matmul(a, bt), m, n, getattr(target, "name", "?"))
        log.add(purpose, m, n, K, time.perf_counter() - t0, "matmul")
        out[start:start + len(chunk)] = np.diagonal(y)[:len(chunk)]
    return out
