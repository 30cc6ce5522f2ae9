"""The C++ examples of docs/examples/ compile, run, and fpspec accepts what they write (FPS-OPD-1, FPS-OPD-2).

``plain_operands.cpp`` writes one case of a GEMM set as two plain operand v1 files;
``fpspec gemm`` of them must give the set's expected output bits and ``fpspec dequantize``
the Python path's values.  ``gemm_results.cpp`` computes an order-independent E4M3 set and
writes the results file that ``fpspec check`` passes.  Skipped where no C++17 compiler is found.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import fpspec
from fpspec.cli import main
from fpspec.io import load_npz
from fpspec.quantized import QuantizedTensor
from fpspec.vectors.schema import decode_meta

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
PACK = ROOT / "vectors" / "v1"
CXX = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")

pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++, c++ or clang++) on PATH")


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("cpp")
    built = {}
    for name in ("plain_operands", "gemm_results"):
        exe = out / name
        proc = subprocess.run([CXX, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                               str(EXAMPLES / f"{name}.cpp")], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        built[name] = exe
    return built


def _run(*args: object) -> None:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


#: (set, case, scheme, profile ("-": none), scale format, model of the set)
SETS = [
    ("gemm-exact-ue5m3-wide", 1, "ue5m3", "exact", "ue5m3", "exact"),
    ("gemm-seed-probe-matched-ue5m3-wide", 2, "ue5m3", "exact", "ue5m3", "seed-probe-matched"),
    ("gemm-sm100-mxf4nvf4-nvfp4", 0, "codes", "-", "ue4m3", "sm100-mxf4nvf4"),
    ("gemm-sm100-mxf4nvf4-mxfp4", 2, "codes", "-", "ue8m0", "sm100-mxf4nvf4"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,case,scheme,profile,scale_format,model", SETS, ids=[s[0] for s in SETS])
def test_fps_opd_2_cpp_plain_operands_give_the_sets_bits(programs, tmp_path, name, case, scheme, profile,
                                                         scale_format, model):
    """FPS-OPD-2: the C++ writer's plain operand files (no cnpy, no JSON) are read by ``fpspec gemm``
    to the set's expected output bits, and by ``fpspec dequantize`` to the values of the tensor the
    Python path builds from the same arrays."""
    set_path = PACK / f"{name}.npz"
    z = load_npz(set_path)
    operand = decode_meta(z["__meta__"], name)["operand"]
    assert (operand["scheme"], operand.get("profile", "-"), operand["scale_format"]) == (scheme, profile, scale_format)
    _run(programs["plain_operands"], set_path, case, scheme, profile, scale_format, tmp_path / "op")
    a, bt = tmp_path / "op-a.npz", tmp_path / "op-bt.npz"
    assert main(["gemm", str(a), str(bt), "--model", model, "--bits", "--out", str(tmp_path / "c.npy")]) == 0
    assert np.array_equal(np.load(tmp_path / "c.npy"), z["out_c"][case])
    qa = QuantizedTensor.from_npz(a)
    if scheme == "codes":  # instruction operands: no quantizer profile, so no dequantize formula
        assert np.array_equal(qa.codes, z["in_a_codes"][case]) and np.array_equal(qa.scales, z["in_a_scales"][case])
        return
    assert main(["dequantize", str(a), "--out", str(tmp_path / "d.npy")]) == 0
    ref = QuantizedTensor(codes=z["in_a_codes"][case], scales=z["in_a_scales"][case], scale_format=scale_format,
                          block=operand["block"], tile=operand["tile"],
                          encode_scale=z["in_a_encode_scale"][case].view(np.float32),
                          decode_scale=z["in_a_decode_scale"][case].view(np.float32),
                          amax=z["in_a_amax"][case].view(np.float32), scheme=scheme, profile=profile,
                          params={"target": str(int(operand["target"]))})
    assert np.float32(qa.decode_scale) == np.float32(ref.decode_scale)
    assert np.array_equal(np.load(tmp_path / "d.npy").view(np.uint32), fpspec.dequantize(ref).view(np.uint32))


def test_fps_opd_1_cpp_results_pass_the_checker(programs, tmp_path, capsys):
    """FPS-OPD-1: the C++ reader reads a pack set and its writer a results file that ``fpspec check``
    passes (exit 0); a result changed by one bit fails (exit 1)."""
    results = tmp_path / "results"
    results.mkdir()
    name = "gemm-order-independent-e4m3"
    _run(programs["gemm_results"], PACK / f"{name}.npz", results)
    assert main(["check", str(PACK), str(results), "--select", name]) == 0
    out = load_npz(results / f"{name}.npz")["out_c"]
    assert np.array_equal(out, load_npz(PACK / f"{name}.npz")["out_c"])
    out = out.copy()
    out[0, 0, 0] ^= 1
    np.savez(results / f"{name}.npz", out_c=out)
    capsys.readouterr()
    assert main(["check", str(PACK), str(results), "--select", name]) == 1
