"""The committed H200 reports and the page rendered from them (FPS-PRB-15)."""

from __future__ import annotations

import json
from pathlib import Path

import fpspec_probe
import pytest

ROOT = Path(__file__).resolve().parents[1]
REPORTS = sorted((ROOT / "docs" / "probe-reports").glob("h200-*.json"))


def test_fps_prb_15_page_is_rendered_from_the_reports():
    """FPS-PRB-15: docs/probe-h200.rst is the committed reports rendered when the docs build: one
    section per report, each with its call and its acceptance count as the report has them."""
    assert REPORTS, "no committed H200 reports"
    assert ".. fpspec-probe-reports::" in (ROOT / "docs" / "probe-h200.rst").read_text()
    text = "\n".join(fpspec_probe.render())
    for path in REPORTS:
        r = json.loads(path.read_text())
        title = f"``{path.stem.removeprefix('h200-')}``"
        a = r["acceptance"]
        assert f"\n{title}\n{'-' * len(title)}\n\nCall: ``{r['target']['call']}``\n" in text, path.name
        assert f"{a['matched']:,}/{a['compared']:,} (100.0000 %)" in text, path.name


@pytest.mark.parametrize("path", REPORTS, ids=[p.stem for p in REPORTS])
def test_fps_prb_15_h200_reports_pass_acceptance(path):
    """FPS-PRB-15: every committed H200 report compared >= 100,000 outputs over K from 256 to
    16384 and matched all of them."""
    r = json.loads(path.read_text())
    a = r["acceptance"]
    assert a["compared"] >= 100_000 and a["matched"] == a["compared"] and a["passed"] is True
    ks = {s["shape"][2] for s in a["per_shape"]}
    assert min(ks) == 256 and max(ks) == 16384
    assert r["findings"]["determinism"]["deterministic"] is True


def test_fps_prb_7_h200_fp8_keeps_13_bits():
    """FPS-PRB-7, FPS-PRB-9, FPS-GEMM-13: what the H200 showed for FP8 _scaled_mm: G = 32,
    F = 13, a 13-bit block result, promotion every 128 (RNE) with use_fast_accum=False
    only; the fit is exactly the km-h100-fp8(-promote128) preset."""
    slow = json.loads((ROOT / "docs/probe-reports/h200-torch-scaled-mm.json").read_text())
    fast = json.loads((ROOT / "docs/probe-reports/h200-torch-scaled-mm-fast.json").read_text())
    for r in (slow, fast):
        p = r["fitted"]["parameters"]
        assert (p["group_size"], p["window_bits"], p["accumulate_bits"], p["accumulate_rounding"]) == (32, 13, 13, "rz")
    assert (slow["fitted"]["parameters"]["promotion_interval"], slow["fitted"]["parameters"]["promotion_rounding"]) \
        == (128, "rne")
    assert fast["fitted"]["parameters"]["promotion_interval"] is None
    assert slow["nearest_preset"] == {"name": "km-h100-fp8-promote128", "differences": {}, "exact": True,
                                      "split_k": None}
    assert fast["nearest_preset"] == {"name": "km-h100-fp8", "differences": {}, "exact": True, "split_k": None}


@pytest.mark.parametrize("path", REPORTS, ids=[p.stem for p in REPORTS])
def test_fps_prb_15_presets_with_split_k_reproduce_the_h200(path):
    """FPS-PRB-15, FPS-GEMM-14: the nearest preset itself, with the library's split of K set
    per shape (split_k), reproduced every sampled H200 output; cuBLAS split K into slices
    of 2816 (FP8, 64 x 64 x 16384), 1408 (BF16/FP16, 64 x 64 x 4096 and x 16384), 8192
    (128 x 4096 x 16384) and 4096 (512 x 512 x 16384), nowhere else."""
    r = json.loads(path.read_text())
    pc = r["preset_check"]
    assert pc["preset"] == r["nearest_preset"]["name"]
    assert pc["compared"] >= 100_000 and pc["matched"] == pc["compared"]
    splits = {tuple(s["shape"]): s["split_k"] for s in pc["per_shape"] if s["split_k"]}
    if r["operand_format"] == "e4m3":
        assert splits == {(64, 64, 16384): 2816}
    else:
        assert splits == {(64, 64, 4096): 1408, (64, 64, 16384): 1408, (128, 4096, 16384): 8192,
                          (512, 512, 16384): 4096}


def test_fps_prb_15_raw_device_data_is_under_vectors():
    """FPS-PRB-15: the raw device output lives in vectors/provenance/h200/, not in docs/."""
    raw = ROOT / "vectors" / "provenance" / "h200"
    assert {p.name for p in raw.iterdir()} >= {"h200_reports.json", "h200_samples.npz", "h200_log.txt"}
    assert not (ROOT / "docs" / "probe-reports" / "raw").exists()


@pytest.mark.parametrize("target,preset,split", [("torch-scaled-mm", "km-h100-fp8-promote128", 2816),
                                                 ("torch-scaled-mm-fast", "km-h100-fp8", 2816),
                                                 ("torch-bf16", "km-h100-bf16", 1408)])
def test_fps_prb_15_raw_h200_samples_recomputed(target, preset, split):
    """FPS-PRB-15, FPS-GEMM-13, FPS-GEMM-14: recompute committed raw H200 samples with
    fpspec.matmul: the fixed preset matches every output at 64 x 64 x 1024 and, with
    split_k, at 64 x 64 x 16384; without split_k it does not match the latter, and with
    FP32-rounded block results (accumulate_bits = 23) FP8 does not match the former."""
    import numpy as np

    from fpspec.named_models import get_model
    from fpspec.probe.accept import check_samples

    raw = ROOT / "vectors" / "provenance" / "h200"
    data = json.loads((raw / "h200_reports.json").read_text())["targets"][target]
    arrays = np.load(raw / "h200_samples.npz")
    fmt = data["probe"]["operand_format"]
    by_shape = {tuple(m["shape"]): dict(m, bits=arrays[m["key"]]) for m in data["samples"]}
    short, long_ = [by_shape[(64, 64, 1024)]], [by_shape[(64, 64, 16384)]]
    assert check_samples(short, fmt, get_model(preset)).passed
    assert check_samples(long_, fmt, get_model(preset, split_k=split)).passed
    assert not check_samples(long_, fmt, get_model(preset)).passed
    if fmt == "e4m3":
        assert not check_samples(short, fmt, get_model(preset, accumulate_bits=23)).passed
