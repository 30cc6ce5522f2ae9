"""The torch twin of the MX block profiles (fpspec.torch.mx) bit-equal to the fast twin and the spec
(FPS-BLK-12, 13, 22, 23, 24, 26, 27, 28, 29).

Every MX-family profile of ``mxfp4`` and ``mxfp8`` (enumerated from fpspec.schemes), each payload
format and each rounding the profile accepts, on float32 and float64 views built to hit every
rule: block amaxes within ulps of 2^k, of max 2^k and of the EVEN point (every k of binary32),
every code and every midpoint of neighbouring codes at several scales (and one ulp either side),
zero blocks and negative zeros, subnormal blocks and scale byte 0, amaxes next to FLT_MAX,
values that underflow microxcaling's binary32 quotient, the worked examples of the scheme pages,
and seeded random blocks over the whole exponent range.  Codes and scale bytes are compared with
``fpspec.fast.blocks.quantize_view_fast`` (large cases) and ``fpspec.exact.blocks.quantize_view_exact``
(small ones); the given-block-amax path, chunking, stochastic rounding of E2M1 payloads (N = 1, 8,
23, 32), FL / CL against the fast twin's tables, and every refusal.  Torch tensors are copied to
the host here, in the test only.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the [torch] extra; the suite runs without it (README)

import fpspec.torch.mx as tmx  # noqa: E402
from fpspec.choices import RoundingMode  # noqa: E402
from fpspec.errors import FpspecError  # noqa: E402
from fpspec.exact.blocks import quantize_view_exact  # noqa: E402
from fpspec.fast.blocks import quantize_view_fast  # noqa: E402
from fpspec.formats import get_format  # noqa: E402
from fpspec.fast.log2 import float_log2_ceil_f32, float_log2_floor_f32  # noqa: E402
from fpspec.schemes import get_profile, get_scheme, profiles_of, resolve_spec  # noqa: E402
from fpspec.torch.mx import (MX_ARITHMETICS, float_log2_ceil_torch, float_log2_floor_torch,  # noqa: E402
                             quantize_mx_torch)

B = 32
F32_MAX = float(np.finfo(np.float32).max)


def _cases() -> list[tuple[str, str, str, str]]:
    """(scheme, profile, payload format, rounding) of every MX-family profile."""
    out = []
    for scheme in ("mxfp4", "mxfp8"):
        for name in profiles_of(scheme):
            prof = get_profile(scheme, name)
            if prof.arithmetic not in MX_ARITHMETICS:
                continue
            for pf in get_scheme(scheme).payload_formats:
                for rounding in prof.roundings:
                    out.append((scheme, name, pf, rounding))
    return out


CASES = _cases()
CASE_IDS = ["-".join(c) for c in CASES]


def test_every_mx_profile_is_enumerated():
    """Every profile of both schemes is an MX-family one, and each payload format appears."""
    names = {(s, p) for s, p, _, _ in CASES}
    assert names == {(s, p) for s in ("mxfp4", "mxfp8") for p in profiles_of(s)}
    assert {pf for _, _, pf, _ in CASES} == {"e2m1", "e4m3", "e5m2"}
    assert len(names) == 10 + 4  # mxfp4: 4 OCP, 5 torchao-0.18, microxcaling; mxfp8: 4 OCP


# ------------------------------------------------------------------ the inputs
def _values_of(pf: str) -> np.ndarray:
    """The finite nonnegative values of a payload format's magnitude codes, ascending."""
    f = get_format(pf)
    return np.array([float(f.decode_exact(c)) for c in range(f.max_finite_code + 1)])


def _ulps(v: np.ndarray, n: int, dtype) -> np.ndarray:
    """v moved by n ulps of dtype (positive v)."""
    out = v.astype(dtype)
    step = np.inf if n > 0 else 0
    for _ in range(abs(n)):
        out = np.nextafter(out, dtype(step))
    return out


def _special_blocks(pf: str, dtype) -> list[np.ndarray]:
    """Hand-picked blocks of 32: decision points at several scales, zeros, subnormals, huge values,
    the worked examples, amaxes next to 2^k, max 2^k and the EVEN point."""
    f32 = np.float32
    vals = _values_of(pf)
    mids = (vals[1:] + vals[:-1]) / 2
    top = vals[-1]
    emax = int(np.floor(np.log2(top)))
    blocks: list[np.ndarray] = []

    def add(v):
        v = np.asarray(v, dtype=np.float64)
        blk = np.zeros(B)
        blk[:min(B, v.size)] = v[:B]
        blocks.append(blk.astype(dtype))

    pts = np.concatenate([vals, mids])
    for j in (-140, -127, -126, -100, -20, -3, 0, 1, 7, 60, 100, 120):
        scale = 2.0 ** j
        if top * scale >= F32_MAX:
            continue
        for chunk in range(0, pts.size, B - 1):
            seg = pts[chunk:chunk + B - 1] * scale
            for n in (0, 1, -1):
                body = np.where(seg > 0, _ulps(seg, n, dtype), seg) if n else seg
                sign = np.where(np.arange(body.size) % 2 == 0, 1.0, -1.0)
                add(np.concatenate([[top * scale], body * sign]))
    add(np.zeros(B))
    add(-np.zeros(B))
    add(np.where(np.arange(B) % 3 == 0, -0.0, 0.0))
    add([-0.0, 1.0, -0.0, -1e-30, 0.0, -3.0])
    tiny = np.float32(2.0 ** -149)
    add([tiny * k * (-1) ** k for k in range(1, 33)])                       # subnormal binary32 block
    add([2.0 ** -126, -(2.0 ** -127), 1.5 * 2.0 ** -125, -1.5 * 2.0 ** -126])  # FPS-BLK-23 worked block
    add([F32_MAX, -F32_MAX, 2.0 ** 127, 1.0, 2.0 ** -149, -(2.0 ** -149)])
    add([float(f32(3.0e38)), 1e-45, -1e-40])
    add([1.0, 0.0625 - 2.0 ** -28, 0.25 - 2.0 ** -26, -(0.25 - 2.0 ** -26)])   # FPS-BLK-24 worked
    add([float(np.array([0x447FFFFF], np.uint32).view(np.float32)[0]), 2.0, -4.0])
    for bits in (0x43400001, 0x45C00001, 0x3BC00001, 0x40FFFFFF, 0x41800001):
        add([float(np.array([bits], np.uint32).view(np.float32)[0]), 1.0, -0.5])
    # a_B = 2^k (1 - 2^-24) and its neighbours (FL one too high), k = -1..2
    for k in (-1, 0, 1, 2):
        add([2.0 ** k * (1 - 2.0 ** -24), -(2.0 ** k) * (1 - 2.0 ** -23), 2.0 ** (k - 3)])
    if dtype == np.float64:
        add([1e-300, -1e-310, 5e-324, 1e-320])                          # below binary32, kept in binary64
        add([1.0 + 2.0 ** -40, 1.5 + 2.0 ** -52, -(6.0 + 2.0 ** -50), 0.75 - 2.0 ** -53])
    # block amaxes next to 2^k, max 2^k and the EVEN point, every k of binary32
    even = 2.0 - 2.0 ** -(_man_bits(pf) + 1)
    for k in range(-149, 128):
        for base in (1.0, top / 2.0 ** emax, even):
            a = base * 2.0 ** k
            if a >= F32_MAX or a < 2.0 ** -149:
                continue
            amaxes = [float(_ulps(np.array([a]), n, np.float32)[0]) for n in (-2, -1, 0, 1, 2)]
            if dtype == np.float64:  # mantissa fields a binary32 amax cannot have (ceil: field 1)
                amaxes += [float(_ulps(np.array([a]), n, np.float64)[0]) for n in (-1, 1)]
            for am in amaxes:
                if np.isfinite(am) and am > 0:
                    add([am, am / 3, -am / 7])
    return blocks


def _man_bits(pf: str) -> int:
    return {"e2m1": 1, "e4m3": 3, "e5m2": 2}[pf]


def _random_blocks(rng: np.random.Generator, n: int, dtype) -> list[np.ndarray]:
    """Seeded random blocks over the whole range: normal values times 2^j per block."""
    out = []
    js = rng.integers(-150, 126, n)
    kinds = rng.integers(0, 4, n)
    for j, kind in zip(js, kinds):
        v = rng.standard_normal(B) * 2.0 ** int(j)
        if kind == 1:
            v[rng.integers(0, B, 8)] = 0.0
            v[rng.integers(0, B, 4)] = -0.0
        elif kind == 2:   # a wide block: a few large values, the rest far smaller
            v *= 2.0 ** rng.integers(-40, 1, B)
        elif kind == 3:
            v = np.round(v / 2.0 ** int(j) * 8) / 8 * 2.0 ** int(j)
        v = np.clip(v, -F32_MAX, F32_MAX)
        out.append(v.astype(dtype))
    return out


def _matrix(blocks: list[np.ndarray], per_row: int = 8) -> np.ndarray:
    rows = -(-len(blocks) // per_row)
    dtype = blocks[0].dtype
    pad = [np.zeros(B, dtype)] * (rows * per_row - len(blocks))
    return np.concatenate(blocks + pad).reshape(rows, per_row * B)


@pytest.fixture(scope="module")
def inputs() -> dict[tuple[str, str], np.ndarray]:
    """payload format, dtype name -> the (M, 256) view: special blocks then seeded random ones."""
    out = {}
    for pf in ("e2m1", "e4m3", "e5m2"):
        for dtype in (np.float32, np.float64):
            rng = np.random.default_rng(zlib.crc32(f"{pf} {np.dtype(dtype).name}".encode()))
            blocks = _special_blocks(pf, dtype) + _random_blocks(rng, 2048, dtype)
            out[(pf, np.dtype(dtype).name)] = _matrix(blocks)
    return out


def _amax(x: np.ndarray) -> np.float32:
    """The binary32 max |x| (fpspec.quantization.quantize: the largest magnitude rounded once)."""
    return np.float32(np.abs(x).max()) if x.size else np.float32(0)


def _torch(x: np.ndarray, spec, rbits=None, block_amax=None):
    c, s, enc, dec = quantize_mx_torch(torch.from_numpy(x), spec, float(_amax(x)), rbits, block_amax)
    assert c.dtype == torch.uint8 and s.dtype == torch.uint8
    assert isinstance(enc, np.float32) and isinstance(dec, np.float32) and enc == 1 and dec == 1
    return c.numpy(), s.numpy()


def _assert_equal(got, want, what: str) -> None:
    codes, scales = got
    bad_s = np.argwhere(scales != want.scales)
    assert bad_s.size == 0, f"{what}: {len(bad_s)} scale bytes differ, first at {tuple(bad_s[0])}: " \
                            f"{scales[tuple(bad_s[0])]:#x} != {want.scales[tuple(bad_s[0])]:#x}"
    bad = np.argwhere(codes != want.codes)
    assert bad.size == 0, f"{what}: {len(bad)} codes differ, first at {tuple(bad[0])}: " \
                          f"{codes[tuple(bad[0])]:#x} != {want.codes[tuple(bad[0])]:#x}"
    assert codes.shape == want.codes.shape and scales.shape == want.scales.shape


# ------------------------------------------------------------ against the fast twin
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("scheme, profile, pf, rounding", CASES, ids=CASE_IDS)
def test_equals_fast(scheme, profile, pf, rounding, dtype, inputs):
    """Codes and scale bytes equal the fast twin's on every special and random block."""
    x = inputs[(pf, dtype)]
    spec = resolve_spec(scheme, profile, rounding=rounding, payload_format=pf)
    want = quantize_view_fast(x, spec, float(_amax(x)), None, want_dequant=False)
    _assert_equal(_torch(x, spec), want, f"{scheme}/{profile} {pf} {rounding} {dtype}")


@pytest.mark.parametrize("scheme, profile, pf, rounding", CASES[::3], ids=CASE_IDS[::3])
def test_given_block_amax_and_chunks(scheme, profile, pf, rounding, inputs, monkeypatch):
    """The input scan's block amaxes (binary32 views) give the same outputs as measuring them, and
    so do many small chunks of rows."""
    x = inputs[(pf, "float32")][:300]
    spec = resolve_spec(scheme, profile, rounding=rounding, payload_format=pf)
    ba = np.abs(x).reshape(-1, B).max(axis=1)
    want = quantize_view_fast(x, spec, float(_amax(x)), None, want_dequant=False, block_amax=ba)
    _assert_equal(_torch(x, spec, block_amax=torch.from_numpy(ba)), want, "given block amax")
    monkeypatch.setattr(tmx, "CHUNK", 3 * 256)
    _assert_equal(_torch(x, spec), want, "chunked")
    _assert_equal(_torch(np.ascontiguousarray(x[:7]), spec),
                  quantize_view_fast(np.ascontiguousarray(x[:7]), spec, 1.0, None, want_dequant=False), "7 rows")


def test_empty_and_noncontiguous_views():
    spec = resolve_spec("mxfp8", "floor")
    c, s, _, _ = quantize_mx_torch(torch.zeros((0, 64)), spec, 0.0, None, None)
    assert c.shape == (0, 64) and s.shape == (0, 2)
    x = np.random.default_rng(5).standard_normal((64, 96)).astype(np.float32)
    xt = torch.from_numpy(x).t()  # a (96, 64) non-contiguous view
    c, s, _, _ = quantize_mx_torch(xt, spec, float(_amax(x)), None, None)
    want = quantize_view_fast(np.ascontiguousarray(x.T), spec, float(_amax(x)), None, want_dequant=False)
    _assert_equal((c.numpy(), s.numpy()), want, "transposed view")


# ----------------------------------------------------- stochastic rounding (E2M1)
SR_MODES = [RoundingMode.SR_MIDPOINT, RoundingMode.SR_ADD, RoundingMode.SR_UNBIASED]
SR_PROFILES = ["floor", "rceil", "torchao-0.18-floor", "torchao-0.18-rceil"]


def _rbits(rng, shape, nbits):
    """(torch rbits, numpy rbits) with values below 2^nbits, 0 and 2^nbits - 1 included."""
    r = rng.integers(0, 2 ** nbits, shape, dtype=np.int64)
    r.reshape(-1)[:4] = [0, 2 ** nbits - 1, 0, 2 ** nbits - 1]
    tdt = {1: torch.uint8, 8: torch.uint8, 23: torch.int32, 32: torch.uint32}[nbits]
    ndt = np.uint8 if nbits <= 8 else np.uint32
    return torch.from_numpy(r).to(tdt), r.astype(ndt)


@pytest.mark.parametrize("nbits", [1, 8, 23, 32])
@pytest.mark.parametrize("mode", SR_MODES, ids=[m.value for m in SR_MODES])
def test_stochastic_e2m1_equals_fast(mode, nbits, inputs):
    """E2M1 payloads under the stochastic modes (a spec built with ``with_``): equal to the fast
    twin's exact threshold comparisons, on binary32 and binary64 views."""
    rng = np.random.default_rng(nbits * 7 + SR_MODES.index(mode))
    for dtype in ("float32", "float64"):
        x = inputs[("e2m1", dtype)][::3]
        for profile in SR_PROFILES:
            spec = resolve_spec("mxfp4", profile).with_(rounding=mode, nbits=nbits)
            rt, rn = _rbits(rng, x.shape, nbits)
            want = quantize_view_fast(x, spec, float(_amax(x)), rn, want_dequant=False)
            _assert_equal(_torch(x, spec, rbits=rt), want, f"{profile} {mode.value} N={nbits} {dtype}")


def test_rtz_e2m1_equals_fast(inputs):
    x = inputs[("e2m1", "float64")]
    spec = resolve_spec("mxfp4", "even").with_(rounding=RoundingMode.RTZ)
    _assert_equal(_torch(x, spec), quantize_view_fast(x, spec, float(_amax(x)), None, want_dequant=False), "rtz")


def test_stochastic_thresholds_exactly():
    """Values exactly at the stochastic thresholds of FPS-RND-5..7 (delta = k / 2^N), every r of
    N = 1 and 3, against the spec: sr-unbiased rounds up iff r < delta 2^N, sr-add iff
    delta + r/2^N >= 1, sr-midpoint iff delta + (2r+1)/2^(N+1) >= 1."""
    for nbits in (1, 3):
        n = 2 ** nbits
        # block amax 6 (e = 0 under floor): elements between 1 and 1.5 (step 0.5) and 4 and 6 (step 2)
        xs, rs = [], []
        for lo, step in ((1.0, 0.5), (4.0, 2.0), (0.0, 0.5)):
            for k in range(n):
                for r in range(n):
                    xs.append(lo + step * k / n)
                    rs.append(r)
        while len(xs) % (B - 1):
            xs.append(0.0)
            rs.append(0)
        rows = len(xs) // (B - 1)
        x = np.concatenate([np.full((rows, 1), 6.0), np.array(xs).reshape(rows, B - 1)], axis=1)
        x = np.concatenate([x, -x], axis=0).astype(np.float32)
        r = np.concatenate([np.zeros((rows, 1)), np.array(rs).reshape(rows, B - 1)], axis=1)
        r = np.concatenate([r, r]).astype(np.uint8)
        for mode in SR_MODES:
            spec = resolve_spec("mxfp4", "floor").with_(rounding=mode, nbits=nbits)
            want = quantize_view_exact(x, spec, float(_amax(x)), r)
            _assert_equal(_torch(x, spec, rbits=torch.from_numpy(r)), want, f"{mode.value} N={nbits}")


# ---------------------------------------------------------- against the spec
def _small(pf: str, dtype, rng) -> np.ndarray:
    blocks = _special_blocks(pf, dtype)
    pick = rng.choice(len(blocks), 10, replace=False)
    chosen = [blocks[i] for i in sorted(pick)] + blocks[-40:-38] + _random_blocks(rng, 4, dtype)
    return _matrix(chosen, per_row=2)


@pytest.mark.parametrize("scheme, profile, pf, rounding", CASES, ids=CASE_IDS)
def test_equals_exact_small(scheme, profile, pf, rounding):
    """A few small views (special blocks, worked examples, random blocks) against the spec (binary64
    views for ``rna``, binary32 for the rest and for the binary32 reproductions)."""
    rng = np.random.default_rng(zlib.crc32(f"{profile} {pf} {rounding}".encode()))
    dtype = np.float64 if rounding == "rna" else np.float32
    spec = resolve_spec(scheme, profile, rounding=rounding, payload_format=pf)
    x = _small(pf, dtype, rng)
    if spec.arithmetic.binary32_input:
        x = x.astype(np.float32)  # the door's step 0: these profiles read a binary32 view (RNE)
    want = quantize_view_exact(x, spec, float(_amax(x)))
    _assert_equal(_torch(x, spec), want, f"{scheme}/{profile} {pf} {rounding}")


@pytest.mark.parametrize("mode", SR_MODES, ids=[m.value for m in SR_MODES])
def test_stochastic_equals_exact_small(mode):
    rng = np.random.default_rng(11)
    for nbits in (1, 8, 23, 32):
        x = _small("e2m1", np.float64, rng)
        spec = resolve_spec("mxfp4", "ceil").with_(rounding=mode, nbits=nbits)
        rt, rn = _rbits(rng, x.shape, nbits)
        want = quantize_view_exact(x, spec, float(_amax(x)), rn)
        _assert_equal(_torch(x, spec, rbits=rt), want, f"{mode.value} N={nbits}")


@pytest.mark.parametrize("profile, values, scale, codes", [
    # docs/scheme-mxfp4.rst, FPS-BLK-23 worked block
    ("floor", [1.5 * 2.0 ** -125, 2.0 ** -126, 2.0 ** -127, -1.5 * 2.0 ** -126], 0, [7, 4, 2, 0xD]),
    ("torchao-0.18-floor", [1.5 * 2.0 ** -125, 2.0 ** -126, 2.0 ** -127, -1.5 * 2.0 ** -126], 0, [5, 2, 1, 0xB]),
    ("torchao-0.18-rceil", [1.5 * 2.0 ** -125, 2.0 ** -126, 2.0 ** -127, -1.5 * 2.0 ** -126], 0, [0, 0, 0, 8]),
    # a_B = 192.00002 (0x43400001): torchao-0.18-rceil 0x84 and the amax saturates; rceil 0x85 (x / 64: 3)
    ("torchao-0.18-rceil", [float(np.array([0x43400001], np.uint32).view(np.float32)[0])], 0x84, [7]),
    ("rceil", [float(np.array([0x43400001], np.uint32).view(np.float32)[0])], 0x85, [5]),  # 3.0000003 -> 3
    # FPS-BLK-24: a_B = 0x447FFFFF has FL = 10: c = 0x87 and the element quantizes to 4 (code 6)
    ("microxcaling", [float(np.array([0x447FFFFF], np.uint32).view(np.float32)[0])], 0x87, [6]),
])
def test_worked_examples(profile, values, scale, codes):
    x = np.zeros((1, B), np.float32)
    x[0, :len(values)] = values
    c, s = _torch(x, resolve_spec("mxfp4", profile))
    assert int(s[0, 0]) == scale
    assert [int(v) for v in c[0, :len(codes)]] == codes


def test_mxfp8_worked_examples():
    """docs/scheme-mxfp8.rst: a block with amax 1.0 and E4M3: c = 119, 1.0 -> 0x78, 2^-17 -> 0x01,
    -0.75 -> 0xF4; E5M2 60000 saturates to 0x7B; -0.0 keeps 0x80."""
    x = np.zeros((1, 2 * B), np.float32)
    x[0, :4] = [1.0, 2.0 ** -17, -0.75, -0.0]
    x[0, B] = 60000.0
    c, s = _torch(x, resolve_spec("mxfp8", "floor"))
    assert int(s[0, 0]) == 119 and [int(v) for v in c[0, :4]] == [0x78, 0x01, 0xF4, 0x80]
    c, s = _torch(x, resolve_spec("mxfp8", "floor", payload_format="e5m2"))
    assert int(s[0, 1]) == 127 and int(c[0, B]) == 0x7B


# ----------------------------------------------------------------- FL and CL
def test_float_log2_floor_and_ceil_match_the_tables():
    """FL and CL (FPS-BLK-22) from bits equal the fast twin's, next to every power of two (64
    patterns either side) and on random binary32 patterns, subnormals included."""
    pows = np.array([1 << j for j in range(23)] + [e << 23 for e in range(1, 256)], dtype=np.int64)
    near = (pows[:, None] + np.arange(-64, 65)[None, :]).reshape(-1)
    rand = np.random.default_rng(3).integers(1, 0x7F800000, 200_000)
    bits = np.unique(np.concatenate([near, rand, [1, 2, 3, 0x7F7FFFFF]]))
    bits = bits[(bits > 0) & (bits < 0x7F800000)]
    v = bits.astype(np.uint32).view(np.float32)
    tb = torch.from_numpy(bits)
    assert np.array_equal(float_log2_floor_torch(tb).numpy(), float_log2_floor_f32(v))
    assert np.array_equal(float_log2_ceil_torch(tb).numpy(), float_log2_ceil_f32(v))


# ------------------------------------------------------------------- refusals
def test_refusals():
    x = torch.ones((2, 64))
    spec = resolve_spec("mxfp4", "floor")
    with pytest.raises(FpspecError, match="1xB blocks only"):
        quantize_mx_torch(x, spec.with_(tile="BxB"), 1.0, None, None)
    with pytest.raises(FpspecError, match="no MX rule for e4m3"):
        quantize_mx_torch(x, resolve_spec("mxfp8", "floor").with_(rounding=RoundingMode.SR_MIDPOINT), 1.0,
                          torch.zeros((2, 64), dtype=torch.uint8), None)
    with pytest.raises(FpspecError, match="no MX rule for microxcaling"):
        quantize_mx_torch(x, resolve_spec("mxfp4", "microxcaling").with_(rounding=RoundingMode.SR_ADD), 1.0,
                          torch.zeros((2, 64), dtype=torch.uint8), None)
    for mode in (RoundingMode.UP, RoundingMode.DOWN, RoundingMode.RNE_BITS):
        with pytest.raises(FpspecError, match="no MX rule"):
            quantize_mx_torch(x, spec.with_(rounding=mode), 1.0, None, None)
    with pytest.raises(FpspecError, match="MX profiles"):
        quantize_mx_torch(x, resolve_spec("nvfp4", None), 1.0, None, None)
    with pytest.raises(FpspecError, match=r"stochastic rounding needs rbits of shape \(2, 64\)"):
        quantize_mx_torch(x, spec.with_(rounding=RoundingMode.SR_MIDPOINT), 1.0, None, None)
    with pytest.raises(FpspecError, match=r"stochastic rounding needs rbits of shape \(2, 64\)"):
        quantize_mx_torch(x, spec.with_(rounding=RoundingMode.SR_MIDPOINT), 1.0,
                          torch.zeros((2, 32), dtype=torch.uint8), None)
    with pytest.raises(FpspecError, match=r"block amaxes must be float32, one per block of the 2x64 view \(4\)"):
        quantize_mx_torch(x, spec, 1.0, None, torch.ones(3))
    with pytest.raises(FpspecError, match="block amaxes must be float32"):
        quantize_mx_torch(x, spec, 1.0, None, torch.ones(4, dtype=torch.float64))
    with pytest.raises(FpspecError, match="not a multiple of the block"):
        quantize_mx_torch(torch.ones((2, 48)), spec, 1.0, None, None)
    with pytest.raises(FpspecError, match="matrix"):
        quantize_mx_torch(torch.ones(64), spec, 1.0, None, None)


# ------------------------------------------------------------------- devices
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("scheme, profile, pf, rounding", CASES, ids=CASE_IDS)
def test_cuda_equals_fast(scheme, profile, pf, rounding, inputs):
    """The same code path on CUDA: outputs on the device, equal to the fast twin, for binary32 and
    binary64 views and for given block amaxes."""
    spec = resolve_spec(scheme, profile, rounding=rounding, payload_format=pf)
    for dtype in ("float32", "float64"):
        x = inputs[(pf, dtype)]
        c, s, _, _ = quantize_mx_torch(torch.from_numpy(x).cuda(), spec, float(_amax(x)), None, None)
        assert c.device.type == "cuda" and s.device.type == "cuda"
        want = quantize_view_fast(x, spec, float(_amax(x)), None, want_dequant=False)
        _assert_equal((c.cpu().numpy(), s.cpu().numpy()), want, f"cuda {scheme}/{profile} {pf} {rounding} {dtype}")
    x = inputs[(pf, "float32")]
    ba = torch.from_numpy(np.abs(x).reshape(-1, B).max(axis=1)).cuda()
    c, s, _, _ = quantize_mx_torch(torch.from_numpy(x).cuda(), spec, float(_amax(x)), None, ba)
    _assert_equal((c.cpu().numpy(), s.cpu().numpy()), quantize_view_fast(x, spec, float(_amax(x)), None,
                                                                        want_dequant=False), "cuda given amax")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("nbits", [1, 8, 23, 32])
def test_cuda_stochastic_equals_fast(nbits, inputs):
    rng = np.random.default_rng(nbits)
    x = inputs[("e2m1", "float64")]
    for mode in SR_MODES:
        spec = resolve_spec("mxfp4", "floor").with_(rounding=mode, nbits=nbits)
        rt, rn = _rbits(rng, x.shape, nbits)
        c, s, _, _ = quantize_mx_torch(torch.from_numpy(x).cuda(), spec, float(_amax(x)), rt.cuda(), None)
        want = quantize_view_fast(x, spec, float(_amax(x)), rn, want_dequant=False)
        _assert_equal((c.cpu().numpy(), s.cpu().numpy()), want, f"cuda {mode.value} N={nbits}")
