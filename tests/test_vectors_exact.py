"""Expected outputs equal fpspec's exact reference (FPS-VEC-7), and GEMM order independence.

The generator computes large sets with the fast paths; here the executable spec
recomputes a stride sample of every conversion set, whole SR sets and several
block and GEMM sets, and must give the committed bits.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fpspec.errors import FpspecError
import pytest

from fpspec.presets import PRESETS
from fpspec.vectors import blocks, gemm_sets  # noqa: F401  (registers the operations)
from fpspec.vectors.ops import compute
from fpspec.vectors.pack import Pack

PACK = Path(__file__).resolve().parent.parent / "vectors" / "v1"


@pytest.fixture(scope="module")
def pack() -> Pack:
    return Pack(PACK)


def _subset(vs, idx):
    meta = dict(vs.meta, cases=len(idx))
    return meta, {k: v[idx] for k, v in vs.inputs.items()}, {k: v[idx] for k, v in vs.outputs.items()}


def test_encode_and_decode_sets_equal_exact_reference(pack):
    """FPS-VEC-7: a stride sample (every set, every output) recomputed by fpspec.exact."""
    for name in pack.names():
        vs = pack.load(name)
        if vs.meta["operation"] not in ("encode", "decode"):
            continue
        stride = 1 if name.startswith("sr-fp32-e2m1") or vs.cases <= 256 else max(1, vs.cases // 300)
        idx = np.arange(0, vs.cases, stride)
        meta, inputs, outputs = _subset(vs, idx)
        got = compute(meta, inputs, "exact")
        for k in outputs:
            assert np.array_equal(got[k], outputs[k]), f"{name}/{k}"


@pytest.mark.parametrize("name", ["quantize-ue5m3-exact-1x16", "quantize-ue5m3-seed-fp32-16x16",
                                  "quantize-nvfp4-te-fp32-1x16", "quantize-mxfp4-rceil-1x32",
                                  "bounds-ue5m3-exact-1x16-ue5m3fnu"])
def test_block_sets_equal_exact_reference(pack, name):
    """FPS-VEC-7, FPS-BLK-2: block sets recomputed by the exact block quantizer (half the cases)."""
    vs = pack.load(name)
    idx = np.arange(0, vs.cases, 2)
    meta, inputs, outputs = _subset(vs, idx)
    got = compute(meta, inputs, "exact")
    for k in outputs:
        assert np.array_equal(got[k], outputs[k]), f"{name}/{k}"


def test_gemm_sets_equal_exact_reference(pack):
    """FPS-VEC-7, FPS-GEMM-1: two model-specific GEMM sets recomputed by the exact accumulator."""
    for name in ("gemm-km-h100-fp8-e4m3-wide", "gemm-seed-probe-matched-nosnap-ue5m3-wide"):
        vs = pack.load(name)
        meta, inputs, outputs = _subset(vs, np.arange(1))
        assert np.array_equal(compute(meta, inputs, "exact")["c"], outputs["c"]), name


def test_order_independent_sets_agree_under_every_preset(pack):
    """FPS-VEC-8 gemm-order-independent: every preset gives the committed output (first case)."""
    for name in [n for n in pack.names() if n.startswith("gemm-order-independent")]:
        vs = pack.load(name)
        meta, inputs, outputs = _subset(vs, np.arange(1))
        for preset in PRESETS:
            if PRESETS[preset].model.output_format == "fp16":
                continue  # the sets' sums are exact in FP32, not in an FP16 accumulator
            m = dict(meta, params=dict(meta["params"], model=preset))
            try:
                c = compute(m, inputs, "fast")["c"]
            except FpspecError as exc:  # operands outside the preset's contract (FPS-GEMM-25)
                assert "hypothetical run" in str(exc), (name, preset, str(exc))
                continue
            assert np.array_equal(c, outputs["c"]), (name, preset)


def test_wide_sets_separate_the_models(pack):
    """FPS-VEC-8 gemm-model-wide: the wide-range sets distinguish the E4M3 presets (else they test nothing)."""
    vs = pack.load("gemm-km-h100-fp8-e4m3-wide")
    for preset in ("km-b200-fp8", "exact", "decoded-fp32"):
        meta = dict(vs.meta, params=dict(vs.meta["params"], model=preset))
        assert not np.array_equal(compute(meta, vs.inputs, "fast")["c"], vs.outputs["c"]), preset
