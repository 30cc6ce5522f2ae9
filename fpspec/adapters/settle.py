"""Settle a persistent split launch's slice count with the call's own outputs (FPS-CUB-10).

A persistent ``nvjet`` split launch runs on a fixed grid (:data:`fpspec.cublas.h200.PERSISTENT_CTAS`),
so its grid no longer says into how many slices P it cut K; the observer knows only the
candidates (:func:`fpspec.cublas.h200.persistent_candidates`).  Each candidate is a
complete model; :func:`settle_choice` computes every candidate's outputs at a sample of
the call's outputs and keeps the one that reproduces all of them, bit for bit.  No
tolerance and no scoring: a candidate reproduces the whole sample or is out; none or
more than one left is an :class:`~fpspec.errors.FpspecError` that says so.  Pure NumPy;
the torch observer (:func:`fpspec.adapters.torch_gemm.observation`) and
``tools/cublas/accept.py`` call it.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..cublas.h200 import TARGETS, KernelChoice, settled
from ..errors import FpspecError
from ..matmul import gemm
from ..cublas.library import kernel_model

__all__ = ["SETTLE_SAMPLES", "settle_sample", "fitting_candidates", "settle_choice", "unsettled"]

#: The settling samples the observer tries in turn, (rows, columns) at most, evenly spread:
#: the next, larger one only where more than one candidate reproduces the smaller one (a
#: GEMV-like call has one row, and candidate splits often agree on a few outputs).
SETTLE_SAMPLES: tuple[tuple[int, int], ...] = ((4, 16), (16, 128), (64, 1024))


def settle_sample(size: int, count: int, avoid: Sequence[int] = ()) -> list[int]:
    """``count`` indices of 0 .. size - 1 spread evenly, none of them in ``avoid`` where
    enough others exist (a sample disjoint from the outputs a report scores)."""
    free = [i for i in range(size) if i not in set(avoid)] or list(range(size))
    if len(free) <= count:
        return free
    return sorted({free[(j * (len(free) - 1)) // (count - 1)] for j in range(count)}) if count > 1 else [free[0]]


def _bits(model, a: np.ndarray, bt: np.ndarray, fmt: str) -> np.ndarray:
    return np.asarray(gemm(a, bt, model, fmt=fmt), dtype=np.float32).reshape(-1).view(np.uint32)


def fitting_candidates(choice: KernelChoice, a: np.ndarray, bt: np.ndarray, want: np.ndarray) -> list[KernelChoice]:
    """Every candidate of ``choice`` (:func:`fpspec.cublas.h200.settled`) that reproduces
    ``want`` bit for bit, one per distinct slice length (arguments as :func:`settle_choice`)."""
    fmt = TARGETS[choice.target].fmt
    want = np.asarray(want)
    want = want.view(np.uint32) if want.dtype == np.float32 else want.astype(np.uint32)
    if want.size != a.shape[0] * bt.shape[0]:
        raise FpspecError(f"{choice.target} at {'x'.join(map(str, choice.shape))}: {want.size} sampled outputs "
                          f"for {a.shape[0]} rows x {bt.shape[0]} columns")
    fits: dict[int | None, KernelChoice] = {}
    for p in choice.candidates:
        c = settled(choice, p)
        if c.s not in fits and (_bits(kernel_model(c), a, bt, fmt) == want.reshape(-1)).all():
            fits[c.s] = c
    return list(fits.values())


def settle_choice(choice: KernelChoice, a: np.ndarray, bt: np.ndarray, want: np.ndarray) -> KernelChoice:
    """The candidate of ``choice`` (confidence ``"candidates"``) that reproduces ``want``:
    the call's FP32 outputs (values, or their uint32 bits) at rows ``a`` (code arrays of
    the sampled rows of A, r x K) and columns ``bt`` (c x K), r x c row-major.  Returns
    :func:`fpspec.cublas.h200.settled` (confidence ``"outputs"``); a choice that is not
    ambiguous is returned as it is."""
    if choice.confidence != "candidates":
        return choice
    fits = fitting_candidates(choice, a, bt, want)
    if len(fits) == 1:
        return fits[0]
    raise FpspecError(unsettled(choice, fits, np.asarray(want).size, "sample more outputs to settle P"))


def unsettled(choice: KernelChoice, fits: list[KernelChoice], size: int, tie_hint: str) -> str:
    """Why ``size`` sampled outputs leave ``choice`` unsettled: no candidate fits them, or
    several (``fits``) do; ``tie_hint`` says what to do about a tie."""
    where = f"{choice.target} at {'x'.join(map(str, choice.shape))}"
    if not fits:
        return (f"{where}: no candidate slice count ({', '.join(map(str, choice.candidates))}) reproduces the "
                f"{size} sampled outputs; not modelled")
    return (f"{where}: slice counts {', '.join(str(c.p) for c in fits)} all reproduce the {size} sampled "
            f"outputs; {tie_hint}")
