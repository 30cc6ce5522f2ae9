"""Tensor scaling: the delayed sample-and-hold amax cache and per-operand T targets (FPS-SCL-*).

The normative text is docs/tensor-scaling.rst.  In short:

* One cache entry per ``(module, role)``; roles are ``x`` (activation),
  ``w`` (weight) and ``dy`` (output gradient).  Each entry holds an amax
  (binary32) and the step tau at which it was sampled.
* Steps are one-based and advanced only by :meth:`AmaxCache.begin_step` (one
  optimizer step); gradient-accumulation microbatches call
  :meth:`AmaxCache.amax` several times within a step and do not advance it.
* :meth:`AmaxCache.amax` refreshes the entry on a cold start (no entry) or when
  ``t - tau >= D``, with the current amax passed through the reduction hook
  (a max over data-parallel ranks, :func:`max_reduce`), and returns the held
  value otherwise.  With D = 50 the refreshes happen at steps 1, 51, 101, ...
  It is a sample-and-hold, not a window maximum.  D = 1 refreshes at every step
  (current scaling at step granularity: microbatches of one step share the
  first microbatch's amax).
* The cache refuses to be pickled, copied or serialized: checkpoints do not
  hold it, and a resume is a cold start.
* A held amax may be 0 (an all-zero tensor at a refresh): the quantizer takes it
  as a given amax of 0, which means what a measured zero amax means for the
  profile (FPS-SCL-10, FPS-BLK-5).
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Iterable

import numpy as np

from .errors import FpspecError

__all__ = ["ROLES", "AmaxCache", "max_reduce", "TargetTable", "CacheEntry"]

#: Operand roles of a linear layer's GEMMs.
ROLES = ("x", "w", "dy")


def _check_amax(value: object, what: str) -> np.float32:
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FpspecError(f"{what} must be a number, got {value!r}") from None
    a = np.float32(f)
    if not math.isfinite(f) or f < 0 or not np.isfinite(a) or float(a) != f:
        raise FpspecError(f"{what} must be a finite, non-negative binary32 value, got {value!r}")
    return a


def max_reduce(values: Iterable[object]) -> np.float32:
    """The max-reduction across ranks: order-independent (max is exact) (FPS-SCL-5)."""
    vals = [_check_amax(v, "a rank's amax") for v in values]
    if not vals:
        raise FpspecError("max_reduce needs at least one rank's amax")
    return np.float32(max(vals))


@dataclass
class CacheEntry:
    amax: np.float32
    tau: int
    refreshes: int = 1


class AmaxCache:
    """Sample-and-hold tensor amax per (module, role) with period D (FPS-SCL-1..6).

    Args:
        period: D >= 1, in optimizer steps (seed: 50; 1 is current scaling).
        reduce: hook applied to the local amax on refresh, e.g. an all-reduce max
            across data-parallel ranks; default: identity.
        periods: per-role or per-(module, role) overrides of D.
    """

    def __init__(self, period: int = 50, reduce: Callable[[np.float32], object] | None = None,
                 periods: dict | None = None):
        self.period = self._check_period(period)
        self._reduce = reduce
        self._periods = {k: self._check_period(v) for k, v in (periods or {}).items()}
        self._step = 0
        self._entries: dict[tuple[str, str], CacheEntry] = {}

    @staticmethod
    def _check_period(d: object) -> int:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 1:
            raise FpspecError(f"the amax period D must be an integer >= 1, got {d!r}")
        return int(d)

    # ----------------------------------------------------------------- steps
    @property
    def step(self) -> int:
        """The current one-based step t (0 before the first begin_step)."""
        return self._step

    def begin_step(self) -> int:
        """Advance to the next optimizer step; returns the new t (FPS-SCL-2)."""
        self._step += 1
        return self._step

    def period_for(self, module: str, role: str) -> int:
        return self._periods.get((module, role), self._periods.get(role, self.period))

    # ------------------------------------------------------------------ amax
    def needs_refresh(self, module: str, role: str) -> bool:
        entry = self._entries.get((module, role))
        return entry is None or self._step - entry.tau >= self.period_for(module, role)

    def amax(self, module: str, role: str, current: object) -> np.float32:
        """The tensor amax to use now for (module, role), given this call's current amax (FPS-SCL-1)."""
        if self._step < 1:
            raise FpspecError("AmaxCache.amax called before the first begin_step() (steps are one-based)")
        if role not in ROLES:
            raise FpspecError(f"unknown operand role {role!r}; roles: {', '.join(ROLES)}")
        cur = _check_amax(current, f"current amax of ({module}, {role})")
        key = (module, role)
        entry = self._entries.get(key)
        if entry is None or self._step - entry.tau >= self.period_for(module, role):
            value = cur if self._reduce is None else _check_amax(self._reduce(cur), "reduced amax")
            if entry is None:
                self._entries[key] = CacheEntry(value, self._step)
            else:
                entry.amax, entry.tau, entry.refreshes = value, self._step, entry.refreshes + 1
            return value
        return entry.amax

    def entry(self, module: str, role: str) -> CacheEntry | None:
        e = self._entries.get((module, role))
        return None if e is None else CacheEntry(e.amax, e.tau, e.refreshes)

    def reset(self) -> None:
        """Forget everything: what a resume from a checkpoint is (a cold start) (FPS-SCL-6)."""
        self._entries.clear()
        self._step = 0

    # --------------------------------------------------- no serialization
    def __reduce_ex__(self, protocol: object) -> object:
        raise FpspecError("AmaxCache is never serialized: checkpoints do not hold it and a resume is "
                          "a cold start (FPS-SCL-6)")

    def __reduce__(self) -> object:
        return self.__reduce_ex__(2)

    def __getstate__(self) -> object:
        return self.__reduce_ex__(2)

    def __copy__(self) -> object:
        return self.__reduce_ex__(2)

    def __deepcopy__(self, memo: object) -> object:
        return self.__reduce_ex__(2)


@dataclass
class TargetTable:
    """T per (module, role, GEMM), with overrides (FPS-SCL-7).

    ``overrides`` maps ``(module_pattern, role, gemm)`` to T; ``gemm`` may be
    ``None`` (any GEMM) and the pattern is an :mod:`fnmatch` pattern.  The most
    specific match wins: an exact module name over a pattern, a named GEMM over
    ``None``; ties keep the first entry.
    """

    default: Fraction = Fraction(448)
    overrides: dict = field(default_factory=dict)

    def lookup(self, module: str, role: str, gemm: str | None = None) -> Fraction:
        best, best_rank = None, -1
        for (pat, r, g), t in self.overrides.items():
            if r != role or (g is not None and g != gemm):
                continue
            if pat == module:
                rank = 2
            elif fnmatch.fnmatchcase(module, pat):
                rank = 1
            else:
                continue
            rank = rank * 2 + (1 if g is not None else 0)
            if rank > best_rank:
                best, best_rank = t, rank
        return Fraction(best) if best is not None else Fraction(self.default)
