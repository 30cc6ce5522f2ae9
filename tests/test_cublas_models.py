"""Library presets, resolve, kernel models and the observer (FPS-CUB-6..9,
docs/cublas-h200.rst): the models reproduce hand-picked calls of the committed H200 sweep
bit for bit, SIMT kernels are a clear error, and the acceptance and observer tools run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fpspec.cublas import h200 as ch
from fpspec.cublas import library
from fpspec.adapters.torch_gemm import OBSERVE_TAG, observation_from_trace
from fpspec.cli import main
from fpspec.errors import FpspecError
from fpspec.matmul import gemm
from fpspec.cublas.library import LIBRARY_PRESETS, resolve
from fpspec.named_models import get_model, presets_json
from fpspec.presets import PRESETS
from tools.cublas import accept as accept_tool
from tools.cublas.common import bits_from_hex, codes_numpy, read_records

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "vectors" / "provenance" / "h200-cublas" / "sweep.jsonl"

#: (target, shape) -> family, one or two calls of every modelled family of the sweep
PICKED = {
    ("torch-bf16", (128, 128, 16384)): "nvjet",            # BF16 S = 1536 (issue 14)
    ("torch-fp16", (128, 128, 16384)): "nvjet",            # FP16 S = 1408 on the same kernel
    ("torch-scaled-mm", (384, 128, 16384)): "nvjet",       # promotion inside slices
    ("torch-bf16", (100, 100, 5000)): "cutlass-s16816",    # slices of 152, residue first (issue 14)
    ("torch-fp16", (128, 128, 1300)): "cutlass-wmma",
    ("torch-bf16", (4096, 33, 4096)): "cutlass-s1688",     # G = 8, z = 6: slices of 704
    ("torch-bf16", (7, 7, 5000)): "cutlass-s1688",         # z = 313: slices of 16
    ("torch-bf16", (7, 7, 1024)): "simt",                  # gemmSN: not modelled
}


@pytest.fixture(scope="module")
def picked() -> dict:
    out = {}
    for rec in read_records([SWEEP]):
        key = (rec.get("target"), tuple(rec.get("shape") or ()))
        if rec.get("kind") == "call" and key in PICKED:
            out[key] = rec
    assert len(out) == len(PICKED)
    return out


def _operands(rec: dict):
    dt = np.uint8 if rec["fmt"] == "e4m3" else np.uint16
    k = rec["shape"][2]
    return (codes_numpy(rec["fmt"], rec["seed_a"], rec["rows"], k).astype(dt),
            codes_numpy(rec["fmt"], rec["seed_b"], rec["cols"], k).astype(dt))


def test_fps_cub_6_library_presets_resolve_per_shape(picked):
    """FPS-CUB-6: the four library presets exist and resolve per shape; gemm with a
    library preset and ``shape`` reproduces every sampled output of the picked swept calls
    (sampled rows of the larger GEMM); a non-library preset resolves to itself."""
    assert LIBRARY_PRESETS == ("cublas-h200-bf16", "cublas-h200-fp16", "cublas-h200-fp8", "cublas-h200-fp8-fast")
    assert resolve("cublas-h200-bf16", (128, 128, 16384)).split_k == 1536
    assert resolve("cublas-h200-fp16", (128, 128, 16384)).split_k == 1408
    assert resolve("km-h100-bf16", (1, 2, 3)) is PRESETS["km-h100-bf16"].model
    assert resolve("cublas-h200-fp8", (64, 64, 256)) == get_model("km-h100-fp8-promote128", require_full_groups=False)
    for (target, shape), rec in picked.items():
        if PICKED[(target, shape)] == "simt":
            continue
        a, bt = _operands(rec)
        preset = accept_tool.PRESET_OF[target]
        y = gemm(a, bt, preset, fmt=rec["fmt"], shape=shape)
        assert np.array_equal(y.reshape(-1).view(np.uint32), bits_from_hex(rec["bits"])), (target, shape)


def test_fps_cub_6_errors_simt_and_shapes(picked):
    """FPS-CUB-6: a SIMT shape is a clear error (not modelled), as are a missing or
    inconsistent shape and a shape given with a fixed preset."""
    with pytest.raises(FpspecError, match="simt kernel .* not modelled"):
        resolve("cublas-h200-bf16", (7, 7, 1024))
    with pytest.raises(FpspecError, match="not modelled"):
        resolve("cublas-h200-bf16", (1, 1, 100))
    with pytest.raises(FpspecError, match="give shape"):
        resolve("cublas-h200-bf16")
    with pytest.raises(FpspecError, match="library preset: its model depends"):
        get_model("cublas-h200-fp8")
    assert json.loads(presets_json())["cublas-h200-fp8"]["library"] == "torch-scaled-mm"
    a = np.full((4, 64), 0x3F80, np.uint16)
    with pytest.raises(FpspecError, match="K must be equal"):
        gemm(a, a, "cublas-h200-bf16", fmt="bf16", shape=(64, 64, 128))
    with pytest.raises(FpspecError, match="at least the rows"):
        gemm(a, a, "cublas-h200-bf16", fmt="bf16", shape=(2, 64, 64))
    with pytest.raises(FpspecError, match="library presets"):
        gemm(a, a, "km-h100-bf16", fmt="bf16", shape=(64, 64, 64))


def test_fps_cub_6_cli_shape_and_models(tmp_path, capsys, picked):
    """FPS-CUB-6: ``fpspec gemm --shape M,N,K`` checks sampled rows of a bigger GEMM;
    ``fpspec models`` lists the library presets with their sources."""
    rec = picked[("torch-bf16", (100, 100, 5000))]
    a, bt = _operands(rec)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "bt.npy", bt)
    assert main(["gemm", str(tmp_path / "a.npy"), str(tmp_path / "bt.npy"), "--model", "cublas-h200-bf16",
                 "--format", "bf16", "--shape", "100,100,5000", "--bits", "--out", str(tmp_path / "y.npy")]) == 0
    assert np.array_equal(np.load(tmp_path / "y.npy").reshape(-1), bits_from_hex(rec["bits"]))
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "cublas-h200-fp8-fast" in out and "library preset: resolved per shape" in out
    assert main(["models", "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["cublas-h200-bf16"]["backing"]["device"].startswith("NVIDIA H200")


def test_fps_cub_6_resolved_choice_says_how_sure(tmp_path, capsys):
    """FPS-CUB-6: ``fpspec models --shape`` shows each library preset's kernel, K cut,
    concrete model and where it comes from (measured, by rule, a guess from a named nearest
    shape, or not modelled), ``--json`` the same as data; FP8 shapes are run as
    torch._scaled_mm pads them; ``fpspec gemm`` with a library preset says the same on
    stderr."""
    assert ch.call_shape("cublas-h200-fp8", (1000, 1000, 9000)) == (1000, 1008, 9008)
    assert ch.call_shape("cublas-h200-bf16", (1000, 1000, 9000)) == (1000, 1000, 9000)
    swept = ch.predict("torch-bf16", 128, 128, 16384)
    assert swept.confidence == "table" and "1536 long" in swept.describe() and "measured" in swept.describe()
    guess = ch.predict("torch-bf16", 1000, 1000, 9000)
    assert guess.confidence == "nearest" and "a guess from the nearest measured shape 928x1048x8960" in \
        guess.describe()
    assert "by rule: no kernel splits K" in ch.predict("torch-bf16", 3000, 3000, 1024).describe()

    assert main(["models", "--shape", "7,7,1024", "--json"]) == 0
    rows = {r["preset"]: r for r in json.loads(capsys.readouterr().out)}
    assert list(rows) == list(LIBRARY_PRESETS)
    bf16 = rows["cublas-h200-bf16"]
    assert bf16["model"] is None and "simt kernel" in bf16["not_modelled"] and bf16["choice"]["kclass"] == "simt"
    fp8 = rows["cublas-h200-fp8"]
    assert fp8["call_shape"] == [7, 16, 1024] and fp8["model"]["promotion_interval"] == 128
    assert fp8["choice"]["confidence"] in ("table", "rule", "nearest")
    assert main(["models", "--shape", "128,128,16384", "--model", "cublas-h200-fp16"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cublas-h200-fp16 at 128x128x16384\n") and "split_k=1408" in out and "measured" in out
    assert main(["models", "--shape", "1,2,3", "--model", "km-h100-bf16"]) == 2
    assert "not a library preset" in capsys.readouterr().err
    assert main(["models", "--model", "cublas-h200-fp16"]) == 2
    assert "--model goes with --shape" in capsys.readouterr().err

    rng = np.random.default_rng(61)
    np.save(tmp_path / "a.npy", rng.integers(0, 0x7E, (3, 9000)).astype(np.uint8))
    np.save(tmp_path / "bt.npy", rng.integers(0, 0x7E, (2, 9000)).astype(np.uint8))
    assert main(["gemm", str(tmp_path / "a.npy"), str(tmp_path / "bt.npy"), "--model", "cublas-h200-fp8-fast",
                 "--format", "e4m3", "--shape", "1000,1000,9000", "--out", str(tmp_path / "y.npy")]) == 0
    err = capsys.readouterr().err
    assert err.startswith("fpspec gemm: cublas-h200-fp8-fast at 1000x1008x9008: nvjet_sm90") and "a guess" in err


def test_fps_cub_7_kernel_families_and_slices():
    """FPS-CUB-7: the family of each kernel and its model: cutlass slices of 152 at
    100 x 100 x 5000 over z = 33 (issue 14); every cutlass split in units of 64 where 64 divides K (704 =
    ceil(4096 / 384) 64 over z = 6), else of 8 (1000 at K = 4000 over z = 4, not 1024; 880
    = ceil(14000 / 128) 8 over z = 16, not 896; 16 over z = 313 at K = 5000); K tiles of the
    kernel's K tile, residue first; G = 8 for s1688."""
    assert ch.cutlass_slices(5000, 33)[:2] == (152, 152) and sum(ch.cutlass_slices(5000, 33)) == 5000
    assert len(ch.cutlass_slices(5000, 33)) == 33
    s1688 = "cutlass_75_tensorop_s1688gemm_bf16_64x64_tn_align1"
    assert [ch.cutlass_slice_unit(k) for k in (4096, 4000, 14000, 5000, 64, 832)] == [64, 8, 8, 8, 64, 64]
    assert ch.cutlass_slices(4096, 6, 64) == (704,) * 5 + (576,)
    assert ch.cutlass_slices(4096, 6) == (688,) * 5 + (656,)
    assert ch.cutlass_slices(4000, 4, ch.cutlass_slice_unit(4000)) == (1000,) * 4
    assert ch.cutlass_slices(14000, 16, 8) == (880,) * 15 + (800,)
    assert ch.cutlass_slices(5000, 313, 8)[:1] == (16,) and len(ch.cutlass_slices(5000, 313, 8)) == 313
    assert ch.cutlass_slices(64, 2, 64) == (32, 32)          # 64 would give one slice: units of 8
    m = library.model_for_kernel("torch-bf16", (8192, 17, 4000), s1688, (128, 1, 4))
    assert m.slice_plan == (1000,) * 4 and m.group_size == 8
    m = library.model_for_kernel("torch-bf16", (4096, 33, 8192), s1688, (64, 1, 6))
    assert m.slice_plan == (1408,) * 5 + (1152,)
    assert ch.cutlass_slices(1000, 1) is None
    names = {"nvjet_sm90_tss_64x32_64x16_2x4_h_bz_splitK_TNT": "nvjet",
             "cutlass_80_tensorop_s16816gemm_bf16_64x64_64x6_tn_align2": "cutlass-s16816",
             "cutlass_75_wmma_tensorop_s161616gemm_f16_16x16_128x2_tn_align1": "cutlass-wmma",
             "cutlass_75_tensorop_s1688gemm_bf16_64x64_tn_align1": "cutlass-s1688",
             "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false>(int)": "simt"}
    for name, fam in names.items():
        assert ch.kernel_family(name) == fam
    m = library.model_for_kernel("torch-bf16", (100, 100, 5000),
                                 "cutlass_80_tensorop_s16816gemm_bf16_64x64_64x6_tn_align2", (4, 1, 33))
    assert (m.group_size, m.k_tile, m.slice_residue, m.slice_plan[0], m.window_bits) == (16, 64, "first", 152, 25)
    m = library.model_for_kernel("cublas-h200-bf16", (31, 31, 1000),
                                 "cutlass_75_tensorop_s1688gemm_bf16_64x64_tn_align1", (1, 1, 16))
    assert (m.group_size, m.k_tile, m.slice_plan[:2]) == (8, ch.S1688_K_TILE, (64, 64))
    with pytest.raises(FpspecError, match="not modelled"):
        library.model_for_kernel("torch-bf16", (7, 7, 64), "void gemmSN_TN_kernel<float, 128>(int)", (1, 1, 1))


def _trace(kernels: list[tuple[str, list[int]]]) -> dict:
    """A kineto trace: the observed call's annotation, its launches and kernels."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": OBSERVE_TAG, "ts": 0, "dur": 100, "pid": 1, "tid": 1}]
    for i, (name, grid) in enumerate(kernels):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10 + i, "dur": 1, "pid": 1,
                   "tid": 1, "args": {"correlation": 100 + i}})
        ev.append({"ph": "X", "cat": "kernel", "name": name, "ts": 200 + i, "dur": 5, "pid": 0, "tid": 7,
                   "args": {"correlation": 100 + i, "grid": grid, "block": [128, 1, 1]}})
    return {"traceEvents": ev}


def test_fps_cub_8_observer_reads_kernel_and_grid():
    """FPS-CUB-8: the observer's model from a profiler trace: a splitK nvjet launch of
    64 CTAs over T = 1 x 2 output tiles (64 x 32 tiles in 1 x 2 clusters, 64 x 64 output)
    is P = 32 slices, S = ceil(16384 / (32 64)) 64 = 512;
    the reduction kernel after it is skipped; a SIMT kernel gives no model and its reason;
    torch's CPU ops (no grid) give none either."""
    obs = observation_from_trace(_trace([("nvjet_sm90_tss_64x32_64x16_1x2_h_bz_splitK_TNT", [1, 2, 32]),
                                         ("void splitKreduce_kernel<32, 16>(int)", [4, 1, 1])]),
                                 "cublas-h200-bf16", (64, 64, 16384))
    assert obs.target == "torch-bf16" and obs.grid == (1, 2, 32) and obs.method == "correlation"
    assert obs.model == get_model("km-h100-bf16", require_full_groups=False, split_k=512)
    obs = observation_from_trace(_trace([("void gemmSN_TN_kernel<float, 128>(int)", [1, 1, 1])]), "torch-bf16",
                                 (7, 7, 64))
    assert obs.model is None and "not modelled" in obs.error
    cpu = {"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": OBSERVE_TAG, "ts": 0, "dur": 50, "pid": 1,
                            "tid": 1},
                           {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 5, "dur": 5, "pid": 1, "tid": 1}]}
    obs = observation_from_trace(cpu, "torch-fp16", (8, 8, 64))
    assert obs.kernel == "aten::mm" and obs.model is None and "no launch grid" in obs.error


def test_fps_cub_8_observe_on_cpu_torch():
    """FPS-CUB-8: observe() runs the torch call under the profiler; on the CPU the op has no
    grid, so no model: a one-line FpspecError (probe --observe exits 1)."""
    pytest.importorskip("torch")
    from fpspec.adapters.torch_gemm import observation, observe

    a = np.full((16, 64), 0x3C00, np.uint16)
    obs = observation(a, a, "torch-fp16", device="cpu")
    assert obs.kernel == "aten::mm" and obs.model is None and obs.result.shape == (16, 16)
    with pytest.raises(FpspecError, match="no launch grid"):
        observe(a, a, "cublas-h200-fp16", device="cpu")
    assert main(["probe", "--observe", "--gemm", "torch-fp16", "--shape", "16x16", "--k", "64"]) == 1


def test_fps_cub_9_accept_tool_on_sweep_subset(tmp_path, picked):
    """FPS-CUB-9: the acceptance tool on picked sweep calls: every tensor-core call
    reproduced offline and by the observer, the SIMT call counted as not modelled; the
    committed docs fragment is the render of the committed report."""
    run = tmp_path / "run.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in picked.values()))
    assert accept_tool.main([str(run), "--json", str(tmp_path / "r.json"), "--rst", str(tmp_path / "r.rst")]) == 0
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["calls"] == len(PICKED) and rep["operand_mismatches"] == 0
    bf16 = rep["targets"]["torch-bf16"]
    assert bf16["families"]["simt"]["not_modelled_observer"] == 49 and bf16["families"]["simt"]["observer"] == 0
    for t, d in rep["targets"].items():
        for fam, f in d["families"].items():
            if fam != "simt":
                assert f["offline"] == f["observer"] == f["outputs"], (t, fam)
    assert [f["family"] for f in rep["failures"]] == ["simt"]
    assert "``torch-bf16`` (``cublas-h200-bf16``)" in (tmp_path / "r.rst").read_text()
    rendered = ROOT / "docs" / "cublas-reports"
    assert accept_tool.main(["--render", str(rendered / "accept-sweep.json"), "--rst",
                             str(rendered / "accept-sweep.inc"), "--check"]) == 0


def test_fps_cub_8_observe_tool_on_cpu(tmp_path):
    """FPS-CUB-8: tools/cublas/observe.py runs end to end on torch's CPU ops (no
    kernels there: nothing modelled by the observer, the offline model compared)."""
    pytest.importorskip("torch")
    from tools.cublas import observe as obs_tool

    shapes = tmp_path / "shapes.txt"
    shapes.write_text("16 32 64\n")
    assert obs_tool.main(["--device", "cpu", "--out", str(tmp_path), "--shapes", str(shapes),
                          "--targets", "torch-bf16,torch-scaled-mm"]) == 0
    lines = [json.loads(x) for x in (tmp_path / "observe.jsonl").read_text().splitlines()]
    calls = [x for x in lines if x["kind"] == "observe"]
    assert [c["target"] for c in calls] == ["torch-scaled-mm", "torch-bf16"] or len(calls) == 2
    for c in calls:
        assert c["operands_ok"] and c["outputs"] == 64 and c["observer_matched"] is None
        assert c["offline_matched"] is not None and "no launch grid" in c["observer_error"]
    summ = json.loads((tmp_path / "observe_summary.json").read_text())
    assert summ["torch-bf16"]["all"]["not_modelled"] == 1


HELDOUT2 = ROOT / "vectors" / "provenance" / "h200-cublas" / "heldout2.jsonl"
_GEMV_FP8 = "nvjet_sm90_qqsss_64x8_128x16_4x1_v_bz_algo2_splitK_TNT"


@pytest.fixture(scope="module")
def persistent_call() -> dict:
    """The FP8 call at 1 x 3344 x 14864 of heldout2.jsonl: a split launch on the persistent
    grid (4, 30, 1) of clusters of 4, 56 output tiles."""
    recs = [r for r in read_records([HELDOUT2]) if r.get("kind") == "call" and r["target"] == "torch-scaled-mm"
            and r["shape"] == [1, 3344, 14864]]
    assert len(recs) == 1
    return recs[0]


def test_fps_cub_10_persistent_launch_gives_candidates():
    """FPS-CUB-10: 120 CTAs are no whole number of slices of 56 tiles; the grid is the
    persistent one of clusters of 4, so P is any of 2 .. slice_cap whose P T CTAs exceed
    120: 3, 4, 5 (117 K tiles, cap 5); the choice has no model until settled, and
    kernel_parameters says how to settle it.  A grid that is not the persistent one of its
    cluster size stays unknown."""
    c = ch.plan_from_kernel("torch-scaled-mm", 1, 3344, 14864, _GEMV_FP8, [4, 30, 1])
    assert (c.confidence, c.candidates, c.tiles, c.p, c.s) == ("candidates", (3, 4, 5), 56, None, None)
    assert not c.modelled
    with pytest.raises(FpspecError, match="settle_choice"):
        library.kernel_model(c)
    assert ch.persistent_candidates(14864, 128, 56, 120, (4, 1)) == (3, 4, 5)
    assert ch.persistent_candidates(14864, 128, 56, 120, (2, 1)) == ()      # clusters of 2 persist on 132
    assert ch.persistent_candidates(14864, 128, 56, 132, (2, 1)) == (3, 4, 5)
    assert ch.persistent_candidates(4096, 128, 56, 120, (4, 1)) == ()       # cap 1: no split at all
    odd = ch.plan_from_kernel("torch-scaled-mm", 1, 3344, 14864, _GEMV_FP8, [4, 29, 1])
    assert odd.confidence == "unknown" and "not a whole number" in odd.note
    s = ch.settled(c, 4)
    assert (s.confidence, s.p, s.s) == ("outputs", 4, 3840) and s.modelled
    assert library.kernel_model(s) == get_model("km-h100-fp8-promote128", require_full_groups=False, split_k=3840)
    with pytest.raises(FpspecError, match="not a candidate"):
        ch.settled(c, 2)


def test_fps_cub_10_settle_choice_on_the_calls_outputs(persistent_call):
    """FPS-CUB-10: the recorded outputs single out P = 4 (S = 3840; P = 3 and 5 miss some);
    a sample no candidate reproduces is an error, not a guess; a choice that is not
    ambiguous passes through."""
    from fpspec.adapters.settle import settle_choice, settle_sample

    a, bt = _operands(persistent_call)
    want = bits_from_hex(persistent_call["bits"])
    c = ch.plan_from_kernel("torch-scaled-mm", 1, 3344, 14864, _GEMV_FP8, [4, 30, 1])
    got = settle_choice(c, a, bt[::2], want[::2])            # settled on half the sample
    assert (got.p, got.s) == (4, 3840)
    assert np.array_equal(gemm(a, bt[1::2], library.kernel_model(got), fmt="e4m3").astype(np.float32)
                          .reshape(-1).view(np.uint32), want[1::2])      # the other half reproduced
    for p in (3, 5):
        other = library.kernel_model(ch.settled(c, p))
        assert (gemm(a, bt, other, fmt="e4m3").astype(np.float32).reshape(-1).view(np.uint32) != want).any()
    bad = want.copy()
    bad[5] ^= 1
    with pytest.raises(FpspecError, match="no candidate slice count"):
        settle_choice(c, a, bt, bad)
    with pytest.raises(FpspecError, match="sampled outputs for"):
        settle_choice(c, a, bt, want[:10])
    plain = ch.plan_from_kernel("torch-bf16", 64, 64, 16384, "nvjet_sm90_tss_64x32_64x16_1x2_h_bz_splitK_TNT",
                                [1, 2, 32])
    assert settle_choice(plain, a, bt, want) is plain
    assert settle_sample(10, 4) == [0, 3, 6, 9] and settle_sample(10, 3, avoid=[0, 1, 2]) == [3, 6, 9]
    assert settle_sample(1, 4, avoid=[0]) == [0]             # nothing else to take


def test_fps_cub_10_observation_settles_and_accept_scores_the_other_half(tmp_path, monkeypatch, persistent_call):
    """FPS-CUB-10: settle_observation picks P from the call's result at outputs outside the
    scored sample, widening the sample while candidates tie; the acceptance tool settles on
    the even sampled columns and scores the odd ones only (32 of 64)."""
    from fpspec.adapters.torch_gemm import Observation, settle_observation

    a, bt = _operands(persistent_call)
    want = bits_from_hex(persistent_call["bits"]).view(np.float32).reshape(1, -1)
    k = 14864
    c = ch.plan_from_kernel("torch-scaled-mm", 1, 3344, k, _GEMV_FP8, [4, 30, 1])
    obs = Observation("torch-scaled-mm", (1, want.shape[1], k), ((_GEMV_FP8, (4, 30, 1)),), _GEMV_FP8, (4, 30, 1),
                      "correlation", error="ambiguous", result=want, choice=c)
    done = settle_observation(obs, a, bt, avoid_cols=range(8))
    assert done.error is None and done.choice.p == 4 and done.model.slice_lengths(k) == [3840, 3840, 3840, 3344]
    assert "settled by the call's outputs" in done.to_dict()["settled"]
    assert settle_observation(done, a, bt) is done
    import fpspec.adapters.settle as settle_mod
    from fpspec.adapters.settle import fitting_candidates

    # one output leaves several candidates: the next, larger sample settles it; the largest
    # sample still ambiguous is an error that says so
    assert len(fitting_candidates(c, a, bt[:1], want[:, :1])) > 1
    monkeypatch.setattr(settle_mod, "SETTLE_SAMPLES", ((1, 1), (1, 64)))
    assert settle_observation(obs, a, bt).choice.p == 4
    monkeypatch.setattr(settle_mod, "SETTLE_SAMPLES", ((1, 1),))
    left = settle_observation(obs, a, bt)
    assert left.model is None and "cannot settle P" in left.error
    bad = want.copy()
    bad[0, 0] = -bad[0, 0]
    wrong = settle_observation(Observation(**{**obs.__dict__, "result": bad}), a, bt)
    assert wrong.model is None and "no candidate slice count" in wrong.error
    run = tmp_path / "run.jsonl"
    run.write_text(json.dumps(persistent_call) + "\n")
    rep = accept_tool.accept([str(run)])
    d = rep["targets"]["torch-scaled-mm"]["all"]
    assert (d["outputs"], d["observer_outputs"], d["observer"], d["settled_calls"]) == (64, 32, 32, 1)
    assert "settled" in rep["failures"][0]


_LAZY = """
from fpspec.cublas import h200, library
import fpspec.matmul
before = h200.recorded_calls.cache_info().currsize
names = library.LIBRARY_PRESETS
library.LIBRARY
after = h200.recorded_calls.cache_info().currsize
h200.predict("torch-bf16", 64, 64, 64)
print(before, after, h200.default_predictor.cache_info().currsize, ",".join(names))
"""


def test_recorded_calls_read_on_first_use():
    """The recorded calls are data read once, when a prediction or the library presets'
    backing (LIBRARY) first needs them: importing fpspec.cublas.library and fpspec.matmul
    reads nothing, and the library presets' names need no data."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _LAZY], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.split() == ["0", "1", "1", "cublas-h200-bf16,cublas-h200-fp16,cublas-h200-fp8,cublas-h200-fp8-fast"]


def test_fps_cub_6_resolution_says_where_the_answer_comes_from(capsys):
    """FPS-CUB-6: ``resolution`` gives the model resolve gives and whether it comes from a
    recorded call, the rule (no kernel splits K) or the nearest recorded shapes (a guess),
    with the reason; the CLI's JSON carries the same basis; a fixed preset is refused."""
    rec = library.resolution("cublas-h200-bf16", (128, 128, 16384))
    assert (rec.basis, rec.model, rec.shape) == ("recorded", resolve("cublas-h200-bf16", (128, 128, 16384)),
                                                 (128, 128, 16384))
    assert rec.reason.startswith("measured: this shape ran on the H200")
    rule = library.resolution("cublas-h200-bf16", (4096, 4096, 512))
    assert (rule.basis, rule.model.split_k) == ("rule", None) and rule.reason.startswith("by rule: no kernel splits K")
    near = library.resolution("cublas-h200-bf16", (1000, 1000, 9000))
    assert near.basis == "nearest" and near.choice.source == (928, 1048, 8960)
    assert near.reason.startswith("a guess from the nearest measured shape 928x1048x8960")
    assert near.model == resolve("cublas-h200-bf16", (1000, 1000, 9000))
    assert ch.predict("torch-bf16", 1000, 1000, 9000).basis == "nearest"
    assert ch.plan_from_kernel("torch-bf16", 4096, 1, 4096, "nvjet_sm90_tss_64x8_64x16_2x1_v_bz_splitK_TNT",
                               [2, 64, 1]).basis == "observed"
    with pytest.raises(FpspecError, match="'km-h100-bf16' is not a library preset"):
        library.resolution("km-h100-bf16", (1, 2, 3))
    with pytest.raises(FpspecError, match="not modelled"):
        library.resolution("cublas-h200-bf16", (7, 7, 1024))  # SIMT: no model, no basis
    assert main(["models", "--shape", "1000,1000,9000", "--model", "cublas-h200-bf16", "--json"]) == 0
    choice = json.loads(capsys.readouterr().out)[0]["choice"]
    assert (choice["basis"], choice["reason"]) == ("nearest", near.reason)
