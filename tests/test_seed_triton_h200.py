"""The seed's Triton kernels and the GPU's log2 as measured on an H200 (vectors/provenance/h200-refs-cuda).

Data made by ``tools/gpu/h200_refs_cuda.py`` on the GPU machine (its README says how):

* ``seed_gemm.npz``: operands and outputs of the seed's ``issue_rz_bf16_gemm``; the presets
  ``seed-triton-h200`` and ``seed-triton-h200-snap`` must reproduce every output (FPS-GEMM-6).
* ``log2.npz``: where floor / ceil of the GPU's binary32 log2 (torch CUDA and Triton
  ``tl.log2``) differ from floor / ceil of log2 x; they must be exactly fpspec's FL / CL
  (FPS-BLK-22) plus four measured subnormal powers of two.  And the seed's rounding,
  which takes its binade from ``floor(tl.log2(a))``, must give the same result with
  either binade at every such x, so the ``seed-triton`` profile (exact binade) is the
  kernel (FPS-BLK-19).
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import fpspec
from fpspec.fast.log2 import float_log2_ceil_f32, float_log2_floor_f32

DATA = Path(__file__).resolve().parents[1] / "vectors" / "provenance" / "h200-refs-cuda"
#: The subnormal powers of two whose GPU log2 has floor and ceiling one above log2 x
#: (bit patterns 8, 64, 4096, 8192: 2^-146, 2^-143, 2^-137, 2^-136).
GPU_LOG2_SUBNORMAL_EXTRAS = (8, 64, 4096, 8192)


@pytest.fixture(scope="module")
def gemm_data():
    return np.load(DATA / "seed_gemm.npz")


@pytest.fixture(scope="module")
def log2_data():
    return np.load(DATA / "log2.npz")


@pytest.mark.parametrize("case", range(4))
@pytest.mark.parametrize("preset,key", [("seed-triton-h200", "out"), ("seed-triton-h200-snap", "snap")])
def test_seed_triton_gemm_reproduced(gemm_data, case, preset, key):
    """FPS-GEMM-6: the promotion model reproduces every output of the seed's Triton GEMM."""
    a, bt, want = gemm_data[f"s{case}_a"], gemm_data[f"s{case}_bt"], gemm_data[f"s{case}_{key}"]
    got = fpspec.gemm(a, bt, preset, fmt="bf16").view(np.uint32)
    assert got.shape == want.shape
    assert np.array_equal(got, want), f"{np.sum(got != want)} of {want.size} outputs differ"


def test_seed_triton_gemm_exact_path(gemm_data):
    """The exact spec gives the same outputs (a corner of the first GEMM)."""
    a, bt, want = gemm_data["s0_a"][:3], gemm_data["s0_bt"][:4], gemm_data["s0_out"][:3, :4]
    got = fpspec.gemm(a, bt, "seed-triton-h200", fmt="bf16", impl="exact").view(np.uint32)
    assert np.array_equal(got, want)


def test_seed_triton_differs_from_probe_matched_model(gemm_data):
    """The measured kernel is not the paper's model: RNE of exact 64-sums differs on many outputs."""
    a, bt, want = gemm_data["s0_a"], gemm_data["s0_bt"], gemm_data["s0_out"]
    plain = fpspec.gemm(a, bt, "km-h100-bf16", fmt="bf16").view(np.uint32)
    assert np.mean(plain == want) < 0.9


def _exact_floor_log2(bits: np.ndarray) -> np.ndarray:
    return np.array([math.frexp(float(v))[1] - 1 for v in bits.view(np.float32)], dtype=np.int64)


@pytest.mark.parametrize("lib", ["torch", "triton"])
def test_gpu_log2_floor_is_fl(log2_data, lib):
    """FPS-BLK-22 on the GPU: floor(log2 x) exceptions are exactly FL's, plus the subnormal extras."""
    bits = log2_data[f"{lib}_floor_bits"]
    delta = log2_data[f"{lib}_floor_delta"]
    fl = float_log2_floor_f32(bits.view(np.float32)).astype(np.int64)
    gpu = _exact_floor_log2(bits) + delta
    extra = np.isin(bits, GPU_LOG2_SUBNORMAL_EXTRAS)
    assert extra.sum() == 4
    assert np.array_equal(fl[~extra], gpu[~extra])
    assert np.all(fl[extra] == gpu[extra] - 1)
    # and FL has no exception the GPU lacks: the tables count as many values below powers of two
    from fpspec.fast.log2 import BELOW_COUNTS
    assert (~extra).sum() == sum(BELOW_COUNTS)


@pytest.mark.parametrize("lib", ["torch", "triton"])
def test_gpu_log2_ceil_is_cl(log2_data, lib):
    bits = log2_data[f"{lib}_ceil_bits"]
    delta = log2_data[f"{lib}_ceil_delta"]
    x = bits.view(np.float32)
    pow2 = np.array([math.frexp(float(v))[0] == 0.5 for v in x])
    exact_ceil = _exact_floor_log2(bits) + (~pow2)
    cl = float_log2_ceil_f32(x).astype(np.int64)
    extra = np.isin(bits, GPU_LOG2_SUBNORMAL_EXTRAS)
    from fpspec.fast.log2 import ABOVE_COUNTS
    assert (~extra).sum() == sum(ABOVE_COUNTS)
    assert np.array_equal(cl[~extra], (exact_ceil + delta)[~extra])


def _seed_round(x: float, exponent: int, precision: int, bias: int, max_finite: float, r: int | None) -> Fraction:
    """The seed's _round_finite_float with a given binade exponent (before its clamp), exactly;
    ``r`` None is RNE, else the FP32 midpoint SR with byte r."""
    e = max(exponent, 1 - bias) - precision + 1
    sig = Fraction(x) / Fraction(2) ** e
    lower = math.floor(sig)
    delta = sig - lower
    if r is None:
        away = delta > Fraction(1, 2) or (delta == Fraction(1, 2) and lower % 2 == 1)
    else:  # fp32(delta + (2r+1) 2^-9) >= 1, delta exact in binary32 here
        away = np.float32(float(delta)) + np.float32((2 * r + 1) / 512) >= np.float32(1.0)
    return min(Fraction(lower + int(away)) * Fraction(2) ** e, Fraction(max_finite))


@pytest.mark.slow
def test_seed_rounding_same_with_gpu_binade(log2_data):
    """FPS-BLK-19: at every x where floor(tl.log2 x) is one above floor(log2 x), the seed's E2M1
    rounding (RNE, and SR for every byte) and its UE5M3 RNE give the same value with either binade."""
    bits = log2_data["triton_floor_bits"]
    x = bits.view(np.float32).astype(np.float64)
    exact = _exact_floor_log2(bits)
    # payloads: the exponent clamp (>= 0) hides smaller binades; larger ones saturate at 6
    e2m1 = (x > 0.5) & (x < 2.0 ** 24)
    ue5m3 = (x > 2.0 ** -16) & (x < 2.0 ** 17)
    assert e2m1.sum() == 138 and ue5m3.sum() == 111  # FL exceptions in those ranges (BELOW_COUNTS)
    for v, e in zip(x[e2m1], exact[e2m1]):
        for r in [None, *range(256)]:
            assert _seed_round(v, e, 2, 1, 6.0, r) == _seed_round(v, e + 1, 2, 1, 6.0, r), (v, r)
    for v, e in zip(x[ue5m3], exact[ue5m3]):
        assert _seed_round(v, e, 4, 15, 61440.0, None) == _seed_round(v, e + 1, 4, 15, 61440.0, None), v
