"""Coverage model gemm-shapes (FPS-VEC-8): the sets hold what they claim, and their outputs are the
exact spec's (FPS-VEC-7, FPS-GEMM-10).

The plans are built once (a second or two: quantization, no GEMM); expected outputs are computed
only for the few sets the equality test samples, on a corner of rows of A and BT.
"""

from __future__ import annotations

import numpy as np
import pytest

from fpspec.formats import get_format
from fpspec.matmul import gemm
from fpspec.cublas.library import LIBRARY
from fpspec.presets import PRESETS
from fpspec.vectors import gemm_sets  # noqa: F401  (registers the gemm operation and the models)
from fpspec.vectors.gemm_sets import gemm_op
from fpspec.vectors.gemm_shapes import QUANTIZED_KINDS, SHAPE_PRESETS, UE5M3_WIDE_TARGET, model_gemm_shapes
from fpspec.vectors.generate import build_set


@pytest.fixture(scope="module")
def plans():
    return {p.name: p for p in model_gemm_shapes(1)}


def _k(plan) -> int:
    key = "a_codes" if "a_codes" in plan.inputs else "a"
    return int(plan.inputs[key].shape[-1])


def _corner(plan, rows_a: int, rows_b: int) -> dict[str, np.ndarray]:
    """The inputs restricted to the first rows of A and of BT (each output reads one row of each)."""
    out = {}
    for name, arr in plan.inputs.items():
        rows = rows_a if name.startswith("a") else rows_b
        out[name] = arr[:, :rows] if arr.ndim == 3 else arr
    return out


#: Small corners of sets of several families: quantized with tensor scales (UE5M3, NVFP4: the model's
#: alpha, folded, the instruction's FP32 epilogue), MXFP4, FP4 from codes with a NaN scale (row 2),
#: plain FP8 with NaN codes (rows 2, 3), a long K.
_SAMPLED = ("gemm-shapes-seed-probe-matched-ue5m3-129x17x16", "gemm-shapes-exact-nvfp4-7x129x144",
            "gemm-shapes-decoded-fp32-mxfp4-17x7x1056", "gemm-shapes-sm100-mxf4nvf4-nvfp4-129x17x64",
            "gemm-shapes-sm120-mxf4nvf4-mxfp4-b16-codes-129x17x128", "gemm-shapes-km-h100-fp8-e4m3-129x17x96",
            "gemm-shapes-seed-triton-h200-ue5m3-1x3x4112")


@pytest.mark.slow
@pytest.mark.parametrize("name", _SAMPLED)
def test_fast_outputs_equal_the_exact_spec(plans, name):
    """FPS-VEC-7: the expected outputs (fast path) of a corner of the set equal gemm(impl="exact")."""
    plan = plans[name]
    corner = _corner(plan, 4, 3)
    fast = gemm_op(plan.meta, corner, "fast")["c"]
    exact = gemm_op(plan.meta, corner, "exact")["c"]
    assert fast.shape == exact.shape and np.array_equal(fast, exact), name
    assert np.array_equal(build_set(plan).outputs["c"][:, :4, :3], fast)


def test_library_preset_outputs_equal_the_exact_spec(plans):
    """FPS-CUB-6: a library set's corner, resolved at the set's shape, equals the exact spec."""
    plan = plans["gemm-shapes-cublas-h200-bf16-bf16-3x17x4112"]
    full = build_set(plan).outputs["c"][0]
    a, bt = plan.inputs["a"][0], plan.inputs["bt"][0]
    c = gemm(a[:2], bt[:3], "cublas-h200-bf16", fmt="bf16", impl="exact", shape=(3, 17, 4112))
    assert np.array_equal(c.view(np.uint32), full[:2, :3])


def test_every_preset_family_has_sets(plans):
    """Every preset (library presets included) has sets, each with its declared operands."""
    presets = {p.meta["model"] for p in plans.values()}
    assert presets == set(PRESETS) | set(LIBRARY) == set(SHAPE_PRESETS)
    kinds = {p.meta["params"]["operands"] for p in plans.values()}
    assert {"ue5m3", "nvfp4", "mxfp4"} <= kinds


def test_k_tails_and_full_groups(plans):
    """K from 16 to past 4096; a K tail past whole groups where the model takes one, whole groups
    (and instructions) where it requires them, and gemm accepts every set's K."""
    ks = {_k(p) for p in plans.values()}
    assert min(ks) == 16 and max(ks) > 4096
    for p in plans.values():
        cov, model = p.meta["shape_coverage"], (PRESETS.get(p.meta["model"]) or LIBRARY[p.meta["model"]]).model
        assert cov["k"] == _k(p), p.name
        if model.require_full_groups:
            assert _k(p) % model.group_size == 0 and cov["k_tail"] == 0, p.name
        if model.instruction_k:
            assert _k(p) % model.instruction_k == 0, p.name
    seed = [p for n, p in plans.items() if n.startswith("gemm-shapes-seed-probe-matched-ue5m3")]
    assert sorted(_k(p) % 64 for p in seed) == [16, 16, 16, 16]  # G = 64: a partial group in every set
    lib = [p.meta["shape_coverage"] for n, p in plans.items() if n.startswith("gemm-shapes-cublas-h200-bf16")]
    assert any(c["k_tile_tail"] for c in lib) and max(c["k_slices"] for c in lib) > 1  # cuBLAS's K tiles, slices


def test_m_and_n_cross_tile_edges(plans):
    """M and N at 1, below 8 and one past 16 and 128: quantized operands every one of 1, 7, 17, 129
    as M and 3, 7, 17, 129 as N; plain codes M in {1, 3, 129}, N in {3, 17}."""
    def sizes(kinds):
        shapes = [p.meta["shape_coverage"] for p in plans.values() if p.meta["params"]["operands"] in kinds]
        return {c["m"] for c in shapes}, {c["n"] for c in shapes}
    assert sizes(set(QUANTIZED_KINDS)) == ({1, 7, 17, 129}, {3, 7, 17, 129})
    assert sizes({"bf16", "e4m3", "fp16"}) == ({1, 3, 129}, {3, 17})  # 3 x 17: the cuBLAS long shape


def test_quantized_operands_carry_tensor_scales(plans):
    """UE5M3 and NVFP4 operands have tensor scales that are not 1 (alpha applies); MXFP4 has none."""
    for p in plans.values():
        kind = p.meta["params"]["operands"]
        if kind not in QUANTIZED_KINDS:
            continue
        dec = p.inputs["a_decode_scale"].view(np.float32)
        if kind == "mxfp4":
            assert np.all(dec == 1) and not p.meta["shape_coverage"]["tensor_scale"], p.name
        else:
            assert np.all(dec != 1) and p.meta["shape_coverage"]["tensor_scale"], p.name
            assert "FPS-GEMM-8" in p.meta["requirements"]
    places = {p.meta["model"]: p.meta["shape_coverage"]["tensor_scales"] for p in plans.values()
              if p.meta["params"]["operands"] in ("nvfp4", "ue5m3")}
    assert places["exact"] == "folded" and places["seed-probe-matched"] == "alpha"
    assert places["sm100-mxf4nvf4"] == places["seed-triton-h200"] == "epilogue"


def test_zero_tiny_and_wide_blocks(plans):
    """Zero rows and blocks, subnormal and zero NVFP4 scales, UE5M3 scales from the smallest to
    the top of the format (T = 61440), and zero outputs where A's row 0 is zero."""
    p = plans["gemm-shapes-exact-nvfp4-7x129x144"]
    s = p.inputs["a_scales"]
    assert np.any(s == 0) and np.any((s > 0) & (s < 8))  # zero and subnormal UE4M3 scales
    assert np.all(p.inputs["a_codes"][:, 0] == 0) and np.all(p.inputs["bt_codes"][:, 1] == 0)
    blocks = p.inputs["bt_codes"].reshape(1, 129, -1, 16)
    assert np.any(np.all(blocks == 0, axis=-1)[:, 2:])  # zero blocks beyond the zero row
    wide = plans["gemm-shapes-exact-ue5m3-17x7x1040"]
    assert wide.meta["operand"]["target"] == UE5M3_WIDE_TARGET
    top = get_format("ue5m3").max_finite_code
    codes = np.concatenate([wide.inputs["a_scales"].ravel(), wide.inputs["bt_scales"].ravel()])
    assert codes.max() >= top - 2 and np.any((codes > 0) & (codes < 8))
    for name in ("gemm-shapes-exact-nvfp4-7x129x144", "gemm-shapes-km-v100-fp16-fp16-129x17x80"):
        c = build_set(plans[name]).outputs["c"][0]
        finite_rows = np.r_[0:2, 4:c.shape[0]]  # rows 2 and 3 of the plain set hold NaN and Inf: 0 x Inf is NaN
        assert np.all(c[0] == 0) and np.all(c[finite_rows, 1] == 0), name
    for p in plans.values():
        cov = p.meta["shape_coverage"]
        assert cov["zero_blocks"] > 0 and cov["wide_blocks"] > 0, p.name


def test_specials_where_the_format_has_them(plans):
    """NaN and Inf codes (plain) and NaN scale codes (from codes) give NaN / Inf outputs in their rows."""
    c = build_set(plans["gemm-shapes-km-v100-fp16-fp16-129x17x80"]).outputs["c"][0].view(np.float32)
    assert np.all(np.isnan(c[2])) and np.all(np.isinf(c[3]) | np.isnan(c[3])) and np.any(np.isinf(c[3]))
    q = build_set(plans["gemm-shapes-sm120-mxf4nvf4-mxfp4-b16-codes-129x17x128"]).outputs["c"][0]
    assert np.all(q[2] == 0x7FFFFFFF)  # NVIDIA's NaN, all bits below the sign set
    assert all(p.meta["shape_coverage"]["specials"] for n, p in plans.items() if n.endswith("129x17x80"))


def test_size_within_budget(plans):
    """The model's array bytes stay under 2.9 MB (the level-1 pack must stay under 24 MB, FPS-VEC-12)."""
    total = 0
    for p in plans.values():
        out = np.dtype(p.meta["outputs"]["c"]["dtype"]).itemsize * int(np.prod(p.meta["outputs"]["c"]["shape"]))
        total += sum(a.nbytes for a in p.inputs.values()) + out * p.meta["cases"]
    assert total < 2.9e6


def test_a_declaration_selects_a_library_presets_sets(plans):
    """FPS-CHK-5: a declaration may name a library preset (cublas-h200-*) as its model; its sets are
    then supported and another preset's are not."""
    from fpspec.vectors.declare import Declaration

    decl = Declaration.from_mapping({"name": "lib", "operations": ["gemm"], "models": ["cublas-h200-bf16"]}, "t")
    ok, _ = decl.supports(plans["gemm-shapes-cublas-h200-bf16-bf16-129x17x80"].meta, "c")
    other, why = decl.supports(plans["gemm-shapes-km-h100-bf16-bf16-129x17x80"].meta, "c")
    assert ok and not other and why == "model km-h100-bf16 not declared"
