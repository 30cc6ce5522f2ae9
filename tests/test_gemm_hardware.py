"""The instruction-level presets against hardware-validated references (FPS-GEMM-16..22).

* Every ``smXX-*`` / ``cdna3-*`` preset reproduces every output (``d_first``: one
  instruction from C = 0; ``d``: the K = 256 chain) of each of its MMA-Sim sets
  (vectors/provenance/mmasim, MMA-Sim c785138) bit for bit, NaN bits included for NVIDIA;
  CDNA3 NaN bits are not defined by MMA-Sim, so NaN-ness is compared there.
* The ``sm90-*`` presets follow the H200 (vectors/provenance/h200-mmasim): every output of
  the cuBLAS run is reproduced, and MMA-Sim's zero rule is one named parameter away.
* exact == fast on sampled outputs of those sets (the outputs a rule change would move,
  plus random ones) and on adversarial operands.
* Hand-derived values pin each new rule.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fpspec.convert import encode
from fpspec.errors import FpspecError
from fpspec.matmul import gemm, rowdot
from fpspec.named_models import get_model
from fpspec.presets import INSTRUCTION_PRESETS, PRESETS
from fpspec.quantized import QuantizedTensor

from gemm_helpers import codes_of
from hardware_sets import H200, h200, load, mismatches, set_names

SETS = set_names()

#: The TF32 sets are modelled by the f16 preset of the same architecture with the TF32
#: instruction's k = 8 (G = 4: Ampere splits it in two halves of 4).
TF32 = {"sm80-tf32": ("sm80-f16", 4), "sm90-tf32": ("sm90-f16", 8), "sm100-tf32": ("sm100-f16", 8)}


def _mmasim_model(preset: str):
    """The model that reproduces a set's MMA-Sim outputs: the preset, MMA-Sim's zero rule for
    the sm90 presets (which follow the H200), the TF32 instruction for the TF32 sets."""
    over = {}
    if preset in TF32:
        preset, g = TF32[preset]
        over = dict(group_size=g, instruction_k=8)
    if preset.startswith("sm90"):
        over["zero_alignment"] = "emin"
    return get_model(preset, **over)


def _bits(y: np.ndarray) -> np.ndarray:
    return y.view(np.uint16 if y.dtype == np.float16 else np.uint32)


def _check(y: np.ndarray, want: np.ndarray, nan_bits: bool, what: str) -> None:
    bad = mismatches(y, want, nan_bits)
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {bad.size} differ, first at "
                           f"{tuple(int(x) for x in np.argwhere(bad)[0])}: got "
                           f"{int(_bits(y)[tuple(np.argwhere(bad)[0])]):#x}, want "
                           f"{int(want[tuple(np.argwhere(bad)[0])]):#x}")


# ============================================================ MMA-Sim, fast path
def test_fpsgemm21_every_instruction_preset_has_mmasim_sets():
    """FPS-GEMM-21: the sets cover every instruction preset (and the TF32 extras)."""
    assert {load(n).preset for n in SETS} == set(INSTRUCTION_PRESETS) | set(TF32)


@pytest.mark.parametrize("name", SETS)
def test_fpsgemm21_presets_reproduce_mmasim(name):
    """FPS-GEMM-21: the preset reproduces every ``d_first`` and ``d`` of its MMA-Sim set, bit for
    bit (NaN bits too on NVIDIA: 0x7FFFFFFF / 0x7FFF), with the fast path."""
    hs = load(name)
    model = _mmasim_model(hs.preset)
    for part, k in (("d_first", hs.k), ("d", None)):
        a, bt, fmt = hs.operands(k)
        y = gemm(a, bt, model, fmt=fmt)
        assert y.dtype == (np.float16 if hs.meta["d_format"] == "fp16" else np.float32)
        _check(y, hs.expected(part), hs.nan_bits_defined, f"{name} {part}")


def _sample_pairs(hs, model, rng) -> list[tuple[int, int]]:
    """Outputs where a rule shows (a neighbouring model gives other bits), and random ones."""
    a, bt, fmt = hs.operands()
    base = _bits(gemm(a, bt, model, fmt=fmt))
    moved = np.zeros(base.shape, dtype=bool)
    neighbours = [dict(window_bits=model.window_bits + 1)]
    if model.product_exponent == "operands":
        neighbours.append(dict(zero_alignment="excluded" if model.zero_alignment == "emin" else "emin"))
    for over in neighbours:
        moved |= _bits(gemm(a, bt, model.replace(**over), fmt=fmt)) != base
    hits = [tuple(int(x) for x in ij) for ij in np.argwhere(moved)]
    pick = [hits[i] for i in rng.permutation(len(hits))[:12]]
    m, n = base.shape
    pick += [(int(rng.integers(m)), int(rng.integers(n))) for _ in range(12)]
    return pick


def _pair_operands(hs, pairs, k):
    """Operands whose row i is A[pairs[i][0]] and BT[pairs[i][1]] (a rowdot gives the pairs)."""
    rows = [p[0] for p in pairs]
    cols = [p[1] for p in pairs]
    a, _, fmt = hs.operands(k, rows=rows)
    _, bt, _ = hs.operands(k, cols=cols)
    return a, bt, fmt


@pytest.mark.slow
@pytest.mark.parametrize("name", SETS)
def test_fpsgemm10_exact_equals_fast_on_mmasim_samples(name):
    """FPS-GEMM-10, FPS-GEMM-21: the exact spec gives the MMA-Sim bits too, on sampled outputs
    (those a one-bit-wider window or the other zero rule would change, and random ones)."""
    hs = load(name)
    model = _mmasim_model(hs.preset)
    pairs = _sample_pairs(hs, model, np.random.default_rng(len(name)))
    for part, k in (("d_first", hs.k), ("d", None)):
        a, bt, fmt = _pair_operands(hs, pairs, k)
        want = np.array([hs.expected(part)[i, j] for i, j in pairs])
        ye = rowdot(a, bt, model, fmt=fmt, impl="exact")
        yf = rowdot(a, bt, model, fmt=fmt, impl="fast")
        assert np.array_equal(_bits(ye), _bits(yf)), name
        _check(ye, want, hs.nan_bits_defined, f"{name} {part} exact")


# ================================================================== the H200
def _h200_k_first() -> dict[str, int]:
    info = json.loads(H200.with_suffix(".json").read_text())
    return {name: s["k_first"] for name, s in info["sets"].items()}


def _h200_model(call: str, k: int):
    """sm90-f16 for torch.mm, sm90-fp8 for torch._scaled_mm (use_fast_accum=False: the
    promotion every 128 products); one instruction of K < k is the zero-padded
    instruction (zero products take no part)."""
    if call == "mm":
        m = get_model("sm90-f16")
    elif call == "scaled_mm_fast1":
        m = get_model("sm90-fp8")
    else:
        m = get_model("sm90-fp8", promotion_interval=128)
    return m if k % m.instruction_k == 0 else m.replace(instruction_k=None, require_full_groups=False)


def test_fpsgemm21_sm90_presets_reproduce_the_h200():
    """FPS-GEMM-21, FPS-GEMM-16: every H200 output of the MMA-Sim operands (cuBLAS nvjet_sm90
    wgmma kernels: FP16, BF16, FP8 e4m3 and e4m3 x e5m2, one instruction and K = 256) is
    reproduced bit for bit by sm90-f16 / sm90-fp8 as they stand (zero products and C = 0 out
    of the alignment), sm90-fp8 with promotion_interval=128 for use_fast_accum=False; with
    MMA-Sim's zero rule (emin) BF16 outputs differ, so the data decide the rule."""
    hw = h200()
    kf = _h200_k_first()
    seen = {"mm": 0, "scaled_mm_fast1": 0, "scaled_mm_fast0": 0}
    emin_misses = 0
    for key in sorted(hw):
        name, call, part = key.split("/")
        if call == "mm_tf32":
            continue  # a cutlass sm80 kernel with a split-K reduction: not one instruction chain
        hs = load(name)
        a, bt, fmt = hs.operands(kf[name] if part == "first" else None)
        model = _h200_model(call, a.shape[1])
        _check(gemm(a, bt, model, fmt=fmt), hw[key], True, key)
        seen[call] += hw[key].size
        if call == "mm" and hs.meta["a_format"] == "bf16":
            emin_misses += int(mismatches(gemm(a, bt, model.replace(zero_alignment="emin"), fmt=fmt),
                                          hw[key]).sum())
    assert seen == {"mm": 98_304, "scaled_mm_fast1": 65_536, "scaled_mm_fast0": 65_536}
    assert emin_misses > 0
    assert PRESETS["sm90-f16"].backing.outputs == seen["mm"]
    assert PRESETS["sm90-fp8"].backing.outputs == seen["scaled_mm_fast1"] + seen["scaled_mm_fast0"] // 2


def test_fpsgemm16_h200_and_mmasim_differ_only_where_zeros_align():
    """FPS-GEMM-16: on the sm90 BF16 set the H200 and MMA-Sim disagree exactly where the zero
    rule matters: sm90-f16 gives the H200's bits, zero_alignment=emin MMA-Sim's, and the
    outputs that differ lie in rows/columns holding zeros facing huge values or in the
    bottom binades."""
    hs = load("sm90-f16__bf16")
    hw = h200()
    a, bt, fmt = hs.operands()
    h = gemm(a, bt, "sm90-f16", fmt=fmt)
    _check(h, hw["sm90-f16__bf16/mm/full"], True, "H200")
    m = gemm(a, bt, "sm90-f16", fmt=fmt, zero_alignment="emin")
    _check(m, hs.expected("d"), True, "MMA-Sim")
    diff = np.argwhere(_bits(h) != _bits(m))
    assert 0 < len(diff) < 40
    classes = {hs.meta["row_classes"][i].split("+")[0] for i, _ in diff}
    assert classes <= {"zspot", "bottom", "tiny", "wide_sub", "step"}, classes


# ======================================================== hand-derived values
def _bf16(values) -> np.ndarray:
    return codes_of(np.array(values, dtype=np.float64), "bf16")


def test_fpsgemm16_zero_product_beside_small_products():
    """FPS-GEMM-16: 0 x 2^127 beside fifteen 2^-40 products (BF16, one wgmma group of 16):
    excluded (sm90-f16, the H200) keeps 15 x 2^-40; emin (MMA-Sim) aligns the zero product at
    -126 + 127 = 1, the window quantum is 2^(1-25) and every 2^-40 is truncated: 0."""
    a = _bf16([[0.0] + [2.0 ** -20] * 15])
    b = _bf16([[2.0 ** 127] + [2.0 ** -20] * 15])
    assert gemm(a, b, "sm90-f16", fmt="bf16")[0, 0] == 15 * 2.0 ** -40
    assert gemm(a, b, "sm90-f16", fmt="bf16", zero_alignment="emin")[0, 0] == 0
    assert gemm(a, b, "sm100-f16", fmt="bf16")[0, 0] == 0  # MMA-Sim's rule, no hardware evidence
    assert gemm(a, b, "sm90-f16", fmt="bf16", impl="exact")[0, 0] == 15 * 2.0 ** -40


def test_fpsgemm16_zero_accumulator_in_the_alignment():
    """FPS-GEMM-16: sixteen products 2^-152 (BF16 2^-76 x 2^-76): excluded sums them exactly,
    2^-148, a subnormal FP32; emin aligns C = 0 at -126, quantum 2^-151, and each 2^-152 is
    truncated to 0."""
    a = _bf16([[2.0 ** -76] * 16])
    for impl in ("fast", "exact"):
        assert gemm(a, a, "sm90-f16", fmt="bf16", impl=impl)[0, 0] == 2.0 ** -148
        assert gemm(a, a, "sm90-f16", fmt="bf16", impl=impl, zero_alignment="emin")[0, 0] == 0


def test_fpsgemm17_overflow_to_inf_and_nan_bits():
    """FPS-GEMM-17: a BF16 product 2^128 (bf16 max x 2, RZ): Inf under the NVIDIA rule,
    FLT_MAX under IEEE RTZ (km-h100-bf16); the Inf stays in the chain when a later group
    subtracts the same amount; a NaN output is 0x7FFFFFFF (0x7FFF for an FP16 D), and
    0x7FC00000 under ieee-quiet."""
    big = float((2 - 2.0 ** -7) * 2.0 ** 127)
    a = _bf16([[big] + [0.0] * 15 + [big] + [0.0] * 15])
    b = _bf16([[2.0] + [0.0] * 15 + [-2.0] + [0.0] * 15])
    for impl in ("fast", "exact"):
        first = gemm(a[:, :16], b[:, :16], "sm90-f16", fmt="bf16", impl=impl)[0, 0]
        assert first == np.inf
        assert gemm(a, b, "sm90-f16", fmt="bf16", impl=impl)[0, 0] == np.inf
        assert gemm(a[:, :16], b[:, :16], "km-h100-bf16", fmt="bf16", impl=impl)[0, 0] == np.finfo(np.float32).max
    nan = _bf16([[float("nan")] + [1.0] * 15])
    one = _bf16([[1.0] * 16])
    assert gemm(nan, one, "sm90-f16", fmt="bf16").view(np.uint32)[0, 0] == 0x7FFFFFFF
    assert gemm(nan, one, "km-h100-bf16", fmt="bf16").view(np.uint32)[0, 0] == 0x7FC00000
    h = codes_of(np.array([[float("nan")] + [1.0] * 15]), "fp16")
    h1 = codes_of(np.array([[1.0] * 16]), "fp16")
    assert gemm(h, h1, "sm90-f16-f16acc", fmt="fp16").view(np.uint16)[0, 0] == 0x7FFF
    assert gemm(h, h1, "sm90-f16-f16acc", fmt="fp16", nan_encoding="ieee-quiet").view(np.uint16)[0, 0] == 0x7E00


def test_fpsgemm18_amd_product_overflow_join_and_signed_zero():
    """FPS-GEMM-18 (cdna3-f16, BF16): products 2^128 and -2^128 are Inf and -Inf before the
    window: NaN (an NVIDIA window sums them to 0); C = -2^-30 from the first group meets a
    product 1 in the second: M = 0, C floored to 2^-24 gives -2^-24, RNE32(1 - 2^-24) =
    0x3F7FFFFF (truncation toward zero would give 1); -2^-80 x 2^-80 in the last group rounds
    to -0 (in the first it would be a -0 C, which the next group's exact zero sum makes +0)."""
    big = _bf16([[2.0 ** 127, 2.0 ** 127] + [0.0] * 14])
    two = _bf16([[2.0, -2.0] + [0.0] * 14])
    for impl in ("fast", "exact"):
        assert np.isnan(gemm(big, two, "cdna3-f16", fmt="bf16", impl=impl)[0, 0])
        assert gemm(big, two, "sm100-f16", fmt="bf16", impl=impl)[0, 0] == 0
    a = _bf16([[-(2.0 ** -15)] + [0.0] * 7 + [1.0] + [0.0] * 7])
    b = _bf16([[2.0 ** -15] + [0.0] * 7 + [1.0] + [0.0] * 7])
    for impl in ("fast", "exact"):
        assert gemm(a, b, "cdna3-f16", fmt="bf16", impl=impl).view(np.uint32)[0, 0] == 0x3F7FFFFF
        assert gemm(a, b, "cdna3-f16", fmt="bf16", impl=impl, join_below="truncate")[0, 0] == 1.0
    tiny = _bf16([[0.0] * 8 + [-(2.0 ** -80)] + [0.0] * 7])  # in the last group: its -0 is the output
    pos = _bf16([[0.0] * 8 + [2.0 ** -80] + [0.0] * 7])
    for impl in ("fast", "exact"):
        assert gemm(tiny, pos, "cdna3-f16", fmt="bf16", impl=impl).view(np.uint32)[0, 0] == 0x80000000
        assert gemm(tiny, pos, "sm90-f16", fmt="bf16", impl=impl).view(np.uint32)[0, 0] == 0


def _fnuz(values, fmt="e5m2fnuz") -> np.ndarray:
    return encode(np.array(values, dtype=np.float32), fmt, "rne")


def test_fpsgemm18_amd_fp8_lanes_and_c_drop():
    """FPS-GEMM-18 (cdna3-fp8, e5m2fnuz): 1 x 1 at k = 16 and -2^-17 x 2^-17 at k = 17 sit in
    the even and the odd lane: the odd lane keeps -2^-34 at its own exponent, and the merge
    floors it to -2^-24 at the joint one: 1 - 2^-24; one lane would truncate it to 0: 1.
    A C of -2^-34 (a first group's result) is dropped below 2^(M-25): 1, where FP16's
    rule floors it: 1 - 2^-24."""
    a = _fnuz([[0.0] * 16 + [1.0, -(2.0 ** -17)] + [0.0] * 14])  # in the second group (K = 32)
    b = _fnuz([[0.0] * 16 + [1.0, 2.0 ** -17] + [0.0] * 14])
    for impl in ("fast", "exact"):
        assert gemm(a, b, "cdna3-fp8", fmt="e5m2fnuz", impl=impl).view(np.uint32)[0, 0] == 0x3F7FFFFF
        assert gemm(a, b, "cdna3-fp8", fmt="e5m2fnuz", impl=impl, window_lanes=1)[0, 0] == 1.0
    a2 = _fnuz([[-(2.0 ** -17)] + [0.0] * 15 + [1.0] + [0.0] * 15])
    b2 = _fnuz([[2.0 ** -17] + [0.0] * 15 + [1.0] + [0.0] * 15])
    for impl in ("fast", "exact"):
        assert gemm(a2, b2, "cdna3-fp8", fmt="e5m2fnuz", impl=impl)[0, 0] == 1.0
        got = gemm(a2, b2, "cdna3-fp8", fmt="e5m2fnuz", impl=impl, join_drop_bits=None)
        assert got.view(np.uint32)[0, 0] == 0x3F7FFFFF


def test_fpsgemm19_fp16_accumulator():
    """FPS-GEMM-19: sm80-f16-f16acc rounds each half to FP16 with RNE: 1 + 2^-11 is a tie
    (-> 1), 1 + 2^-11 + 2^-20 is above it (-> 1 + 2^-10, kept by the 24-bit window); 256 x
    256 = 2^16 overflows FP16 to Inf; the output is float16."""
    def h(values):
        return codes_of(np.array([values + [0.0] * (16 - len(values))]), "fp16")

    one = h([1.0, 1.0, 1.0])
    for impl in ("fast", "exact"):
        y = gemm(h([1.0, 2.0 ** -11]), one, "sm80-f16-f16acc", fmt="fp16", impl=impl)
        assert y.dtype == np.float16 and y[0, 0] == 1.0
        y = gemm(h([1.0, 2.0 ** -11, 2.0 ** -20]), one, "sm80-f16-f16acc", fmt="fp16", impl=impl)
        assert y.view(np.uint16)[0, 0] == 0x3C01
        y = gemm(h([256.0]), h([256.0]), "sm80-f16-f16acc", fmt="fp16", impl=impl)
        assert y.view(np.uint16)[0, 0] == 0x7C00
    with pytest.raises(FpspecError, match="accumulator_format"):
        get_model("sm80-f16-f16acc", output_format="fp32")
    with pytest.raises(FpspecError, match="accumulate_bits"):
        get_model("sm80-f16", accumulator_format="fp16", output_format="fp16")


def test_fpsgemm20_operand_formats():
    """FPS-GEMM-20: mixed operand formats (one per operand), TF32 operands (the low 13 bits of
    the FP32 code ignored: a NaN whose payload lies only there reads as Inf), FNUZ NaN 0x80,
    and K a multiple of the instruction's k."""
    a = codes_of(np.array([[1.5] + [0.0] * 31]), "e4m3")
    b = codes_of(np.array([[-3.0] + [0.0] * 31]), "e5m2")
    assert gemm(a, b, "sm90-fp8", fmt=("e4m3", "e5m2"))[0, 0] == -4.5
    rng = np.random.default_rng(20)
    x = rng.standard_normal((2, 8)).astype(np.float32).view(np.uint32)
    low = rng.integers(0, 1 << 13, x.shape).astype(np.uint32)
    cleared = x & np.uint32(0xFFFFE000)
    m = get_model("sm90-f16", group_size=8, instruction_k=8)
    assert np.array_equal(gemm(cleared | low, cleared, m, fmt="tf32"), gemm(cleared, cleared, m, fmt="tf32"))
    nan_low = np.array([[0x7F800001] + [0x3F800000] * 7], np.uint32)
    assert gemm(nan_low, np.full((1, 8), 0x3F800000, np.uint32), m, fmt="tf32")[0, 0] == np.inf
    f = _fnuz([[1.0] * 16], "e4m3fnuz")
    f[0, 3] = 0x80
    assert np.isnan(gemm(f, _fnuz([[1.0] * 16], "e4m3fnuz"), "cdna3-fp8", fmt="e4m3fnuz", instruction_k=16)[0, 0])
    with pytest.raises(FpspecError, match="instruction's k=32"):
        gemm(f, f, "cdna3-fp8", fmt="e4m3fnuz")
    with pytest.raises(FpspecError, match="pair"):
        gemm(a, b, "sm90-fp8", fmt=("e4m3",))
    with pytest.raises(FpspecError, match="BT codes for e5m2fnuz must be uint8"):
        gemm(a, b.astype(np.uint16), "sm90-fp8", fmt=("e4m3", "e5m2fnuz"))


def _nvfp4(values, scales) -> QuantizedTensor:
    c = encode(np.array([values], np.float32), "e2m1", "rne")
    s = encode(np.array([scales], np.float32), "ue4m3", "rne")
    return QuantizedTensor.from_codes(c, s, payload_format="e2m1", scale_format="ue4m3", block=16)


def test_fpsgemm22_block_terms_aligned_by_the_scales():
    """FPS-GEMM-22: sm100-mxf4nvf4 (NVFP4): a zero block under scales 448 x 448 still aligns
    at e(448) + e(448) = 16 (window quantum 2^(16-35)); the next block's 0.25 x 2^-9 x 2^-9 =
    2^-20 is truncated: 0.  Without zero blocks in the alignment E = -6 - 6 (the UE4M3
    subnormal 2^-9 clamps at emin -6) and 2^-20 is kept."""
    a = _nvfp4([0.0] * 16 + [0.5] + [0.0] * 47, [448, 2.0 ** -9, 1, 1])
    b = _nvfp4([1.0] * 16 + [0.5] + [0.0] * 47, [448, 2.0 ** -9, 1, 1])
    for impl in ("fast", "exact"):
        assert gemm(a, b, "sm100-mxf4nvf4", impl=impl)[0, 0] == 0
        assert gemm(a, b, "sm100-mxf4nvf4", impl=impl, zero_alignment="excluded")[0, 0] == 2.0 ** -20


def test_fpsgemm22_seed_model_and_the_instruction_disagree():
    """FPS-GEMM-22, FPS-GEMM-21: the worked inputs of the disagreement ``blackwell-nvfp4-gemm``:
    the seed's snap gives 0 where the instruction gives 2^-14; its group RNE32 gives 7225345
    where the instruction keeps 7225344.5 (RZ)."""
    a = _nvfp4([0.5] + [0.0] * 63, [2.0 ** -6, 1, 1, 1])
    assert gemm(a, a, "seed-probe-matched")[0, 0] == 0
    assert gemm(a, a, "sm100-mxf4nvf4")[0, 0] == 2.0 ** -14
    a = _nvfp4([6.0] + [0.0] * 15 + [1.5] + [0.0] * 47, [448, 1, 1, 1])
    b = _nvfp4([6.0] + [0.0] * 15 + [0.5] + [0.0] * 47, [448, 1, 1, 1])
    assert gemm(a, b, "seed-probe-matched")[0, 0] == 7225345.0
    assert gemm(a, b, "sm100-mxf4nvf4")[0, 0] == 7225344.5
    from fpspec.disagreements import DISAGREEMENTS
    entry = {d.key: d for d in DISAGREEMENTS}["blackwell-nvfp4-gemm"]
    assert "7225344.5" in entry.behaviours[0].does and "55.2%" in entry.behaviours[0].note


def test_fpsgemm21_seed_agreement_measured_in_the_disagreement_entry():
    """FPS-GEMM-21: the figures the disagreement entry states are measured on MMA-Sim's NVFP4
    set: seed-probe-matched 55.2%, without the snap 82.9%, c = RZ(c + exact 64-sum) 99.6%."""
    hs = load("sm100-mxf4nvf4__nvfp4-ue4m3-b16")
    a, bt, _ = hs.operands()
    want = hs.expected("d")
    rates = []
    for over in ({}, dict(snap_bits=None), dict(snap_bits=None, group_rounding="none")):
        y = gemm(a, bt, get_model("seed-probe-matched", **over))
        rates.append(round(100 * float((~mismatches(y, want, nan_bits=False)).mean()), 1))
    assert rates == [55.2, 82.9, 99.6]


def test_fpsgemm20_quantized_from_codes_is_validated():
    """FPS-GEMM-20: QuantizedTensor.from_codes holds E2M1 or FP8 payloads with scale bytes,
    encode/decode scale 1, and refuses what a hardware operand cannot be."""
    codes = np.zeros((1, 32), np.uint8)
    q = QuantizedTensor.from_codes(codes, np.array([[127]], np.uint8), payload_format="e4m3",
                                   scale_format="ue8m0", block=32)
    assert q.scheme == "codes" and float(q.decode_scale) == 1.0 and q.payload_format == "e4m3"
    with pytest.raises(FpspecError, match="payload format"):
        QuantizedTensor.from_codes(codes, np.array([[127]], np.uint8), payload_format="fp16",
                                   scale_format="ue8m0", block=32)
    with pytest.raises(FpspecError, match="out of range"):
        QuantizedTensor.from_codes(np.full((1, 32), 16, np.uint8), np.array([[1]], np.uint8),
                                   payload_format="e2m1", scale_format="ue4m3", block=32)
    with pytest.raises(FpspecError, match="scales shape"):
        QuantizedTensor.from_codes(codes, np.array([[1, 1]], np.uint8), payload_format="e4m3",
                                   scale_format="ue8m0", block=32)
    bad = QuantizedTensor(codes=codes, scales=np.array([[127]], np.uint8), scale_format="ue8m0", block=32,
                          tile="1xB", encode_scale=np.float32(2), decode_scale=np.float32(0.5),
                          amax=np.float32(0), scheme="codes", profile="codes", payload_format="e4m3")
    with pytest.raises(FpspecError, match="must be 1"):
        bad.validate()


# ======================================================= exact == fast, adversarial
def _adversarial_codes(rng, fmt: str, shape) -> np.ndarray:
    """Codes over the whole range: random bit patterns (specials, subnormals, extremes),
    with runs of zeros and a cancelling half."""
    from fpspec.gemm_operands import code_format

    f = code_format(fmt)
    bits = f.bits
    x = rng.integers(0, 1 << bits, size=shape, dtype=np.uint64).astype(f.storage_dtype)
    x[:, ::5] = 0
    half = shape[1] // 2
    sign = np.array(1 << (bits - 1), dtype=x.dtype)
    x[0, half:] = x[0, :half] ^ sign  # row 0 cancels across the two halves
    return x


@pytest.mark.parametrize("name", INSTRUCTION_PRESETS)
def test_fpsgemm10_exact_equals_fast_adversarial(name):
    """FPS-GEMM-10: every instruction preset, exact == fast on random bit patterns of its
    formats (specials, subnormals, top binades, zero runs, a cancelling row), two
    instructions of K; block-scaled presets on random payloads and scale bytes (NaN and
    zero scales included, MXFP4 with block 32 and 16)."""
    rng = np.random.default_rng(sum(map(ord, name)))
    model = get_model(name)
    k = 2 * model.instruction_k
    if "mxf4nvf4" in name:
        for sf, blk in (("ue4m3", 16), ("ue8m0", 32), ("ue8m0", 16)):
            ops = []
            for rows in (3, 4):
                c = rng.integers(0, 16, (rows, k)).astype(np.uint8)
                c[:, :16] = 0  # a zero block
                s = rng.integers(0, 128 if sf == "ue4m3" else 256, (rows, k // blk)).astype(np.uint8)
                s[0, 0] = 0x7E if sf == "ue4m3" else 0xFE  # the largest scale on the zero block
                ops.append(QuantizedTensor.from_codes(c, s, payload_format="e2m1", scale_format=sf, block=blk))
            ye, yf = (gemm(*ops, model, impl=impl) for impl in ("exact", "fast"))
            assert np.array_equal(_bits(ye), _bits(yf)), (name, sf, blk)
        return
    if "mxf8f6f4" in name:
        ops = []
        for rows, pf in ((3, "e4m3"), (4, "e5m2")):
            c = rng.integers(0, 256, (rows, k)).astype(np.uint8)
            s = rng.integers(100, 256, (rows, k // 32)).astype(np.uint8)
            ops.append(QuantizedTensor.from_codes(c, s, payload_format=pf, scale_format="ue8m0", block=32))
        ye, yf = (gemm(*ops, model, impl=impl) for impl in ("exact", "fast"))
        assert np.array_equal(_bits(ye), _bits(yf)), name
        return
    fmts = {"cdna3-fp8": ("e4m3fnuz", "e5m2fnuz"), "cdna3-f16": ("bf16", "fp16")}.get(name)
    if fmts is None:
        fmts = ("e4m3", "e5m2") if "8" in name.split("-")[1] else ("bf16", "fp16")
    for fmt in fmts:
        a = _adversarial_codes(rng, fmt, (3, k))
        bt = _adversarial_codes(rng, fmt, (4, k))
        ye, yf = (gemm(a, bt, model, fmt=fmt, impl=impl) for impl in ("exact", "fast"))
        assert np.array_equal(_bits(ye), _bits(yf)), (name, fmt)


@pytest.mark.parametrize("over", [
    dict(zero_alignment="excluded"), dict(accumulate_rounding="rne"), dict(window_bits=20),
    dict(accumulate_overflow="ieee"), dict(nan_encoding="ieee-quiet"),
])
def test_fpsgemm10_instruction_parameters_varied(over):
    """FPS-GEMM-10: exact == fast when the new parameters are varied on wide-range BF16 (AMD and
    NVIDIA models) and on FP16 near the FP16 accumulator's overflow."""
    rng = np.random.default_rng(len(str(over)))
    a = _adversarial_codes(rng, "bf16", (3, 32))
    bt = _adversarial_codes(rng, "bf16", (3, 32))
    for name in ("sm100-f16", "cdna3-f16"):
        m = get_model(name, **over)
        ye, yf = (gemm(a, bt, m, fmt="bf16", impl=impl) for impl in ("exact", "fast"))
        assert np.array_equal(_bits(ye), _bits(yf)), (name, over)
    x = codes_of(np.clip(rng.standard_normal((3, 32)) * 64, -300, 300).astype(np.float16).astype(np.float64), "fp16")
    m = get_model("sm90-f16-f16acc", **{k: v for k, v in over.items() if k != "accumulate_overflow"})
    ye, yf = (gemm(x, x, m, fmt="fp16", impl=impl) for impl in ("exact", "fast"))
    assert np.array_equal(_bits(ye), _bits(yf)) and np.isinf(ye).any()


def test_fpsgemm20_bad_instruction_parameters():
    """FPS-GEMM-9, FPS-GEMM-20: inconsistent instruction parameters are one-line FpspecErrors."""
    for over, why in [
        (dict(zero_alignment="emin", product_exponent="exact"), "zero_alignment"),
        (dict(window_lanes=3), "window_lanes"),
        (dict(join_sum_bits=31), "join_c_bits"),
        (dict(chain_zero="signed"), "chain_zero"),
        (dict(instruction_k=24), "instruction_k"),
        (dict(block_term_size=16), "block_term_size"),
        (dict(block_exponent="scales", operand_domain="decoded-fp32"), "block_exponent"),
        (dict(nan_encoding="signalling"), "one of"),
    ]:
        with pytest.raises(FpspecError, match=why):
            get_model("sm90-f16", **over)
    q32 = QuantizedTensor.from_codes(np.zeros((1, 64), np.uint8), np.zeros((1, 2), np.uint8), payload_format="e2m1",
                                     scale_format="ue8m0", block=32)
    with pytest.raises(FpspecError, match="block_term_size=64 must divide A's scale block 32"):
        gemm(q32, q32, "sm100-mxf4nvf4", block_term_size=64)
    # CDNA3's NaN bits: MMA-Sim leaves them open, fpspec names its choice (ieee-quiet)
    nan = _bf16([[float("nan")] + [1.0] * 15])
    assert get_model("cdna3-f16").nan_encoding == "ieee-quiet"
    assert gemm(nan, _bf16([[1.0] * 16]), "cdna3-f16", fmt="bf16").view(np.uint32)[0, 0] == 0x7FC00000


def _finite_codes(rng, fmt: str, shape) -> np.ndarray:
    """Random finite codes of a format, over its whole range (subnormals and zeros included)."""
    from fpspec.formats import CodeKind, get_format

    f = get_format(fmt)
    finite = np.array([c for c in range(f.num_codes) if f.kind(c) not in (CodeKind.NAN, CodeKind.INF)])
    return finite[rng.integers(0, finite.size, shape)].astype(f.storage_dtype)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in INSTRUCTION_PRESETS if not n.startswith("cdna3") and "mxf4" not in n])
def test_fpsgemm10_row_kernel_equals_exact_on_finite_operands(name):
    """FPS-GEMM-10: finite operands take the row-vectorised window kernel; with zeros facing
    huge values, bottom-binade products and both zero rules it equals the exact spec."""
    from fpspec.fast.accumulate import _terms_kernel
    from fpspec.fast.chain import chain_plan
    from fpspec.fast.kernels import gemm_window_narrow_rows, gemm_window_rows
    from fpspec.gemm_operands import operand_formats

    rng = np.random.default_rng(sum(map(ord, name)) + 1)
    model = get_model(name)
    k = 2 * model.instruction_k
    if "mxf8f6f4" in name:
        ops = []
        for rows, pf in ((3, "e4m3"), (4, "e5m2")):
            c = _finite_codes(rng, pf, (rows, k))
            c[:, ::3] = 0
            s = rng.integers(0, 255, (rows, k // 32)).astype(np.uint8)
            ops.append(QuantizedTensor.from_codes(c, s, payload_format=pf, scale_format="ue8m0", block=32))
        a, bt, fmt = ops[0], ops[1], None
    else:
        fmt = "fp16" if "f16acc" in name else (("e4m3", "e5m2") if "8" in name.split("-")[1] else "bf16")
        fa, fb = operand_formats(fmt)
        a, bt = _finite_codes(rng, fa, (3, k)), _finite_codes(rng, fb, (4, k))
        a[:, ::4] = 0  # zeros facing whatever B holds there
    for zero in ("emin", "excluded"):
        m = model.replace(zero_alignment=zero)
        kernel, _ = _terms_kernel(a, bt, m, fmt, chain_plan(k, m))
        assert kernel in (gemm_window_rows, gemm_window_narrow_rows)
        ye, yf = (gemm(a, bt, m, fmt=fmt, impl=impl) for impl in ("exact", "fast"))
        assert np.array_equal(_bits(ye), _bits(yf)), (name, zero)


def test_fpsgemm10_block_terms_kernel_variants():
    """FPS-GEMM-10, FPS-GEMM-22: the block-term kernel (any scales, NaN and zero included; terms
    smaller than the scale block; exponents from the value or from the scales; A and BT with
    different scale blocks) equals the exact spec."""
    rng = np.random.default_rng(22)
    ops = {}
    for rows, blk in ((3, 32), (4, 16)):
        c = rng.integers(0, 16, (rows, 128)).astype(np.uint8)
        c[:, 32:48] = 0
        s = rng.integers(0, 256, (rows, 128 // blk)).astype(np.uint8)
        s[1, 1] = 0xFF  # NaN
        ops[blk] = QuantizedTensor.from_codes(c, s, payload_format="e2m1", scale_format="ue8m0", block=blk)
    for over in (dict(), dict(block_exponent="value", zero_alignment="excluded"), dict(zero_alignment="excluded"),
                 dict(window_bits=12, group_size=32, instruction_k=None), dict(accumulate_rounding="rne")):
        m = get_model("sm100-mxf4nvf4", **over)
        ye, yf = (gemm(ops[32], ops[16], m, impl=impl) for impl in ("exact", "fast"))
        assert np.array_equal(_bits(ye), _bits(yf)), over
        assert np.isnan(ye[1]).all() and np.isnan(ye[:, 1]).all() and not np.isnan(ye[0, 0])
    m = get_model("seed-probe-matched", scale_placement="block", window_bits=20, fused=True)
    ye, yf = (gemm(ops[16], ops[16], m, impl=impl) for impl in ("exact", "fast"))
    assert np.array_equal(_bits(ye), _bits(yf))


def test_fpsgemm11_cli_mixed_formats_fp16_output_and_models_listing(tmp_path, capsys):
    """FPS-GEMM-11: fpspec gemm with --bt-format (mixed operands) and an FP16 output (--bits:
    uint16); tensors built from codes as .npz; fpspec models lists every instruction preset
    with its instruction and source (MMA-Sim), and --json carries architecture, instruction
    and the arithmetic."""
    from fpspec.cli import main

    a = codes_of(np.array([[1.5] + [0.0] * 31]), "e4m3")
    b = codes_of(np.array([[-3.0] + [0.0] * 31]), "e5m2")
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out = tmp_path / "c.npy"
    assert main(["gemm", "--operand-format", "e4m3", "--bt-format", "e5m2", str(tmp_path / "a.npy"),
                 str(tmp_path / "b.npy"), "--model", "sm89-fp8", "--out", str(out)]) == 0
    assert np.load(out)[0, 0] == -4.5
    h = codes_of(np.array([[1.0, 2.0 ** -11, 2.0 ** -20] + [0.0] * 13]), "fp16")
    np.save(tmp_path / "h.npy", h)
    np.save(tmp_path / "one.npy", codes_of(np.array([[1.0] * 16]), "fp16"))
    assert main(["gemm", "--operand-format", "fp16", str(tmp_path / "h.npy"), str(tmp_path / "one.npy"),
                 "--model", "sm90-f16-f16acc", "--bits", "--out", str(out)]) == 0
    got = np.load(out)
    assert got.dtype == np.uint16 and got[0, 0] == 0x3C01
    q = _nvfp4([0.5] + [0.0] * 63, [2.0 ** -6, 1, 1, 1])
    q.to_npz(tmp_path / "q.npz")
    assert QuantizedTensor.from_npz(tmp_path / "q.npz").scheme == "codes"
    assert main(["gemm", str(tmp_path / "q.npz"), str(tmp_path / "q.npz"), "--model", "sm100-mxf4nvf4",
                 "--out", str(out)]) == 0
    assert np.load(out)[0, 0] == 2.0 ** -14
    capsys.readouterr()
    assert main(["gemm", "--bt-format", "e5m2", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"),
                 "--model", "sm89-fp8", "--out", str(out)]) == 2
    assert "needs --operand-format" in capsys.readouterr().err
    assert main(["models"]) == 0
    text = capsys.readouterr().out
    for name in INSTRUCTION_PRESETS:
        after = text.split(f"\n{name}\n")[1].split("\n")
        block = "\n".join(after[:next(i for i, line in enumerate(after) if not line.startswith("    "))])
        assert "instruction: " in block and "MMA-Sim" in block and "2511.10909" in block, name
    assert main(["models", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["cdna3-fp8"]["architecture"].startswith("AMD CDNA3")
    assert listing["sm100-mxf4nvf4"]["arithmetic"]["window"].startswith("F = 35")
    assert listing["sm90-f16"]["backing"]["kind"] == "measured"
