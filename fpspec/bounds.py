"""Range bounds of the tensor-scale target T, for any scale format (FPS-BND-*).

With tensor amax g and target T, a block with amax a_B asks for the scale
u = T a_B / g = T rho (rho = a_B / g, the block-to-tensor amax ratio), rounded
to the scale format with RNE and saturation (docs/bounds.rst):

* **headroom** (FPS-BND-1): the scale saturates iff u > U (U = max finite), so
  every block is unsaturated iff T rho <= U, i.e. rho <= U / T.
* **min_nonzero_ratio** (FPS-BND-2): the scale code is nonzero iff u rounds up
  to the smallest positive value s_min, i.e. u > s_min / 2; u = s_min / 2 is a
  tie that RNE sends to code 0 (the even one).  The bound is *exclusive*: rho
  must be strictly greater than s_min / (2T).  Formats without a zero (UE8M0)
  have no such bound (0).
* **min_normal_ratio** (FPS-BND-3): below rho = 2^emin / T the scale is
  subnormal and has fewer than m + 1 significant bits (or, without subnormals,
  is clamped at its minimum).

All figures are exact :class:`~fractions.Fraction` values; :meth:`RangeBounds.as_dict`
adds floats for JSON.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from fractions import Fraction

from .errors import FpspecError
from .formats import get_format

__all__ = ["RangeBounds", "range_bounds", "SCALE_FORMATS"]

#: Scale formats the bounds are defined for (unsigned use of each).
SCALE_FORMATS = ("ue5m3", "ue5m3fnu", "ue4m3", "e4m3", "ue8m0")


@dataclass(frozen=True)
class RangeBounds:
    scale_format: str
    target: Fraction
    max_scale: Fraction
    min_scale: Fraction          # smallest positive scale value
    min_normal_scale: Fraction
    headroom: Fraction           # U / T
    min_nonzero_ratio: Fraction  # exclusive infimum of rho with a nonzero scale code
    min_nonzero_exclusive: bool
    min_normal_ratio: Fraction   # 2^emin / T

    @property
    def dynamic_range(self) -> Fraction | None:
        """headroom / min_nonzero_ratio: the span of block ratios with a usable scale."""
        return self.headroom / self.min_nonzero_ratio if self.min_nonzero_ratio else None

    def as_dict(self) -> dict:
        d: dict = {"scale_format": self.scale_format}
        for key in ("target", "max_scale", "min_scale", "min_normal_scale", "headroom",
                    "min_nonzero_ratio", "min_normal_ratio"):
            v: Fraction = getattr(self, key)
            d[key] = float(v)
            d[key + "_exact"] = str(v)
        d["min_nonzero_exclusive"] = self.min_nonzero_exclusive
        dr = self.dynamic_range
        d["dynamic_range"] = None if dr is None else float(dr)
        return d


def _target(target: object) -> Fraction:
    """T as an exact Fraction: a finite, positive number (an int, float, Fraction or a string
    such as '448' or '1/2'); an infinite or NaN T has no bounds and is refused."""
    if isinstance(target, bool):
        raise FpspecError(f"target T must be a number, got {target!r}")
    value = target
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Rational):
        value = float(value)  # NumPy floats too (np.float32(448)); a float is exact as a Fraction
    try:
        t = Fraction(value)  # type: ignore[arg-type]
    except OverflowError:  # Fraction(inf)
        raise FpspecError(f"target T must be finite, got {target!r}") from None
    except (TypeError, ValueError, ZeroDivisionError):
        raise FpspecError(f"target T must be a finite number, got {target!r}") from None
    if t <= 0:
        raise FpspecError(f"target T must be positive, got {target!r}")
    return t


def range_bounds(scale_format: str, target: Fraction | float | int = 448) -> RangeBounds:
    """The bounds of :mod:`fpspec.bounds` for one scale format and T (FPS-BND-1..3); T must
    be finite and positive (FpspecError otherwise)."""
    if scale_format not in SCALE_FORMATS:
        raise FpspecError(f"bounds are defined for scale formats {', '.join(SCALE_FORMATS)}, "
                          f"got {scale_format!r}")
    fmt = get_format(scale_format)
    t = _target(target)
    u_max = fmt.max_finite
    s_min = fmt.min_positive
    if fmt.has_zero:
        nonzero = s_min / 2 / t
        exclusive = True
    else:
        nonzero = Fraction(0)
        exclusive = False
    return RangeBounds(scale_format=scale_format, target=t, max_scale=u_max, min_scale=s_min,
                       min_normal_scale=fmt.min_normal, headroom=u_max / t,
                       min_nonzero_ratio=nonzero, min_nonzero_exclusive=exclusive,
                       min_normal_ratio=fmt.min_normal / t)
