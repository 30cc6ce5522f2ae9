"""Shared helpers of the rounding sweeps: target lists and policies that accept every input."""

from __future__ import annotations

import numpy as np

from fpspec.choices import NanPolicy, NegativePolicy, Policies, ZeroPolicy, default_policies
from fpspec.formats import FloatFormat, get_format

#: Every 4- and 8-bit target (FPS-FMT-1).
NARROW_FORMATS = ["e2m1", "e4m3", "ue4m3", "ue5m3", "ue5m3fnu", "ue8m0", "e5m2"]
#: The deterministic modes (FPS-RND-1..4, FPS-RND-15).
DETERMINISTIC_MODES = ["rne", "rtz", "rna", "up", "down", "rne-bits"]
#: The stochastic modes (FPS-RND-5..7).
SR_MODES = ["sr-midpoint", "sr-add", "sr-unbiased"]


def accepting_policies(fmt: FloatFormat | str, **overrides: str) -> Policies:
    """The format's defaults, with every refusing NaN / negative / zero policy replaced by a
    mapping, so that a sweep over all inputs (NaNs, negatives, zero) has a code for each."""
    fmt = get_format(fmt)
    pol = default_policies(fmt)
    nan = NanPolicy.NAN if fmt.has_nan else NanPolicy.ZERO
    negative = NegativePolicy.NAN if fmt.has_nan else NegativePolicy.ZERO
    zero = ZeroPolicy.NAN if fmt.has_nan else ZeroPolicy.MIN
    pol = Policies(overflow=pol.overflow, nan=nan, negative=negative, zero=zero)
    return pol.with_(**overrides)


def mismatch_report(x: np.ndarray, got: np.ndarray, want: np.ndarray, limit: int = 5) -> str:
    """A readable list of the first mismatches (input bits, fast code, exact code)."""
    bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
    flat = x.reshape(-1)
    view = {2: np.uint16, 4: np.uint32, 8: np.uint64}[flat.dtype.itemsize]
    lines = [f"{bad.size} mismatches"]
    for i in bad[:limit]:
        lines.append(f"  index {i}: input {float(flat[i])!r} (bits {int(flat[i:i + 1].view(view)[0]):#x}) "
                     f"fast {int(got.reshape(-1)[i]):#x} exact {int(want.reshape(-1)[i]):#x}")
    return "\n".join(lines)
