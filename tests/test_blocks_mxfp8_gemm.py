"""MXFP8 QuantizedTensors in the ``kind::mxf8f6f4`` GEMM presets (FPS-BLK-26, FPS-GEMM-21).

* mxfp8 tensors (scheme ``mxfp8``) holding the codes and scale bytes of every MMA-Sim
  ``*-mxf8f6f4`` set reproduce MMA-Sim's outputs bit for bit (NaN bits included), exactly as
  the same codes given through :meth:`QuantizedTensor.from_codes` do;
* tensors written by ``fpspec.quantize(x, "mxfp8", ...)`` go through ``fpspec.gemm`` on the
  fast path and the exact spec with the same bits, equal to the codes-built operands.
"""

from __future__ import annotations

import numpy as np
import pytest

import fpspec
from fpspec.matmul import gemm
from fpspec.quantization import dequantize
from fpspec.quantized import QuantizedTensor

from hardware_sets import load, mismatches, set_names

SETS = [n for n in set_names() if "mxf8f6f4" in n]


def _mxfp8(codes: np.ndarray, scales: np.ndarray, pf: str) -> QuantizedTensor:
    """An mxfp8 tensor (profile floor) holding given codes and scale bytes."""
    return QuantizedTensor(codes=np.ascontiguousarray(codes), scales=np.ascontiguousarray(scales),
                           scale_format="ue8m0", block=32, tile="1xB", encode_scale=np.float32(1),
                           decode_scale=np.float32(1), amax=np.float32(0), scheme="mxfp8", profile="floor",
                           payload_format=pf)


def _bits(y):
    return y.view(np.uint32)


def test_sets_present():
    """Both Blackwell generations, every payload pairing."""
    assert {load(n).preset for n in SETS} == {"sm100-mxf8f6f4", "sm120-mxf8f6f4"}
    assert len(SETS) == 6


@pytest.mark.parametrize("name", SETS)
def test_mxfp8_tensors_reproduce_mmasim(name):
    """FPS-BLK-26: mxfp8 tensors with MMA-Sim's codes and scale bytes give every d_first (one
    instruction) and d (the K = 256 chain) of the set, as the codes-built operands do."""
    hs = load(name)
    assert hs.meta["scale_format"] == "ue8m0" and hs.meta["block_size"] == 32
    for part, k in (("d_first", hs.k), ("d", None)):
        qa_codes, qb_codes, _ = hs.operands(k)
        qa = _mxfp8(qa_codes.codes, qa_codes.scales, hs.meta["a_format"])
        qb = _mxfp8(qb_codes.codes, qb_codes.scales, hs.meta["b_format"])
        y = fpspec.gemm(qa, qb, hs.preset)
        bad = mismatches(y, hs.expected(part), hs.nan_bits_defined)
        assert not bad.any(), f"{name} {part}: {int(bad.sum())} of {bad.size} differ"
        assert np.array_equal(_bits(y), _bits(gemm(qa_codes, qb_codes, hs.preset)))


@pytest.mark.parametrize("name", [n for n in SETS if n.startswith("sm100")])
def test_mxfp8_tensors_exact_path_on_mmasim_rows(name):
    """FPS-BLK-26: the exact spec gives the same MMA-Sim bits for mxfp8 tensors (8 rows x 8
    columns of each sm100 set, the K = 256 chain)."""
    hs = load(name)
    rows, cols = list(range(0, 128, 16)), list(range(0, 32, 4))
    qa_c, _, _ = hs.operands(None, rows=rows)
    _, qb_c, _ = hs.operands(None, cols=cols)
    qa = _mxfp8(qa_c.codes, qa_c.scales, hs.meta["a_format"])
    qb = _mxfp8(qb_c.codes, qb_c.scales, hs.meta["b_format"])
    ye = fpspec.gemm(qa, qb, hs.preset, impl="exact")
    want = hs.expected("d")[np.ix_(rows, cols)]
    assert not mismatches(ye, want, hs.nan_bits_defined).any()
    assert np.array_equal(_bits(ye), _bits(fpspec.gemm(qa, qb, hs.preset)))


@pytest.mark.parametrize("pa, pb", [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2")])
@pytest.mark.parametrize("preset", ["sm100-mxf8f6f4", "sm120-mxf8f6f4"])
def test_quantized_operands_fast_equals_exact(pa, pb, preset):
    """FPS-BLK-26: tensors written by fpspec.quantize(..., "mxfp8") multiply on the fast path and the
    exact spec to the same bits, and to the bits of the same codes built with from_codes; with
    scale bytes far apart across blocks the result stays within the payloads' rounding error of
    the float product."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((8, 64)) * 2.0 ** rng.integers(-6, 6, (8, 1))).astype(np.float32)
    w = (rng.standard_normal((4, 64)) * 2.0 ** rng.integers(-6, 6, (4, 1))).astype(np.float32)
    qa = fpspec.quantize(x, "mxfp8", payload_format=pa)
    qb = fpspec.quantize(w, "mxfp8", payload_format=pb, profile="rceil")
    yf = fpspec.gemm(qa, qb, preset)
    ye = fpspec.gemm(qa, qb, preset, impl="exact")
    assert np.array_equal(_bits(yf), _bits(ye))
    # the Numba path itself takes FP8 payloads (they are its own: no reason to leave them to the spec)
    from fpspec.exact.accumulate import tensor_alpha
    from fpspec.fast.accumulate import exact_only_reason, gemm_fast
    from fpspec.named_models import get_model

    model = get_model(preset)
    assert exact_only_reason(qa, qb, model) is None
    assert np.array_equal(_bits(gemm_fast(qa, qb, model, fmt=None, alpha=tensor_alpha(qa, qb, model))), _bits(yf))
    ca = QuantizedTensor.from_codes(qa.codes, qa.scales, payload_format=pa, scale_format="ue8m0", block=32)
    cb = QuantizedTensor.from_codes(qb.codes, qb.scales, payload_format=pb, scale_format="ue8m0", block=32)
    assert np.array_equal(_bits(yf), _bits(gemm(ca, cb, preset)))
    ref = dequantize(qa).astype(np.float64) @ dequantize(qb).astype(np.float64).T
    mag = np.abs(dequantize(qa)).astype(np.float64) @ np.abs(dequantize(qb)).astype(np.float64).T
    assert (np.abs(yf - ref) <= mag * 2.0 ** -20).all()
