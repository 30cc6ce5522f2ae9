"""What block quantization refuses in its input (FPS-BLK-1), as every twin says it.

Step 0 of :func:`fpspec.quantization.quantize` refuses NaN, +-Inf and magnitudes whose binary32
rounding is infinite, naming the first such element; each twin finds that element with its own
scan (:func:`fpspec.fast.scan.scan_input`, :func:`fpspec.torch.scan.scan_input_torch`) and raises
the one message made here.
"""

from __future__ import annotations

from .errors import FpspecError

__all__ = ["BINARY32_OVERFLOW", "FLOAT_INPUT_DTYPES", "refused_input", "not_a_float_input", "not_a_matrix"]

#: |x| at or above this rounds to +inf in binary32 (2^128 - 2^103, the midpoint past FLT_MAX).
BINARY32_OVERFLOW = float.fromhex("0x1.ffffffp127")
#: The dtypes block quantization takes (by name, numpy's and torch's alike).
FLOAT_INPUT_DTYPES = ("float16", "bfloat16", "float32", "float64")
_FLT_MAX = float.fromhex("0x1.fffffep127")


def refused_input(why: str, value: float, index: tuple[int, ...]) -> FpspecError:
    """The error for input element ``index`` of value ``value``; ``why`` is ``non-finite`` or
    ``binary32-range`` (the scan's verdict)."""
    if why == "non-finite":
        return FpspecError(f"non-finite input value {value!r} (fpspec refuses NaN and Inf in block "
                           "quantization)", index)
    return FpspecError(f"input value {value!r} is beyond the binary32 range (its binary32 rounding is "
                       f"infinite; FLT_MAX = {_FLT_MAX!r}): tensor amaxes and "
                       "scales are binary32 values (FPS-BLK-1)", index)


def not_a_float_input(dtype: object) -> FpspecError:
    return FpspecError(f"input must be a float array ({', '.join(FLOAT_INPUT_DTYPES)}), got {dtype}")


def not_a_matrix(shape: tuple[int, ...]) -> FpspecError:
    return FpspecError(f"input must have at least 2 dimensions (M, K), got shape {shape}")
