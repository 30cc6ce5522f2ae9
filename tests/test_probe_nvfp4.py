"""NVFP4 probe operands and recipes (FPS-PRB-13), the epilogue probe (FPS-PRB-12)."""

from __future__ import annotations

import numpy as np
import pytest

from fpspec.adapters.torch_nvfp4 import (pack_e2m1, swizzle_scales, swizzled_offset, unpack_e2m1,
                                         unswizzle_scales)
from fpspec.errors import FpspecError
from fpspec.named_models import get_model
from fpspec.probe.nvfp4 import BlockRow, ModelBlockScaledTarget, build_blockscaled, probe_nvfp4


def test_fps_prb_13_nibble_packing_low_first():
    """FPS-PRB-13: element k = 2j goes to the low nibble of byte j, k = 2j + 1 to the high one."""
    codes = np.array([[0x1, 0x2, 0xF, 0x8], [0x0, 0x7, 0x9, 0x0]], np.uint8)
    packed = pack_e2m1(codes)
    assert packed.tolist() == [[0x21, 0x8F], [0x70, 0x09]]
    assert np.array_equal(unpack_e2m1(packed), codes)
    with pytest.raises(FpspecError, match="> 15"):
        pack_e2m1(np.array([[16, 0]], np.uint8))
    with pytest.raises(FpspecError, match="odd"):
        pack_e2m1(np.zeros((1, 3), np.uint8))


def test_fps_prb_13_scale_swizzle_layout():
    """FPS-PRB-13: the blocked 128x4 scale layout, offsets derived by hand:
    (0,0)->0, (0,3)->3, (1,0)->16, (31,0)->496, (32,0)->4, (97,2)->1*16+3*4+2=30,
    (0,4) -> next column tile: 512, (128,0) with 2 column tiles -> 1024."""
    i = np.array([0, 0, 1, 31, 32, 97, 0, 128])
    j = np.array([0, 3, 0, 0, 0, 2, 4, 0])
    assert swizzled_offset(i, j, 2).tolist() == [0, 3, 16, 496, 4, 30, 512, 1024]
    rng = np.random.default_rng(0)
    s = rng.integers(0, 127, (130, 6), dtype=np.uint8)
    flat = swizzle_scales(s)
    assert flat.size == 2 * 2 * 512  # rows padded to 256, columns to 8
    assert np.array_equal(unswizzle_scales(flat, 130, 6), s)
    assert flat[swizzled_offset(np.array([129]), np.array([5]), 2)][0] == s[129, 5]
    assert np.count_nonzero(flat) <= s.size


def test_fps_prb_13_torch_operands_are_the_bits(monkeypatch):
    """FPS-PRB-13: the NVFP4 target hands torch the packed payload and swizzled scale bytes
    (checked on the CPU: the tensors are built before any device copy)."""
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("torch without float4_e2m1fn_x2")
    from fpspec.adapters import torch_nvfp4

    t = torch_nvfp4.TorchNVFP4Target.__new__(torch_nvfp4.TorchNVFP4Target)
    t.torch, t.device, t.name = torch, "cpu", "x"
    rows = [BlockRow().put(0, 6, 1).put(17, -0.5, 4).scale(1, 2 ** -3, 448)]
    a, sa, bt, sb = build_blockscaled(rows, 32)
    ta, tb, tsa, tsb = t.operands(a, sa, bt, sb)
    assert ta.shape == (1, 16) and ta.dtype == torch.float4_e2m1fn_x2
    assert ta.view(torch.uint8)[0, 0].item() == 0x07  # k=0: 6.0 is code 7, k=1: +0
    assert ta.view(torch.uint8)[0, 8].item() == 0x90  # k=17: -0.5 (code 9) in the high nibble
    assert tsa.dtype == torch.float8_e4m3fn and tsa.numel() == 512
    assert tsb.view(torch.uint8)[1].item() == 0x7E  # block 1 of row 0: 448 at offset 1
    with pytest.raises(FpspecError, match="multiple of 32"):
        t.operands(a[:, :16], sa[:, :1], bt[:, :16], sb[:, :1])


def test_fps_prb_13_nvfp4_probes_tell_the_seed_variants_apart():
    """FPS-PRB-13: NV-1 separates RNE from RZ inside the 64-group and NV-2 sees the 1/1024
    lattice, on fpspec's seed models as the GEMM under test."""
    snap = probe_nvfp4(ModelBlockScaledTarget("seed-probe-matched"))
    nosnap = probe_nvfp4(ModelBlockScaledTarget("seed-probe-matched-nosnap"))
    rz = probe_nvfp4(ModelBlockScaledTarget(get_model("seed-probe-matched-nosnap", group_rounding="rz")))
    assert (snap["group_rounding"], snap["lattice"]) == ("rne", "1/1024 (ties to even)")
    assert nosnap["group_rounding"] == "rne" and nosnap["lattice"].startswith("none")
    assert rz["group_rounding"] == "rz"
    assert snap["single_products"][2] == ["3/4096", "1/1024"]


def test_fps_prb_13_block_values_must_be_exact():
    """FPS-PRB-1, FPS-PRB-13: a payload that is no E2M1 value is refused."""
    with pytest.raises(FpspecError, match="E2M1"):
        build_blockscaled([BlockRow().put(0, 5, 1)], 32)


def test_fps_prb_12_epilogue_alpha_once():
    """FPS-PRB-12: a GEMM that forms alpha = RNE32(sa sb) and returns RNE32(alpha acc) is
    classified 'once'."""
    from fractions import Fraction

    from fpspec.adapters.fpspec_model import ModelTarget
    from fpspec.exact.rounding import round_to_code
    from fpspec.formats import FP32
    from fpspec.probe.recipes import ProbeContext, recipe_epilogue

    base = ModelTarget("km-h100-fp8", "e4m3")

    class Scaled:
        operand_format = "e4m3"
        name = "scaled"

        def matmul(self, a, bt):
            return base.matmul(a, bt)

        def matmul_scaled(self, a, bt, sa, sb):
            y = base.matmul(a, bt)
            alpha = FP32.decode_exact(round_to_code(Fraction(sa) * Fraction(sb), FP32, "rne"))
            out = [float(FP32.decode_exact(round_to_code(alpha * Fraction(float(v)), FP32, "rne")))
                   for v in y.ravel()]
            return np.array(out, dtype=np.float32).reshape(y.shape)

    ctx = ProbeContext(Scaled(), "e4m3", K=32, shape=None)
    f = recipe_epilogue(ctx)
    assert f["alpha"] == "once" and f["matches"]["once"] == f["cases"]


def test_fps_prb_13_where_block_scales_enter():
    """FPS-PRB-13 (NV-3): with a 13-bit window the probe tells scales folded into each
    product from scales applied to a block's payload sum; with an exact group sum it says
    the question has no observable answer, and a window wider than FP32 is ambiguous."""
    from fpspec.probe.nvfp4 import probe_scale_placement

    def ask(model):
        return probe_scale_placement(ModelBlockScaledTarget(model))["scale_placement"]

    assert ask(get_model("km-h100-fp8", alpha_source="none")) == "product (window F in [13])"
    assert ask(get_model("km-h100-fp8", scale_placement="block", alpha_source="none")) == "block (window F in [13])"
    assert ask("seed-probe-matched-nosnap").startswith("unobservable")
    assert ask(get_model("km-b200-fp8", alpha_source="none")).startswith("ambiguous")
