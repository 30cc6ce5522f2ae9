"""One door per verb (fpspec.twins, docs/architecture.rst): the implementation is chosen once by
name, the resolved spec travels with a quantized tensor, and a verb given a resolved spec
resolves nothing again."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import fpspec
from fpspec.errors import FpspecError
from fpspec.quantization import dequantize, quantize
from fpspec.quantized import QuantizedTensor
from fpspec.schemes import resolve_spec
from fpspec.twins import TWIN_NAMES, Twin, choose_twin


def _x(m: int = 32, k: int = 64, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)) * 2.0 ** rng.uniform(-8, 8, (m, 1))).astype(np.float32)


def test_choose_twin_by_name_once():
    """Each name gives one twin, built once; a twin is taken as chosen."""
    assert TWIN_NAMES == ("fast", "exact", "torch")
    fast = choose_twin("fast")
    assert isinstance(fast, Twin) and fast.name == "fast"
    assert choose_twin("fast") is fast and choose_twin(fast) is fast
    assert choose_twin("exact").name == "exact" and not choose_twin("exact").block_amax_from_scan


@pytest.mark.parametrize("impl,message", [
    ("numba", r"impl must be 'fast' or 'exact' or 'torch', got 'numba'"),
    (3, r"impl must be 'fast' or 'exact' or 'torch', got 3"),
])
def test_every_verb_refuses_an_unknown_twin_by_name(impl, message):
    """An unknown name is refused with the names known."""
    x = _x(16, 16)
    qt = quantize(x, "ue5m3")
    calls = (lambda: fpspec.encode(x, "e2m1", impl=impl), lambda: fpspec.decode(qt.codes, "e2m1", impl=impl),
             lambda: quantize(x, "ue5m3", impl=impl), lambda: dequantize(qt, impl=impl),
             lambda: fpspec.gemm(qt, qt, "seed-probe-matched", impl=impl))
    for call in calls:
        with pytest.raises(FpspecError, match=message):
            call()


def test_quantize_carries_its_resolved_spec_and_takes_one():
    """FPS-BLK-15: ``qt.spec`` is the spec quantize resolved; quantize given it gives the same bits,
    and refuses a setting given beside it (it would be a second answer)."""
    x = _x()
    qt = quantize(x, "ue5m3", profile="seed-fp32", target=2048, rounding="rtz")
    spec = qt.spec
    assert spec == resolve_spec("ue5m3", "seed-fp32", target=2048, rounding="rtz")
    assert (spec.profile.name, spec.target, spec.rounding.value) == ("seed-fp32", 2048, "rtz")
    again = quantize(x, spec)
    assert (again.codes == qt.codes).all() and (again.scales == qt.scales).all()
    assert again.spec is spec and again.params == qt.params
    with pytest.raises(FpspecError, match="a resolved BlockSpec carries target, rounding"):
        quantize(x, spec, target=448, rounding="rne")
    with pytest.raises(FpspecError, match="scheme must be a scheme name .* or a resolved BlockSpec, got int 4"):
        quantize(x, 4)


def test_a_file_resolves_its_spec_once_on_load(tmp_path):
    """A tensor read from its file gets the spec its names and params resolve to (validate), equal to
    the one quantize made; row slices keep it."""
    qt = quantize(_x(), "ue5m3", profile="seed-fp32", rounding="sr", rbits=np.full((32, 64), 7, np.uint8))
    qt.to_npz(tmp_path / "q.npz")
    back = QuantizedTensor.from_npz(tmp_path / "q.npz")
    assert back.spec == qt.spec and back.spec.nbits == 8 and back.spec.rounding.value == "sr-midpoint"
    assert qt[3:5].spec is qt.spec
    bare = replace(qt, spec=None)
    assert bare.resolved_spec() == qt.spec and bare.spec is not None  # resolved once and kept


@pytest.mark.parametrize("scheme,profile,tile", [
    ("ue5m3", "exact", "1xB"), ("ue5m3", "seed-fp32", "BxB"), ("ue5m3", "seed-portable", "1xB"),
    ("nvfp4", "te-fp32", "1xB"), ("nvfp4", "torchao-0.18", "1xB"), ("mxfp4", "floor", "1xB"),
    ("mxfp8", "rceil", "1xB"),
])
def test_dequantize_exact_twin_equals_fast_through_the_verb(scheme, profile, tile):
    """FPS-BLK-14: ``dequantize(impl="exact")`` (fpspec.exact.dequant, every element by its formula on
    exact values) gives the fast table look-up's bits, signs of zeros included."""
    x = _x(32, 64, seed=len(profile))
    x[1, :] = -0.0
    qt = quantize(x, scheme, profile=profile, tile=tile)
    fast = dequantize(qt)
    exact = dequantize(qt, impl="exact")
    assert fast.dtype == exact.dtype == np.float32
    assert (fast.view(np.uint32) == exact.view(np.uint32)).all()
    assert np.signbit(exact).any() and (exact[1] == 0).all()  # (the zero row: each profile's signed-zero rule)


def _pair(seed: int = 3):
    return quantize(_x(8, 64, seed), "ue5m3"), quantize(_x(4, 64, seed + 1), "ue5m3")


def test_gemm_path_is_chosen_once_with_its_reason():
    """FPS-GEMM-10: gemm_path says which twin computes and why; the fast path declines what it does
    not carry (an exact alpha) by one function, and gemm gives the chosen twin's bits."""
    from fpspec.matmul import gemm_and_path, gemm_path

    qa, qb = _pair()
    path = gemm_path(qa, qb, "seed-probe-matched")
    assert (path.twin, path.resolution) == ("fast", None)
    assert path.reason.startswith("the fast path carries this model")
    assert gemm_path(qa, qb, "seed-probe-matched", impl="exact").reason == "impl='exact' asks for the executable spec"
    declined = gemm_path(qa, qb, "seed-probe-matched", alpha_rounding="exact")
    assert declined.twin == "exact"
    assert declined.reason == ("the fast path does not carry it: alpha is applied exactly "
                               "(alpha_rounding='exact'), not as an FP32 value")
    y, taken = gemm_and_path(qa, qb, "seed-probe-matched", alpha_rounding="exact")
    assert taken == declined
    assert (y.view(np.uint32) == fpspec.gemm(qa, qb, "seed-probe-matched", alpha_rounding="exact",
                                             impl="exact").view(np.uint32)).all()


def test_cli_gemm_explain(tmp_path):
    """``fpspec gemm --explain`` prints the path (text, or one JSON object with --json) and computes
    nothing without --out; a library preset's kernel comes with the basis of that answer."""
    import json
    import subprocess
    import sys

    qa, qb = _pair()
    qa.to_npz(tmp_path / "a.npz")
    qb.to_npz(tmp_path / "b.npz")

    def run(*args):
        return subprocess.run([sys.executable, "-m", "fpspec", "gemm", *map(str, args)], capture_output=True,
                              text=True)

    r = run(tmp_path / "a.npz", tmp_path / "b.npz", "--model", "seed-probe-matched", "--explain", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert (got["model"], got["implementation"], got["kernel"], got["blas_partials"]) == \
        ("seed-probe-matched", "fast", "gemm_block_sums_rows", False)
    assert got["parameters"]["group_size"] == 64 and not list(tmp_path.glob("*.npy"))
    x = _x(8, 64)
    np.save(tmp_path / "ca.npy", fpspec.encode(x, "bf16"))
    np.save(tmp_path / "cb.npy", fpspec.encode(x[:4], "bf16"))
    r = run(tmp_path / "ca.npy", tmp_path / "cb.npy", "--operand-format", "bf16", "--model", "cublas-h200-bf16",
            "--shape", "4096,4096,64", "--explain")
    assert r.returncode == 0, r.stderr
    assert "library: cublas-h200-bf16 at 4096x4096x64: nvjet_sm90_" in r.stdout
    assert "  basis: recorded\n" in r.stdout and "implementation: fast: " in r.stdout
    r = run(tmp_path / "ca.npy", tmp_path / "cb.npy", "--operand-format", "bf16", "--model", "cublas-h200-bf16",
            "--explain")
    assert "  basis: nearest (a guess, not a fact)\n" in r.stdout, r.stdout
    for args, message in (((), "--out is required (or --explain"), (("--json", "--out", tmp_path / "c.npy"),
                                                                      "--json is for --explain")):
        r = run(tmp_path / "a.npz", tmp_path / "b.npz", "--model", "seed-probe-matched", *args)
        assert r.returncode == 2 and message in r.stderr, r.stderr
