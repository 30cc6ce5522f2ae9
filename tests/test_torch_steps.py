"""The torch twin's block-quantization steps held to the fast twin bit for bit (docs/torch.rst): the
input scan, the tensor amax, the columnwise view, the 16-point Hadamard transform, its bfloat16
rounding and dequantization of every (scale code, payload code) pair of every formula."""

from __future__ import annotations

import numpy as np
import pytest

from fpspec.errors import FpspecError
from fpspec.fast.dequant import dequant_value_table, dequantize_blocks
from fpspec.fast.rht import rht16_fast, round_bf16_fast
from fpspec.fast.scan import scan_values
from fpspec.formats import get_format
from fpspec.schemes import Dequant

torch = pytest.importorskip("torch")

from fpspec.torch.dequant import dequantize_blocks_torch  # noqa: E402
from fpspec.torch.rht import rht16_torch, round_bf16_torch  # noqa: E402
from fpspec.torch.scan import scan_values_torch, tensor_amax_torch  # noqa: E402
from fpspec.torch.transpose import transpose_torch  # noqa: E402


def _wide(rng, shape, lo=-60, hi=60) -> np.ndarray:
    x = rng.standard_normal(shape) * 2.0 ** rng.uniform(lo, hi, shape)
    x = x.astype(np.float32)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, flat.size // 50)] = 0.0
    flat[rng.integers(0, flat.size, flat.size // 50)] = -0.0
    flat[rng.integers(0, flat.size, 8)] = np.float32(2.0 ** -149)  # subnormals
    return x


def _bits(a) -> np.ndarray:
    a = a.numpy() if isinstance(a, torch.Tensor) else a
    return a.view(np.uint32) if a.dtype == np.float32 else a.view(np.uint64)


@pytest.mark.parametrize("seed", range(4))
def test_rht16_and_bf16_rounding_equal_the_fast_twin(seed):
    rng = np.random.default_rng(seed)
    x = _wide(rng, (48, 256))
    np.testing.assert_array_equal(_bits(rht16_torch(torch.from_numpy(x))), _bits(rht16_fast(x)))
    np.testing.assert_array_equal(_bits(round_bf16_torch(torch.from_numpy(x))), _bits(round_bf16_fast(x)))


def test_rht16_and_bf16_refuse_overflow_by_index():
    x = np.zeros((2, 32), np.float32)
    x[1, 16:32] = np.float32(3e38)
    with pytest.raises(FpspecError, match="overflows binary32") as e:
        rht16_torch(torch.from_numpy(x))
    with pytest.raises(FpspecError, match="overflows binary32") as f:
        rht16_fast(x)
    assert str(e.value) == str(f.value)
    y = np.full((1, 4), np.float32(float.fromhex("0x1.ffp127")))
    with pytest.raises(FpspecError, match="rounds beyond bfloat16"):
        round_bf16_torch(torch.from_numpy(y))
    with pytest.raises(FpspecError, match="needs the last dimension 8"):
        rht16_torch(torch.zeros((2, 8)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("block", [0, 16, 32])
def test_scan_equals_the_fast_scan(dtype, block):
    rng = np.random.default_rng(7)
    x = _wide(rng, (64, 64)).astype(dtype).reshape(-1)
    cases = [x.copy()]
    for bad in (np.nan, -np.inf, 3.5e38 if dtype == np.float64 else np.inf):
        y = x.copy()
        y[1234] = bad
        y[2000] = np.nan
        cases.append(y)
    cases.append(np.zeros(0, dtype))
    for flat in cases:
        want = scan_values(flat, block)
        got = scan_values_torch(torch.from_numpy(flat), block)
        assert (got.bad, got.why) == (want.bad, want.why)
        if want.bad < 0:
            assert got.amax == want.amax
            assert (got.block_amax is None) == (want.block_amax is None)
            if want.block_amax is not None:
                np.testing.assert_array_equal(_bits(got.block_amax), _bits(want.block_amax))
    v = _wide(rng, (8, 40)).astype(np.float64) * 1e-30
    assert tensor_amax_torch(torch.from_numpy(v)) == np.float32(np.abs(v).max())
    assert tensor_amax_torch(torch.zeros((0, 3))) == 0


def test_transpose():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = transpose_torch(torch.from_numpy(x))
    assert t.is_contiguous()
    np.testing.assert_array_equal(t.numpy(), x.T)


#: (formula, scale format, payload format, amax, T, decode scale) of every dequantization formula.
_FORMULAS = [
    (Dequant.EXACT, "ue5m3", "e2m1", 3.7, 448.0, np.float32(3.7 / 2688)),
    (Dequant.EXACT, "ue4m3", "e2m1", 0.0, 448.0, np.float32(1)),
    (Dequant.SEED_KERNEL, "ue5m3", "e2m1", 1e30, 2048.0, np.float32(1e30 / 12288)),
    (Dequant.SEED_PORTABLE, "ue5m3fnu", "e2m1", 5.5, 448.0, np.float32(5.5 / 2688)),
    (Dequant.TE, "ue4m3", "e2m1", 3e38, 448.0, np.float32(3e38 / 2688)),
    (Dequant.TORCHAO, "ue4m3", "e2m1", 17.0, 448.0, np.float32(17.0 / 2688)),
    (Dequant.MX, "ue8m0", "e2m1", 0.0, None, np.float32(1)),
    (Dequant.MX, "ue8m0", "e4m3", 0.0, None, np.float32(1)),
    (Dequant.MX, "ue8m0", "e5m2", 0.0, None, np.float32(1)),
]


@pytest.mark.parametrize("formula,sf,pf,amax,target,dec", _FORMULAS)
@pytest.mark.parametrize("tile", ["1xB", "BxB"])
def test_dequantize_every_pair_equals_the_fast_twin(formula, sf, pf, amax, target, dec, tile):
    """Every (scale code, payload code) pair appears: a block per scale code, each block holding
    every finite payload code, in both tile layouts; the first non-finite index agrees."""
    block = 16 if pf == "e2m1" else 32
    nsc = get_format(sf).num_codes
    pfmt = get_format(pf)
    payloads = np.array([c for c in range(pfmt.num_codes) if pfmt.kind(c).value not in ("nan", "inf")], np.uint8)
    reps = -(-payloads.size // block)
    row = np.resize(payloads, reps * block)
    rng = np.random.default_rng(nsc)
    if tile == "1xB":
        codes = np.tile(row, (nsc, 1))
        scales = np.arange(nsc, dtype=np.uint8).repeat(reps).reshape(nsc, reps)
    else:
        codes = np.tile(row, (block, 1))
        codes = np.concatenate([rng.permutation(codes.reshape(-1)).reshape(codes.shape) for _ in range(4)])
        scales = rng.integers(0, nsc, (4, reps), dtype=np.uint8)
    table = dequant_value_table(formula, sf, pf, amax, target, dec)
    want, want_bad = dequantize_blocks(codes, scales, table, block, tile)
    got, got_bad = dequantize_blocks_torch(torch.from_numpy(codes), torch.from_numpy(scales), formula, sf, pf, amax,
                                           target, dec, block, tile)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    assert got_bad == want_bad
