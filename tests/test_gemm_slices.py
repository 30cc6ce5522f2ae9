"""Slice plans (FPS-GEMM-23, FPS-GEMM-14): explicit slice lengths, K tiles with the
partial tile first or last; the fast plan equals the exact spec bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from fpspec.errors import FpspecError
from fpspec.fast.chain import CONTINUE, END_SLICE, PROMOTE, chain_plan
from fpspec.matmul import gemm
from fpspec.models import GemmModel, parse_overrides
from fpspec.named_models import get_model

from gemm_helpers import wide_codes

ONE, SMALL = 0x3F80, 0x3300   # BF16 1.0 and 2^-25


def test_fpsgemm23_plan_residue_first_tiles():
    """FPS-GEMM-23: K = 100 as slices (52, 48), K tiles of 32 with the partial tile first,
    groups of 16 from each tile start: slice 0 = tiles [0, 20) [20, 52), slice 1 = [52, 68)
    [68, 100); promotion after every 32 products of a slice (hand-derived)."""
    m = get_model("km-h100-fp8", require_full_groups=False, group_size=16, slice_plan=(52, 48), k_tile=32,
                  slice_residue="first", promotion_interval=32)
    p = chain_plan(100, m)
    assert p.start.tolist() == [0, 16, 20, 36, 52, 68, 84]
    assert p.stop.tolist() == [16, 20, 36, 52, 68, 84, 100]
    assert p.action.tolist() == [CONTINUE, CONTINUE, CONTINUE, END_SLICE, CONTINUE, PROMOTE, END_SLICE]
    assert p.longest == 16
    last = chain_plan(100, m.replace(slice_residue="last"))
    assert last.start.tolist() == [0, 16, 32, 48, 52, 68, 84] and last.stop.tolist()[:4] == [16, 32, 48, 52]


def test_fpsgemm23_residue_first_changes_groups_hand_derived():
    """FPS-GEMM-23: products 1, 2^-25, 2^-25, 2^-25, 0, 0 in non-fused groups of 4 (exact sum,
    RNE to FP32, RZ add).  Partial group last: {1, 3 2^-25} rounds to 1 + 2^-23.  Partial
    group first: {1, 2^-25} -> 1, then 2^-24 added with RZ -> 1."""
    m = GemmModel(group_size=4, fused=False, group_rounding="rne", accumulate_rounding="rtz", alpha_source="none")
    a = np.array([[ONE, SMALL, SMALL, SMALL, 0, 0]], np.uint16)
    bt = np.full((1, 6), ONE, np.uint16)
    for impl in ("exact", "fast"):
        assert gemm(a, bt, m, fmt="bf16", impl=impl)[0, 0] == np.float32(1 + 2.0 ** -23)
        assert gemm(a, bt, m.replace(slice_residue="first"), fmt="bf16", impl=impl)[0, 0] == np.float32(1.0)


def test_fpsgemm23_slice_plan_sums_slices_rne_hand_derived():
    """FPS-GEMM-23, FPS-GEMM-14: slice_plan (1, 5): slice 0 is 1, slice 1 is 3 2^-25 exactly;
    their FP32 RNE sum is 1 + 2^-23 (one chain with RZ adds gives 1)."""
    m = GemmModel(group_size=1, fused=False, group_rounding="rne", accumulate_rounding="rtz", alpha_source="none")
    a = np.array([[ONE, SMALL, SMALL, SMALL, 0, 0]], np.uint16)
    bt = np.full((1, 6), ONE, np.uint16)
    for impl in ("exact", "fast"):
        assert gemm(a, bt, m, fmt="bf16", impl=impl)[0, 0] == np.float32(1.0)
        assert gemm(a, bt, m, fmt="bf16", impl=impl, slice_plan=(1, 5))[0, 0] == np.float32(1 + 2.0 ** -23)


_PLANS = [
    dict(slice_plan=(36, 40, 24)),
    dict(slice_plan=(36, 64), k_tile=32, slice_residue="first"),
    dict(slice_plan=(7, 93), k_tile=64, slice_residue="first"),
    dict(split_k=48, k_tile=32, slice_residue="first"),
    dict(slice_residue="first"),
    dict(slice_plan=(52, 48), k_tile=32, slice_residue="first", promotion_interval=32),
    dict(slice_plan=(100,), k_tile=32, slice_residue="first", accumulate_bits=13),
]


@pytest.mark.parametrize("variant", range(len(_PLANS)))
@pytest.mark.parametrize("fmt", ["bf16", "fp16", "e4m3"])
def test_fpsgemm23_fast_equals_exact(fmt, variant):
    """FPS-GEMM-23, FPS-GEMM-10: every slice-plan variant agrees bit for bit on wide-range
    (adversarial: 30 binades, cancellation) operands, K = 100 (partial tiles and groups),
    on a fused-window and a sequential FP32 base; the plan is not vacuous (it changes
    outputs)."""
    rng = np.random.default_rng(2300 + variant + 7 * len(fmt))
    a = wide_codes(rng, (3, 100), fmt, span=30)
    bt = wide_codes(rng, (4, 100), fmt, span=30)
    over = _PLANS[variant]
    changed = 0
    for base in (get_model("km-h100-bf16", require_full_groups=False, group_size=8),
                 get_model("decoded-fp32").replace(group_size=4, group_rounding="none")):
        if base.fused is False and "accumulate_bits" in over:
            continue
        m = base.replace(**over)
        ye = gemm(a, bt, m, fmt=fmt, impl="exact")
        yf = gemm(a, bt, m, fmt=fmt)
        assert np.array_equal(ye.view(np.uint32), yf.view(np.uint32)), (base, over)
        changed += int((ye.view(np.uint32) != gemm(a, bt, base, fmt=fmt).view(np.uint32)).sum())
    assert changed > 0


def test_fpsgemm23_bad_slice_plans():
    """FPS-GEMM-23: a plan and split_k together, non-positive lengths, a K tile that is not a
    multiple of G, and a plan that does not sum to K are one-line FpspecErrors; --set parses
    a plan."""
    base = get_model("km-h100-bf16", require_full_groups=False)
    for over, msg in ((dict(slice_plan=(64, 64), split_k=64), "exclusive"), (dict(slice_plan=(64, 0)), "positive"),
                      (dict(slice_plan="64,64"), "sequence"), (dict(k_tile=24), "multiple of group_size"),
                      (dict(slice_plan=(64,), accumulator_format="fp16", output_format="fp16", accumulate_bits=10,
                            accumulate_rounding="rne"), "fp32")):
        with pytest.raises(FpspecError, match=msg):
            base.replace(**over)
    a = np.full((1, 100), ONE, np.uint16)
    with pytest.raises(FpspecError, match="slice_plan sums to 96"):
        gemm(a, a, base, fmt="bf16", slice_plan=(48, 48))
    assert parse_overrides(["slice_plan=152,152,96", "k_tile=64", "slice_residue=first"]) == {
        "slice_plan": (152, 152, 96), "k_tile": 64, "slice_residue": "first"}
    assert GemmModel.from_dict(base.replace(slice_plan=[60, 40]).to_dict()).slice_plan == (60, 40)


def test_fpsgemm23_quantized_slice_plans():
    """FPS-GEMM-23, FPS-GEMM-10: slice plans of whole scale blocks on E2M1 operands (terms
    per product and per block) agree bit for bit; a slice or K tile that cuts a scale block
    is an FpspecError."""
    from gemm_helpers import random_quantized

    rng = np.random.default_rng(23)
    a = random_quantized(rng, 3, 256, "ue5m3", 16, "1xB")
    bt = random_quantized(rng, 2, 256, "ue5m3", 16, "1xB", amax=5.0)
    for name, over in (("seed-probe-matched", dict(slice_plan=(48, 208), k_tile=64, slice_residue="first")),
                       ("km-h100-fp8-promote128", dict(slice_plan=(96, 160), k_tile=64, slice_residue="first",
                                                       require_full_groups=False)),
                       ("seed-probe-matched", dict(slice_plan=(112, 144), k_tile=64, slice_residue="first",
                                                   scale_placement="block", window_bits=13, fused=True))):
        m = get_model(name, **over)
        ye, yf = gemm(a, bt, m, impl="exact"), gemm(a, bt, m)
        assert np.array_equal(ye.view(np.uint32), yf.view(np.uint32)), (name, over)
    with pytest.raises(FpspecError, match="block size"):
        gemm(a, bt, "seed-probe-matched", slice_plan=(40, 216), group_size=8)
