"""Exact spec vs fast path of block quantization, bit for bit (FPS-BLK-15)."""

from __future__ import annotations

import numpy as np
import pytest

from fpspec.quantization import dequantize, quantize

M, K = 16, 32


def _data(kind: str, rng: np.random.Generator) -> tuple[np.ndarray, float | None]:
    """A (M, K) float32 tensor of one kind, and the amax to pass (None = measured)."""
    if kind == "normal":
        return rng.standard_normal((M, K)).astype(np.float32), None
    if kind == "student-t":
        return rng.standard_t(2, (M, K)).astype(np.float32), None
    if kind == "wide":
        return (rng.standard_normal((M, K)) * 2.0 ** rng.uniform(-30, 30, (M, K))).astype(np.float32), None
    if kind == "edge":
        x = rng.standard_normal((M, K)).astype(np.float32)
        x[0, :] = 0.0                   # all-zero blocks
        x[1, :32] = -0.0                # negative zeros
        x[2, :] *= np.float32(2.0 ** -24)   # blocks far below the tensor amax
        x[3, :16] *= np.float32(2.0 ** -60)  # scales that underflow
        x[4, 5] = 1e6                   # the tensor amax
        return x, None
    if kind == "stale":
        # a held amax far below the current values: blocks saturate at the maximum scale
        return (rng.standard_normal((M, K)) * 1e3).astype(np.float32), 1e-3
    if kind == "ties":
        # amax 2688 -> G = 1 for T = 448; block amax 6 -> scale exactly 1; payload = x exactly
        t = rng.choice(np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 3.0]), (M, K))
        t *= rng.choice([-1.0, 1.0], (M, K))
        t[:, ::16] = 6.0
        t[0, 0] = 2688.0
        return t.astype(np.float32), None
    raise AssertionError(kind)


CONFIGS = [
    ("ue5m3", "exact", {}),
    ("ue5m3", "seed-fp32", {}),
    ("ue5m3", "exact", {"scale_format": "ue5m3fnu", "target": 2048}),
    ("ue5m3", "exact", {"tile": "BxB", "zero_scale_rule": False}),
    ("ue5m3", "seed-fp32", {"columnwise": True}),
    ("ue5m3", "exact", {"block": 32}),
    ("ue5m3", "exact", {"rounding": "sr"}),
    ("ue5m3", "seed-fp32", {"rounding": "sr"}),
    ("ue5m3", "exact", {"rounding": "rna"}),
    ("nvfp4", "te-fp32", {}),
    ("nvfp4", "te-fp32", {"tile": "BxB", "columnwise": True}),
    ("nvfp4", "exact", {}),
    ("nvfp4", "torchao-0.18", {"tile": "BxB"}),
    ("mxfp4", "floor", {}),
    ("mxfp4", "ceil", {}),
    ("mxfp4", "even", {"rounding": "rna"}),
    ("mxfp4", "rceil", {}),
]
KINDS = ["normal", "student-t", "wide", "edge", "stale", "ties"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scheme,profile,kw", CONFIGS, ids=[f"{s}-{p}-{'-'.join(k)}" for s, p, k in CONFIGS])
def test_exact_equals_fast(scheme, profile, kw, kind):
    """FPS-BLK-15: codes, scales, tensor scales and dequantized values agree bit for bit."""
    rng = np.random.default_rng(hash((scheme, profile, kind, tuple(kw))) % 2**32)
    x, amax = _data(kind, rng)
    if scheme == "mxfp4" and amax is not None:
        amax = None
    kw = dict(kw)
    if kw.get("rounding") == "sr":
        kw["rbits"] = rng.integers(0, 256, (K, M) if kw.get("columnwise") else (M, K), dtype=np.uint8)
    a = quantize(x, scheme, profile=profile, amax=amax, impl="fast", **kw)
    b = quantize(x, scheme, profile=profile, amax=amax, impl="exact", **kw)
    assert np.array_equal(a.codes, b.codes)
    assert np.array_equal(a.scales, b.scales)
    assert a.encode_scale.view(np.uint32) == b.encode_scale.view(np.uint32)
    assert a.decode_scale.view(np.uint32) == b.decode_scale.view(np.uint32)
    assert a.amax == b.amax
    assert np.array_equal(dequantize(a).view(np.uint32), dequantize(b).view(np.uint32))


@pytest.mark.parametrize("scheme,profile", [("ue5m3", "exact"), ("ue5m3", "seed-fp32"), ("nvfp4", "te-fp32"),
                                            ("mxfp4", "floor")])
def test_kernel_dequant_matches_dequantize(scheme, profile):
    """FPS-BLK-14: the dequantized values each path computes equal dequantize() of the container."""
    from fpspec.exact.blocks import quantize_view_exact
    from fpspec.fast.blocks import quantize_view_fast
    from fpspec.quantization import tensor_amax
    from fpspec.schemes import resolve_spec

    rng = np.random.default_rng(7)
    x = (rng.standard_normal((M, K)) * 2.0 ** rng.uniform(-20, 20, (M, K))).astype(np.float32)
    x[0, :3] = -0.0
    block = 32 if scheme == "mxfp4" else 16
    spec = resolve_spec(scheme, profile, block=block, tile="1xB", target=None, scale_format=None,
                        zero_scale_rule=None, rounding="rne")
    g = tensor_amax(x)
    qt = quantize(x, scheme, profile=profile)
    ref = dequantize(qt).view(np.uint32)
    assert np.array_equal(quantize_view_fast(x, spec, float(g), hot_path=False).dequant.view(np.uint32), ref)
    assert np.array_equal(quantize_view_exact(x, spec, float(g)).dequant.view(np.uint32), ref)


@pytest.mark.parametrize("kind", ["wide", "edge"])
def test_exact_equals_fast_rht(kind):
    """FPS-BLK-15, FPS-BLK-10: columnwise quantization after the Hadamard transform, both paths."""
    rng = np.random.default_rng(11)
    x, _ = _data(kind, rng)
    a = quantize(x, "nvfp4", profile="te-kernel", columnwise=True, rht=True, impl="fast")
    b = quantize(x, "nvfp4", profile="te-kernel", columnwise=True, rht=True, impl="exact")
    assert np.array_equal(a.codes, b.codes) and np.array_equal(a.scales, b.scales) and a.amax == b.amax


def test_rht_exact_equals_fast():
    """FPS-BLK-10: the binary32 Hadamard transform is bit-equal in both paths, subnormals included."""
    from fpspec.exact.blocks import rht16_exact
    from fpspec.fast.blocks import rht16_fast

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((8, 32)) * 2.0 ** rng.uniform(-149, 100, (8, 32))).astype(np.float32)
    x[0, :16] = -0.0
    a, b = rht16_fast(x), rht16_exact(x)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scheme,profile,kw", [c for c in CONFIGS if c[0] != "mxfp4" and not c[2].get("rounding")
                                               and c[2].get("tile") != "BxB"])
def test_hot_path_equals_general_kernel(scheme, profile, kw, kind):
    """FPS-BLK-15: the vectorized RNE hot path equals the general kernel (itself tested against the spec)."""
    from fpspec.fast.blocks import quantize_view_fast
    from fpspec.quantization import prepare_view, tensor_amax
    from fpspec.schemes import resolve_spec

    rng = np.random.default_rng(hash((scheme, profile, kind)) % 2**32)
    x, amax = _data(kind, rng)
    kw = dict(kw)
    spec = resolve_spec(scheme, profile, block=kw.pop("block", 16), tile="1xB", target=kw.pop("target", None),
                        scale_format=kw.pop("scale_format", None), zero_scale_rule=kw.pop("zero_scale_rule", None),
                        rounding="rne")
    v, _, _ = prepare_view(x, spec, columnwise=kw.pop("columnwise", False))
    g = tensor_amax(v) if amax is None else np.float32(amax)
    hot = quantize_view_fast(v, spec, float(g), want_dequant=False)
    gen = quantize_view_fast(v, spec, float(g), hot_path=False)
    assert hot.dequant is None
    assert np.array_equal(hot.codes, gen.codes) and np.array_equal(hot.scales, gen.scales)


_ALL_PROFILES = [("ue5m3", "exact"), ("ue5m3", "seed-fp32"), ("nvfp4", "te-fp32"), ("nvfp4", "te-kernel"),
                 ("nvfp4", "exact"), ("nvfp4", "torchao-0.18"), ("mxfp4", "floor"), ("mxfp4", "ceil"),
                 ("mxfp4", "even"), ("mxfp4", "rceil")]


def _hypothesis_case():
    from hypothesis import strategies as st

    f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
    return st.tuples(
        st.lists(f32, min_size=32, max_size=32),
        st.sampled_from(_ALL_PROFILES),
        st.one_of(st.none(), st.floats(width=32, min_value=2.0 ** -149, max_value=float(np.finfo(np.float32).max))),
        st.booleans(),
        st.integers(0, 2 ** 32 - 1),
    )


def test_exact_equals_fast_hypothesis():
    """FPS-BLK-15: arbitrary binary32 blocks (subnormals, huge values, signed zeros), every profile,
    measured or given amax, RNE or the profile's stochastic mode: both paths agree or both refuse."""
    from hypothesis import HealthCheck, given, settings

    from fpspec.errors import FpspecError
    from fpspec.schemes import get_profile

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_hypothesis_case())
    def check(case):
        values, (scheme, profile), amax, stochastic, seed = case
        x = np.array(values, dtype=np.float32).reshape(1, 32)
        kw: dict = {"profile": profile}
        if scheme != "mxfp4":
            kw["amax"] = amax
        sr = [m for m in get_profile(scheme, profile).roundings if m.startswith("sr")]
        if stochastic and sr:
            kw["rounding"] = sr[0]
            kw["rbits"] = np.random.default_rng(seed).integers(0, 256, x.shape, dtype=np.uint8)
        results = []
        for impl in ("fast", "exact"):
            try:
                q = quantize(x, scheme, impl=impl, **kw)
                results.append((q.codes.tolist(), q.scales.tolist(), int(q.encode_scale.view(np.uint32)),
                                dequantize(q).view(np.uint32).tolist()))
            except FpspecError as exc:
                results.append(("refused", str(exc).split(" (")[0]))
        assert results[0] == results[1]

    check()
