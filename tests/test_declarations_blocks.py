"""The block-quantization declarations of public implementations, checked on the real references
(FPS-CHK-5, FPS-BLK-18, FPS-BLK-23, FPS-BLK-24, FPS-BLK-25).

Each reference runs on the level-1 pack's quantize sets through its module in ``tools/`` (which
writes ``RESULTS/<set>.npz``), and ``fpspec check`` then passes with its declaration in
``vectors/declarations/`` and fails (exit 1, the first mismatch decoded) without it.

Where each reference comes from (none of them is part of fpspec):

* torchao 0.18.0 is on the package index: ``pip install -e ".[dev]"`` installs it (extra
  ``refs``).  Where the running interpreter lacks it, ``FPSPEC_TORCHAO_PYTHON`` may name a
  python that has it (for example a scratch virtual environment); otherwise the tests skip.
* TransformerEngine's ``reference_nvfp4.py``, microxcaling's ``mx`` package and the seed's
  ``formats.py`` are files of public repositories that a test cannot fetch: set
  ``FPSPEC_TE_REFERENCE`` (the path of ``reference_nvfp4.py``), ``FPSPEC_MICROXCALING`` (the
  folder holding ``mx``) and ``FPSPEC_SEED_FORMATS`` (the path of ``formats.py``); each test
  skips, saying which variable it needs, when its variable is unset.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fpspec.cli import main
from fpspec.vectors.declare import load_declaration
from fpspec.vectors.pack import Pack

#: The whole module is in the slow lane (python3 -m pytest -m "not slow" leaves it out).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PACK = ROOT / "vectors" / "v1"
DECL = ROOT / "vectors" / "declarations"

#: declaration file -> (its supported outputs in vectors/v1, the sets they belong to)
EXPECTED = {
    "torchao-0.18.yaml": (20, ["quantize-mxfp4-torchao-0.18-ceil-1x32", "quantize-mxfp4-torchao-0.18-even-1x32",
                               "quantize-mxfp4-torchao-0.18-floor-1x32", "quantize-mxfp4-torchao-0.18-rceil-1x32",
                               "quantize-nvfp4-torchao-0.18-1x16"]),
    "torchao-0.18-cuda.yaml": (20, ["quantize-mxfp4-torchao-0.18-ceil-1x32", "quantize-mxfp4-torchao-0.18-even-1x32",
                                    "quantize-mxfp4-torchao-0.18-floor-1x32",
                                    "quantize-mxfp4-torchao-0.18-rceil-cuda-1x32",
                                    "quantize-nvfp4-torchao-0.18-cuda-1x16"]),
    "microxcaling.yaml": (12, ["quantize-mxfp4-microxcaling-1x32", "quantize-mxfp4-microxcaling-1x32-rna",
                               "quantize-mxfp4-microxcaling-1x32-rtz"]),
    "transformer-engine.yaml": (16, ["quantize-nvfp4-te-fp32-16x16", "quantize-nvfp4-te-fp32-1x16",
                                     "quantize-nvfp4-te-fp32-1x16-colwise-rht", "quantize-nvfp4-te-fp32-1x16-witness"]),
    "seed-ue5m3.yaml": (36, ["quantize-ue5m3-seed-fp32-16x16", "quantize-ue5m3-seed-fp32-1x16",
                             "quantize-ue5m3-seed-fp32-1x16-colwise", "quantize-ue5m3-seed-fp32-1x16-sr-midpoint",
                             "quantize-ue5m3-seed-fp32-1x16-sr-midpoint-witness",
                             "quantize-ue5m3-seed-fp32-1x16-t2048", "quantize-ue5m3-seed-fp32-1x16-witness",
                             "quantize-ue5m3-seed-portable-1x16", "quantize-ue5m3-seed-portable-1x16-witness"]),
}


def _check(results: Path, capsys, declare: str | None = None, select: str | None = None) -> tuple[int, str]:
    args = ["check", str(PACK), str(results), "--max-report", "3", "--verbose"]
    if declare:
        args += ["--declare", str(DECL / declare)]
    if select:
        args += ["--select", select]
    code = main(args)
    return code, capsys.readouterr().out


def _tool(python: str, module: str, *args: str) -> str:
    """Run ``python -m tools.<module>`` from the root of this tree; its output (it must succeed)."""
    proc = subprocess.run([python, "-m", f"tools.{module}", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


def _env_path(var: str, what: str) -> Path:
    value = os.environ.get(var)
    if not value:
        pytest.skip(f"{var} is not set: {what}")
    path = Path(value)
    if not path.exists():
        pytest.fail(f"{var}={value} does not exist")
    return path


def _passes_exactly(out: str, n: int) -> None:
    assert f"pass {n}; exit 0" in out and " fail " not in out, out[-3000:]


def _fails_readably(code: int, out: str) -> None:
    assert code == 1, out[-3000:]
    first = out.split("MISMATCH", 2)[1]
    assert "expected" in first and "got" in first and " = " in first


def test_block_declarations_select_their_sets():
    """FPS-CHK-5: each block declaration is valid and selects exactly the sets of its profiles in
    vectors/v1 (every declared profile has a set), with the stated number of outputs."""
    pack = Pack(PACK)
    metas = {name: pack.load(name).meta for name in pack.names()}
    for fname, (n_out, sets) in EXPECTED.items():
        decl = load_declaration(DECL / fname)
        sel = {name: [o for o in meta["outputs"] if decl.supports(meta, o)[0]] for name, meta in metas.items()}
        sel = {k: v for k, v in sel.items() if v}
        assert sorted(sel) == sets, fname
        assert sum(len(v) for v in sel.values()) == n_out, fname
        assert {metas[s]["profile"] for s in sets} == set(decl.profiles), fname


# ------------------------------------------------------------------ torchao 0.18.0
def _torchao_python() -> str:
    if importlib.util.find_spec("torchao") is not None:
        return sys.executable
    other = os.environ.get("FPSPEC_TORCHAO_PYTHON")
    if other:
        return other
    pytest.skip("torchao 0.18.0 is not installed: pip install -e '.[dev]' (extra refs) installs it, or set "
                "FPSPEC_TORCHAO_PYTHON to a python that has it")


@pytest.fixture(scope="module")
def torchao_results(tmp_path_factory):
    py = _torchao_python()
    out = tmp_path_factory.mktemp("torchao")
    log = _tool(py, "compare_torchao_mx", str(PACK), "--out", str(out))
    assert "torchao 0.18.0," in log, log  # the version the declaration was measured on
    _tool(py, "compare_torchao_nvfp4", "--pack", str(PACK), "--out", str(out), "--select", "quantize-nvfp4-*")
    return out


def test_torchao_passes_with_its_declaration(torchao_results, capsys):
    """FPS-CHK-5, FPS-BLK-18, FPS-BLK-23: torchao 0.18.0's to_mx (FLOOR, CEIL, EVEN, RCEIL) and its
    two-level NVFP4 pass all 20 outputs of torchao-0.18.yaml: the mxfp4 torchao-0.18-* profiles
    (scale byte 0, RCEIL's binary32 log2) and nvfp4/torchao-0.18; exit 0."""
    code, out = _check(torchao_results, capsys, "torchao-0.18.yaml")
    assert code == 0, out
    _passes_exactly(out, 20)


def test_torchao_fails_without_its_declaration(torchao_results, capsys):
    """FPS-CHK-4, FPS-CHK-5: without the declaration torchao's results are checked against the OCP
    profiles' sets too, and fail (exit 1) on the scale-byte-0 and float-log2 cases, the first
    mismatch decoded field by field."""
    code, out = _check(torchao_results, capsys, None, "quantize-mxfp4-floor-1x32,quantize-mxfp4-ceil-1x32,"
                       "quantize-mxfp4-even-1x32,quantize-mxfp4-rceil-1x32")
    _fails_readably(code, out)
    assert "quantize-mxfp4-rceil-1x32/scales" in out and "profile_dependent" in out


# ------------------------------------------------------------------ microxcaling
@pytest.fixture(scope="module")
def microxcaling_results(tmp_path_factory):
    pytest.importorskip("torch")
    root = _env_path("FPSPEC_MICROXCALING", "the folder holding microsoft/microxcaling's mx package (commit "
                     "7bc41952de394f5cc5e782baf132e7c7542eb4e4; not on the package index)")
    out = tmp_path_factory.mktemp("microxcaling")
    _tool(sys.executable, "compare_microxcaling", str(root), str(PACK), "--out", str(out))
    return out


def test_microxcaling_passes_with_its_declaration(microxcaling_results, capsys):
    """FPS-CHK-5, FPS-BLK-24: microxcaling's _quantize_mx (even, nearest, floor) passes all 12 outputs
    of microxcaling.yaml (profile mxfp4/microxcaling, rne/rna/rtz); exit 0."""
    code, out = _check(microxcaling_results, capsys, "microxcaling.yaml")
    assert code == 0, out
    _passes_exactly(out, 12)


def test_microxcaling_fails_without_its_declaration(microxcaling_results, capsys):
    """FPS-CHK-4: checked as the OCP floor profile, microxcaling fails (exit 1): -0.0 becomes +0 and
    its binary32 log2 moves the scale of amaxes just below a power of two."""
    code, out = _check(microxcaling_results, capsys, None, "quantize-mxfp4-floor-*")
    _fails_readably(code, out)
    assert "quantize-mxfp4-floor-1x32/scales" in out and "negative_zero" in out


# ------------------------------------------------------------------ TransformerEngine
@pytest.fixture(scope="module")
def te_results(tmp_path_factory):
    pytest.importorskip("torch")
    ref = _env_path("FPSPEC_TE_REFERENCE", "the path of TransformerEngine's transformer_engine/pytorch/"
                    "custom_recipes/reference_nvfp4.py (commit d0067d0da6cb01811b8072a7d304f0e00344ce2b)")
    out = tmp_path_factory.mktemp("te")
    _tool(sys.executable, "compare_te_nvfp4", str(ref), "--pack", str(PACK), "--out", str(out))
    return out


def test_transformer_engine_passes_with_its_declaration(te_results, capsys):
    """FPS-CHK-5, FPS-BLK-8: NVFP4QuantizerRef passes the 16 outputs of transformer-engine.yaml
    (te-fp32: 1x16, 16x16, columnwise with RHT, the mutant-witness cases); exit 0."""
    code, out = _check(te_results, capsys, "transformer-engine.yaml")
    assert code == 0, out
    _passes_exactly(out, 16)


def test_transformer_engine_fails_without_its_declaration(te_results, capsys):
    """FPS-CHK-4: without the declaration the reference is also checked as te-kernel, exact and
    torchao-0.18 and fails (exit 1)."""
    code, out = _check(te_results, capsys, None, "quantize-nvfp4-*")
    _fails_readably(code, out)
    assert "quantize-nvfp4-torchao-0.18-1x16/scales" in out


# ------------------------------------------------------------------ the seed
def _seed_formats() -> Path:
    pytest.importorskip("torch")
    return _env_path("FPSPEC_SEED_FORMATS", "the path of MrHuff/ue5m3-fp4's src/ue5m3_fp4/formats.py (commit "
                     "59868e71c82fb48146742a62e2c1d8a5d2768a3b)")


@pytest.fixture(scope="module")
def seed_results(tmp_path_factory):
    formats = _seed_formats()
    out = tmp_path_factory.mktemp("seed")
    _tool(sys.executable, "compare_seed_ue5m3", str(formats), str(PACK), "--out", str(out))
    portable = tmp_path_factory.mktemp("seed-portable-order")
    _tool(sys.executable, "compare_seed_ue5m3", str(formats), str(PACK), "--out", str(portable),
          "--dequant", "portable")
    return out, portable


def test_seed_passes_with_its_declaration(seed_results, capsys):
    """FPS-CHK-5, FPS-BLK-3, FPS-BLK-25: the seed's portable reference (its own dequantization on the
    seed-portable set, the kernel's order on the seed-fp32 sets) passes all 24 outputs of
    seed-ue5m3.yaml, SR-midpoint set included; exit 0."""
    code, out = _check(seed_results[0], capsys, "seed-ue5m3.yaml")
    assert code == 0, out
    _passes_exactly(out, 24)


def test_seed_portable_order_fails_as_the_kernel_order(seed_results, capsys):
    """FPS-CHK-4, FPS-BLK-25: the portable reference's own dequantization, payload * (scale * gd),
    written for every set, fails the seed-fp32 sets (the kernel's order) in dequant only (exit 1):
    the two orders need two profile names."""
    code, out = _check(seed_results[1], capsys, "seed-ue5m3.yaml")
    _fails_readably(code, out)
    failing = {line.split()[0] for line in out.splitlines() if line.split()[1:2] == ["fail"] and "/" in line}
    assert failing == {f"quantize-ue5m3-seed-fp32-{s}/dequant"
                       for s in ("16x16", "1x16", "1x16-colwise", "1x16-sr-midpoint", "1x16-t2048")}, out
