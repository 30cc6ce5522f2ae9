"""The front door: ``import fpspec`` exposes the main verbs, lazily (FPS-CLI-1)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import fpspec


def test_import_is_cheap():
    """``import fpspec`` loads neither NumPy nor Numba; naming a verb loads its module and NumPy, but
    not Numba, which the first call of the fast twin loads (fpspec.twins: a twin's modules are
    imported when it is first chosen)."""
    code = ("import sys, fpspec; print('numba' in sys.modules, 'numpy' in sys.modules); "
            "encode = fpspec.encode; print('numba' in sys.modules); "
            "import numpy as np; encode(np.zeros(2, np.float32), 'e2m1', impl='exact'); "
            "print('numba' in sys.modules); encode(np.zeros(2, np.float32), 'e2m1'); print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False", "False", "True"]


@pytest.mark.parametrize("name,module", [
    ("encode", "fpspec.convert"), ("decode", "fpspec.convert"),
    ("quantize", "fpspec.quantization"), ("dequantize", "fpspec.quantization"),
    ("gemm", "fpspec.matmul"), ("check", "fpspec.vectors.checker"),
    ("QuantizedTensor", "fpspec.quantized"), ("FloatFormat", "fpspec.formats"),
    ("get_format", "fpspec.formats"), ("RoundingMode", "fpspec.choices"),
    ("GemmModel", "fpspec.models"), ("get_model", "fpspec.named_models"), ("PRESETS", "fpspec.presets"),
    ("FpspecError", "fpspec.errors"),
])
def test_exports_are_the_module_objects(name, module):
    import importlib

    assert getattr(fpspec, name) is getattr(importlib.import_module(module), name)
    assert name in fpspec.__all__ and name in dir(fpspec)


def test_submodule_import_does_not_shadow_a_verb():
    """No module is named after the function it holds, so importing every module keeps
    ``fpspec.quantize`` / ``fpspec.gemm`` / ``fpspec.check`` functions."""
    import fpspec.matmul  # noqa: F401
    import fpspec.quantization  # noqa: F401
    import fpspec.vectors.checker  # noqa: F401

    assert callable(fpspec.quantize) and callable(fpspec.gemm) and callable(fpspec.check)


def test_top_level_round_trip():
    x = np.array([[0.3, -1.7, 2.5, 6.5]], dtype=np.float32)
    assert fpspec.encode(x, "e2m1").tolist() == [[1, 11, 4, 7]]
    qt = fpspec.quantize(np.tile(x, (1, 4)), "nvfp4")
    assert isinstance(qt, fpspec.QuantizedTensor)
    assert fpspec.get_model("seed-probe-matched") is fpspec.PRESETS["seed-probe-matched"].model


def test_unknown_attribute():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        fpspec.nope  # noqa: B018
