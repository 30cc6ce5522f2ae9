"""The float8 declarations of public implementations, checked on the real packages (FPS-CHK-5, FPS-CHK-9).

Each installable implementation runs on the level-1 pack's decode and encode sets (its one
cast per set written under every output name), and ``fpspec check`` then passes with its
declaration in vectors/declarations/ and fails (exit 1, first mismatch printed) without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fpspec.adapters.ml_dtypes_vectors import (ML_DTYPES_06_DECLARATION, ML_DTYPES_07_DECLARATION, ML_DTYPES_SETS,
                                               ml_dtypes_declaration, write_ml_dtypes_cast_results)
from fpspec.adapters.torch_vectors import (TORCH_211_FLOAT8_DECLARATION, TORCH_FLOAT8_DECLARATION,
                                           TORCH_FLOAT8_SETS, torch_float8_declaration, write_torch_cast_results)
from fpspec.cli import main
from fpspec.vectors.declare import Declaration, load_declaration

ROOT = Path(__file__).resolve().parent.parent
PACK = ROOT / "vectors" / "v1"
DECL = ROOT / "vectors" / "declarations"
#: Where a torch 2.11 CPU build would live (a scratch virtual environment, outside the tree).
TORCH_211_VENV = Path(os.environ.get("FPSPEC_TORCH211_PYTHON", "/work/scratch/venv-torch211/bin/python"))


def _check(results: Path, select: str, declare: Path | None, capsys) -> tuple[int, str]:
    args = ["check", str(PACK), str(results), "--select", select, "--max-report", "3", "--verbose"]
    if declare is not None:
        args += ["--declare", str(declare)]
    code = main(args)
    return code, capsys.readouterr().out


@pytest.fixture(scope="module")
def ml_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("ml_dtypes")
    assert write_ml_dtypes_cast_results(PACK, out) == 18
    return out


@pytest.fixture(scope="module")
def torch_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("torch")
    assert write_torch_cast_results(PACK, out, device="cpu") == 14
    return out


def test_declaration_files_equal_the_adapters():
    """FPS-CHK-5: each file in vectors/declarations/ is the declaration its adapter uses."""
    assert load_declaration(DECL / "ml_dtypes-0.6.yaml") == Declaration.from_mapping(ML_DTYPES_06_DECLARATION)
    assert load_declaration(DECL / "ml_dtypes-0.7.yaml") == Declaration.from_mapping(ML_DTYPES_07_DECLARATION)
    assert ml_dtypes_declaration("0.5.4") is ML_DTYPES_06_DECLARATION
    assert ml_dtypes_declaration("0.6.0") is ML_DTYPES_06_DECLARATION
    assert ml_dtypes_declaration("0.7.0") is ML_DTYPES_07_DECLARATION
    assert load_declaration(DECL / "torch-2.13.yaml") == Declaration.from_mapping(TORCH_FLOAT8_DECLARATION)
    assert load_declaration(DECL / "torch-2.11.yaml") == Declaration.from_mapping(TORCH_211_FLOAT8_DECLARATION)
    assert torch_float8_declaration("2.11.0+cu130") is TORCH_211_FLOAT8_DECLARATION
    assert torch_float8_declaration("2.12.0") is TORCH_FLOAT8_DECLARATION
    assert torch_float8_declaration("2.13.0+cpu") is TORCH_FLOAT8_DECLARATION


def _ml_dtypes_e8m0_output() -> str:
    """The E8M0 output the installed ml_dtypes claims: rne_bits before 0.7, rna from 0.7."""
    return "rna" if ml_dtypes_declaration() is ML_DTYPES_07_DECLARATION else "rne_bits"


def test_ml_dtypes_passes_with_its_declaration(ml_results, capsys):
    """FPS-CHK-5, FPS-CHK-9, FPS-RND-13, FPS-RND-15: ml_dtypes' casts pass every output the
    declaration of the installed release claims (decode of six formats; encode to e2m1 with
    nan=flipped-zero, e4m3 with fpspec's defaults, e5m2 with nan=quiet, ue8m0 with rne-bits
    before 0.7 and rna from 0.7), 18 outputs, exit 0."""
    decl = ml_dtypes_declaration()
    code, out = _check(ml_results, ML_DTYPES_SETS, DECL / f"{decl['name']}.yaml", capsys)
    assert code == 0, out
    assert "summary: not-supported 66, pass 18; exit 0" in out
    for claimed in ("encode-fp32-e2m1-boundary/rne_nan_flipped_zero", "encode-fp32-e5m2-boundary/rne_nan_quiet",
                    f"encode-fp32-ue8m0-boundary/{_ml_dtypes_e8m0_output()}", "encode-bf16-e4m3-exhaustive/rne"):
        assert any(line.startswith(claimed + " ") and " pass " in line for line in out.splitlines()), claimed


def test_ml_dtypes_fails_without_its_declaration(ml_results, capsys):
    """FPS-CHK-4, FPS-CHK-5: without the declaration every output of the sets is expected; the
    check exits 1 and prints the first mismatch field by field."""
    code, out = _check(ml_results, ML_DTYPES_SETS, None, capsys)
    assert code == 1
    first = out.split("MISMATCH", 2)[1]
    assert "expected" in first and "got" in first and " = " in first


@pytest.mark.parametrize("fmt,policy,output,tag", [
    ("e2m1", {"nan": "flipped-zero"}, "encode-fp32-e2m1-boundary/rne", "nan_input"),
    ("e5m2", {"nan": "quiet"}, "encode-fp32-e5m2-boundary/rne", "nan_input"),
])
def test_each_ml_dtypes_policy_is_needed(ml_results, fmt, policy, output, tag, capsys):
    """FPS-CHK-5, FPS-RND-10: dropping one declared NaN policy claims the default-policy output
    instead, which then fails exactly on NaN inputs."""
    from fpspec.vectors.checker import check

    ours = ml_dtypes_declaration()
    decl = dict(ours, policies={k: v for k, v in ours["policies"].items() if k != fmt})
    rep = check(PACK, ml_results, select=ML_DTYPES_SETS, declaration=Declaration.from_mapping(decl))
    o = {f"{x.set}/{x.output}": x for x in rep.outputs}[output]
    assert o.status == "fail" and o.tag_counts[tag] == o.mismatched_cases > 0
    assert rep.exit_code == 1


def test_ml_dtypes_e8m0_rounding_is_the_release_s(ml_results):
    """FPS-RND-15: claimed with the other release's E8M0 rounding (rna before 0.7, rne-bits from
    0.7), ml_dtypes' E8M0 fails exactly on the FP32/BF16 subnormals strictly between 2^-127
    and 1.5 * 2^-127 (31 BF16 cases, 5 FP32 boundary cases), where 0.7 changed."""
    from fpspec.vectors.checker import check

    ours = ml_dtypes_declaration()
    other = ML_DTYPES_06_DECLARATION if ours is ML_DTYPES_07_DECLARATION else ML_DTYPES_07_DECLARATION
    decl = dict(ours, rounding=other["rounding"])
    rep = check(PACK, ml_results, select="encode-*-ue8m0-*", declaration=Declaration.from_mapping(decl))
    fails = {f"{o.set}/{o.output}": o.mismatched_cases for o in rep.outputs if o.status == "fail"}
    name = "rne_bits" if other is ML_DTYPES_06_DECLARATION else "rna"
    assert fails == {f"encode-bf16-ue8m0-exhaustive/{name}": 31, f"encode-fp32-ue8m0-boundary/{name}": 5}
    assert all("subnormal_input" in m.tags for m in rep.mismatches)


def test_torch_213_passes_with_its_declaration(torch_results, capsys):
    """FPS-CHK-5, FPS-CHK-9: torch >= 2.12's float8 casts (2.13 CPU here) pass all 14 outputs of
    torch-2.13.yaml, E8M0 included (rne-bits, zero=min, negative=abs); exit 0."""
    import torch

    assert torch_float8_declaration(torch.__version__) is TORCH_FLOAT8_DECLARATION
    code, out = _check(torch_results, TORCH_FLOAT8_SETS, DECL / "torch-2.13.yaml", capsys)
    assert code == 0, out
    assert "pass 14; exit 0" in out
    assert "encode-fp32-ue8m0-boundary/rne_bits_zero_min_neg_abs" in out


def test_torch_213_fails_without_its_declaration_and_with_the_211_one(torch_results, capsys):
    """FPS-CHK-4, FPS-CHK-5: without a declaration the check exits 1 with a readable first mismatch;
    with torch 2.11's declaration (E4M3 overflow -> NaN) it fails exactly the E4M3 overflow cases."""
    code, out = _check(torch_results, TORCH_FLOAT8_SETS, None, capsys)
    assert code == 1 and "MISMATCH" in out and "expected" in out
    code, out = _check(torch_results, TORCH_FLOAT8_SETS, DECL / "torch-2.11.yaml", capsys)
    assert code == 1
    failing = [line.split()[0] for line in out.splitlines()
               if line.split()[1:2] == ["fail"] and "/" in line.split()[0]]
    assert failing == ["encode-bf16-e4m3-exhaustive/rne", "encode-fp16-e4m3-exhaustive/rne",
                       "encode-fp32-e4m3-boundary/rne"], out
    assert all("overflow" in line or "inf_input" in line
               for line in out.splitlines() if line.startswith("MISMATCH"))


def test_torch_213_e4m3_saturates_infinity_too():
    """FPS-RND-9: torch >= 2.12 sends 465, 1e9 and +-Inf to +-448 (0x7E/0xFE), fpspec overflow=sat;
    torch 2.11 gave NaN there on CPU and CUDA alike (pytorch#178817)."""
    import torch

    from fpspec.convert import encode

    x = np.array([464.0, 465.0, 1e9, np.inf, -np.inf], dtype=np.float32)
    got = torch.from_numpy(x).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    assert got.tolist() == [0x7E, 0x7E, 0x7E, 0x7E, 0xFE]
    assert encode(x, "e4m3", overflow="sat").tolist() == got.tolist()
    assert encode(x, "e4m3").tolist() == [0x7E, 0x7F, 0x7F, 0x7F, 0xFF]  # what torch 2.11 gives


def _torch_211_python() -> str | None:
    import torch

    if torch.__version__.startswith("2.11."):
        return sys.executable
    return str(TORCH_211_VENV) if TORCH_211_VENV.exists() else None


@pytest.mark.skipif(_torch_211_python() is None, reason=(
    "torch 2.11 cannot run here: PyPI's torch 2.11.0 for Linux is the 530 MB CUDA build with "
    "multi-GB nvidia-* dependencies, and the CPU index download.pytorch.org is unreachable. "
    "Run on the GPU machine: python3 -m tools.gpu.gpu_check --pack vectors/v1 --out OUT "
    "--device cuda --declaration vectors/declarations/torch-2.11.yaml --float8-only"))
def test_torch_211_passes_with_its_declaration(tmp_path, capsys):
    """FPS-CHK-5, FPS-CHK-9: torch 2.11's casts (a scratch environment, or the installed torch
    when it is 2.11) pass torch-2.11.yaml and fail without it."""
    py = _torch_211_python()
    code = ("import sys; from fpspec.adapters.torch_vectors import write_torch_cast_results as w; "
            "import torch; assert torch.__version__.startswith('2.11'), torch.__version__; "
            f"w({str(PACK)!r}, sys.argv[1], device='cpu')")
    subprocess.run([py, "-c", code, str(tmp_path / "r")], check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    code_, out = _check(tmp_path / "r", TORCH_FLOAT8_SETS, DECL / "torch-2.11.yaml", capsys)
    assert code_ == 0, out
    assert _check(tmp_path / "r", TORCH_FLOAT8_SETS, None, capsys)[0] == 1
