"""The offline cuBLAS shape rule of fpspec.cublas.h200 (FPS-CUB-1..5, docs/cublas-h200.rst):
the recorded calls (a data file the rule tool generates), kernel names and launch grids,
predictions at hand-checked shapes, the leave-one-shape-out rates the docs quote, and bad input."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from fpspec.cublas import h200 as ch
from fpspec.cublas import library
from fpspec.errors import FpspecError
from tools.cublas import rule as rule_tool

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "vectors" / "provenance" / "h200-cublas" / "sweep.jsonl"
HELDOUT = ROOT / "vectors" / "provenance" / "h200-cublas" / "heldout.jsonl"
SOURCES = (SWEEP, HELDOUT, HELDOUT.with_name("heldout2.jsonl"), HELDOUT.with_name("heldout3.jsonl"),
           *(HELDOUT.with_name(f"train{i}.jsonl.gz") for i in (1, 2, 3)))


@pytest.fixture(scope="module")
def sweep_calls() -> list[dict]:
    return rule_tool.read_sweep(SWEEP)[1]


@pytest.fixture(scope="module")
def table_calls() -> list[dict]:
    """Every call of the table's sources: the sweep, the three held-out runs, train1-3."""
    return [c for p in SOURCES for c in rule_tool.read_sweep(p)[1]]


# ------------------------------------------------------------------ the recorded calls
@pytest.mark.slow
def test_fps_cub_4_recorded_calls_reproduce_from_the_committed_runs():
    """FPS-CUB-4: regenerating the recorded calls from the committed sweep, held-out and
    training runs gives the committed data file's JSON text exactly, and the file names each
    source's sha256 (of its content) and the command that regenerates it."""
    text = rule_tool.calls_text(SOURCES)
    committed = gzip.decompress(ch.CALLS_FILE.read_bytes()).decode()
    assert text == committed, f"{ch.CALLS_FILE} is stale: run the command it names ('command')"
    data = json.loads(committed)
    assert data["schema"] == ch.CALLS_SCHEMA == "fpspec-cublas-h200-calls/1"
    assert data["command"].startswith("python3 -m tools.cublas.rule emit vectors/provenance/h200-cublas/sweep.jsonl ")
    rec = ch.recorded_calls()
    assert rec.sources == tuple((p.relative_to(ROOT).as_posix(),
                                 hashlib.sha256(rule_tool.run_text(p).encode()).hexdigest()) for p in SOURCES)
    assert rec.sources[0] == ("vectors/provenance/h200-cublas/sweep.jsonl",
                              hashlib.sha256(SWEEP.read_bytes()).hexdigest())
    assert rec.device["gpu"] == "NVIDIA H200" and rec.device["sm_count"] == 132
    assert len(ch.CALLS_FILE.read_bytes()) < 200_000       # 29,806 calls, compressed
    assert "heldout4" not in text and "heldout5" not in text  # the acceptance sets are never sources


def test_emit_through_the_rule_tool(tmp_path):
    out = tmp_path / "calls.json.gz"
    # the CLI writes what calls_text gives (for the whole table: the test above), here for
    # the sweep and the first held-out run alone; the same runs give the same bytes
    assert rule_tool.main(["emit", str(SWEEP), str(HELDOUT), "--out", str(out)]) == 0
    first = out.read_bytes()
    text = gzip.decompress(first).decode()
    assert text == rule_tool.calls_text([SWEEP, HELDOUT]) and "heldout.jsonl" in text and "train1" not in text
    assert rule_tool.main(["emit", str(SWEEP), str(HELDOUT), "--out", str(out)]) == 0 and out.read_bytes() == first
    small = ch.recorded_calls(out)
    # the two runs' calls, one per shape run (FP8 runs N and K rounded up to 16)
    assert {t: len(v) for t, v in small.observations.items()} == {"torch-bf16": 524, "torch-fp16": 524,
                                                                 "torch-scaled-mm": 521, "torch-scaled-mm-fast": 521}
    with pytest.raises(SystemExit):
        rule_tool.main(["emit", str(SWEEP.parent), "--out", str(out)])   # a directory


def test_recorded_calls_refuse_a_damaged_file(tmp_path):
    """A missing, damaged or foreign data file is one FpspecError naming it."""
    bad = tmp_path / "calls.json.gz"
    with pytest.raises(FpspecError, match="calls.json.gz: not a table of recorded cuBLAS calls"):
        ch.recorded_calls(bad)
    bad.write_bytes(b"not gzip")
    with pytest.raises(FpspecError, match="not a table of recorded cuBLAS calls"):
        ch.recorded_calls(bad)
    bad.write_bytes(gzip.compress(json.dumps({"schema": "other/1"}).encode()))
    with pytest.raises(FpspecError, match="schema 'other/1'"):
        ch.recorded_calls(bad)


def test_table_holds_every_swept_call(table_calls):
    obs = ch.observations_from_table()
    held = 69 + 64 + 82 + 1200 + 800 + 1600            # the three held-out runs' shapes and train1-3's
    assert {t: len(v) for t, v in obs.items()} == {"torch-bf16": 455 + held, "torch-fp16": 455 + held,
                                                    "torch-scaled-mm": 448 + held, "torch-scaled-mm-fast": 448 + held}
    # FP8 runs N rounded up to 16: 8192 x 1 and 8192 x 7 both run as 8192 x 16 (same kernel)
    want = {(c["target"], *c["shape"]) for c in table_calls}
    assert {(t, o.m, o.n, o.k) for t, rows in obs.items() for o in rows} == want
    one = {(o.m, o.n, o.k): o for o in obs["torch-bf16"]}[(64, 64, 16384)]
    assert one.kernel == "nvjet_sm90_tss_64x32_64x16_1x2_h_bz_splitK_TNT" and one.grid == (2, 12, 1) and one.p is None
    # a persistent split launch carries the P its recorded outputs settled (FPS-CUB-10)
    gemv = {(o.m, o.n, o.k): o for o in obs["torch-scaled-mm"]}[(1, 3344, 14864)]
    assert gemv.grid == (4, 30, 1) and gemv.p == 4
    plan = ch.default_predictor().plan("torch-scaled-mm", (1, 3344, 14864))
    assert (plan.confidence, plan.p, plan.s) == ("outputs", 4, 3840)
    assert ch.predict("torch-scaled-mm", 1, 3344, 14864).s == 3840


# ------------------------------------------------------------------ kernel names
def test_fps_cub_1_kernel_names():
    """FPS-CUB-1: class, tile, K tile, cluster and flags from the names the sweep met."""
    k = ch.parse_kernel_name("nvjet_sm90_tss_64x32_64x16_2x4_h_bz_splitK_TNT")
    assert (k.kclass, k.tile, k.kt, k.stages, k.cluster, k.split_k) == ("nvjet", (64, 32), 64, 16, (2, 4), True)
    k = ch.parse_kernel_name("nvjet_sm90_qqsss_128x128_128x6_2x1_v_bz_coopA_algo2_TNT")
    assert (k.tile, k.kt, k.cluster, k.split_k) == ((128, 128), 128, (2, 1), False) and "algo2" in k.flags
    full = ("void cutlass::Kernel2<cutlass_75_tensorop_s1688gemm_bf16_64x64_tn_align1>"
            "(cutlass_75_tensorop_s1688gemm_bf16_64x64_tn_align1::Params)")
    k = ch.parse_kernel_name(full)
    assert (k.name, k.kclass, k.tile, k.kt, k.instr_k) == (
        "cutlass_75_tensorop_s1688gemm_bf16_64x64_tn_align1", "sm75", (64, 64), None, 8)
    k = ch.parse_kernel_name("cutlass_80_wmma_tensorop_s161616gemm_f16_32x32_128x2_tn_align2")
    assert (k.kclass, k.tile, k.kt, k.stages, k.instr_k) == ("sm80", (32, 32), 128, 2, 16) and "wmma" in k.flags
    k = ch.parse_kernel_name("cutlass_80_tensorop_s16816gemm_bf16_128x64_64x3_tn_align2")
    assert (k.kclass, k.tile, k.kt, k.instr_k) == ("sm80", (128, 64), 64, 16)
    dot = ("void dot_kernel<float, 128, 0, cublasDotParams<cublasGemvTensorStridedBatched<__nv_bfloat16 const>, "
           "cublasGemvTensorStridedBatched<float> > >(cublasDotParams<cublasGemvTensorStridedBatched<__nv_bfloat16 "
           "const>, cublasGemvTensorStridedBatched<float> >)")
    assert ch.short_kernel_name(dot) == "dot_kernel<float, 128, 0>"
    assert ch.parse_kernel_name(dot).kclass == "simt"
    assert ch.parse_kernel_name("gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false>").kclass == "simt"
    # the GEMV kernel of 1 x 500 x 96 (heldout.jsonl): a return type before its name
    gemv = ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, float, float, "
            "float, false, true, true, false, 7, false, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched"
            "<__nv_bfloat16 const>, float> >(cublasGemvParamsEx<int, float>)")
    assert ch.short_kernel_name(gemv) == ("internal::gemvx::kernel<int, int, __nv_bfloat16, float, float, float, "
                                          "false, true, true, false, 7, false>")
    assert ch.parse_kernel_name(gemv).kclass == "simt" and ch.kernel_family(gemv) == "simt"
    with pytest.raises(FpspecError, match="simt kernel internal::gemvx::kernel.* is not modelled"):
        library.model_for_kernel("cublas-h200-bf16", (1, 500, 96), gemv, (125, 1, 1))
    red = "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false>(cublasLt::Params)"
    assert ch.parse_kernel_name(red).kclass == "reduce"
    assert ch.parse_kernel_name("some_kernel").kclass == "other"
    assert ch.pick_gemm_kernel([(red, [1, 1, 1]), (full, [1, 1, 13])]) == (full, [1, 1, 13])
    assert ch.pick_gemm_kernel([(red, [1, 1, 1])]) is None


def test_fps_cub_1_alignment_rule_gives_every_swept_class(table_calls):
    """FPS-CUB-1: the class the alignment rule names is the class of the kernel that ran,
    for every call of the table's runs but the BF16 / FP16 calls with M <= 16 that run the
    SIMT gemmSN kernel where the rule says sm75: the eight 7 x 7 BF16 calls (K <= 4096) of
    the sweep, none of the held-out runs, 37 calls of train1 (34 BF16, 3 FP16) and 25 BF16
    calls of train3."""
    misses = []
    for c in table_calls:
        name, grid = rule_tool.call_kernel(c)
        got = ch.kernel_class(c["target"], *c["shape"])
        ran = ch.parse_kernel_name(name).kclass
        if got != ran:
            misses.append((c["target"], tuple(c["shape"]), got, ran))
    sweep = [("torch-bf16", (7, 7, k), "sm75", "simt") for k in (16, 64, 100, 256, 1000, 1024, 2048, 4096)]
    assert set(sweep) <= set(misses) and len(misses) == 8 + 37 + 25
    assert all(got == "sm75" and ran == "simt" and s[0] <= 16 for _, s, got, ran in misses)
    assert sum(t == "torch-fp16" for t, *_ in misses) == 3
    assert ch.kernel_class("torch-bf16", 1, 1, 4096) == "simt"
    # a vector output that is not 8-aligned runs the SIMT gemvx kernel (1 x 500 x 96 held out)
    assert ch.kernel_class("torch-bf16", 1, 500, 96) == "simt"
    assert ch.kernel_class("torch-fp16", 500, 1, 96) == "simt"
    assert ch.kernel_class("torch-fp16", 1, 504, 96) == "nvjet"
    assert ch.kernel_class("torch-bf16", 2, 500, 96) == "sm80"
    assert ch.kernel_class("torch-fp16", 4096, 1, 4096) == "nvjet"      # runs as 1 x 4096
    assert ch.kernel_class("torch-bf16", 33, 65, 5000) == "sm75"
    assert ch.kernel_class("torch-bf16", 100, 100, 5000) == "sm80"
    assert ch.kernel_class("torch-bf16", 64, 64, 1300) == "sm80"
    assert ch.kernel_class("torch-scaled-mm", 7, 16, 16) == "nvjet"


# ------------------------------------------------------------------ plans from kernels
def test_fps_cub_2_tiles_in_cublas_orientation_with_whole_clusters():
    """FPS-CUB-2: T counts cuBLAS's m = torch N along TM, whole clusters, and an M x 1
    output as 1 x M."""
    assert ch.padded_tiles(64, 64, (64, 32), (1, 2)) == 2
    assert ch.padded_tiles(33, 48, (64, 8), (1, 4)) == 1 * 8          # ceil(33/8) = 5 tiles -> 2 clusters of 4
    assert ch.padded_tiles(65, 80, (64, 8), (2, 4)) == 2 * 12
    assert ch.padded_tiles(4096, 1, (64, 8), (2, 1)) == ch.padded_tiles(1, 4096, (64, 8), (2, 1)) == 64
    assert ch.padded_tiles(100, 300, (128, 64)) == 3 * 2


def test_fps_cub_3_plan_from_kernel_at_hand_checked_calls():
    """FPS-CUB-3: P = CTAs / T for splitK nvjet kernels, one chain otherwise; cutlass
    slices from the grid's z."""
    pl = ch.plan_from_kernel("torch-bf16", 64, 64, 16384, "nvjet_sm90_tss_64x32_64x16_1x2_h_bz_splitK_TNT",
                             [2, 12, 1])
    assert (pl.p, pl.s, pl.tiles, pl.ctas, pl.confidence, pl.modelled) == (12, 1408, 2, 24, "kernel", True)
    assert pl.preset == "km-h100-bf16"
    pl = ch.plan_from_kernel("torch-bf16", 4096, 1, 4096, "nvjet_sm90_tss_64x8_64x16_2x1_v_bz_splitK_TNT",
                             [2, 64, 1])
    assert (pl.p, pl.s) == (2, 2048)
    pl = ch.plan_from_kernel("torch-scaled-mm-fast", 33, 48, 8192, "nvjet_sm90_qqsss_64x8_128x16_1x4_h_bz_splitK_TNT",
                             [4, 6, 1])
    assert (pl.tiles, pl.p, pl.s) == (8, 3, 2816)
    # a persistent non-split kernel: the grid says nothing about K
    pl = ch.plan_from_kernel("torch-bf16", 64, 1, 256, "nvjet_sm90_tss_8x64_64x16_4x1_v_bz_TNN", [4, 2, 1])
    assert (pl.p, pl.s, pl.confidence) == (1, None, "kernel")
    pl = ch.plan_from_kernel("torch-bf16", 8192, 8192, 4096, "nvjet_sm90_tss_320x128_64x3_1x2_h_bz_coopB_TNT",
                             [2, 66, 1])
    assert (pl.p, pl.s, pl.tiles) == (1, None, 26 * 64)
    # a grid that is not whole slices: unknown, with the reason
    pl = ch.plan_from_kernel("torch-bf16", 64, 64, 4096, "nvjet_sm90_tss_64x32_64x16_1x2_h_bz_splitK_TNT", [3, 1, 1])
    assert pl.confidence == "unknown" and pl.s is None and "not a whole number" in pl.note and not pl.modelled
    pl = ch.plan_from_kernel("torch-bf16", 31, 31, 5000, "cutlass_75_tensorop_s1688gemm_bf16_64x64_tn_align1",
                             [1, 1, 63])
    assert (pl.kclass, pl.p, pl.s, pl.modelled) == ("sm75", 63, 80, False)
    pl = ch.plan_from_kernel("torch-bf16", 7, 7, 64, "gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false>",
                             [1, 1, 1])
    assert (pl.kclass, pl.confidence, pl.s) == ("simt", "unknown", None)


def _nvjet_plans(sweep_calls):
    for c in sweep_calls:
        name, grid = rule_tool.call_kernel(c)
        pl = ch.plan_from_kernel(c["target"], *c["shape"], name, grid)
        if pl.kclass == "nvjet":
            yield c, pl


def test_fps_cub_3_every_nvjet_call_of_the_sweep_has_a_whole_slice_plan(sweep_calls):
    """FPS-CUB-3: every nvjet launch of the sweep reads as P whole slices of T tiles;
    P never exceeds the cap of FPS-CUB-4; P T never exceeds the 132 SMs; and for clusters
    of one or two CTAs P = min(cap, floor(132 / T)) exactly (issue 14's rule, B = 132)."""
    n = split = 0
    for c, pl in _nvjet_plans(sweep_calls):
        n += 1
        kt = ch.TARGETS[c["target"]].kt
        assert pl.confidence == "kernel", (c["target"], c["shape"], pl)
        assert pl.p <= max(1, ch.slice_cap(c["shape"][2], kt))
        if "splitK" in pl.kernel:
            split += 1
            assert pl.p * pl.tiles == pl.ctas <= ch.CTA_LIMIT
            if pl.cluster[0] * pl.cluster[1] <= 2:
                assert pl.p == max(1, min(ch.slice_cap(c["shape"][2], kt), ch.CTA_LIMIT // pl.tiles))
        else:
            assert pl.s is None
    assert n == 2 * 342 + 2 * 455 and split > 400


# calls whose reading needed the M x 1 swap, the cluster padding, a 1 x 1 cluster, P = 11 vs
# 12 on one kernel (BF16 vs FP16), FP8 with and without promotion, persistent grids
BIT_CHECKED = [("torch-bf16", (4096, 1, 4096)), ("torch-bf16", (1000, 1, 32768)), ("torch-bf16", (64, 1, 256)),
               ("torch-scaled-mm-fast", (33, 48, 8192)), ("torch-scaled-mm", (65, 80, 8192)),
               ("torch-scaled-mm-fast", (1000, 112, 8192)), ("torch-fp16", (64, 8192, 16384)),
               ("torch-bf16", (128, 128, 16384)), ("torch-fp16", (128, 128, 16384)),
               ("torch-bf16", (640, 640, 32768)), ("torch-bf16", (64, 64, 16384)), ("torch-scaled-mm", (64, 64, 16384)),
               ("torch-fp16", (1536, 1536, 32768)), ("torch-bf16", (384, 384, 5000)), ("torch-fp16", (16, 16, 5000)),
               ("torch-scaled-mm", (129, 144, 32768)), ("torch-bf16", (8192, 64, 4096)), ("torch-fp16", (1000, 1000, 64))]


@pytest.mark.slow
def test_fps_cub_3_plans_reproduce_the_sampled_bits(sweep_calls):
    """FPS-CUB-3: at hand-picked calls the target's preset with the plan's S reproduces
    every sampled output of the H200, and the neighbouring slice counts do not."""
    from tools.cublas import fit

    by = {(c["target"], tuple(c["shape"])): c for c in sweep_calls}
    for key in BIT_CHECKED:
        c = by[key]
        pl = ch.plan_from_kernel(c["target"], *c["shape"], *rule_tool.call_kernel(c))
        assert pl.modelled, key
        pairs = fit.Pairs(c)
        hyp = fit.hypotheses(c["target"])[0]
        kt = ch.TARGETS[c["target"]].kt
        assert pairs.operands_ok and pairs.count(hyp, pl.s, kt) == pairs.n, key
        for p in {max(1, pl.p - 1), pl.p + 1} - {pl.p}:
            s = ch.slice_length(c["shape"][2], kt, p)
            if s != pl.s and s is not None:
                assert pairs.count(hyp, s, kt) < pairs.n, (key, p)


# ------------------------------------------------------------------ offline prediction
def test_fps_cub_4_version_1_splits_and_swept_shapes():
    """FPS-CUB-4: version 1's measured splits come back from the table."""
    assert ch.predict("torch-bf16", 64, 64, 16384).s == 1408
    assert ch.predict("torch-bf16", 64, 64, 4096).s == 1408
    assert ch.predict("torch-scaled-mm", 64, 64, 16384).s == 2816
    assert ch.predict("torch-scaled-mm-fast", 64, 64, 16384).s == 2816
    assert ch.predict("torch-bf16", 128, 4096, 16384).s == 8192
    assert ch.predict("torch-bf16", 512, 512, 16384).s == 4096
    for t in ch.TARGETS:
        c = ch.predict(t, 1024, 1024, 1024)
        assert (c.confidence, c.s, c.kclass) == ("table", None, "nvjet")
    c = ch.predict("torch-bf16", 128, 128, 16384)
    assert (c.confidence, c.p, c.s, c.source) == ("table", 11, 1536, (128, 128, 16384))
    assert ch.predict("torch-fp16", 128, 128, 16384).s == 1408       # same kernel, P = 12
    c = ch.predict("torch-bf16", 100, 100, 5000)                     # sm80: slices of the grid, not modelled
    assert (c.kclass, c.p, c.s, c.modelled) == ("sm80", 33, 152, False)


def test_fps_cub_4_rule_no_split_for_short_k_and_large_outputs():
    """FPS-CUB-4: at most 2R K tiles, or more than 66 output tiles under every swept tile:
    one chain, whatever the kernel."""
    c = ch.predict("torch-bf16", 300, 200, 2560)                     # 40 K tiles of 64
    assert (c.confidence, c.p, c.s) == ("rule", 1, None)
    assert ch.slice_cap(2560, 64) == 1 and ch.slice_cap(2624, 64) == 2 and ch.slice_cap(5120, 128) == 1
    c = ch.predict("torch-scaled-mm", 3000, 3008, 20000)
    assert (c.confidence, c.s) == ("rule", None)
    c = ch.predict("torch-bf16", 8192, 8192, 12000)
    assert (c.confidence, c.s) == ("rule", None)
    assert ch.slice_length(4096, 64, 3) == 1408 and ch.slice_length(4096, 64, 1) is None
    assert ch.slice_length(100, 64, 2) == 64 and ch.slice_length(64, 64, 2) is None
    assert ch.slice_length(5000, 8, 33) == 152


def test_fps_cub_5_nearest_estimates():
    """FPS-CUB-5: unswept shapes get P from the nearest swept shapes."""
    # 64 x 64 splits as far as K allows: 172 K tiles -> cap 8 -> slices of 22 tiles
    c = ch.predict("torch-bf16", 64, 64, 11000)
    assert (c.confidence, c.p, c.s) == ("nearest", 8, 1408) and c.source is not None
    # 64 x 64 x 12000 is a held-out shape, now in the table (188 K tiles, cap 9, 21 tiles a slice)
    c = ch.predict("torch-bf16", 64, 64, 12000)
    assert (c.confidence, c.p, c.s) == ("table", 9, 1344)
    # 1 x 4096 and 33 x 4096 at K = 16384 both split in 4 (tiles of 128 x 8 or 128 x 40)
    c = ch.predict("torch-bf16", 16, 4096, 16384)
    assert (c.confidence, c.p, c.s) == ("nearest", 4, 4096)
    # a 4096 x 4096 output is too large to split at any K that was swept
    assert ch.predict("torch-fp16", 4096, 4096, 24000).s is None
    # SIMT: class from the alignment rule, kernel of the nearest swept shape, S unknown
    # (issue 14 measured 7 x 9 x 1024 BF16 on the SIMT gemmSN kernel, as at 7 x 7 x 1024)
    c = ch.predict("torch-bf16", 7, 9, 1024)
    assert (c.kclass, c.confidence, c.s, c.modelled) == ("simt", "unknown", None, False)
    assert c.kernel.startswith("gemmSN_TN_kernel") and c.source == (7, 7, 1024)
    assert ch.kernel_class("torch-bf16", 7, 9, 1024) == "sm75"
    # a cutlass class (FPS-CUB-7): the nearest swept call's kernel and its grid z, not scaled
    # by K: 33 x 65 x 6000 takes train1's 21 x 41 x 5776's z = 66, so S = ceil(6000 / (66 8)) 8 = 96
    c = ch.predict("torch-bf16", 33, 65, 5000)
    assert c.kclass == "sm75" and c.kernel.startswith("cutlass_75") and c.confidence == "nearest"
    assert (c.source, c.p) == ((33, 33, 5000), 63)
    c = ch.predict("torch-bf16", 33, 65, 6000)
    assert (c.source, c.p, c.s) == ((21, 41, 5776), 66, 96)


def test_fps_cub_4_cutlass_split_rule():
    """FPS-CUB-4: a cutlass mma.sync kernel with large tiles splits K into z = min(floor(B / T),
    ceil(K / 72)) slices, T its output tiles in cuBLAS's orientation, B = 264 CTAs for 128 x
    128 tiles and 132 for 128 x 256 and 256 x 128: the budget bound at 96 x 881 x 4720 (s1688,
    T = 7: z = 37, as recorded), the K bound at 144 x 457 x 1800 (z = 25, as recorded), and
    for s16816 216 x 400 x 12766 (tiles 128 x 256 over cuBLAS's m = N: T = 4, z = 33) and 960 x
    216 x 24822 (256 x 128: T = 8, z = 16), as recorded.  Offline, a shape whose nearest
    cutlass call ran such a kernel takes the rule's z, not that call's (69 x 837 x 1869 next
    to train's 69 x 835 x 1869: z = 26, S = 72; 1000 x 1001 x 3000 next to 1023 x 1025 x 3500,
    which ran z = 7: 4); a 64 x 64 s1688 kernel keeps its nearest call's z."""
    assert ch.CUTLASS_CTA_BUDGETS == {(128, 128): 264, (128, 256): 132, (256, 128): 132}
    assert ch.CUTLASS_MIN_SLICE == 72
    assert ch.cutlass_split(96, 881, 4720, (128, 128)) == 37 and ch.cutlass_split(144, 457, 1800, (128, 128)) == 25
    assert ch.cutlass_split(216, 400, 12766, (128, 256)) == 33 and ch.cutlass_split(960, 216, 24822, (256, 128)) == 16
    # the orientation matters: 216 x 280 x 22474 ran 128 x 256 tiles with z = 44 (T = 3);
    # the tile read the other way round would give T = 4 and z = 33
    assert ch.cutlass_split(216, 280, 22474, (128, 256)) == 44 and ch.cutlass_split(216, 280, 22474, (256, 128)) == 33
    assert ch.cutlass_split(3000, 3000, 100, (128, 128)) == 1
    c = ch.predict("torch-bf16", 69, 837, 1869)
    assert (c.kernel, c.confidence, c.p, c.s, c.source, c.ctas) == (
        "cutlass_75_tensorop_s1688gemm_bf16_128x128_tn_align1", "nearest", 26, 72, (69, 835, 1869), None)
    assert "split rule" in c.note
    c = ch.predict("torch-bf16", 1000, 1001, 3000)
    assert (c.source, c.p, c.s) == ((1023, 1025, 3500), 4, 752)
    c = ch.predict("torch-bf16", 584, 322, 13490)
    assert (c.kernel, c.p, c.source) == ("cutlass_80_tensorop_s16816gemm_bf16_128x256_64x3_tn_align2", 14,
                                         (584, 320, 13490))
    assert "nearest measured call" in ch.predict("torch-bf16", 33, 65, 6000).note


LOO_NVJET_S = {"torch-bf16": (3062, 3394), "torch-fp16": (3056, 3394), "torch-scaled-mm": (4145, 4263),
               "torch-scaled-mm-fast": (4146, 4263)}


@pytest.mark.slow
def test_fps_cub_5_leave_one_shape_out_rates_quoted_in_the_docs():
    """FPS-CUB-5: with each shape of the table (sweep, three held-out runs, train1-3) left out in
    turn, the predicted S equals the launched kernel's S on the share of nvjet shapes
    docs/cublas-h200.rst quotes; "rule" answers are never wrong.  A predictor's
    ``without`` keeps its class (a variant's leave-one-out measures the variant)."""
    pred = ch.default_predictor()

    class Variant(ch.Predictor):
        pass

    assert type(Variant(ch.observations_from_table()).without("torch-bf16", (64, 64, 16384))) is Variant
    for target, want in LOO_NVJET_S.items():
        ok = n = 0
        for shape in pred.shapes(target):
            truth = pred.plan(target, shape)
            if truth.kclass != "nvjet":
                continue
            got = pred.without(target, shape).predict(target, *shape)
            assert got.confidence in ("rule", "nearest"), (target, shape, got)
            n += 1
            ok += got.s == truth.s
            if got.confidence == "rule":
                assert got.s == truth.s, (target, shape)
        assert (ok, n) == want, target


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("args", [("torch-int8", 4, 4, 4), ("torch-bf16", 0, 4, 4), ("torch-bf16", 4, -1, 4),
                                  ("torch-bf16", 4, 4, 2.0), ("torch-bf16", True, 4, 4), ("torch-bf16", 4, 4, "64"),
                                  ("torch-scaled-mm", 16, 24, 64), ("torch-scaled-mm-fast", 16, 32, 100)])
def test_fps_cub_1_bad_shapes_and_targets(args):
    """FPS-CUB-1: an unknown target, a size that is not a positive integer, or an FP8 N or K
    that torch._scaled_mm refuses, is a one-line FpspecError."""
    for fn in (ch.predict, ch.kernel_class):
        with pytest.raises(FpspecError) as e:
            fn(*args)
        assert "\n" not in str(e.value)
    with pytest.raises(FpspecError):
        ch.plan_from_kernel(*args, "nvjet_sm90_tss_64x8_64x16_1x2_h_bz_TNT", [1, 1, 1])


def test_numpy_integers_are_sizes():
    np = pytest.importorskip("numpy")
    c = ch.predict("torch-bf16", np.int64(64), np.int32(64), np.uint16(16384))
    assert c.shape == (64, 64, 16384) and type(c.shape[0]) is int and c.s == 1408


@pytest.mark.parametrize("grid", [[0, 1, 1], [1, 2], None, "abc", "123", [1, 1, -3], [True, 1, 1]])
def test_fps_cub_3_bad_grids_and_names(grid):
    with pytest.raises(FpspecError, match="launch grid"):
        ch.plan_from_kernel("torch-bf16", 64, 64, 64, "nvjet_sm90_tss_64x8_64x16_1x2_h_bz_TNT", grid)
    for name in ("", "   ", None, 3):
        with pytest.raises(FpspecError, match="kernel name"):
            ch.plan_from_kernel("torch-bf16", 64, 64, 64, name, [1, 1, 1])
