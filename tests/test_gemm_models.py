"""GEMM model parameters and presets: one rounding vocabulary (rtz, rz an alias), --set
values, refusal of bad parameters, and each preset's backing as data (FPS-GEMM-3,
FPS-GEMM-9, FPS-GEMM-11)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fpspec.cli import main
from fpspec.errors import FpspecError
from fpspec.matmul import gemm
from fpspec.cublas.library import LIBRARY, LIBRARY_PRESETS
from fpspec.models import GemmModel, parse_overrides
from fpspec.named_models import get_model
from fpspec.presets import BACKING_KINDS, INSTRUCTION_PRESETS, PRESETS

from gemm_helpers import wide_codes


# -------------------------------------------------------------- rtz vs rz
def test_fpsgemm3_rtz_is_canonical_rz_an_alias():
    """FPS-GEMM-3: round toward zero is ``rtz`` in every GEMM model field and preset (the
    conversions' RoundingMode name); ``rz`` is accepted wherever a model parameter is
    parsed (constructor, replace, get_model, --set) and stored as ``rtz``."""
    for p in PRESETS.values():
        m = p.model
        assert "rz" not in (m.group_rounding, m.accumulate_rounding, m.promotion_rounding), p.name
    assert PRESETS["km-h100-fp8"].model.accumulate_rounding == "rtz"
    assert PRESETS["seed-probe-matched"].model.accumulate_rounding == "rtz"
    m = GemmModel(group_rounding="rz", accumulate_rounding="rz", promotion_rounding="rz")
    assert (m.group_rounding, m.accumulate_rounding, m.promotion_rounding) == ("rtz", "rtz", "rtz")
    assert m == GemmModel(group_rounding="rtz", accumulate_rounding="rtz", promotion_rounding="rtz")
    assert PRESETS["exact"].model.replace(accumulate_rounding="rz").accumulate_rounding == "rtz"
    assert get_model("seed-probe-matched", group_rounding="rz").group_rounding == "rtz"
    assert get_model("seed-probe-matched", **parse_overrides(["group_rounding=RZ"])).group_rounding == "rtz"
    assert GemmModel.from_dict({"accumulate_rounding": "rz"}).accumulate_rounding == "rtz"
    with pytest.raises(FpspecError, match="must be one of rne, rtz"):
        GemmModel(accumulate_rounding="rd")
    # the alias is a name for the same rounding: identical outputs
    rng = np.random.default_rng(6)
    a, bt = wide_codes(rng, (2, 64), "bf16"), wide_codes(rng, (3, 64), "bf16")
    y1 = gemm(a, bt, get_model("seed-probe-matched-nosnap", group_rounding="rz"), fmt="bf16")
    y2 = gemm(a, bt, get_model("seed-probe-matched-nosnap", group_rounding="rtz"), fmt="bf16")
    assert np.array_equal(y1.view(np.uint32), y2.view(np.uint32))


def test_fpsgemm11_models_listing_and_set_use_rtz(tmp_path, capsys):
    """FPS-GEMM-11: ``fpspec models`` prints rtz (never rz); ``--set`` takes rz and rtz."""
    assert main(["models"]) == 0
    text = capsys.readouterr().out
    assert "accumulate_rounding=rtz" in text and "=rz" not in text
    a8 = np.full((2, 64), 0x38, dtype=np.uint8)
    np.save(tmp_path / "a.npy", a8)
    outs = []
    for value in ("rz", "rtz"):
        out = tmp_path / f"{value}.npy"
        assert main(["gemm", "--format", "e4m3", str(tmp_path / "a.npy"), str(tmp_path / "a.npy"),
                     "--model", "exact", "--set", f"accumulate_rounding={value}", "--bits", "--out", str(out)]) == 0
        outs.append(np.load(out))
    assert np.array_equal(outs[0], outs[1]) and outs[0][0, 0] == np.float32(64).view(np.uint32)


# -------------------------------------------------------------- --set none
def test_fpsgemm11_set_none_is_the_choice_none(tmp_path, capsys):
    """FPS-GEMM-11: ``--set PARAM=none`` sets the choice ``none`` where it is one
    (alpha_source, group_rounding) and None elsewhere (window_bits, snap_bits, G)."""
    assert parse_overrides(["alpha_source=none", "group_rounding=None", "window_bits=none", "L=none",
                            "G=null"]) == {"alpha_source": "none", "group_rounding": "none", "window_bits": None,
                                           "L": None, "G": None}
    m = get_model("seed-probe-matched", **parse_overrides(["alpha_source=none", "group_rounding=none"]))
    assert (m.alpha_source, m.group_rounding) == ("none", "none")
    from fpspec.quantization import quantize

    x = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    quantize(x, "nvfp4").to_npz(tmp_path / "A.npz")
    out = tmp_path / "C.npy"
    # alpha_source=none on NVFP4 operands would drop their tensor scales: refused (FPS-GEMM-25)
    assert main(["gemm", str(tmp_path / "A.npz"), str(tmp_path / "A.npz"), "--model", "seed-probe-matched",
                 "--set", "alpha_source=none", "--set", "group_rounding=none", "--out", str(out)]) == 2
    assert "tensor scale of A (nvfp4" in capsys.readouterr().err
    assert main(["gemm", str(tmp_path / "A.npz"), str(tmp_path / "A.npz"), "--model", "seed-probe-matched",
                 "--set", "group_rounding=none", "--out", str(out)]) == 0
    qa = quantize(x, "nvfp4")
    assert np.array_equal(np.load(out), gemm(qa, qa, "seed-probe-matched", group_rounding="none"))


# ----------------------------------------------------------- bad parameters
_BAD = [
    (dict(group_size=0), "positive"), (dict(group_size=-3), "positive"), (dict(group_size=1.5), "integer"),
    (dict(group_size=True), "integer"), (dict(group_size="64"), "integer"), (dict(G=2.0 ** 40), "integer"),
    (dict(window_bits=-61), "-60..200"), (dict(window_bits=201), "-60..200"), (dict(window_bits=2 ** 70), "-60..200"),
    (dict(window_bits=13.0), "integer"), (dict(neab="x"), "neab"), (dict(neab=1.5), "neab"),
    (dict(neab=True), "neab"), (dict(snap_bits=150), "-126..149"), (dict(snap_bits="10"), "integer"),
    (dict(align_exponent_floor=2 ** 70), "-2000..2000"), (dict(align_exponent_floor=-2001), "-2000..2000"),
    (dict(promotion_interval=0), "positive"), (dict(promotion_interval=48), "multiple of group_size"),
    (dict(split_k=-64), "positive"), (dict(split_k=1.0), "integer"), (dict(accumulate_bits=23.0), "integer"),
    (dict(accumulate_bits=None), "integer"), (dict(accumulate_bits=-1), "0..23"),
    (dict(accumulate_rounding=1), "one of"), (dict(group_rounding=None), "one of"),
    (dict(alpha_rounding="seed"), "one of"), (dict(output_format="fp64"), "one of"), (dict(fused=1), "true or false"),
    (dict(require_full_groups="yes"), "true or false"), (dict(groupsize=4), "unknown GEMM model parameter"),
]


@pytest.mark.parametrize("over,why", _BAD, ids=[str(o) for o, _ in _BAD])
def test_fpsgemm9_bad_parameters_are_fpspec_errors(over, why):
    """FPS-GEMM-9: every bad parameter is a one-line FpspecError naming it (never a
    ValueError, a Numba TypingError, an OverflowError or a MemoryError), also through gemm()."""
    with pytest.raises(FpspecError, match=why) as info:
        get_model("seed-probe-matched", **over)
    assert "\n" not in str(info.value)
    a8 = np.full((2, 64), 0x38, dtype=np.uint8)
    with pytest.raises(FpspecError, match=why):
        gemm(a8, a8, "seed-probe-matched", fmt="e4m3", **over)


def test_fpsgemm9_huge_counts_run_without_huge_buffers():
    """FPS-GEMM-9, FPS-GEMM-10: a group, promotion interval or K slice longer than K is one
    group, no promotion before the end, one slice: G = 2^40, N_C = 2^70 and S = 2^62
    give the G = None result on every path (the kernels size buffers by the planned
    groups, not by G), and numpy integers are accepted as parameters."""
    rng = np.random.default_rng(40)
    a, bt = wide_codes(rng, (2, 96), "bf16", span=20), wide_codes(rng, (3, 96), "bf16", span=20)
    for name in ("seed-probe-matched-nosnap", "km-h100-bf16", "exact"):
        name = get_model(name)  # the chain as parameters (FPS-GEMM-25: the seed preset takes FP4 operands)
        want = gemm(a, bt, name, fmt="bf16", group_size=None, require_full_groups=False, impl="exact")
        for over in (dict(group_size=2 ** 40), dict(group_size=2 ** 40, promotion_interval=2 ** 80),
                     dict(group_size=np.int64(2 ** 40), split_k=2 ** 62)):
            for impl in ("fast", "exact"):
                got = gemm(a, bt, name, fmt="bf16", require_full_groups=False, impl=impl, **over)
                assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (name, over, impl)
    m = GemmModel(group_size=np.int32(16), window_bits=np.int64(13), below_window="truncate")
    assert (m.group_size, m.window_bits) == (16, 13) and type(m.group_size) is int


# ------------------------------------------------------------------ backing
@pytest.mark.slow
def test_fpsgemm3_every_preset_has_a_structured_backing(capsys):
    """FPS-GEMM-3: every preset says what it is backed by (kind in BACKING_KINDS, a detail,
    where the evidence is); measured presets name the GPU, the number of outputs compared
    and the shapes, which are the probe's acceptance shapes; ``fpspec models --json``
    carries it."""
    from fpspec.probe.accept import DEFAULT_SHAPES

    kinds = {}
    for name, p in PRESETS.items():
        b = p.backing
        assert b.kind in BACKING_KINDS and b.detail and b.reference, name
        kinds[name] = b.kind
        if b.kind == "measured" and name in INSTRUCTION_PRESETS:
            # the H200 run of the MMA-Sim operands: one instruction and the K = 256 chain
            assert "H200" in b.device and b.outputs == 98_304 and b.shapes[-1] == (64, 64, 256)
        elif name.startswith("seed-triton-h200"):
            # the seed's Triton GEMM (vectors/provenance/h200-refs-cuda; tests/test_seed_triton_h200.py)
            assert "H200" in b.device and "Triton" in b.device and b.outputs == 31_488
            assert b.shapes == ((64, 64, 1024), (96, 200, 640), (1024, 1024, 512))
        elif b.kind == "measured":
            assert "H200" in b.device and b.outputs >= 114_688
            assert b.shapes == tuple((m, n, k) for m, n, k, _, _ in DEFAULT_SHAPES)
        else:
            assert b.device is None and b.outputs is None and b.shapes == ()
    assert kinds == {"seed-probe-matched": "paper", "seed-probe-matched-nosnap": "paper",
                     "seed-triton-h200": "measured", "seed-triton-h200-snap": "measured",
                     "decoded-fp32": "fpspec-choice", "exact": "fpspec-choice", "km-h100-fp8": "measured",
                     "km-h100-fp8-promote128": "measured", "km-b200-fp8": "paper", "km-h100-bf16": "measured",
                     "km-a100-bf16": "paper", "km-v100-fp16": "paper",
                     **{n: "measured" if n in ("sm90-f16", "sm90-fp8") else "hardware-validated-model"
                        for n in INSTRUCTION_PRESETS}}
    for name, p in LIBRARY.items():
        # the library presets: the H200 cuBLAS runs in the table, their outputs and shapes (FPS-CUB-6)
        b = p.backing
        assert b.kind == "measured" and p.library and name in LIBRARY_PRESETS
        assert "H200" in b.device and b.outputs == _table_outputs()[p.library] and len(b.shapes) in (4263, 4270)
        assert f"measured at {len(b.shapes)} shapes" in p.source
    assert main(["models", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["km-h100-fp8"]["backing"]["kind"] == "measured"
    assert listing["km-h100-fp8"]["backing"]["shapes"][0] == [64, 64, 256]
    assert listing["exact"]["backing"] == {"kind": "fpspec-choice", "detail": PRESETS["exact"].backing.detail,
                                           "reference": "docs/gemm.rst", "device": None, "outputs": None,
                                           "shapes": []}
    from fpspec.presets import Backing

    with pytest.raises(FpspecError, match="measured"):
        Backing("measured", "x", "docs")
    with pytest.raises(FpspecError, match="must be one of"):
        Backing("rumour", "x", "docs")


def _table_outputs() -> dict[str, int]:
    """Sampled outputs per target of the runs the cuBLAS table is generated from (its sources)."""
    import collections
    from pathlib import Path

    from fpspec.cublas.h200 import recorded_calls
    from tools.cublas.common import read_records

    root = Path(__file__).resolve().parents[1]
    out: collections.Counter = collections.Counter()
    for path, _ in recorded_calls().sources:
        for r in read_records([root / path]):
            if r.get("kind") == "call" and r.get("bits") and not r.get("error"):
                out[r["target"]] += len(r["bits"])
    return dict(out)


# -------------------------------------------------------------- the layers
_FRESH_IMPORT = """
import sys, time
t = time.perf_counter()
import fpspec.models
took = time.perf_counter() - t
print(took, sorted(m for m in sys.modules if m.startswith(("fpspec.cublas", "fpspec.presets"))))
"""


def _fresh_import() -> tuple[float, list[str]]:
    """Seconds ``import fpspec.models`` takes in a fresh interpreter, and the fpspec.cublas /
    fpspec.presets modules it loaded."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _FRESH_IMPORT], capture_output=True, text=True, check=True).stdout
    took, loaded = out.split(" ", 1)
    return float(took), json.loads(loaded.replace("'", '"'))


def test_models_import_alone_and_fast():
    """fpspec.models holds the model and the operand contracts only: importing it loads
    neither the presets nor the cuBLAS predictor and its recorded calls (issue 29), and takes
    well under 50 ms (about 15 ms measured; the best of three fresh interpreters, so that a
    busy machine does not fail it)."""
    runs = [_fresh_import() for _ in range(3)]
    assert all(loaded == [] for _, loaded in runs), runs
    assert min(took for took, _ in runs) < 0.050, runs


def test_presets_and_library_presets_in_one_order():
    """Every preset states its contract, in the order ``fpspec models`` lists them (the fixed
    presets, then the library ones): the unknown-name refusal lists CONTRACTS."""
    from fpspec.models import CONTRACTS, unknown_preset

    assert list(CONTRACTS) == [*PRESETS, *LIBRARY_PRESETS] == [*PRESETS, *LIBRARY]
    assert str(unknown_preset("nope")).endswith(", cublas-h200-fp8-fast") and "sm90-f16, " in str(unknown_preset(1))


def test_get_model_is_one_door_for_every_preset():
    """FPS-GEMM-3, FPS-CUB-6: get_model takes a fixed preset, an instruction preset and a
    library preset (at a shape, as resolve gives it); a library preset without a shape, a
    shape with a fixed preset and an unknown name are one-line refusals."""
    from fpspec.cublas.library import resolve

    assert get_model("sm90-f16") is PRESETS["sm90-f16"].model
    assert get_model("seed-probe-matched", G=32).group_size == 32
    m = get_model("cublas-h200-bf16", shape=(128, 128, 16384))
    assert m == resolve("cublas-h200-bf16", (128, 128, 16384)) and m.split_k == 1536
    assert get_model("cublas-h200-bf16", shape=(128, 128, 16384), split_k=None).split_k is None
    with pytest.raises(FpspecError, match=r"library preset: .*shape=\(M, N, K\)"):
        get_model("cublas-h200-fp16")
    with pytest.raises(FpspecError, match="shape is for library presets"):
        get_model("km-h100-bf16", shape=(1, 2, 3))
    with pytest.raises(FpspecError, match="unknown GEMM model preset 'nope'"):
        get_model("nope")
    with pytest.raises(FpspecError, match="unknown GEMM model preset"):
        get_model(["sm90-f16"])  # type: ignore[arg-type]
