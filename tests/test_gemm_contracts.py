"""GEMM operand contracts and tensor scales (FPS-GEMM-25, FPS-GEMM-8).

Each preset states what its hardware or library takes (``fpspec.models.CONTRACTS``) and
refuses anything else with an FpspecError that names the model, the rule and the operand;
``allow_what_if=True`` runs it anyway, flagged by a ``GemmWhatIfWarning``.  Quantized
operands with a tensor scale are scaled by alpha (the model's, or the contract's epilogue)
or refused, never dropped.
"""

from __future__ import annotations

import re
import warnings
from functools import lru_cache

import numpy as np
import pytest

from fpspec.cli import main
from fpspec.convert import encode
from fpspec.errors import FpspecError
from fpspec.gemm_operands import has_tensor_scale
from fpspec.matmul import GemmWhatIfWarning, gemm
from fpspec.cublas.library import LIBRARY
from fpspec.models import CONTRACTS, GENERIC_CONTRACT, TENSOR_SCALE_PLACES, TE_NVFP4_EPILOGUE
from fpspec.named_models import get_model
from fpspec.presets import PRESETS
from fpspec.quantization import quantize
from fpspec.quantized import QuantizedTensor

M = N = 16
K = 64


@lru_cache(maxsize=None)
def _inputs(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((M, K)).astype(np.float32)


def _codes_of(q: QuantizedTensor) -> QuantizedTensor:
    """The same payload codes and scale bytes without a tensor scale (as an instruction gets them)."""
    return QuantizedTensor.from_codes(q.codes, q.scales, payload_format=q.payload_format,
                                      scale_format=q.scale_format, block=q.block)


#: Operand kinds: name -> (quantized tensor or code array, fmt of a code array).
def operand(kind: str, seed: int):
    x = _inputs(seed)
    quantized = {
        "nvfp4": lambda: quantize(x, "nvfp4"), "nvfp4-2d": lambda: quantize(x, "nvfp4", tile="BxB"),
        "nvfp4-codes": lambda: _codes_of(quantize(x, "nvfp4")), "mxfp4": lambda: quantize(x, "mxfp4"),
        "mxfp4-b16": lambda: QuantizedTensor.from_codes(quantize(x, "mxfp4").codes,
                                                        np.full((M, K // 16), 127, np.uint8), payload_format="e2m1",
                                                        scale_format="ue8m0", block=16),
        "ue5m3": lambda: quantize(x, "ue5m3"), "ue5m3-b32": lambda: quantize(x, "ue5m3", block=32),
        "mxfp8-e4m3": lambda: quantize(x, "mxfp8"),
        "mxfp8-e5m2": lambda: quantize(x, "mxfp8", payload_format="e5m2"),
    }
    if kind in quantized:
        return quantized[kind](), None
    if kind == "tf32":
        return x.view(np.uint32).copy(), "tf32"
    return encode(x, kind, "rne"), kind


_TAKES_FP4 = r"E2M1 with UE4M3 scales in blocks of 16 or UE8M0 scales in blocks of 32 or 16, one scaling for both"
_NOT_QUANTIZED = r"code arrays.*, not quantized tensors; A is quantized \(nvfp4: E2M1 with UE4M3 scales in 1x16"
ACCEPT = None

#: (model, A's kind, BT's kind, the refusal's regex or ACCEPT).
CASES = [
    # Blackwell FP4 instructions: NVFP4 or MXFP4, one scaling for both
    ("sm100-mxf4nvf4", "nvfp4", "nvfp4", ACCEPT),
    ("sm100-mxf4nvf4", "nvfp4-2d", "nvfp4", ACCEPT),
    ("sm100-mxf4nvf4", "nvfp4-codes", "nvfp4-codes", ACCEPT),
    ("sm100-mxf4nvf4", "mxfp4", "mxfp4", ACCEPT),
    ("sm100-mxf4nvf4", "mxfp4-b16", "mxfp4-b16", ACCEPT),
    ("sm100-mxf4nvf4", "nvfp4", "mxfp4", rf"^sm100-mxf4nvf4 takes {_TAKES_FP4} operands; BT has ue8m0 scales in "
                                         r"blocks of 32, A ue4m3 in blocks of 16"),
    ("sm100-mxf4nvf4", "mxfp4", "mxfp4-b16", r"BT has ue8m0 scales in blocks of 16, A ue8m0 in blocks of 32"),
    ("sm100-mxf4nvf4", "nvfp4", "ue5m3", rf"^sm100-mxf4nvf4 takes {_TAKES_FP4} operands; BT has ue5m3 scales"),
    ("sm100-mxf4nvf4", "ue5m3", "nvfp4", r"; A has ue5m3 scales \(for a hypothetical run"),
    ("sm100-mxf4nvf4", "ue5m3-b32", "ue5m3-b32", r"; A has ue5m3 scales"),
    ("sm100-mxf4nvf4", "mxfp8-e4m3", "mxfp8-e4m3", r"; A has e4m3 payloads"),
    ("sm100-mxf4nvf4", "bf16", "bf16", r"^sm100-mxf4nvf4 takes E2M1 .*, not code arrays; A is bf16 codes"),
    ("sm120-mxf4nvf4", "mxfp4-b16", "mxfp4-b16", ACCEPT),
    ("sm120-mxf4nvf4", "nvfp4", "nvfp4", ACCEPT),
    ("sm120-mxf4nvf4", "nvfp4", "ue5m3", r"^sm120-mxf4nvf4 takes .*; BT has ue5m3 scales"),
    # Blackwell MX instructions: UE8M0 in blocks of 32, payloads may differ
    ("sm100-mxf8f6f4", "mxfp8-e4m3", "mxfp8-e5m2", ACCEPT),
    ("sm100-mxf8f6f4", "mxfp8-e4m3", "mxfp4", ACCEPT),
    ("sm100-mxf8f6f4", "nvfp4", "nvfp4", r"^sm100-mxf8f6f4 takes E4M3 or E5M2 or E2M1 with UE8M0 scales in blocks "
                                         r"of 32, .*; A has ue4m3 scales"),
    ("sm100-mxf8f6f4", "mxfp4-b16", "mxfp4-b16", r"; A has ue8m0 scales in blocks of 16"),
    ("sm120-mxf8f6f4", "mxfp8-e5m2", "mxfp8-e5m2", ACCEPT),
    ("sm120-f8f6f4", "mxfp8-e4m3", "mxfp8-e4m3", r"^sm120-f8f6f4 takes e4m3 or e5m2 code arrays \(A and BT may "
                                                 r"differ\), not quantized tensors; A is quantized \(mxfp8"),
    # Hopper and older: plain codes only
    ("sm90-fp8", "nvfp4", "nvfp4", r"^sm90-fp8 takes e4m3 or e5m2 " + _NOT_QUANTIZED),
    ("sm90-fp8", "e4m3", "e5m2", ACCEPT),
    ("sm90-fp8", "e4m3", "bf16", r"^sm90-fp8 takes e4m3 or e5m2 code arrays \(A and BT may differ\); BT is bf16 "
                                 r"codes"),
    ("sm90-fp8", "e4m3fnuz", "e4m3", r"; A is e4m3fnuz codes"),
    ("sm90-f16", "nvfp4", "nvfp4", r"^sm90-f16 takes fp16 or bf16 " + _NOT_QUANTIZED),
    ("sm90-f16", "bf16", "bf16", ACCEPT),
    ("sm90-f16", "fp16", "bf16", r"^sm90-f16 takes fp16 or bf16 code arrays, one format for both; BT is bf16 "
                                 r"codes, A fp16"),
    ("sm90-f16", "tf32", "tf32", r"; A is tf32 codes"),
    ("sm90-f16-f16acc", "bf16", "bf16", r"^sm90-f16-f16acc takes fp16 code arrays; A is bf16 codes"),
    ("sm80-f16", "fp16", "fp16", ACCEPT),
    ("sm70-f16", "bf16", "bf16", r"^sm70-f16 takes fp16 code arrays; A is bf16 codes"),
    ("sm75-f16", "fp16", "fp16", ACCEPT),
    ("sm89-fp8", "e5m2", "e4m3", ACCEPT),
    ("sm100-f16", "e4m3", "e4m3", r"^sm100-f16 takes fp16 or bf16 code arrays, one format for both; A is e4m3"),
    ("sm100-f8f6f4", "e4m3", "e5m2", ACCEPT),
    ("cdna3-fp8", "e4m3fnuz", "e5m2fnuz", ACCEPT),
    ("cdna3-fp8", "e4m3", "e4m3", r"^cdna3-fp8 takes e4m3fnuz or e5m2fnuz code arrays .*; A is e4m3 codes"),
    ("cdna3-f16", "bf16", "bf16", ACCEPT),
    ("cdna3-f16", "nvfp4", "nvfp4", r"^cdna3-f16 takes fp16 or bf16 " + _NOT_QUANTIZED),
    # the seed's models
    ("seed-probe-matched", "ue5m3", "ue5m3", ACCEPT),
    ("seed-probe-matched", "nvfp4", "nvfp4", ACCEPT),
    ("seed-probe-matched", "mxfp4", "mxfp4", ACCEPT),
    ("seed-probe-matched", "ue5m3", "nvfp4", r"; BT has ue4m3 scales in blocks of 16, A ue5m3 in blocks of 16"),
    ("seed-probe-matched", "bf16", "bf16", r"^seed-probe-matched takes E2M1 with UE5M3 scales .*, not code arrays; "
                                           r"A is bf16 codes"),
    ("seed-probe-matched", "mxfp8-e4m3", "mxfp8-e4m3", r"; A has e4m3 payloads"),
    ("seed-probe-matched-nosnap", "ue5m3-b32", "ue5m3-b32", ACCEPT),
    ("seed-triton-h200", "bf16", "bf16", ACCEPT),
    ("seed-triton-h200-snap", "ue5m3", "ue5m3", ACCEPT),
    ("seed-triton-h200", "nvfp4", "nvfp4", r"^seed-triton-h200 takes bf16 code arrays; or E2M1 with UE5M3 scales "
                                           r".*; A has ue4m3 scales"),
    ("seed-triton-h200-snap", "fp16", "fp16", r"; A is fp16 codes"),
    # the references take everything
    ("exact", "nvfp4", "mxfp4", ACCEPT),
    ("exact", "e4m3", "bf16", ACCEPT),
    ("decoded-fp32", "ue5m3", "mxfp8-e5m2", ACCEPT),
    # Khattak-Mikaitis models
    ("km-h100-fp8", "e4m3", "e5m2", ACCEPT),
    ("km-h100-fp8-promote128", "nvfp4", "nvfp4", r"^km-h100-fp8-promote128 takes e4m3 or e5m2 " + _NOT_QUANTIZED),
    ("km-h100-bf16", "bf16", "fp16", r"^km-h100-bf16 takes fp16 or bf16 code arrays, one format for both; BT is "
                                     r"fp16 codes, A bf16"),
    ("km-v100-fp16", "bf16", "bf16", r"^km-v100-fp16 takes fp16 code arrays; A is bf16 codes"),
    ("km-b200-fp8", "e5m2", "e5m2", ACCEPT),
    # library presets (resolved at a shape whose kernel is modelled)
    ("cublas-h200-fp8", "e5m2", "e4m3", r"^cublas-h200-fp8 takes e4m3 code arrays; A is e5m2 codes"),
    ("cublas-h200-bf16", "fp16", "fp16", r"^cublas-h200-bf16 takes bf16 code arrays; A is fp16 codes"),
    ("cublas-h200-bf16", "bf16", "bf16", ACCEPT),
]


def _run(model, ka: str, kb: str, **kw):
    a, fa = operand(ka, 1)
    b, fb = operand(kb, 2)
    fmt = None if fa is None and fb is None else (fa if fa == fb else (fa, fb))
    if model in LIBRARY:
        kw.setdefault("shape", (4096, 4096, K))
    return gemm(a, b, model, fmt=fmt, **kw)


def test_fpsgemm25_the_table_holds_enough_combinations():
    """FPS-GEMM-25: at least 40 (model, A, BT) combinations, refusals and acceptances both, over
    every kind of preset."""
    assert len(CASES) >= 40 and len({c[1:3] for c in CASES}) >= 25
    assert sum(c[3] is ACCEPT for c in CASES) >= 15 and sum(c[3] is not ACCEPT for c in CASES) >= 25
    assert {c[0] for c in CASES} >= {"sm100-mxf4nvf4", "sm90-fp8", "sm90-f16", "seed-triton-h200", "exact",
                                     "km-h100-fp8", "cublas-h200-bf16", "cdna3-fp8"}


@pytest.mark.parametrize("model,ka,kb,refusal", CASES, ids=[f"{m}:{a}x{b}" for m, a, b, _ in CASES])
def test_fpsgemm25_operand_contracts(model, ka, kb, refusal):
    """FPS-GEMM-25: each combination is accepted, or refused with a message that names the model,
    the rule and the operand; a refused one runs with allow_what_if=True, flagged."""
    if refusal is ACCEPT:
        with warnings.catch_warnings():
            warnings.simplefilter("error", GemmWhatIfWarning)  # an accepted pair is no what-if
            y = _run(model, ka, kb)
        assert y.shape == (M, N) and np.isfinite(y.astype(np.float32)).all()
        return
    with pytest.raises(FpspecError) as info:
        _run(model, ka, kb)
    text = str(info.value)
    assert re.search(refusal, text), text
    assert text.endswith("(for a hypothetical run: allow_what_if=True, fpspec gemm --allow-what-if)")
    assert "\n" not in text


@pytest.mark.parametrize("model,ka,kb", [("sm100-mxf4nvf4", "nvfp4", "mxfp4"), ("sm90-fp8", "e4m3", "bf16"),
                                         ("seed-probe-matched", "ue5m3", "nvfp4"),
                                         ("sm100-mxf4nvf4", "ue5m3", "ue5m3")])
def test_fpsgemm25_what_if_runs_flagged_with_tensor_scales_applied(model, ka, kb):
    """FPS-GEMM-25: a what-if run computes the combination and says so (GemmWhatIfWarning); its
    tensor scales are applied too: it is close to the exact product of the same operands."""
    with pytest.warns(GemmWhatIfWarning, match=rf"^what-if: {model} takes .*; the result is a hypothetical$"):
        y = _run(model, ka, kb, allow_what_if=True).astype(np.float64)
    ref = _run("exact", ka, kb).astype(np.float64)
    assert np.allclose(y, ref, rtol=2e-2, atol=2e-2 * np.abs(ref).max())


def test_fpsgemm25_what_if_never_drops_tensor_scales():
    """FPS-GEMM-25: alpha_source=none on operands with a tensor scale is refused, what-if or not;
    a model given as parameters (a GemmModel) without alpha is refused too."""
    for kw in ({}, {"allow_what_if": True}):
        with pytest.raises(FpspecError, match=r"^sm100-mxf4nvf4 has alpha_source=none and encoded operands: the "
                                              r"tensor scale of A \(nvfp4, decode scale .*\) would be dropped"):
            _run("sm100-mxf4nvf4", "nvfp4", "nvfp4", alpha_source="none", **kw)
    with pytest.raises(FpspecError, match=r"^the given model has alpha_source=none .* tensor scale of A \(ue5m3"):
        _run(get_model("seed-triton-h200"), "ue5m3", "ue5m3")
    # without a tensor scale nothing is dropped: the encoded product, as the instruction gives it
    assert _run(get_model("sm100-mxf4nvf4"), "nvfp4-codes", "nvfp4-codes").shape == (M, N)


def test_fpsgemm25_models_given_as_parameters_have_the_generic_contract():
    """FPS-GEMM-25: a GemmModel (not a preset name) takes any operand; its tensor scales go where
    its parameters say."""
    y = _run(get_model("sm90-fp8"), "e4m3", "bf16")
    assert y.shape == (M, N)
    assert GENERIC_CONTRACT.any_operands
    assert GENERIC_CONTRACT.tensor_scales(get_model("exact")) == "folded"
    assert GENERIC_CONTRACT.tensor_scales(get_model("km-h100-fp8")) == "alpha"
    assert GENERIC_CONTRACT.tensor_scales(get_model("sm90-fp8")) == "refused"


def test_fpsgemm25_every_preset_states_its_contract():
    """FPS-GEMM-25: every preset and library preset has a contract with its source, a rule in
    words, and a place for tensor scales; the instruction presets carry TransformerEngine's
    epilogue, the seed's Triton GEMM the seed's."""
    assert set(CONTRACTS) == set(PRESETS) | set(LIBRARY)
    for name, c in CONTRACTS.items():
        model = (PRESETS.get(name) or LIBRARY[name]).model
        assert c.source and c.rule() and "  " not in c.rule(), name
        assert c.tensor_scales(model) in TENSOR_SCALE_PLACES, name
    for name in ("sm100-mxf4nvf4", "sm120-mxf4nvf4", "sm90-fp8"):
        assert CONTRACTS[name].epilogue == ("amax", "fp32-reciprocal") == TE_NVFP4_EPILOGUE
        assert CONTRACTS[name].tensor_scales(PRESETS[name].model) == "epilogue"
    assert CONTRACTS["seed-triton-h200-snap"].epilogue == ("amax", "fp32-reciprocal")
    assert CONTRACTS["seed-probe-matched"].tensor_scales(PRESETS["seed-probe-matched"].model) == "alpha"
    assert CONTRACTS["exact"].tensor_scales(PRESETS["exact"].model) == "folded"
    assert CONTRACTS["km-h100-fp8"].tensor_scales(PRESETS["km-h100-fp8"].model) == "alpha"


# ------------------------------------------------------------------ alpha applied
def _te_alpha(amax_a, amax_b) -> np.float32:
    """TransformerEngine's compute_nvfp4_per_tensor_scale_kernel in numpy binary32:
    1.0f * amax_A * amax_B * factor_inv, factor_inv = (float)(1.0 / (6 * 6 * 448 * 448))."""
    factor_inv = np.float32(1.0 / (6.0 * 6.0 * 448.0 * 448.0))
    return np.float32(np.float32(np.float32(1.0) * np.float32(amax_a)) * np.float32(amax_b)) * factor_inv


def test_fpsgemm25_nvfp4_through_sm100_applies_tes_alpha_bit_for_bit():
    """FPS-GEMM-25, FPS-GEMM-8: NVFP4 x NVFP4 through sm100-mxf4nvf4 is RNE32(alpha y_enc), where
    y_enc is the instruction's product of the encoded operands (codes and scale bytes alone) and
    alpha is TE's binary32 amax_a amax_b factor_inv; it is neither y_enc (the dropped tensor scales,
    the issue's 62x) nor off the exact product of the dequantized operands."""
    x, w = _inputs(11)[:4], _inputs(12)[:3]
    qa, qb = quantize(x, "nvfp4"), quantize(w, "nvfp4")
    assert has_tensor_scale(qa) and not has_tensor_scale(_codes_of(qa))
    alpha = _te_alpha(qa.amax, qb.amax)
    assert alpha == np.float32(np.float32(qa.amax) * np.float32(qb.amax)) * (np.float32(1) / np.float32(7225344.0))
    for impl in ("fast", "exact"):
        y_enc = gemm(_codes_of(qa), _codes_of(qb), "sm100-mxf4nvf4", impl=impl)
        y = gemm(qa, qb, "sm100-mxf4nvf4", impl=impl)
        want = (alpha * y_enc).astype(np.float32)  # binary32 products, RNE
        assert np.array_equal(y.view(np.uint32), want.view(np.uint32))
    ref = gemm(qa, qb, "exact").astype(np.float64)
    assert np.allclose(y, ref, rtol=1e-5, atol=1e-6 * np.abs(ref).max())
    assert np.abs(y_enc).max() > 10 * np.abs(ref).max()  # what dropping the tensor scales gave


def test_fpsgemm25_nvfp4_alpha_hand_computed_small_case():
    """FPS-GEMM-25: one output by hand: A = [6, 0, ...] with block scale 448 and amax 6 * 448 * 2
    (decode scale 2), BT = [1, 0, ...] with scale 1 and amax 2688: y_enc = 6 * 448 = 2688,
    alpha = RNE32(5376 * 2688) RNE32(1 / 7225344) in binary32, y = RNE32(alpha 2688)."""
    def nvfp4(first: float, scale: float, amax: float) -> QuantizedTensor:
        codes = encode(np.array([[first] + [0.0] * 15], np.float32), "e2m1", "rne")
        scales = encode(np.array([[scale]], np.float32), "ue4m3", "rne")
        return QuantizedTensor(codes=codes, scales=scales, scale_format="ue4m3", block=16, tile="1xB",
                               encode_scale=np.float32(2688 / amax), decode_scale=np.float32(amax / 2688),
                               amax=np.float32(amax), scheme="nvfp4", profile="te-fp32", params={"target": "448"})
    qa, qb = nvfp4(6.0, 448.0, 5376.0), nvfp4(1.0, 1.0, 2688.0)
    y = gemm(qa, qb, "sm100-mxf4nvf4", instruction_k=16, group_size=16)[0, 0]
    alpha = np.float32(np.float32(5376.0) * np.float32(2688.0)) * (np.float32(1) / np.float32(7225344.0))
    assert y == np.float32(alpha * np.float32(2688.0))
    assert abs(float(y) - 2688.0 * 2.0) <= 2688.0 * 2.0 * 2.0 ** -22  # = 6 * 448 * decode scales 2 * 1


def test_fpsgemm25_seed_triton_applies_the_seeds_alpha():
    """FPS-GEMM-25: seed-triton-h200-snap on UE5M3 tensors is the seed's probe_matched_fp4_gemm:
    issue_rz_bf16_gemm of the encoded operands (snapped), times _encoded_global_alpha as torch forms it
    on CUDA: RNE32(RNE32(amax_a amax_b) RNE32(1 / RNE32((6 T_a)(6 T_b)))), T = 448."""
    x, w = _inputs(21)[:4], _inputs(22)[:5]
    qa, qb = quantize(x, "ue5m3"), quantize(w, "ue5m3")
    y_enc = gemm(_codes_of(qa), _codes_of(qb), "seed-triton-h200-snap")
    y = gemm(qa, qb, "seed-triton-h200-snap")
    den = np.float32((448.0 * 6.0) * (448.0 * 6.0))
    alpha = np.float32(np.float32(qa.amax) * np.float32(qb.amax)) * (np.float32(1) / den)
    assert np.array_equal(y.view(np.uint32), (alpha * y_enc).astype(np.float32).view(np.uint32))
    ref = gemm(qa, qb, "exact").astype(np.float64)
    assert np.allclose(y, ref, rtol=1e-2, atol=1e-2 * np.abs(ref).max())  # the snap costs 2^-11 of y_enc
    # an alpha_rounding override is kept (the seed on a CPU divides: fp32-divide)
    y_div = gemm(qa, qb, "seed-triton-h200-snap", alpha_rounding="fp32-divide")
    alpha_div = np.float32(np.float32(qa.amax) * np.float32(qb.amax)) / den
    assert np.array_equal(y_div.view(np.uint32), (alpha_div * y_enc).astype(np.float32).view(np.uint32))


def test_fpsgemm25_bf16_codes_get_no_alpha():
    """FPS-GEMM-25: code arrays carry no tensor scale: seed-triton-h200 on BF16 codes is unchanged."""
    a, _ = operand("bf16", 31)
    b, _ = operand("bf16", 32)
    assert np.array_equal(gemm(a, b, "seed-triton-h200", fmt="bf16"), gemm(a, b, get_model("seed-triton-h200"),
                                                                           fmt="bf16"))


def test_fpsgemm25_cli_refuses_and_runs_what_if(tmp_path, capsys):
    """FPS-GEMM-25, FPS-GEMM-11: fpspec gemm refuses NVFP4 x MXFP4 on sm100-mxf4nvf4 in one line
    (exit 2) naming --allow-what-if; with the flag it runs and prints one warning line."""
    quantize(_inputs(1), "nvfp4").to_npz(tmp_path / "A.npz")
    quantize(_inputs(2), "mxfp4").to_npz(tmp_path / "B.npz")
    out = tmp_path / "C.npy"
    argv = ["gemm", str(tmp_path / "A.npz"), str(tmp_path / "B.npz"), "--model", "sm100-mxf4nvf4", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "BT has ue8m0 scales in blocks of 32, A ue4m3" in err
    assert err.rstrip().endswith("(--allow-what-if runs it as a hypothetical)")
    assert main([*argv, "--allow-what-if"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("fpspec gemm: warning: what-if: sm100-mxf4nvf4 takes") and err.count("\n") == 1
    assert np.load(out).shape == (M, N)
