"""fpspec: a bit-exact specification and simulator of 4-bit block-scaled floating point.

The main verbs, at the top as in numpy and ml_dtypes::

    import fpspec
    codes = fpspec.encode(x, "e2m1")                      # convert (docs/rounding.rst)
    qt = fpspec.quantize(x, "ue5m3")                      # block-quantize (docs/scheme-*.rst)
    y = fpspec.gemm(qa, qb, "seed-probe-matched")         # GEMM models (docs/gemm.rst)
    report = fpspec.check("vectors/v1", "results", declaration="impl.yaml")  # the checker (docs/checker.rst)

The names are loaded on first use, so ``import fpspec`` stays cheap (no Numba
start-up until a fast path runs).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
#: The version of the numeric specification (docs/, requirement ids, vector semantics).
SPEC_VERSION = "1"

#: Public name -> module that defines it (loaded lazily by :func:`__getattr__`).
_EXPORTS: dict[str, str] = {
    "encode": "fpspec.convert",
    "decode": "fpspec.convert",
    "quantize": "fpspec.quantization",
    "dequantize": "fpspec.quantization",
    "gemm": "fpspec.matmul",
    "check": "fpspec.vectors.checker",
    "QuantizedTensor": "fpspec.quantized",
    "FloatFormat": "fpspec.formats",
    "get_format": "fpspec.formats",
    "FORMATS": "fpspec.formats",
    "RoundingMode": "fpspec.choices",
    "GemmModel": "fpspec.models",
    "get_model": "fpspec.named_models",
    "PRESETS": "fpspec.presets",
    "range_bounds": "fpspec.bounds",
    "FpspecError": "fpspec.errors",
}

__all__ = ["SPEC_VERSION", "__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fpspec' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # static type checkers and IDEs see the real names
    from .bounds import range_bounds
    from .choices import RoundingMode
    from .convert import decode, encode
    from .errors import FpspecError
    from .formats import FORMATS, FloatFormat, get_format
    from .matmul import gemm
    from .models import GemmModel
    from .named_models import get_model
    from .presets import PRESETS
    from .quantization import dequantize, quantize
    from .quantized import QuantizedTensor
    from .vectors.checker import check
