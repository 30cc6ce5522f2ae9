"""Delayed sample-and-hold tensor scaling, T overrides and recipes (FPS-SCL-*)."""

from __future__ import annotations

import copy
import pickle
from fractions import Fraction

import numpy as np
import pytest

from fpspec.errors import FpspecError
from fpspec.recipes import NEMOTRON_H_8B, RECIPES, get_recipe
from fpspec.scaling import AmaxCache, TargetTable, max_reduce


def _run(cache: AmaxCache, steps: int, amax_of_step, microbatches: int = 1, key=("l0", "x")):
    used, refreshed = [], []
    for _ in range(steps):
        t = cache.begin_step()
        for mb in range(microbatches):
            before = cache.needs_refresh(*key)
            used.append(float(cache.amax(*key, amax_of_step(t, mb))))
            if before:
                refreshed.append(t)
    return used, refreshed


def test_refresh_steps_for_d50():
    """FPS-SCL-1, FPS-SCL-2: with D = 50 the amax is sampled at steps 1, 51, 101 and held between."""
    cache = AmaxCache(period=50)
    used, refreshed = _run(cache, 120, lambda t, mb: float(t))
    assert refreshed == [1, 51, 101]
    assert used[0] == 1 and used[49] == 1 and used[50] == 51 and used[99] == 51 and used[100] == 101
    assert used[119] == 101


def test_sample_and_hold_is_not_a_window_maximum():
    """FPS-SCL-1: a large amax between refreshes is not remembered; the sample at the refresh step is."""
    cache = AmaxCache(period=3)
    vals = {1: 1.0, 2: 100.0, 3: 100.0, 4: 2.0, 5: 50.0}
    used, _ = _run(cache, 5, lambda t, mb: vals[t])
    assert used == [1.0, 1.0, 1.0, 2.0, 2.0]


def test_microbatches_do_not_advance():
    """FPS-SCL-2: microbatches within a step share the step; only begin_step advances it."""
    cache = AmaxCache(period=2)
    used, refreshed = _run(cache, 4, lambda t, mb: float(10 * t + mb), microbatches=3)
    assert refreshed == [1, 3]
    assert used == [10, 10, 10, 10, 10, 10, 30, 30, 30, 30, 30, 30]


def test_d1_is_current_scaling_per_step():
    """FPS-SCL-3: D = 1 refreshes at every step; microbatches of one step share the first's amax."""
    cache = AmaxCache(period=1)
    used, refreshed = _run(cache, 3, lambda t, mb: float(t + mb / 4), microbatches=2)
    assert refreshed == [1, 2, 3]
    assert used == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]


def test_cold_start_and_independent_keys():
    """FPS-SCL-4: each (module, role) has its own entry; a key first seen late is a cold start."""
    cache = AmaxCache(period=50)
    cache.begin_step()
    assert cache.amax("a", "x", 1.0) == 1
    for _ in range(9):
        cache.begin_step()
    assert cache.step == 10
    assert cache.amax("a", "w", 5.0) == 5           # cold start at step 10
    assert cache.amax("a", "x", 9.0) == 1           # held since step 1
    assert cache.entry("a", "w").tau == 10
    for _ in range(49):
        cache.begin_step()
    assert cache.amax("a", "x", 7.0) == 7           # step 59: 59 - 1 >= 50
    assert cache.amax("a", "w", 8.0) == 5           # 59 - 10 < 50
    cache.begin_step()
    assert cache.amax("a", "w", 8.0) == 8           # step 60


def test_reduction_hook_runs_on_refresh_only():
    """FPS-SCL-5: the max-reduction across ranks is applied to the sample before caching."""
    calls = []
    ranks = {0: 3.0, 1: 11.0, 2: 7.0}

    def reduce(local):
        calls.append(float(local))
        return max_reduce([local] + [v for r, v in ranks.items() if r != 0])

    cache = AmaxCache(period=2, reduce=reduce)
    cache.begin_step()
    assert cache.amax("m", "dy", 3.0) == 11
    cache.begin_step()
    assert cache.amax("m", "dy", 4.0) == 11
    assert calls == [3.0]
    assert max_reduce([2.0, 9.0, 5.0]) == max_reduce([9.0, 5.0, 2.0]) == np.float32(9)


def test_never_serialized():
    """FPS-SCL-6: the cache refuses pickling and copying; reset() is the cold start of a resume."""
    cache = AmaxCache()
    cache.begin_step()
    cache.amax("m", "x", 1.0)
    for fn in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(FpspecError, match="never serialized"):
            fn(cache)
    cache.reset()
    assert cache.step == 0 and cache.entry("m", "x") is None


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), 0.1, "x"])
def test_bad_amax_refused(bad):
    """FPS-SCL-1: the current amax must be a finite non-negative binary32 value."""
    cache = AmaxCache()
    cache.begin_step()
    with pytest.raises(FpspecError):
        cache.amax("m", "x", bad)


def test_bad_usage_refused():
    """FPS-SCL-2: amax before the first step, unknown roles and bad periods are errors."""
    with pytest.raises(FpspecError, match="before the first"):
        AmaxCache().amax("m", "x", 1.0)
    c = AmaxCache()
    c.begin_step()
    with pytest.raises(FpspecError, match="role"):
        c.amax("m", "act", 1.0)
    for d in (0, 2.5, True):
        with pytest.raises(FpspecError, match="period"):
            AmaxCache(period=d)


def test_target_overrides():
    """FPS-SCL-7: T per (module, role, GEMM): exact module over pattern, named GEMM over any."""
    t = TargetTable(Fraction(448), {("layers.*.down_proj", "dy", None): Fraction(1024),
                                    ("layers.51.down_proj", "dy", "wgrad"): Fraction(2048)})
    assert t.lookup("layers.51.down_proj", "dy", "wgrad") == 2048
    assert t.lookup("layers.51.down_proj", "dy", "dgrad") == 1024
    assert t.lookup("layers.3.down_proj", "dy", "wgrad") == 1024
    assert t.lookup("layers.3.down_proj", "x", "wgrad") == 448
    assert t.lookup("layers.3.up_proj", "dy", "wgrad") == 448


def test_seed_recipe():
    """FPS-SCL-8, FPS-SCL-9: the seed recipe: D = 50, 2-D weights, SR on dY only, T = 2048 for dY in
    wgrad of the four final MLP down_proj layers of Nemotron-H 8B (blocks 45, 47, 49, 51)."""
    r = get_recipe("seed-ue5m3-block16").for_model(NEMOTRON_H_8B)
    assert r.scheme == "ue5m3" and r.block == 16 and r.zero_scale_rule
    for g in r.gemms:
        for op in (g.a, g.b):
            assert op.period == 50 and not op.rht
            assert (op.rounding == "sr") == (op.role == "dy")
            assert (op.tile == "BxB") == (op.role == "w")
    assert r.target("layers.47.mixer.down_proj", "dy", "wgrad") == 2048
    assert r.target("layers.43.mixer.down_proj", "dy", "wgrad") == 448
    assert r.target("layers.51.mixer.down_proj", "dy", "dgrad") == 448
    assert r.target("layers.51.mixer.down_proj", "x", "wgrad") == 448
    kw = r.quantize_kwargs("layers.51.mixer.down_proj", "wgrad", "a")
    assert kw["columnwise"] and kw["rounding"] == "sr" and kw["target"] == 2048
    assert get_recipe("seed-ue5m3-block32").block == 32


def test_final_down_proj_selection_is_explicit_data():
    """FPS-SCL-9: the seed's override covers mixer.down_proj in layers 44..51; on Nemotron-H 8B those
    MLP blocks are 45, 47, 49 and 51 (44, 46, 48 and 50 are Mamba-2 blocks), not the last four block
    indices 48..51.  final_mlps selects the last MLP blocks of any layout."""
    from fpspec.recipes import SEED_FINAL_DOWN_PROJ, ModelLayout, TargetOverride

    assert len(NEMOTRON_H_8B.pattern) == 52 and len(NEMOTRON_H_8B.mlp_layers()) == 24
    assert SEED_FINAL_DOWN_PROJ.layers(NEMOTRON_H_8B) == (45, 47, 49, 51)
    r = get_recipe("seed-ue5m3-block16").for_model()
    got = sorted(k[0] for k, t in r.targets.overrides.items() if t == 2048)
    assert got == [f"layers.{i}.mixer.down_proj" for i in (45, 47, 49, 51)]
    assert TargetOverride.final_mlps(NEMOTRON_H_8B, 4, "dy", "wgrad", 2048).layers(NEMOTRON_H_8B) == (45, 47, 49, 51)
    dense = ModelLayout("dense-6", "------", down_proj="model.layers.{i}.mlp.down_proj")
    o = TargetOverride.final_mlps(dense, 4, "dy", "wgrad", 2048)
    assert sorted(k[0] for k in o.table_entries(dense)) == [f"model.layers.{i}.mlp.down_proj" for i in (2, 3, 4, 5)]
    with pytest.raises(FpspecError):
        TargetOverride.final_mlps(dense, 7, "dy", "wgrad", 2048)
    with pytest.raises(FpspecError):
        get_recipe("seed-ue5m3-block16").for_model(52)


def test_held_amax_zero_reaches_the_quantizer():
    """FPS-SCL-10, FPS-BLK-5: the cache holds a sampled 0 until the next refresh; the quantizer takes
    the held 0 as the seed does (encode scale 1) on the later, nonzero tensor, identically on both
    paths; te-fp32 takes FLT_MAX, torchao-0.18 refuses."""
    from fpspec.quantization import quantize

    cache = AmaxCache(period=3)
    cache.begin_step()
    assert cache.amax("m", "dy", 0.0) == 0.0
    cache.begin_step()
    x = np.zeros((1, 16), np.float32)
    x[0, :2] = [3.0, 1.5]
    g = cache.amax("m", "dy", float(np.abs(x).max()))
    assert g == 0.0 and cache.entry("m", "dy").tau == 1
    for impl in ("fast", "exact"):
        q = quantize(x, "ue5m3", profile="seed-fp32", amax=g, impl=impl)
        assert q.encode_scale == 1 and q.scales[0, 0] == 0x70 and q.codes[0, :2].tolist() == [0x7, 0x5]
        assert quantize(x, "nvfp4", profile="te-fp32", amax=g, impl=impl).encode_scale == np.finfo(np.float32).max
        with pytest.raises(FpspecError, match="zero tensor amax"):
            quantize(x, "nvfp4", profile="torchao-0.18", amax=g, impl=impl)


def test_other_presets():
    """FPS-SCL-8: TE settings use D = 1 and RHT on the wgrad operands only; MX has no tensor scale."""
    for name in ("te-nvfp4", "ue5m3-te-settings"):
        r = RECIPES[name]
        wg = r.gemm("wgrad")
        assert wg.a.rht and wg.b.rht and wg.a.columnwise and wg.b.columnwise
        assert not any(op.rht for g in (r.gemm("fprop"), r.gemm("dgrad")) for op in (g.a, g.b))
        assert all(op.period == 1 for g in r.gemms for op in (g.a, g.b))
    mx = RECIPES["ocp-mxfp4"]
    assert mx.target("m", "x", "fprop") is None and mx.block == 32
    with pytest.raises(FpspecError):
        get_recipe("nope")


def test_recipe_kwargs_quantize():
    """FPS-SCL-8: every preset's operand settings are accepted by quantize()."""
    from fpspec.quantization import quantize

    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 32)).astype(np.float32)
    for r in RECIPES.values():
        for g in r.gemms:
            for which in ("a", "b"):
                kw = r.quantize_kwargs("m", g.name, which)
                rb = rng.integers(0, 256, (32, 32), dtype=np.uint8) if kw["rounding"] != "rne" else None
                q = quantize(x, rbits=rb, **kw)
                assert q.codes.shape == (32, 32)
