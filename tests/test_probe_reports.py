"""The committed H200 reports and the page rendered from them (FPS-PRB-15)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REPORTS = sorted((ROOT / "docs" / "probe-reports").glob("h200-*.json"))


def _tool():
    spec = importlib.util.spec_from_file_location("render_probe_h200", ROOT / "tools" / "render_probe_h200.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fps_prb_15_page_is_rendered_from_the_reports():
    """FPS-PRB-15: docs/probe-h200.rst is exactly what the committed reports render to."""
    assert REPORTS, "no committed H200 reports"
    assert _tool().main(["--check"]) == 0


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
    """FPS-PRB-7, FPS-PRB-9: what the H200 showed for FP8 _scaled_mm: G = 32, F = 13, a
    13-bit block result, promotion every 128 (RNE) with use_fast_accum=False only."""
    slow = json.loads((ROOT / "docs/probe-reports/h200-torch-scaled-mm.json").read_text())["fitted"]
    fast = json.loads((ROOT / "docs/probe-reports/h200-torch-scaled-mm-fast.json").read_text())["fitted"]
    for f in (slow, fast):
        assert (f["parameters"]["group_size"], f["parameters"]["window_bits"], f["accumulate_bits"]) == (32, 13, 13)
        assert f["parameters"]["accumulate_rounding"] == "rz"
    assert (slow["parameters"]["promotion_interval"], slow["parameters"]["promotion_rounding"]) == (128, "rne")
    assert fast["parameters"]["promotion_interval"] is None
