"""Public conversion API: encode floats to codes, decode codes to floats (FPS-RND-*, FPS-FMT-*).

``impl="fast"`` (default) runs the Numba path, ``impl="exact"`` the executable
spec in :mod:`fpspec.exact.rounding`; the two are bit-equal by test.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from .choices import DEFAULT_SR_BITS, Policies, RoundingMode, default_policies
from .exact.rounding import encode_exact
from .fast.rounding import decode_fast, encode_fast, validate_policies
from .errors import FpspecError
from .formats import FloatFormat, get_format

__all__ = ["encode", "decode", "resolve_policies"]


def resolve_policies(fmt: FloatFormat | str, *, overflow: str | None = None, nan: str | None = None,
                     negative: str | None = None, zero: str | None = None) -> Policies:
    """The format's default policies with the given ones replaced (names as in :mod:`fpspec.choices`)."""
    fmt = get_format(fmt)
    pol = default_policies(fmt).with_(overflow=overflow, nan=nan, negative=negative, zero=zero)
    validate_policies(fmt, pol)
    return pol


def encode(x: np.ndarray, fmt: FloatFormat | str, rounding: RoundingMode | str = "rne", *,
           rbits: np.ndarray | None = None, nbits: int = DEFAULT_SR_BITS,
           overflow: str | None = None, nan: str | None = None, negative: str | None = None,
           zero: str | None = None, impl: Literal["fast", "exact"] = "fast") -> np.ndarray:
    """Round every element of a float array once, from its exact value, to a code of ``fmt``.

    Returns codes in ``fmt.storage_dtype`` (uint8 / uint16 / uint32), the shape of ``x``.
    Stochastic modes take ``rbits`` (uint8/16/32, same shape, values < 2^nbits).
    """
    fmt = get_format(fmt)
    pol = resolve_policies(fmt, overflow=overflow, nan=nan, negative=negative, zero=zero)
    if impl == "fast":
        return encode_fast(x, fmt, rounding, rbits=rbits, nbits=nbits, policies=pol)
    if impl == "exact":
        return encode_exact(x, fmt, rounding, rbits=rbits, nbits=nbits, policies=pol)
    raise ValueError(f"impl must be 'fast' or 'exact', got {impl!r}")


def decode(codes: np.ndarray, fmt: FloatFormat | str, *,
           impl: Literal["fast", "exact"] = "fast") -> np.ndarray:
    """Decode codes to float64 values (exact; NaN and Inf codes give NaN and Inf).

    ``impl="exact"`` decodes every code with :meth:`FloatFormat.decode_exact`.
    """
    if impl == "fast":
        return decode_fast(codes, fmt)
    if impl == "exact":
        return _decode_exact(codes, get_format(fmt))
    raise FpspecError(f"impl must be 'fast' or 'exact', got {impl!r}")


def _decode_exact(codes: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """The exact twin of decode_fast: each code's exact value as float64, signed zeros kept."""
    codes = np.asarray(codes)
    if codes.dtype.kind not in "ui":
        raise FpspecError(f"codes must be an unsigned integer array, got {codes.dtype}")
    out = np.empty(codes.shape, dtype=np.float64)
    for idx, c in np.ndenumerate(codes):
        c = int(c)
        if not 0 <= c < fmt.num_codes:
            raise FpspecError(f"code {c} out of range for {fmt.name} ({fmt.bits} bits)", idx)
        v = float(fmt.decode_exact(c))
        out[idx] = -0.0 if v == 0 and fmt.signed and c & fmt.sign_mask else v
    return out
