"""Operand builders shared by the GEMM tests (not a test module)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from fpspec.formats import get_format
from fpspec.quantized import QuantizedTensor

_DT = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "fp16": np.float16,
       "bf16": ml_dtypes.bfloat16}


def codes_of(values, fmt: str) -> np.ndarray:
    """Code array of exactly representable values (asserts exactness)."""
    x = np.asarray(values, dtype=np.float64)
    y = x.astype(np.float32).astype(_DT[fmt])
    assert np.array_equal(y.astype(np.float64), x, equal_nan=True), "value not representable"
    return y.view(np.uint8 if fmt in ("e4m3", "e5m2") else np.uint16)


def wide_codes(rng, shape, fmt: str, span: int = 12) -> np.ndarray:
    """Random codes over a wide exponent range (2^-span .. 2^span times a normal sample)."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-span, span + 1, shape))
    top = float(get_format(fmt).max_finite)
    y = np.clip(x, -top, top).astype(np.float32).astype(_DT[fmt])
    return y.view(np.uint8 if fmt in ("e4m3", "e5m2") else np.uint16)


def random_quantized(rng, m: int, k: int, scale_format: str, block: int = 16, tile: str = "1xB",
                     span: int | None = None, target: float = 448.0, amax: float = 3.5,
                     decode_scale: float = 0.0029296875) -> QuantizedTensor:
    """A QuantizedTensor with random E2M1 codes and random finite scale codes.

    ``span`` limits the scale codes to a window of that many codes around the middle
    of the format (None: every finite positive code)."""
    sf = get_format(scale_format)
    finite = np.array([c for c in range(sf.num_codes)
                       if sf.kind(c).value in ("normal", "subnormal")], dtype=np.uint8)
    if span is not None:
        mid = len(finite) // 2
        finite = finite[max(mid - span, 0): mid + span]
    codes = rng.integers(0, 16, (m, k)).astype(np.uint8)
    rows = m // block if tile == "BxB" else m
    scales = rng.choice(finite, size=(rows, k // block)).astype(np.uint8)
    return QuantizedTensor(codes=codes, scales=scales, scale_format=scale_format, block=block,
                           tile=tile, encode_scale=np.float32(1 / decode_scale),
                           decode_scale=np.float32(decode_scale), amax=np.float32(amax),
                           scheme="test", profile="test", params={"target": target})
