"""Tests of the GEMM probe (docs/probe.rst, FPS-PRB-*)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from fpspec.adapters.fpspec_model import ModelTarget
from fpspec.adapters.numpy_gemm import NumpyTarget
from fpspec.errors import FpspecError
from fpspec.exact.accumulate import gemm_exact
from fpspec.named_models import get_model
from fpspec.presets import PRESETS
from fpspec.probe import probe_gemm
from fpspec.probe.accept import check_samples, collect_samples, operand_codes, shapes_from_text
from fpspec.probe.fit import PROBED_FIELDS
from fpspec.probe.operands import ProbeRow, ProductSplitter, build_operands, pow2
from fpspec.probe.recipes import classify_rounding, round_magnitude
from fpspec.probe.targets import CallLog, run_rows

#: operand format each preset is probed with in the self-test
PRESET_FORMAT = {"km-h100-bf16": "bf16", "km-a100-bf16": "fp16", "km-v100-fp16": "fp16",
                 "decoded-fp32": "bf16", "exact": "fp16", "seed-triton-h200": "bf16", "seed-triton-h200-snap": "bf16"}


# ------------------------------------------------------------------ operands
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "fp16", "bf16"])
def test_fps_prb_1_products_are_exact(fmt):
    """FPS-PRB-1: every probe product is split into two codes whose values multiply to it exactly."""
    sp = ProductSplitter(fmt)
    for v in (pow2(10), -pow2(10), 3 * pow2(-5), Fraction(9, 4) * pow2(4), pow2(-12)):
        a, b = sp.split(v)
        got = Fraction(float(sp._table[a])) * Fraction(float(sp._table[b]))
        assert got == v


def test_fps_prb_1_impossible_product_is_refused():
    """FPS-PRB-1: a product no pair of e4m3 values gives (2^-19 < 2^-9 * 2^-9) is an error."""
    sp = ProductSplitter("e4m3")
    assert sp.split(pow2(-18)) == (1, 1)  # min subnormal squared: codes 0x01, 0x01
    with pytest.raises(FpspecError, match="not a product of two e4m3 values"):
        sp.split(pow2(-19))
    with pytest.raises(FpspecError, match="outside K"):
        build_operands([ProbeRow.of({8: pow2(0)})], 8, sp)


def test_fps_prb_2_diagonal_batching():
    """FPS-PRB-2: probe i sits in row i of A and BT; the output is read on the diagonal,
    also when the probes are spread over several GEMM calls of a fixed shape."""
    sp = ProductSplitter("e4m3")
    rows = [ProbeRow.of({0: pow2(i), 5: -pow2(i - 3)}) for i in range(10)]
    a, bt = build_operands(rows, 16, sp)
    assert a.shape == (10, 16) and np.count_nonzero(a[:, 1:5]) == 0
    log = CallLog()
    y = run_rows(NumpyTarget("e4m3"), rows, 16, sp, log, "t", shape=(4, 6))
    assert y.tolist() == [2.0 ** i - 2.0 ** (i - 3) for i in range(10)]
    assert [(c["M"], c["N"]) for c in log.calls] == [(4, 6)] * 3


# ------------------------------------------------------------------ rounding
def test_fps_prb_8_rounding_classifier_hand_cases():
    """FPS-PRB-8: the mode classifier on hand-made cases (quantum 1, value 2 + t)."""
    q = Fraction(1)
    assert round_magnitude(Fraction(5, 2), q, "rne") == 2 and round_magnitude(Fraction(7, 2), q, "rne") == 4
    assert round_magnitude(Fraction(5, 2), q, "rna") == 3 and round_magnitude(Fraction(-5, 2), q, "rna") == -3
    assert round_magnitude(Fraction(-9, 4), q, "rz") == -2 and round_magnitude(Fraction(-9, 4), q, "rd") == -3
    assert round_magnitude(Fraction(9, 4), q, "ru") == 3
    cases = [(Fraction(11, 4), q, 2), (Fraction(-11, 4), q, -2)]  # 2.75 -> 2, -2.75 -> -2
    assert classify_rounding(cases) == ["rz"]
    cases = [(Fraction(11, 4), q, 3), (Fraction(5, 2), q, 2)]
    assert classify_rounding(cases) == ["rne"]


# ------------------------------------------------------- evaluator vs reference
@pytest.mark.parametrize("name,fmt", [("km-h100-fp8", "e4m3"), ("km-h100-fp8-promote128", "e4m3"),
                                      ("km-h100-bf16", "bf16"), ("km-a100-bf16", "fp16"),
                                      ("km-b200-fp8", "e5m2"), ("decoded-fp32", "bf16")])
def test_fps_prb_16_evaluator_equals_exact_reference(name, fmt):
    """FPS-PRB-16: fpspec's models as a probe target (ModelTarget: fpspec.matmul's fast
    path, its matmul and the probe's rowdot) are bit-equal to fpspec.exact.accumulate on
    wide-range random operands (FP32 bits compared)."""
    model = get_model(name)
    a = operand_codes(fmt, 11, np.arange(3), 256)
    bt = operand_codes(fmt, 12, np.arange(4), 256)
    want = gemm_exact(a, bt, model, fmt=fmt)
    target = ModelTarget(model, fmt)
    got = target.matmul(a, bt)
    assert np.array_equal(want.view(np.uint32), got.view(np.uint32))
    diag = target.rowdot(a[:3], bt[:3])
    assert diag.dtype == np.float32 and diag.shape == (3,)
    assert np.array_equal(diag.view(np.uint32), np.diagonal(want).copy().view(np.uint32))


def test_fps_prb_16_accumulate_bits_hand_case():
    """FPS-PRB-16, FPS-GEMM-13: a group result kept to 13 fraction bits: 2^14 + 2^14 + 2 =
    32770 = 2^15 + 2 has exponent 15, so 13 bits keep multiples of 2^2: RTZ -> 32768;
    with FP32 (23 bits, quantum 2^-8) it stays 32770.  The probe target and the exact
    reference agree."""
    sp = ProductSplitter("e4m3")
    a, bt = build_operands([ProbeRow.of({0: pow2(14), 1: pow2(14), 2: pow2(1)})], 32, sp)
    for bits, want in ((13, 32768.0), (23, 32770.0)):
        m = get_model("km-h100-fp8", accumulate_bits=bits)
        assert ModelTarget(m, "e4m3").rowdot(a, bt).tolist() == [want]
        assert gemm_exact(a, bt, m, fmt="e4m3").tolist() == [[want]]


@pytest.mark.parametrize("over", [dict(split_k=96), dict(split_k=160, accumulate_bits=7),
                                  dict(split_k=64, promotion_interval=None)])
def test_fps_prb_16_evaluator_split_k_equals_exact(over):
    """FPS-PRB-16, FPS-GEMM-14: the probe target's split of K is the model family's split_k."""
    model = get_model("km-h100-fp8-promote128", **over)
    a = operand_codes("e4m3", 21, np.arange(3), 256)
    bt = operand_codes("e4m3", 22, np.arange(2), 256)
    want = gemm_exact(a, bt, model, fmt="e4m3")
    assert np.array_equal(want.view(np.uint32), ModelTarget(model, "e4m3").matmul(a, bt).view(np.uint32))


# ------------------------------------------------------------------ self-test
@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, p in PRESETS.items() if not p.instruction])
def test_fps_prb_14_probe_recovers_every_preset(name):
    """FPS-PRB-14, and through it FPS-PRB-4, FPS-PRB-5, FPS-PRB-6, FPS-PRB-10, FPS-PRB-11: with fpspec's own preset as the GEMM
    under test, the probe fits exactly that preset on every probed field.  (The instruction-level
    presets of docs/hardware-models.rst share their groups and windows with GEMM-level ones and
    differ in fields the probe does not probe: overflow, NaN bits, the zero rule.)"""
    fmt = PRESET_FORMAT.get(name, "e4m3")
    target = ModelTarget(name, fmt)
    rep = probe_gemm(target, fmt, K=256, scan_k=160, acceptance_shapes=((4, 4, 256, 4, 4),),
                     epilogue=False, determinism=False)
    fitted = rep.fitted["parameters"]
    preset = PRESETS[name].model
    for f in PROBED_FIELDS:
        assert fitted[f] == getattr(preset, f), (f, fitted[f], getattr(preset, f))
    assert fitted["split_k"] is None and rep.nearest_preset["split_k"] is None
    assert rep.nearest_preset["exact"] and rep.nearest_preset["name"] == name
    assert rep.passed


def test_fps_prb_7_and_9_recover_h200_fp8_behaviour():
    """FPS-PRB-7, FPS-PRB-9, FPS-PRB-14: a 13-bit group result, promotion every 128 and a
    split of K into slices of 256 (the shape of what the H200 showed) are recovered as the
    GemmModel fields accumulate_bits and split_k; the nearest preset is
    km-h100-fp8-promote128 with split_k = 256."""
    target = ModelTarget("km-h100-fp8-promote128", "e4m3", split_k=256)
    rep = probe_gemm(target, "e4m3", K=1024, scan_k=96, acceptance_shapes=((4, 4, 1024, 4, 4),),
                     epilogue=False, determinism=False)
    p = rep.fitted["parameters"]
    assert (p["accumulate_bits"], p["promotion_interval"], p["split_k"]) == (13, 128, 256)
    assert rep.findings["boundaries"]["rounding"] == "rne"
    assert rep.nearest_preset == {"name": "km-h100-fp8-promote128", "differences": {}, "exact": True,
                                  "split_k": 256}
    assert rep.passed


def test_fps_prb_14_library_split_without_promotion_is_split_k():
    """FPS-PRB-14, FPS-GEMM-14: a GEMM that splits K without promoting shows as chain
    boundaries every S products (promotion_interval = S, RNE); against a preset without
    promotion the nearest-preset report names it split_k = S, exactly."""
    target = ModelTarget("km-h100-fp8", "e4m3", split_k=192)
    rep = probe_gemm(target, "e4m3", K=1024, scan_k=96, acceptance_shapes=((4, 4, 1024, 4, 4),),
                     epilogue=False, determinism=False)
    assert rep.nearest_preset["name"] == "km-h100-fp8" and rep.nearest_preset["exact"]
    assert rep.nearest_preset["split_k"] == 192
    assert rep.passed


def test_fps_prb_3_determinism_recipe_flags_a_noisy_gemm():
    """FPS-PRB-3: a GEMM whose last bit changes between calls is reported non-deterministic."""
    base = ModelTarget("km-h100-fp8", "e4m3")
    state = {"n": 0}

    def noisy(a, bt):
        y = base.matmul(a, bt)
        state["n"] += 1
        return (y.view(np.uint32) ^ np.uint32(state["n"] % 2)).view(np.float32)

    from fpspec.probe.recipes import ProbeContext, recipe_determinism
    from fpspec.probe.targets import as_target

    ctx = ProbeContext(as_target(noisy, "e4m3"), "e4m3", K=64, shape=(8, 8))
    f = recipe_determinism(ctx)
    assert f["deterministic"] is False and f["differing_outputs"] > 0


# ------------------------------------------------------------------ acceptance
def test_fps_prb_15_operands_are_reproducible_and_wide():
    """FPS-PRB-15: hash-generated operands depend only on (fmt, seed, row, k), cover
    every finite e4m3 code and never a NaN."""
    a = operand_codes("e4m3", 5, np.arange(64), 512)
    again = operand_codes("e4m3", 5, np.array([3, 17]), 512)
    assert np.array_equal(a[[3, 17]], again)
    assert set(np.unique(a).tolist()) == set(range(256)) - {0x7F, 0xFF}
    b = operand_codes("bf16", 5, np.arange(16), 512)
    e = (b >> 7) & 0xFF
    assert e[b & 0x7FFF != 0].min() >= 127 - 24 and e.max() <= 127 + 24


def test_fps_prb_15_wrong_model_fails_acceptance():
    """FPS-PRB-15: only 100 % passes; a GEMM under one preset checked against another fails."""
    target = ModelTarget("km-h100-fp8", "e4m3")
    samples = collect_samples(target, "e4m3", shapes_from_text("16x16x512:8x8"), seed=3)
    ok = check_samples(samples, "e4m3", get_model("km-h100-fp8"))
    bad = check_samples(samples, "e4m3", get_model("km-h100-fp8-promote128"))
    assert ok.passed and ok.match_rate == 1.0
    assert not bad.passed and bad.matched < bad.compared
    assert bad.per_shape[0]["first_mismatches"][0]["gemm"] != bad.per_shape[0]["first_mismatches"][0]["model"]


def test_fps_prb_15_shape_text():
    """FPS-PRB-15: acceptance shapes on the command line."""
    assert shapes_from_text("64x64x256, 4096x128x1024:32x16") == ((64, 64, 256, 64, 64), (4096, 128, 1024, 32, 16))
    with pytest.raises(FpspecError, match="bad shape"):
        shapes_from_text("64x64")


def test_fps_prb_9_probe_at_one_shape_uses_that_shape():
    """FPS-PRB-2, FPS-PRB-9: probe_at runs every GEMM at exactly (M, N, K) and fits there."""
    from fpspec.probe import probe_at

    target = ModelTarget("km-h100-fp8-promote128", "e4m3")
    seen = set()
    orig = target.matmul

    def spy(a, bt):
        seen.add((a.shape[0], bt.shape[0], a.shape[1]))
        return orig(a, bt)

    target.matmul = spy  # with a shape given the probe never uses rowdot
    findings, fitted, calls = probe_at(target, "e4m3", 16, 24, 256, scan_k=80)
    assert seen == {(16, 24, 256)}
    assert fitted.model.promotion_interval == 128 and fitted.model.group_size == 32
    assert all((c["M"], c["N"], c["K"]) == (16, 24, 256) for c in calls)
