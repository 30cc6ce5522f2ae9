"""The torch twin of conversion (fpspec.torch.rounding) bit-equal to the fast twin and the spec
(FPS-RND-0..16, FPS-FMT-3).

Every fp16 and bf16 bit pattern to every format of at most 8 bits under every mode (fast twin;
RNE and a subset of every mode against the exact spec), float32 / float64 inputs at every
rounding boundary of every format, seeded fuzz, stochastic rounding with N = 1, 3, 8, 16, 23, 32
(every r at small N, thresholds hit exactly, shifts past 64 and 128), every policy with every
refusal worded as the fast twin words it, and decoding of every code of every format of at most
16 bits plus a binary32 fuzz.  Codes are compared as bits (torch tensors are copied to the host
here, in the test only).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the [torch] extra; the suite runs without it (README)

import fpspec.torch.rounding as tr  # noqa: E402
from fpspec.choices import (NanPolicy, NegativePolicy, OverflowPolicy, Policies, RoundingMode,  # noqa: E402
                            ZeroPolicy, default_policies, validate_mode, validate_policies)
from fpspec.convert import check_random_values  # noqa: E402
from fpspec.errors import FpspecError  # noqa: E402
from fpspec.exact.rounding import decode_exact_codes, encode_exact  # noqa: E402
from fpspec.fast.rounding import decode_fast, encode_fast  # noqa: E402
from fpspec.formats import FORMATS, FloatFormat  # noqa: E402
from fpspec.torch.rounding import decode_torch, encode_torch  # noqa: E402

from sweep_helpers import accepting_policies, mismatch_report  # noqa: E402

SMALL = [f for f in FORMATS.values() if f.bits <= 8]
MODES = list(RoundingMode)
SR = [m for m in MODES if m.stochastic]
NP_CODE = {torch.uint8: np.uint8, torch.uint16: np.uint16, torch.uint32: np.uint32}


# ---------------------------------------------------------------- helpers
def to_torch(x: np.ndarray) -> "torch.Tensor":
    """A numpy float array (bfloat16 from ml_dtypes included) as a torch tensor, bit for bit."""
    if x.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(x.copy())


def modes_of(fmt: FloatFormat) -> list[RoundingMode]:
    out = []
    for m in MODES:
        try:
            validate_mode(fmt, m)
        except FpspecError:
            continue
        out.append(m)
    return out


def sweep_policies(fmt: FloatFormat) -> Policies:
    """Policies under which every input has a code; negatives to unsigned formats as |x| (so the
    directed modes round them)."""
    return accepting_policies(fmt, negative="abs") if not fmt.signed else accepting_policies(fmt)


def outcome(fn, *args, **kw):
    try:
        return fn(*args, **kw), None
    except FpspecError as exc:
        return None, (str(exc), exc.index)


def agree(x: np.ndarray, fmt, mode, *, rbits=None, nbits=8, policies=None, want=None):
    """encode_torch == encode_fast (codes and dtype, or the same refusal); returns the codes."""
    kw = {"nbits": nbits, "policies": policies}
    fast, fast_err = outcome(encode_fast, x, fmt, mode, rbits=rbits, **kw)
    rt = None if rbits is None else torch.from_numpy(np.ascontiguousarray(rbits))
    got, got_err = outcome(encode_torch, to_torch(x), fmt, mode, rbits=rt, **kw)
    assert got_err == fast_err, f"{fmt} {mode}: torch {got_err} fast {fast_err}"
    if got is None:
        return None
    assert got.dtype == tr.code_dtype(fmt) and tuple(got.shape) == x.shape
    g = got.numpy()
    assert g.dtype == fast.dtype
    assert np.array_equal(g, fast), f"{fmt.name if hasattr(fmt, 'name') else fmt} {mode}: " + \
        mismatch_report(x, g, fast)
    if want is not None:
        assert np.array_equal(g, want), f"{fmt} {mode} vs exact: " + mismatch_report(x, g, want)
    return g


def all16(dtype) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint16).view(dtype)


def rbits_for(n: int, nbits: int, seed: int) -> np.ndarray:
    dt = np.uint8 if nbits <= 8 else (np.uint16 if nbits <= 16 else np.uint32)
    return np.random.default_rng(seed).integers(0, 1 << nbits, n, dtype=np.uint64).astype(dt)


# ------------------------------------------------- exhaustive 16-bit inputs
@pytest.mark.parametrize("src", [np.float16, ml_dtypes.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_every_16bit_input_every_mode(src, fmt):
    """FPS-RND-0..8, FPS-RND-15: all 65536 patterns (NaNs, Infs, subnormals) == fast twin, every mode."""
    x = all16(src)
    pol = sweep_policies(fmt)
    for i, mode in enumerate(modes_of(fmt)):
        if mode.stochastic:
            for nbits in (3, 8):
                agree(x, fmt, mode, rbits=rbits_for(x.size, nbits, i + nbits), nbits=nbits, policies=pol)
        else:
            agree(x, fmt, mode, policies=pol)


@pytest.mark.parametrize("src", [np.float16, ml_dtypes.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_every_16bit_input_rne_equals_spec(src, fmt):
    """FPS-RND-1: RNE of every pattern == the exact spec (not only the fast twin); every other mode
    on every 64th pattern."""
    x = all16(src)
    pol = sweep_policies(fmt)
    agree(x, fmt, RoundingMode.RNE, policies=pol, want=encode_exact(x, fmt, RoundingMode.RNE, policies=pol))
    xs = x[::64]
    for mode in modes_of(fmt):
        r = rbits_for(xs.size, 8, 3) if mode.stochastic else None
        want = encode_exact(xs, fmt, mode, rbits=r, nbits=8, policies=pol)
        agree(xs, fmt, mode, rbits=r, nbits=8, policies=pol, want=want)


# ------------------------------------------------------ rounding boundaries
def grid_values(fmt: FloatFormat) -> np.ndarray:
    """The format's non-negative finite values ascending (float64), binary32: a sample with its edges."""
    if fmt.bits <= 16:
        v = decode_fast(np.arange(fmt.num_codes), fmt)
        return np.unique(np.abs(v[np.isfinite(v)]))
    rng = np.random.default_rng(32)
    codes = np.concatenate([np.arange(0, 64), np.arange(0x7FFFC0, 0x800040), np.arange(0x7F7FFFC0, 0x7F800000),
                            rng.integers(0, 0x7F800000, 4000)]).astype(np.uint32)
    return np.unique(codes.view(np.float32).astype(np.float64))


def boundary_inputs(fmt: FloatFormat, dtype) -> np.ndarray:
    """Every value and every midpoint between neighbours (including max + quantum/2, the overflow
    boundary), two ulps of ``dtype`` either side of each, both signs, 0, Inf and NaN."""
    vals = grid_values(fmt)
    top = float(fmt.max_finite + Fraction(2) ** (fmt.emax - fmt.man_bits))
    if fmt.bits <= 16:
        nxt = np.append(vals[1:], top)
    else:  # binary32 sample: the next binary32 value above each
        nxt = (vals.astype(np.float32).view(np.uint32) + 1).view(np.float32).astype(np.float64)
        nxt[vals == float(fmt.max_finite)] = top
    base = np.concatenate([vals, (vals + nxt) / 2, [top, top * 2, float(fmt.min_positive) / 4]])
    with np.errstate(over="ignore"):
        base = base.astype(dtype)
    base = base[np.isfinite(base)]
    ibits = {np.float32: np.int32, np.float64: np.int64}[dtype]
    b = base.view(ibits)
    near = [(b + d).view(dtype) for d in (-2, -1, 1, 2)]
    pos = np.concatenate([base] + near + [np.array([0.0, np.inf, np.nan], dtype=dtype)])
    pos = pos[~np.signbit(pos)]  # (0 - 1 ulp is a NaN pattern with the sign bit: dropped here, kept below)
    return np.concatenate([pos, -pos])


@pytest.mark.parametrize("fmt", list(FORMATS.values()), ids=lambda f: f.name)
def test_boundaries_every_mode(fmt):
    """FPS-RND-1..9: at and beside every tie and every value, float32 and float64 inputs (binary32
    targets: float64 inputs), every mode == fast; RNE and RTZ == the spec too."""
    pol = sweep_policies(fmt)
    for dtype in (np.float32, np.float64) if fmt.bits < 32 else (np.float64,):
        x = boundary_inputs(fmt, dtype)
        for i, mode in enumerate(modes_of(fmt)):
            r = rbits_for(x.size, 8, i) if mode.stochastic else None
            want = None
            if mode in (RoundingMode.RNE, RoundingMode.RTZ) and x.size <= 80000:
                want = encode_exact(x, fmt, mode, policies=pol)
            agree(x, fmt, mode, rbits=r, nbits=8, policies=pol, want=want)


# ------------------------------------------------------------------- fuzz
def fuzz_inputs(fmt: FloatFormat, dtype, n: int, seed: int) -> np.ndarray:
    """Random bit patterns (every exponent, NaN and Inf included) and random values in and around the
    format's range (random significands, exponents from below its smallest subnormal to past max)."""
    rng = np.random.default_rng(seed)
    ibits = {np.float32: np.uint32, np.float64: np.uint64}[dtype]
    raw = rng.integers(0, np.iinfo(ibits).max, n // 2, dtype=ibits, endpoint=True).view(dtype)
    lo = fmt.emin - fmt.man_bits - 4
    hi = fmt.emax + 3
    sig = rng.integers(1, 1 << 53, n - n // 2, dtype=np.int64).astype(np.float64)
    e = rng.integers(lo, hi, sig.size) - 53
    with np.errstate(over="ignore"):
        ranged = (np.ldexp(sig, e) * rng.choice([-1.0, 1.0], sig.size)).astype(dtype)
    return np.concatenate([raw, ranged])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", list(FORMATS.values()), ids=lambda f: f.name)
def test_fuzz_every_mode(fmt, dtype):
    """Seeded fuzz, 2^14 values per format, dtype and mode (SR: N cycling 1..32) == fast."""
    pol = sweep_policies(fmt)
    widths = (1, 3, 8, 16, 23, 32)
    for i, mode in enumerate(modes_of(fmt)):
        x = fuzz_inputs(fmt, dtype, 1 << 14, seed=100 * i + fmt.bits + dtype().itemsize)
        nbits = widths[i % len(widths)]
        r = rbits_for(x.size, nbits, i) if mode.stochastic else None
        agree(x, fmt, mode, rbits=r, nbits=nbits, policies=pol)


# -------------------------------------------------------- stochastic rounding
@pytest.mark.parametrize("nbits", [1, 3, 8])
@pytest.mark.parametrize("fmt", ["e2m1", "e4m3", "ue8m0", "e5m2", "bf16"])
def test_sr_every_r(fmt, nbits):
    """FPS-RND-5..7: every r in [0, 2^N) on boundary inputs (float32 and float64) == fast;
    a subset == the exact spec."""
    f = FORMATS[fmt]
    pol = sweep_policies(f)
    rng = np.random.default_rng(nbits)
    n_r = 1 << nbits
    for dtype in (np.float32, np.float64):
        x0 = rng.permutation(boundary_inputs(f, dtype))[: (4096 // n_r if nbits == 8 else 2048)]
        x = np.repeat(x0, n_r)
        r = np.tile(np.arange(n_r, dtype=np.uint8), x0.size)
        for mode in SR:
            agree(x, f, mode, rbits=r, nbits=nbits, policies=pol)
            xs, rs = x[: 24 * n_r], r[: 24 * n_r]
            agree(xs, f, mode, rbits=rs, nbits=nbits, policies=pol,
                  want=encode_exact(xs, f, mode, rbits=rs, nbits=nbits, policies=pol))


@pytest.mark.parametrize("nbits", [1, 3, 8, 16, 23, 32])
def test_sr_thresholds_hit_exactly(nbits):
    """delta = j / 2^N' exactly for N' around N (the thresholds of all three rules, where
    sr-unbiased's r == delta 2^N decides by the bits it dropped), r at its extremes and at random."""
    rng = np.random.default_rng(nbits)
    for fmt, lo, q in (("e2m1", 1.0, 0.5), ("e4m3", 1.0, 0.125), ("fp16", 1.0, 2.0 ** -10),
                       ("ue8m0", 2.0 ** -127, 2.0 ** -127), ("fp32", 3.0, 2.0 ** -22)):
        f = FORMATS[fmt]
        pts = []
        for nn in {max(1, nbits - 1), nbits, nbits + 1, 30}:
            j = np.unique(np.concatenate([np.arange(0, min(1 << nn, 64)),
                                          rng.integers(0, 1 << nn, 64, dtype=np.int64),
                                          [(1 << nn) - 1, 1 << (nn - 1)]]))
            pts.append(lo + j.astype(np.float64) * (q / 2.0 ** nn))  # exact in float64 (<= 53 bits)
        x = np.concatenate(pts)
        x = np.concatenate([x, -x]) if f.signed else x
        top = (1 << nbits) - 1
        rvals = np.concatenate([[0, 1, top, top - 1, 1 << (nbits - 1)],
                                rng.integers(0, 1 << nbits, 16, dtype=np.int64)]) % (1 << nbits)
        xx = np.repeat(x, rvals.size)
        r = np.tile(rvals, x.size).astype(np.uint32)
        pol = sweep_policies(f)
        for mode in SR:
            want = encode_exact(xx, f, mode, rbits=r, nbits=nbits, policies=pol)
            agree(xx, f, mode, rbits=r, nbits=nbits, policies=pol, want=want)


@pytest.mark.parametrize("nbits", [1, 8, 32])
def test_sr_huge_shifts(nbits):
    """float64 inputs far below a format's smallest value: shifts past 54, 64 and 128 (the fast
    twin's capped float delta, the torch twin's clamped integer shifts) decide as the spec does."""
    tiny = np.array([2.0 ** -e for e in (20, 40, 60, 64, 70, 100, 127, 128, 150, 200, 500, 1000, 1022)]
                    + [5e-324, 1e-310, 3 * 2.0 ** -140], dtype=np.float64)
    x = np.concatenate([tiny, tiny * 1.75, -tiny])
    top = (1 << nbits) - 1
    for fmt in ("e2m1", "e4m3", "ue8m0", "fp32", "bf16"):
        f = FORMATS[fmt]
        pol = sweep_policies(f)
        for rv in (0, 1, top):
            r = np.full(x.size, rv, dtype=np.uint32)
            for mode in SR:
                agree(x, f, mode, rbits=r, nbits=nbits, policies=pol,
                      want=encode_exact(x, f, mode, rbits=r, nbits=nbits, policies=pol))
        for mode in modes_of(f):
            if not mode.stochastic:
                agree(x, f, mode, policies=pol, want=encode_exact(x, f, mode, policies=pol))


@pytest.mark.parametrize("rdtype", [torch.uint8, torch.uint16, torch.uint32, torch.int16, torch.int32, torch.int64])
def test_sr_rbits_dtypes(rdtype):
    """Every accepted random-value dtype gives the same codes for the same values."""
    x = fuzz_inputs(FORMATS["e4m3"], np.float32, 4096, seed=5)
    r = rbits_for(x.size, 7, 9).astype(np.int64)
    want = encode_fast(x, "e4m3", "sr-unbiased", rbits=r.astype(np.uint8), nbits=7)
    got = encode_torch(to_torch(x), "e4m3", "sr-unbiased", rbits=torch.from_numpy(r).to(rdtype), nbits=7)
    assert np.array_equal(got.numpy(), want)


# ----------------------------------------------------------------- policies
SPECIALS = [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.0, -1.0, 3.0e-39, -3.0e-39, 1e30, -1e30, 7.0, -7.0,
            2.0 ** -128, 6.5e4, -6.5e4, 2.0 ** 127 * 1.5]


def policy_sets(fmt: FloatFormat):
    """Every combination of the policies that matter to ``fmt`` (negative: unsigned formats;
    zero: formats without zero), refused ones included."""
    negs = list(NegativePolicy) if not fmt.signed else [NegativePolicy.ERROR]
    zeros = list(ZeroPolicy) if not fmt.has_zero else [ZeroPolicy.ERROR]
    for o, n, g, z in itertools.product(OverflowPolicy, NanPolicy, negs, zeros):
        yield Policies(overflow=o, nan=n, negative=g, zero=z)


@pytest.mark.parametrize("fmt", list(FORMATS.values()), ids=lambda f: f.name)
def test_every_policy(fmt):
    """FPS-RND-9..12, FPS-RND-16: every policy combination on NaN, +-Inf, +-0, negatives, overflow and
    underflow, in two orders (so each refusal is met first somewhere): the same codes, or the same
    refusal, worded alike and at the same index, as the fast twin; an impossible policy refused alike."""
    base = np.array(SPECIALS, dtype=np.float64)
    orders = [base, base[::-1].copy(), np.roll(base, 5)]
    modes = [RoundingMode.RNE, RoundingMode.RTZ, RoundingMode.UP, RoundingMode.DOWN, RoundingMode.SR_ADD]
    refused = 0
    for pol in policy_sets(fmt):
        try:
            validate_policies(fmt, pol)
        except FpspecError as exc:
            refused += 1
            with pytest.raises(FpspecError) as got:
                encode_torch(torch.zeros(2), fmt, policies=pol)
            assert str(got.value) == str(exc)
            continue
        for mode, (k, x) in itertools.product(modes, enumerate(orders)):
            x = x.astype(np.float32) if (k == 1 and fmt.bits < 32) else x
            r = np.arange(x.size, dtype=np.uint8) if mode.stochastic else None
            agree(x.reshape(3, -1), fmt, mode, rbits=None if r is None else r.reshape(3, -1), policies=pol)
    assert refused or fmt.has_nan  # (formats without NaN refuse nan/quiet policies)


def test_refusals_name_the_first_element():
    """Each refusal kind, by hand: its words (encode_fast's) and the first offending index."""
    cases = [
        ("e2m1", {}, [[1.0, 2.0, 3.0], [4.0, np.nan, np.nan]], "NaN input to e2m1 under NaN policy 'error'", (1, 1)),
        ("ue8m0", {}, [[1.0, -2.0], [-3.0, 0.0]], "negative input to unsigned ue8m0 under negative policy 'error'",
         (0, 1)),
        ("ue8m0", {"negative": "abs"}, [[1.0, -2.0], [-3.0, 0.0]],
         "zero input to ue8m0, which has no zero, under zero policy 'error'", (1, 1)),
        ("e4m3", {"overflow": "error"}, [[448.0, 460.0, 465.0]],
         "overflow: value beyond max finite 448 of e4m3 under overflow policy 'error'", (0, 2)),
        ("e5m2", {"overflow": "error"}, [[1.0], [-np.inf]],
         None, None),  # Inf is Inf in e5m2: no refusal
        ("e4m3", {"overflow": "error"}, [[1.0], [-np.inf]],
         "overflow: value beyond max finite 448 of e4m3 under overflow policy 'error'", (1, 0)),
    ]
    for fmt, pol_kw, values, msg, idx in cases:
        pol = default_policies(fmt).with_(**pol_kw)
        x = np.array(values, dtype=np.float32)
        codes = agree(x, fmt, RoundingMode.RNE, policies=pol)
        if msg is None:
            assert codes is not None
            continue
        with pytest.raises(FpspecError) as exc:
            encode_torch(to_torch(x), fmt, policies=pol)
        assert exc.value.index == idx and str(exc.value) == f"{msg} (first at index {list(idx)})"


def test_argument_refusals():
    """FPS-RND-16: bad arguments refused before any element, in the fast twin's words where it has them."""
    x = torch.ones(2, 3)
    r8 = torch.zeros(2, 3, dtype=torch.uint8)
    with pytest.raises(FpspecError, match="needs random bits"):
        encode_torch(x, "e2m1", "sr")
    with pytest.raises(FpspecError, match=r"rbits shape \(3, 2\) does not match input shape \(2, 3\)"):
        encode_torch(x, "e2m1", "sr", rbits=torch.zeros(3, 2, dtype=torch.uint8))
    with pytest.raises(FpspecError, match="rbits must be uint8, uint16, uint32, int16, int32 or int64, got float32"):
        encode_torch(x, "e2m1", "sr", rbits=torch.zeros(2, 3))
    with pytest.raises(FpspecError, match="rbits must be a torch tensor"):
        encode_torch(x, "e2m1", "sr", rbits=np.zeros((2, 3), dtype=np.uint8))
    for nbits in (0, 33, 2.0):
        with pytest.raises(FpspecError) as got:
            encode_torch(x, "e2m1", "sr", rbits=r8, nbits=nbits)
        with pytest.raises(FpspecError) as want:
            encode_fast(np.ones((2, 3), np.float32), "e2m1", "sr", rbits=np.zeros((2, 3), np.uint8), nbits=nbits)
        assert str(got.value) == str(want.value)
    with pytest.raises(FpspecError, match="input must be a float array .* got int32"):
        encode_torch(torch.ones(3, dtype=torch.int32), "e2m1")
    with pytest.raises(FpspecError, match="input must be a torch tensor"):
        encode_torch(np.ones(3, dtype=np.float32), "e2m1")
    with pytest.raises(FpspecError, match="rne-bits"):
        bad = [f for f in FORMATS.values() if (f.man_bits == 0) == f.subnormals]
        encode_torch(x, bad[0] if bad else FloatFormat("e3m0s", 3, 0, 3, True, True, FORMATS["e2m1"].specials),
                     "rne-bits")
    assert encode_torch(x, "e2m1", "rne", rbits=torch.full((2, 3), 99)).dtype == torch.uint8  # (ignored)


def test_random_values_out_of_range_named():
    """A random value not below 2^nbits (or negative) is refused by value and index, as the door's
    check_random_values words it, before any element is encoded (a NaN before it is not reported)."""
    x = torch.tensor([[np.nan, 1.0, 2.0], [3.0, 4.0, 5.0]])
    r = np.array([[0, 1, 2], [3, 9, 200]], dtype=np.uint8)
    with pytest.raises(FpspecError) as want:
        check_random_values(r, 3)
    for dt in (torch.uint8, torch.uint16, torch.uint32, torch.int32, torch.int64):
        with pytest.raises(FpspecError) as got:
            encode_torch(x, "e2m1", "sr", rbits=torch.from_numpy(r.astype(np.int64)).to(dt), nbits=3)
        assert str(got.value) == str(want.value) and got.value.index == (1, 1)
    neg = torch.tensor([[0, 1, 2], [3, -4, 0]], dtype=torch.int32)
    with pytest.raises(FpspecError, match=r"random value -4 is negative.*\(first at index \[1, 1\]\)"):
        encode_torch(x, "e2m1", "sr", rbits=neg, nbits=3)
    ok = torch.tensor([[0, 1, 2], [3, 255, 0]], dtype=torch.uint8)  # nbits = 8: every uint8 fits
    with pytest.raises(FpspecError, match="NaN input"):
        encode_torch(x, "e2m1", "sr", rbits=ok, nbits=8)
    full = torch.tensor([[0, 1, 2], [3, 2 ** 32 - 1, 0]], dtype=torch.int64)
    encode_torch(x.nan_to_num(), "e2m1", "sr", rbits=full, nbits=32)


# ------------------------------------------------ shapes, dtypes, chunks
def test_shapes_dtypes_and_strides():
    """Codes keep the input's shape and device, in the code dtype of the format; 0-d, empty,
    non-contiguous and grad-requiring inputs; every input dtype."""
    for fmt in FORMATS.values():
        assert encode_torch(torch.ones(2, 2), fmt).dtype == NP_CODE_T[fmt.storage_dtype]
    assert encode_torch(torch.tensor(1.5), "e4m3").shape == ()
    assert encode_torch(torch.tensor(1.5), "e4m3").item() == 0x3C
    assert encode_torch(torch.empty(0, 3), "fp16").shape == (0, 3)
    with pytest.raises(FpspecError, match=r"first at index \[\]"):
        encode_torch(torch.tensor(float("nan")), "e2m1")
    base = torch.linspace(-500, 500, 601, dtype=torch.float64).reshape(601, 1).expand(601, 3).t()
    assert not base.is_contiguous()
    want = encode_fast(base.numpy().copy(), "e4m3")
    assert np.array_equal(encode_torch(base, "e4m3").numpy(), want)
    g = torch.linspace(-3, 3, 50, requires_grad=True)
    assert np.array_equal(encode_torch(g, "e2m1").numpy(), encode_fast(g.detach().numpy(), "e2m1"))
    for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        v = torch.linspace(-70000, 70000, 999).to(dt)
        vn = v.to(torch.float64).numpy()  # exact widening
        assert np.array_equal(encode_torch(v, "e5m2").numpy(), encode_fast(vn, "e5m2"))


NP_CODE_T = {"uint8": torch.uint8, "uint16": torch.uint16, "uint32": torch.uint32}


def test_chunks(monkeypatch):
    """Across chunk boundaries: the same codes, and a refusal in a later chunk named by its global index."""
    monkeypatch.setattr(tr, "CHUNK", 1000)
    x = fuzz_inputs(FORMATS["e4m3"], np.float32, 4500, seed=1)
    r = rbits_for(x.size, 8, 1)
    agree(x, "e4m3", "sr", rbits=r)
    agree(x, "fp16", "rne")
    y = np.ones((3, 1500), dtype=np.float32)
    y[2, 1234] = np.nan
    with pytest.raises(FpspecError, match=r"first at index \[2, 1234\]"):
        encode_torch(to_torch(y), "e2m1")
    rr = np.zeros((3, 1500), dtype=np.uint8)
    rr[2, 7] = 200
    with pytest.raises(FpspecError, match=r"random value 200 .*first at index \[2, 7\]"):
        encode_torch(to_torch(np.ones((3, 1500), np.float32)), "e2m1", "sr", rbits=torch.from_numpy(rr), nbits=4)
    codes = torch.from_numpy(np.arange(4500, dtype=np.int64) % 256)
    assert np.array_equal(decode_torch(codes, "e4m3").numpy().view(np.uint64),
                          decode_fast(codes.numpy(), "e4m3").view(np.uint64))


# ------------------------------------------------------------------ decoding
@pytest.mark.parametrize("fmt", [f for f in FORMATS.values() if f.bits <= 16], ids=lambda f: f.name)
def test_decode_every_code(fmt):
    """FPS-FMT-3: every code's float64 bits == the fast twin's table (signed zeros and NaNs included)
    and == the exact decoder; codes given in the encoder's dtype and as int32 / int64."""
    codes = np.arange(fmt.num_codes, dtype=fmt.storage_dtype)
    want = decode_fast(codes, fmt).view(np.uint64)
    assert np.array_equal(want, decode_exact_codes(codes, fmt).view(np.uint64)) or fmt.bits == 16
    for tc in (torch.from_numpy(codes), torch.from_numpy(codes.astype(np.int32)),
               torch.from_numpy(codes.astype(np.int64)).reshape(2, -1)):
        got = decode_torch(tc, fmt)
        assert got.dtype == torch.float64 and tuple(got.shape) == tuple(tc.shape)
        assert np.array_equal(got.numpy().reshape(-1).view(np.uint64), want), fmt.name


def test_decode_fp32():
    """binary32 codes: a fuzz and every special (signed zeros, subnormals, Inf, quiet and signalling
    NaNs with payloads of both signs) == the fast twin's bits."""
    rng = np.random.default_rng(32)
    special = np.array([0, 0x80000000, 1, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
                        0x7F800001, 0xFF800001, 0x7FC00000, 0xFFC00000, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FA5A5A5],
                       dtype=np.uint32)
    codes = np.concatenate([special, rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32)])
    want = decode_fast(codes, "fp32").view(np.uint64)
    got = decode_torch(torch.from_numpy(codes), "fp32").numpy().view(np.uint64)
    assert np.array_equal(got, want)
    back = encode_torch(decode_torch(torch.from_numpy(codes[:16]), "fp32"), "fp32")
    assert np.array_equal(back.numpy()[:7], codes[:7])  # finite codes round-trip through float64


def test_decode_refusals():
    """A code out of range is named with its index, as decode_fast names it; a float array is refused."""
    cases = [(np.array([[1, 2, 3], [4, 256, 300]], dtype=np.uint16), "e4m3"),
             (np.array([0, 5, -1], dtype=np.int16), "e2m1"),
             (np.array([0, 16], dtype=np.int64), "e2m1"),
             (np.array([[1 << 16]], dtype=np.uint32), "fp16")]
    for codes, fmt in cases:
        with pytest.raises(FpspecError) as want:
            decode_fast(codes, fmt)
        with pytest.raises(FpspecError) as got:
            decode_torch(torch.from_numpy(codes), fmt)
        assert str(got.value) == str(want.value) and got.value.index == want.value.index
    with pytest.raises(FpspecError, match="codes must be an unsigned integer array, got float32"):
        decode_torch(torch.zeros(3), "e4m3")
    with pytest.raises(FpspecError, match="codes must be a torch tensor"):
        decode_torch(np.zeros(3, dtype=np.uint8), "e4m3")
