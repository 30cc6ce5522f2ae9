"""Exact spec vs fast path of block quantization, bit for bit (FPS-BLK-15).

Every profile x scale format x tile x block x payload rounding (SR with explicit bits of
several widths), columnwise views, padding, the Hadamard transform (binary32 and
bfloat16 output), zero blocks, amax edge cases (held 0, stale, tiny, near FLT_MAX) and
binary64 inputs placed on the decision boundaries of the exact profiles.
"""

from __future__ import annotations

import numpy as np
import pytest

from fpspec.errors import FpspecError
from fpspec.quantization import dequantize, quantize
from fpspec.schemes import BLOCK_SCHEMES, PROFILES, get_profile

M, K = 16, 32
FLT_MAX = float(np.finfo(np.float32).max)


def _data(kind: str, rng: np.random.Generator, shape=(M, K)) -> tuple[np.ndarray, float | None]:
    """A float32 tensor of one kind, and the amax to pass (None = measured)."""
    m, k = shape
    if kind == "normal":
        return rng.standard_normal(shape).astype(np.float32), None
    if kind == "student-t":
        return rng.standard_t(2, shape).astype(np.float32), None
    if kind == "wide":
        return (rng.standard_normal(shape) * 2.0 ** rng.uniform(-30, 30, shape)).astype(np.float32), None
    if kind == "edge":
        x = rng.standard_normal(shape).astype(np.float32)
        x[0, :] = 0.0                          # all-zero blocks
        x[1, :min(k, 32)] = -0.0               # negative zeros
        x[2, :] *= np.float32(2.0 ** -24)      # blocks far below the tensor amax
        x[3, :16] *= np.float32(2.0 ** -60)    # scales that underflow
        x[4, 5] = 1e6                          # the tensor amax
        x[5, :4] = np.float32(2.0 ** -149)     # binary32 subnormals
        return x, None
    if kind == "stale":
        # a held amax far below the current values: blocks saturate at the maximum scale
        return (rng.standard_normal(shape) * 1e3).astype(np.float32), 1e-3
    if kind == "ties":
        # amax 2688 -> G = 1 for T = 448; block amax 6 -> scale exactly 1; payload = x exactly
        t = rng.choice(np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 3.0]), shape)
        t *= rng.choice([-1.0, 1.0], shape)
        t[:, ::16] = 6.0
        t[0, 0] = 2688.0
        return t.astype(np.float32), None
    if kind == "huge":
        # values near FLT_MAX (codes are exact; TE's dequantization overflows: FPS-BLK-21)
        return (rng.uniform(-1, 1, shape) * FLT_MAX).astype(np.float32), None
    if kind == "held-zero":
        return rng.standard_normal(shape).astype(np.float32), 0.0
    raise AssertionError(kind)


def _same(a, b) -> None:
    assert np.array_equal(a.codes, b.codes)
    assert np.array_equal(a.scales, b.scales)
    assert a.encode_scale.view(np.uint32) == b.encode_scale.view(np.uint32)
    assert a.decode_scale.view(np.uint32) == b.decode_scale.view(np.uint32)
    assert a.amax.view(np.uint32) == b.amax.view(np.uint32)
    da, db = dequantize(a, overflow="ieee"), dequantize(b, overflow="ieee")
    assert np.array_equal(da.view(np.uint32), db.view(np.uint32))


def _both(x, scheme, **kw):
    """Both implementations' results, or both refusals' first clause."""
    out = []
    for impl in ("fast", "exact"):
        try:
            out.append(quantize(x, scheme, impl=impl, **kw))
        except FpspecError as exc:
            out.append(("refused", str(exc).split(" (")[0]))
    if isinstance(out[0], tuple) or isinstance(out[1], tuple):
        assert out[0] == out[1]
        return None
    _same(*out)
    return out[0]


def _rbits(rng, shape, nbits, *, edges=False):
    dtype = np.uint8 if nbits <= 8 else (np.uint16 if nbits <= 16 else np.uint32)
    r = rng.integers(0, 1 << nbits, shape, dtype=np.uint64)
    if edges:  # bits near 0 and near 2^N - 1
        r[::2] = rng.integers(0, 3, r[::2].shape)
        r[1::2] = (1 << nbits) - 1 - rng.integers(0, 3, r[1::2].shape)
    return r.astype(dtype)


# -------------------------------------------------- the full cross product
def _cross_product():
    kinds = ["normal", "edge", "ties", "wide", "stale", "student-t", "held-zero", "huge"]
    out, n = [], 0
    for (scheme, name), prof in PROFILES.items():
        sch = BLOCK_SCHEMES[scheme]
        for sf in prof.scale_formats:
            for tile in sch.tiles:
                for block in sch.blocks:
                    for rounding in prof.roundings:
                        out.append((scheme, name, sf, tile, block, rounding, kinds[n % len(kinds)]))
                        n += 1
    return out


CROSS = _cross_product()


@pytest.mark.slow
@pytest.mark.parametrize("scheme,profile,sf,tile,block,rounding,kind", CROSS,
                         ids=["-".join(map(str, c)) for c in CROSS])
def test_every_profile_format_tile_block_rounding(scheme, profile, sf, tile, block, rounding, kind):
    """FPS-BLK-15, FPS-BLK-6, FPS-BLK-7: fast == exact for every combination a profile accepts,
    SR with explicit random bytes."""
    rng = np.random.default_rng(abs(hash((scheme, profile, sf, tile, block, rounding))) % 2**32)
    shape = (block, 2 * block) if tile == "BxB" else (8, 2 * block)
    x, amax = _data(kind, rng, shape)
    kw = dict(profile=profile, tile=tile, block=block, rounding=rounding, scale_format=sf)
    if BLOCK_SCHEMES[scheme].tensor_scale:
        kw["amax"] = amax
    if rounding.startswith("sr"):
        kw["rbits"] = _rbits(rng, shape, 8)
    _both(x, scheme, **kw)


CONFIGS = [
    ("ue5m3", "exact", {}),
    ("ue5m3", "seed-fp32", {}),
    ("ue5m3", "exact", {"scale_format": "ue5m3fnu", "target": 2048}),
    ("ue5m3", "exact", {"tile": "BxB", "zero_scale_rule": False}),
    ("ue5m3", "seed-fp32", {"columnwise": True}),
    ("ue5m3", "exact", {"block": 32}),
    ("ue5m3", "exact", {"rounding": "sr"}),
    ("ue5m3", "seed-fp32", {"rounding": "sr"}),
    ("ue5m3", "seed-fp32", {"rounding": "sr", "sr_eval": "fp32"}),
    ("ue5m3", "exact", {"rounding": "rna"}),
    ("nvfp4", "te-fp32", {}),
    ("nvfp4", "te-fp32", {"tile": "BxB", "columnwise": True}),
    ("nvfp4", "te-kernel", {"rounding": "sr-add"}),
    ("nvfp4", "exact", {}),
    ("nvfp4", "torchao-0.18", {"tile": "BxB"}),
    ("mxfp4", "floor", {}),
    ("mxfp4", "ceil", {}),
    ("mxfp4", "even", {"rounding": "rna"}),
    ("mxfp4", "rceil", {}),
    ("ue5m3", "seed-portable", {}),
    ("ue5m3", "seed-portable", {"rounding": "sr", "sr_eval": "fp32"}),
    ("ue5m3", "seed-triton", {"rounding": "sr", "sr_eval": "fp32"}),
    ("ue5m3", "seed-triton", {"tile": "BxB"}),
    ("mxfp4", "torchao-0.18-floor", {}),
    ("mxfp4", "torchao-0.18-ceil", {}),
    ("mxfp4", "torchao-0.18-even", {}),
    ("mxfp4", "torchao-0.18-rceil", {}),
    ("mxfp4", "microxcaling", {}),
    ("mxfp4", "microxcaling", {"rounding": "rna"}),
    ("mxfp4", "microxcaling", {"rounding": "rtz"}),
]
KINDS = ["normal", "student-t", "wide", "edge", "stale", "ties"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scheme,profile,kw", CONFIGS, ids=[f"{s}-{p}-{'-'.join(k)}" for s, p, k in CONFIGS])
def test_exact_equals_fast(scheme, profile, kw, kind):
    """FPS-BLK-15: codes, scales, tensor scales and dequantized values agree bit for bit."""
    rng = np.random.default_rng(abs(hash((scheme, profile, kind, tuple(kw)))) % 2**32)
    x, amax = _data(kind, rng)
    kw = dict(kw)
    if kw.get("rounding", "").startswith("sr"):
        kw["rbits"] = rng.integers(0, 256, (K, M) if kw.get("columnwise") else (M, K), dtype=np.uint8)
    _both(x, scheme, profile=profile, amax=amax if scheme != "mxfp4" else None, **kw)


@pytest.mark.parametrize("scheme,profile", [("ue5m3", "exact"), ("ue5m3", "seed-fp32"), ("ue5m3", "seed-portable"),
                                            ("nvfp4", "te-fp32"), ("nvfp4", "torchao-0.18"), ("mxfp4", "floor"),
                                            ("mxfp4", "torchao-0.18-floor"), ("mxfp4", "microxcaling")])
def test_kernel_dequant_matches_dequantize(scheme, profile):
    """FPS-BLK-14: the dequantized values each path computes equal dequantize() of the container."""
    from fpspec.exact.blocks import quantize_view_exact
    from fpspec.fast.blocks import quantize_view_fast
    from fpspec.quantization import tensor_amax
    from fpspec.schemes import resolve_spec

    rng = np.random.default_rng(7)
    x = (rng.standard_normal((M, K)) * 2.0 ** rng.uniform(-20, 20, (M, K))).astype(np.float32)
    x[0, :3] = -0.0
    spec = resolve_spec(scheme, profile)
    g = tensor_amax(x)
    ref = dequantize(quantize(x, scheme, profile=profile)).view(np.uint32)
    assert np.array_equal(quantize_view_fast(x, spec, float(g)).dequant.view(np.uint32), ref)
    assert np.array_equal(quantize_view_exact(x, spec, float(g)).dequant.view(np.uint32), ref)
    assert quantize_view_fast(x, spec, float(g), want_dequant=False).dequant is None


# ------------------------------------------------------ stochastic rounding
SR_PROFILES = [(s, p, r) for (s, p), prof in PROFILES.items() for r in prof.roundings if r.startswith("sr")]


@pytest.mark.slow
@pytest.mark.parametrize("nbits", [1, 3, 8, 16, 23, 32])
@pytest.mark.parametrize("scheme,profile,rounding", SR_PROFILES)
def test_sr_every_width_and_edge_bits(scheme, profile, rounding, nbits):
    """FPS-BLK-7, FPS-BLK-15: SR with N = 1..32 random bits, random values and values near 0 and
    2^N - 1, on payload ties and random data: fast == exact."""
    rng = np.random.default_rng(nbits * 7919 + len(profile))
    x, _ = _data("ties", rng)
    y, _ = _data("wide", rng)
    x[8:] = y[8:]
    for edges in (False, True):
        _both(x, scheme, profile=profile, rounding=rounding, nbits=nbits,
              rbits=_rbits(rng, x.shape, nbits, edges=edges))


def test_sr_fp32_evaluation_equals_fast():
    """FPS-BLK-19, FPS-BLK-15: the seed's FP32 SR evaluation, fast == exact, N = 1..23, small payloads
    (where it differs from exact SR) and random data."""
    rng = np.random.default_rng(19)
    for nbits in (1, 4, 8, 12, 23):
        x = (rng.standard_normal((M, K)) * 2.0 ** rng.integers(-30, 2, (M, K))).astype(np.float32)
        x[:, 0] = 6.0
        _both(x, "ue5m3", profile="seed-fp32", rounding="sr", sr_eval="fp32", nbits=nbits, amax=2688.0,
              rbits=_rbits(rng, x.shape, nbits, edges=bool(nbits % 2)))


@pytest.mark.parametrize("sr_eval", ["exact", "fp32"])
def test_sr_with_an_overflowing_payload_product(sr_eval):
    """FPS-BLK-3, FPS-BLK-19, FPS-BLK-15: a held amax far below the values (g = 1e-30, x = 1e30) makes
    seed-fp32's multiplier ge / 61440 = 4.4e28 and fp32(x * mult) = +-inf: the payload saturates at
    +-6 under every SR evaluation, on both paths."""
    x = np.full((1, 16), 1e30, np.float32)
    x[0, 1::2] *= -1
    r = np.full(x.shape, 255, np.uint8)
    q = _both(x, "ue5m3", profile="seed-fp32", rounding="sr", sr_eval=sr_eval, rbits=r, amax=1e-30)
    assert q.codes.tolist() == [[0x7, 0xF] * 8] and q.scales.tolist() == [[0xF7]]


# ------------------------------------------------------ views and transforms
@pytest.mark.parametrize("kind", ["wide", "edge"])
@pytest.mark.parametrize("profile,rht_output", [("te-kernel", None), ("te-fp32", "bf16"), ("te-fp32", None),
                                                ("exact", "bf16")])
def test_exact_equals_fast_rht(kind, profile, rht_output):
    """FPS-BLK-15, FPS-BLK-10, FPS-BLK-20: columnwise quantization after the Hadamard transform,
    binary32 or bfloat16 output, both paths."""
    rng = np.random.default_rng(11)
    x, _ = _data(kind, rng)
    _both(x, "nvfp4", profile=profile, columnwise=True, rht=True, rht_output=rht_output)


def test_rht_exact_equals_fast():
    """FPS-BLK-10, FPS-BLK-20: the binary32 Hadamard transform and the bfloat16 rounding are bit-equal
    in both paths, subnormals included."""
    from fpspec.exact.blocks import rht16_exact, round_bf16_exact
    from fpspec.fast.rht import rht16_fast, round_bf16_fast

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((8, 32)) * 2.0 ** rng.uniform(-149, 100, (8, 32))).astype(np.float32)
    x[0, :16] = -0.0
    a, b = rht16_fast(x), rht16_exact(x)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert np.array_equal(round_bf16_fast(a).view(np.uint32), round_bf16_exact(a).view(np.uint32))


@pytest.mark.parametrize("shape", [(5, 20), (17, 33), (3, 16)])
@pytest.mark.parametrize("scheme,profile,tile", [("ue5m3", "exact", "BxB"), ("ue5m3", "seed-fp32", "1xB"),
                                                 ("nvfp4", "te-fp32", "BxB"), ("mxfp4", "even", "1xB")])
def test_padding_and_columnwise(shape, scheme, profile, tile):
    """FPS-BLK-1, FPS-BLK-15: zero-padded views (rowwise and columnwise), both paths."""
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_t(3, shape).astype(np.float32)
    for cw in (False, True):
        q = _both(x, scheme, profile=profile, tile=tile, pad=True, columnwise=cw)
        assert q.params["view_shape"] == list(shape[::-1] if cw else shape)


# ------------------------------------- MX profiles of binary32 references (float log2)
MX_FP32_PROFILES = [("torchao-0.18-floor", "rne"), ("torchao-0.18-ceil", "rne"), ("torchao-0.18-even", "rne"),
                    ("torchao-0.18-rceil", "rne"), ("microxcaling", "rne"), ("microxcaling", "rna"),
                    ("microxcaling", "rtz")]


def _near_every_power_of_two(rng: np.random.Generator, per_k: int) -> np.ndarray:
    """One block (row) per amax: amaxes within 50 ulps of 2^k and of 6 2^k (the RCEIL quotient's
    binade edge) for every k, byte-0 and subnormal amaxes; each block's other elements are
    -0.0, tiny negatives (quotients that underflow), E2M1 decision points and their binary32
    neighbours relative to the block's power of two, and the values 2^e (0.25 - 2^-26) and
    2^e 8 (1 - 2^-24) that microxcaling's binary32 steps treat specially."""
    rows = []
    for k in range(-149, 128):
        for base in (2.0 ** k, 6.0 * 2.0 ** k):
            if base >= 3.4e38:
                continue
            b = int(np.array([base], np.float32).view(np.uint32)[0])
            for d in rng.integers(-50, 51, per_k):
                a = np.array([min(max(b + int(d), 1), 0x7F7FFFFF)], np.uint32).view(np.float32)[0]
                e = np.floor(np.log2(float(a))) - 2
                pts = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.25 - 2.0 ** -26, 8 * (1 - 2.0 ** -24),
                                0.5, 6.0, 2 * (1 - 2.0 ** -24)]) * 2.0 ** e
                v = np.minimum(rng.choice(pts, 28), float(a)).astype(np.float32)      # |v| <= a_B
                vb = v.view(np.uint32).astype(np.int64) + rng.integers(-1, 2, 28)   # binary32 neighbours
                v = np.minimum(np.maximum(vb, 0).astype(np.uint32).view(np.float32), a)
                row = np.concatenate([v * rng.choice(np.float32([-1, 1]), 28),
                                      np.float32([a, -0.0, -(2.0 ** -149), -3 * 2.0 ** -149])])
                rows.append(rng.permutation(row))
    return np.array(rows, dtype=np.float32)


@pytest.mark.slow
@pytest.mark.parametrize("profile,rounding", MX_FP32_PROFILES)
def test_mx_fp32_profiles_near_every_power_of_two(profile, rounding):
    """FPS-BLK-15, FPS-BLK-22, FPS-BLK-23, FPS-BLK-24: the exact spec (the float-log2 rule decided on
    rational bounds of ln) and the fast path (generated tables) agree on block amaxes next to every
    power of two and 6 2^k, byte-0 blocks, signed and underflowing zeros and element decision points."""
    rng = np.random.default_rng(abs(hash((profile, rounding))) % 2**32)
    x = _near_every_power_of_two(rng, 1)
    assert x.shape == (552, 32) and np.isfinite(x).all()
    assert _both(x, "mxfp4", profile=profile, rounding=rounding) is not None


@pytest.mark.slow
@pytest.mark.parametrize("profile,rounding", MX_FP32_PROFILES)
def test_mx_fp32_profiles_seeded_sweep(profile, rounding):
    """FPS-BLK-15: seeded random blocks over the whole binary32 range, binary32 and binary64 input."""
    rng = np.random.default_rng(len(profile) * 17 + len(rounding))
    for dtype in (np.float32, np.float64):
        e = rng.integers(-150, 127, (24, 4, 1)).astype(np.float64)
        x = (rng.standard_normal((24, 4, 32)) * 2.0 ** e).reshape(24, 128).astype(dtype)
        x[rng.random(x.shape) < 0.05] = -0.0
        assert _both(x, "mxfp4", profile=profile, rounding=rounding) is not None


# ---------------------------------------------------------- amax edge cases
AMAXES = [0.0, 2.0 ** -149, 1e-30, 0.37, 6.0, 2688.0, 1e30, FLT_MAX]


@pytest.mark.slow
@pytest.mark.parametrize("scheme,profile", [k for k in PROFILES if k[0] != "mxfp4"])
def test_given_amax_edge_cases(scheme, profile):
    """FPS-BLK-5, FPS-SCL-10, FPS-BLK-15: held amaxes of 0, the smallest subnormal, tiny, ordinary,
    huge and FLT_MAX: both paths agree, or both refuse (torchao-0.18 with a zero amax)."""
    rng = np.random.default_rng(5)
    x, _ = _data("edge", rng)
    for a in AMAXES:
        _both(x, scheme, profile=profile, amax=a)


# --------------------------------------------------------- binary64 inputs
def _boundary_values(rng, g: float, t: float, sf_values: np.ndarray, n: int) -> np.ndarray:
    """binary64 values next to the exact decision boundaries of an exact profile with amax g and
    target T: scale midpoints (a_B T / g = mid) and payload decision points (|x| 6T = t g s)."""
    out = []
    mids = (sf_values[:-1] + sf_values[1:]) / 2
    for _ in range(n):
        if rng.random() < 0.5:
            v = rng.choice(mids[mids > 0]) * g / t
        else:
            s = rng.choice(sf_values[sf_values > 0])
            v = rng.choice([0.25, 0.5, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0]) * g * s / (6 * t)
        for _ in range(int(rng.integers(-2, 3))):
            v = np.nextafter(v, np.inf)
        out.append(v * rng.choice([-1.0, 1.0]))
    return np.array(out)


B64_CASES = [(s, p, r) for s, p in (("ue5m3", "exact"), ("nvfp4", "exact"), ("mxfp4", "floor"), ("mxfp4", "rceil"))
             for r in ("rne", "rna", "sr-midpoint", "sr-unbiased") if r in get_profile(s, p).roundings]


@pytest.mark.parametrize("scheme,profile,rounding", B64_CASES)
def test_binary64_inputs_at_decision_boundaries(scheme, profile, rounding):
    """FPS-BLK-1, FPS-BLK-15: binary64 inputs (not binary32 values) within a few ulps of the exact
    scale midpoints and payload decision points: the fast path's TwoProduct comparisons give the
    exact spec's codes."""
    from fpspec.fast.rounding import decode_table

    prof = get_profile(scheme, profile)
    rng = np.random.default_rng(len(profile) * 31 + len(rounding))
    sf = decode_table(prof.scale_formats[0])
    sf = np.unique(sf[np.isfinite(sf)])
    for g, t in ((3.0, 448.0), (float(np.float32(0.1)), 448.0), (1e-20, 2048.0)):
        x = _boundary_values(rng, g, t, sf[sf < 1e4], M * K).reshape(M, K)
        x[0, 0] = g  # the tensor amax: the measured g is fp32(max |x|)
        kw = {"profile": profile, "rounding": rounding}
        if prof.target is not None:
            kw.update(target=t, amax=g)
        if rounding.startswith("sr"):
            kw["rbits"] = _rbits(rng, x.shape, 8, edges=True)
        _both(x, scheme, **kw)


def test_binary64_ordinary_arrays_every_profile():
    """FPS-BLK-1, FPS-BLK-15: numpy's default float64 arrays are accepted by every profile, both paths
    agree; binary32 profiles equal their result on the binary32-narrowed array."""
    rng = np.random.default_rng(64)
    x = rng.standard_normal((M, K)) * 2.0 ** rng.integers(-140, 120, (M, K))
    x[1, :] = rng.standard_normal(K) * 1e-300  # far below binary32: exact values, or 0 after narrowing
    for (scheme, profile), prof in PROFILES.items():
        q = _both(x, scheme, profile=profile)
        if prof.arithmetic.binary32_input:
            n = quantize(x.astype(np.float32), scheme, profile=profile)
            assert np.array_equal(q.codes, n.codes) and np.array_equal(q.scales, n.scales)


# ---------------------------------------------------------------- hypothesis
def _hypothesis_case():
    from hypothesis import strategies as st

    f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
    f64 = st.floats(allow_nan=False, allow_infinity=False, min_value=-3.4e38, max_value=3.4e38)
    return st.tuples(
        st.one_of(st.lists(f32, min_size=32, max_size=32), st.lists(f64, min_size=32, max_size=32)),
        st.sampled_from(sorted(PROFILES)),
        st.one_of(st.none(), st.just(0.0),
                  st.floats(width=32, min_value=2.0 ** -149, max_value=FLT_MAX)),
        st.booleans(),
        st.integers(0, 2 ** 32 - 1),
    )


def test_exact_equals_fast_hypothesis():
    """FPS-BLK-15: arbitrary binary32 and binary64 blocks (subnormals, huge values, signed zeros),
    every profile, measured, held-zero or given amax, RNE or the profile's stochastic modes with
    N = 1..23 bits: both paths agree or both refuse."""
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_hypothesis_case())
    def check(case):
        values, (scheme, profile), amax, stochastic, seed = case
        rng = np.random.default_rng(seed)
        dtype = np.float64 if any(float(np.float32(v)) != v for v in values) else np.float32
        x = np.array(values, dtype=dtype).reshape(1, 32)
        kw: dict = {"profile": profile}
        if scheme != "mxfp4":
            kw["amax"] = amax
        sr = [m for m in get_profile(scheme, profile).roundings if m.startswith("sr")]
        if stochastic and sr:
            nbits = int(rng.integers(1, 24))
            kw.update(rounding=sr[int(rng.integers(0, len(sr)))], nbits=nbits, rbits=_rbits(rng, x.shape, nbits))
        _both(x, scheme, **kw)

    check()


def test_thread_setting_reaches_block_kernels():
    """FPS-BLK-15: fpspec.fast.parallel.set_threads (bench --threads) sets the thread count of the
    block kernels' prange loops (Numba's pool), and the thread count never changes a result."""
    import numba

    from fpspec.fast.parallel import set_threads

    rng = np.random.default_rng(8)
    x = rng.standard_t(3, (256, 512)).astype(np.float32)
    try:
        got = []
        for n in (1, 2):
            assert set_threads(n) == n and numba.get_num_threads() == min(n, numba.config.NUMBA_NUM_THREADS)
            q = quantize(x, "ue5m3", profile="seed-fp32", tile="BxB")
            got.append((q.codes.copy(), q.scales.copy(), dequantize(q).view(np.uint32).copy()))
        assert all(np.array_equal(a, b) for a, b in zip(*got))
    finally:
        set_threads(None)
