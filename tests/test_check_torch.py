"""The checker on real implementations: torch's float8 casts and a pure-torch UE5M3 quantizer (FPS-CHK-9)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the [torch] extra; the suite runs without it (README)

from fpspec.adapters.torch_vectors import (TORCH_FLOAT8_DECLARATION, TORCH_FLOAT8_SETS, bits_to_torch,
                                           check_torch_casts, require_torch, torch_to_bits)
from fpspec.cli import main
from fpspec.errors import FpspecError
from fpspec.vectors.checker import format_text
from fpspec.vectors.declare import Declaration, load_declaration
from fpspec.vectors.harness import Harness

ROOT = Path(__file__).resolve().parent.parent
PACK = ROOT / "vectors" / "v1"
EXAMPLES = ROOT / "docs" / "examples"
DECLARATIONS = ROOT / "vectors" / "declarations"


def _example():
    spec = importlib.util.spec_from_file_location("torch_ue5m3_quantizer", EXAMPLES / "torch_ue5m3_quantizer.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def torch_report():
    return check_torch_casts(PACK, device="cpu", select=TORCH_FLOAT8_SETS)


def _status(report):
    return {(o.set, o.output): o for o in report.outputs}


def test_torch_float8_casts_pass_what_they_declare(torch_report):
    """FPS-CHK-9, FPS-CHK-5: torch 2.13 CPU casts pass every output of their declaration
    (vectors/declarations/torch-2.13.yaml), the E8M0 casts included."""
    report, _ = torch_report
    st = _status(report)
    passing = [("decode-e4m3", "value"), ("decode-e5m2", "value"), ("decode-ue8m0", "value"),
               ("decode-fp16", "value"), ("decode-bf16", "value"),
               ("encode-fp16-e4m3-exhaustive", "rne_ovf_sat"), ("encode-bf16-e4m3-exhaustive", "rne_ovf_sat"),
               ("encode-fp32-e4m3-boundary", "rne_ovf_sat"), ("encode-fp16-e5m2-exhaustive", "rne"),
               ("encode-bf16-e5m2-exhaustive", "rne"), ("encode-fp32-e5m2-boundary", "rne"),
               ("encode-fp16-ue8m0-exhaustive", "rne_bits_zero_min_neg_abs"),
               ("encode-bf16-ue8m0-exhaustive", "rne_bits_zero_min_neg_abs"),
               ("encode-fp32-ue8m0-boundary", "rne_bits_zero_min_neg_abs")]
    for key in passing:
        assert st[key].status == "pass", key
    assert sorted(k for k, o in st.items() if o.status == "pass") == sorted(passing)
    # NaN payloads differ (torch keeps FP16/BF16 payloads): accepted only because they are declared
    assert st[("decode-fp16", "value")].nan_equivalent > 0
    # torch's e4m3 cast saturates: the ml_dtypes-style output (NaN past 464) is not claimed
    assert st[("encode-fp16-e4m3-exhaustive", "rne")].status == "not-supported"
    assert st[("encode-fp16-e4m3-exhaustive", "rtz")].status == "not-supported"
    assert report.exit_code == 0


def test_torch_e8m0_is_rne_bits_with_abs_and_zero_min(torch_report):
    """FPS-CHK-9, FPS-RND-11, FPS-RND-15: torch's E8M0 cast equals fpspec rne-bits with
    negative=abs, zero=min on every FP32 boundary input; the older approximation rna_zero_min
    differs exactly on negative inputs (torch drops the sign) and FP32 subnormals above 2^-127
    (torch rounds them up to 2^-126)."""
    from fpspec.convert import encode

    report, h = torch_report
    vs = h.pack.load("encode-fp32-ue8m0-boundary")
    x = vs.inputs["x"].view(np.float32)
    got = torch.from_numpy(x.copy()).to(torch.float8_e8m0fnu).view(torch.uint8).numpy()
    assert np.array_equal(got, encode(x, "ue8m0", "rne-bits", negative="abs", zero="min"))
    assert np.array_equal(got, vs.outputs["rne_bits_zero_min_neg_abs"])
    bad = got != vs.outputs["rna_zero_min"]
    neg = np.signbit(x) & ~np.isnan(x) & (x != 0)
    sub = (vs.inputs["x"] & 0x7F800000) == 0
    assert bad.any() and not (bad & ~neg & ~sub).any()
    # 2^-127 + 2^-149 (0x00400001) -> torch 2^-126 (code 1); rna gives 2^-127 (code 0)
    t = torch.tensor([0x00400001], dtype=torch.int32).view(torch.float32).to(torch.float8_e8m0fnu)
    assert int(t.view(torch.uint8)) == 1


def test_undeclared_e4m3_saturation_would_fail_only_on_overflow():
    """FPS-CHK-5: claiming ml_dtypes' E4M3 overflow (NaN; torch 2.11's behaviour) instead fails
    exactly the overflow cases."""
    decl = dict(TORCH_FLOAT8_DECLARATION, policies={"ue8m0": {"zero": "min", "negative": "abs"}})
    report, _ = check_torch_casts(PACK, select="encode-fp16-e4m3-exhaustive", declaration=decl)
    (o,) = [o for o in report.outputs if o.status != "not-supported"]
    assert o.output == "rne" and o.status == "fail"
    assert o.tag_counts["overflow"] == o.mismatched_cases > 0


def test_declaration_file_matches_the_adapter():
    """FPS-CHK-5: vectors/declarations/torch-2.13.yaml is the adapter's declaration for torch >= 2.12."""
    assert load_declaration(DECLARATIONS / "torch-2.13.yaml") == Declaration.from_mapping(TORCH_FLOAT8_DECLARATION)


def test_example_quantizer_passes(tmp_path, capsys):
    """FPS-CHK-9, FPS-BLK-3: the pure-torch UE5M3 (seed-fp32) quantizer passes all its sets, via the CLI."""
    ex = _example()
    h = Harness(PACK, load_declaration(EXAMPLES / "torch_ue5m3_seed_fp32.yaml"))
    names = []
    for s in h.sets():
        names.append(s.name)
        s.submit(ex.run_set(s.meta, s.inputs, "cpu"))
    assert names == ["quantize-ue5m3-seed-fp32-16x16", "quantize-ue5m3-seed-fp32-1x16",
                     "quantize-ue5m3-seed-fp32-1x16-colwise", "quantize-ue5m3-seed-fp32-1x16-t2048",
                     "quantize-ue5m3-seed-fp32-1x16-witness"]
    h.save(tmp_path / "res")
    code = main(["check", str(PACK), str(tmp_path / "res"), "--declare",
                 str(EXAMPLES / "torch_ue5m3_seed_fp32.yaml"), "--verbose"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "pass 20; exit 0" in out
    assert "quantize-ue5m3-seed-fp32-1x16-sr-midpoint/codes" in out and "rounding sr-midpoint/8 not declared" in out


@pytest.mark.slow
@pytest.mark.parametrize("bug,tag", [("no-zero-scale-rule", "zero_scale"), ("ties-away", "tie")])
def test_wrong_quantizer_is_rejected(bug, tag, tmp_path, capsys):
    """FPS-CHK-9, FPS-CHK-4: a deliberately wrong variant exits 1 with a decoded report whose
    mismatches all carry the tag of the broken rule."""
    ex = _example()
    h = Harness(PACK, load_declaration(EXAMPLES / "torch_ue5m3_seed_fp32.yaml"))
    for s in h.sets():
        s.submit(ex.run_set(s.meta, s.inputs, "cpu", bug=bug))
    h.save(tmp_path / "res")
    code = main(["check", str(PACK), str(tmp_path / "res"), "--declare",
                 str(EXAMPLES / "torch_ue5m3_seed_fp32.yaml"), "--max-report", "5"])
    out = capsys.readouterr().out
    assert code == 1
    assert "MISMATCH quantize-ue5m3-seed-fp32-" in out and f"{tag}=" in out
    rep = h.report(max_report=1000)
    assert rep.mismatches and all(tag in m.tags for m in rep.mismatches)
    # the checker names the choice the wrong quantizer made, on each set it fails
    choice = {"no-zero-scale-rule": "the zero-scale rule off", "ties-away": "payload rounding rna"}[bug]
    failing = {o.set for o in rep.outputs if o.status == "fail"}
    assert failing >= {"quantize-ue5m3-seed-fp32-16x16", "quantize-ue5m3-seed-fp32-1x16",
                       "quantize-ue5m3-seed-fp32-1x16-colwise", "quantize-ue5m3-seed-fp32-1x16-t2048"}
    assert rep.explanations == {name: f"your outputs match ue5m3/seed-fp32 with {choice}" for name in failing}
    assert f"EXPLAIN quantize-ue5m3-seed-fp32-1x16: your outputs match ue5m3/seed-fp32 with {choice}" in out
    if bug == "no-zero-scale-rule":
        # scale code 0 instead of 0x78 (1.0), and payloads saturated at +-6 instead of 0
        assert "expected      0x78 ue5m3 e=01111 m=000 = 1" in format_text(rep, 1000)
        assert "got           0x00 ue5m3 e=00000 m=000 = 0" in format_text(rep, 1000)
    else:
        m = next(m for m in rep.mismatches if m.output == "codes")
        assert m.distance in (1, -1)


def test_adapter_bits_round_trip():
    """FPS-CHK-9: bit patterns pass through tensors unchanged, for every dtype width."""
    for fmt, bits in (("e4m3", np.arange(256, dtype=np.uint8)), ("bf16", np.arange(0, 65536, 7, dtype=np.uint16)),
                      ("fp32", np.array([0x7FC00001, 0x80000000, 0x00000001, 0xFF800000], dtype=np.uint32))):
        t = bits_to_torch(bits, fmt)
        assert np.array_equal(torch_to_bits(t), bits)


def test_adapter_without_torch(monkeypatch):
    """FPS-CHK-9: torch is imported lazily; without it the message says how to install it."""
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(FpspecError, match="pip install"):
        require_torch()
