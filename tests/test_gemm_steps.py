"""FPS-GEMM-10: the chain-step variants (fpspec/fast/steps.py) and their one table.

The table :data:`fpspec.fast.steps.VARIANTS` names every variant, its scalar twin and the
test that pins them; the first tests walk it so that it cannot fall behind the module (a
variant added without a row, a row whose twin or test is gone).  The others are the
pinning tests of the variants no other file checks against their twin directly.
"""

from __future__ import annotations

import ast
import importlib
import math
from pathlib import Path

import numba
import numpy as np
import pytest

from fpspec.fast import steps
from fpspec.fast.chain import CONTINUE, END_SLICE, PROMOTE, accumulate, after_group, chain_spec, float_bits
from fpspec.fast.spans import lsb_of
from fpspec.named_models import get_model

ROOT = Path(__file__).resolve().parent.parent


def _resolve(dotted: str):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _test_source(path: Path, name: str) -> str | None:
    """The source of the test function ``name`` of the file (docstring included), or None."""
    text = path.read_text()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment(text, node)
    return None


def _compiled_functions() -> set[str]:
    """The names of the compiled functions defined in fpspec/fast/steps.py."""
    return {name for name, value in vars(steps).items()
            if isinstance(value, numba.core.registry.CPUDispatcher) and value.py_func.__module__ == steps.__name__}


def test_every_compiled_function_of_steps_is_in_the_table():
    """Each compiled function of the module is a listed variant or a listed helper, once."""
    listed = [v.name for v in steps.VARIANTS]
    helpers = [h.__name__ for h in steps.HELPERS]
    assert len(set(listed)) == len(listed) == 13
    assert _compiled_functions() == set(listed) | set(helpers)
    assert not set(listed) & set(helpers)
    assert set(listed) <= set(steps.__all__)


@pytest.mark.parametrize("variant", steps.VARIANTS, ids=lambda v: v.name)
def test_every_variant_names_a_twin_and_a_test_that_exist(variant):
    """The twin and the exact step are functions that exist, the step number is one of FPS-GEMM-1's,
    and the pinning test is a test function of a file in tests/ that names the variant (calls it, or
    says in its docstring that the step it checks runs it)."""
    twin = _resolve(variant.twin)
    assert callable(twin) and variant.twin.startswith("fpspec.fast.")
    assert callable(_resolve(variant.exact)) and variant.exact.startswith("fpspec.exact.accumulate.")
    assert variant.step in {"3", "3-4", "4", "5", "6-7"}
    path, _, test = variant.test.partition("::")
    source = _test_source(ROOT / path, test)
    assert test.startswith("test_") and source is not None, variant.test
    assert variant.name in source, f"{variant.test} does not name {variant.name}"
    assert variant.where


# ------------------------------------------------------- pinning tests
def _fp32_values(rng, n):
    """FP32 values held in float64 over the whole range, with zeros, subnormals, the largest
    values, Inf and NaN first."""
    mant = rng.integers(1 << 23, 1 << 24, n).astype(np.float64)
    v = np.ldexp(mant, rng.integers(-149 - 23, 128 - 23, n)) * rng.choice([-1.0, 1.0], n)
    v = v.astype(np.float32).astype(np.float64)
    special = [0.0, 2.0 ** -149, -(2.0 ** -149), 2.0 ** -126, float(np.finfo(np.float32).max), 1.0, -3.0,
               2.0 ** -130 * 3, math.inf, -math.inf, math.nan]
    v[:len(special)] = special
    return v


@numba.njit
def _bits_below_all(c, q):
    out = np.empty(c.size, dtype=np.bool_)
    for j in range(c.size):
        out[j] = steps.bits_below(float_bits(c[j]), q[j])
    return out


def test_fpsgemm24_bits_below_equals_lsb_of():
    """bits_below(bits of c, q) says whether a finite FP32 value c has a set bit below 2^q,
    as the pair step's ``lsb_of(c) < q`` (False for a zero), for q from far below c's lowest
    bit to far above its top (counts clamped at 0 and 63)."""
    rng = np.random.default_rng(2401)
    c = _fp32_values(rng, 4000)
    c = c[np.isfinite(c)]
    c = np.concatenate([c, np.zeros(5), [1.5, -1.5, 2.0 ** 127 * 1.5]])
    q = rng.integers(-220, 200, c.size)
    q[:c.size // 2] = [lsb_of(float(x)) + int(rng.integers(-2, 3)) if x != 0.0 else 0
                       for x in c[:c.size // 2]]  # at c's lowest bit and beside it
    got = _bits_below_all(c, q)
    want = np.array([x != 0.0 and lsb_of(float(x)) < int(k) for x, k in zip(c, q)])
    assert np.array_equal(got, want)
    assert got.any() and not got.all()
    assert _bits_below_all(np.array([1.5, 1.5, 1.5, 0.0]), np.array([-1, 0, -2, 500])).tolist() == \
        [False, True, False, False]


@pytest.mark.parametrize("name,over", [
    ("seed-probe-matched", {}),                                # not fused, group RNE, accumulator RTZ
    ("seed-probe-matched", dict(group_rounding="rtz")),        # group RTZ
    ("seed-probe-matched", dict(group_rounding="none")),       # the group's sum joins c exactly
    ("seed-probe-matched", dict(fused=True)),                  # fused: c + sum rounded once
    ("seed-probe-matched", dict(accumulate_bits=13)),          # a lattice narrower than FP32
])
def test_fpsgemm24_accumulate_exact64_equals_accumulate(name, over):
    """accumulate_exact64(c, x, low) = accumulate(c, x 2^-low, low) for an exact float64 group
    sum x, a multiple of 2^low below 2^(low + 53): random FP32 accumulators (Inf and NaN
    included) against sums of 1 to 53 bits over the FP32 range and past it, zero sums and
    sums that cancel c."""
    spec = chain_spec(get_model(name, **over))
    rng = np.random.default_rng(2402 + len(over))
    n = 3000
    c = _fp32_values(rng, n)
    low = rng.integers(-200, 110, n)
    sig = (rng.integers(1, 1 << 53, n, dtype=np.int64) >> rng.integers(0, 53, n)) * rng.choice([-1, 1], n)
    sig[::9] = 0
    x = np.ldexp(sig.astype(np.float64), low)
    for k in range(3, n, 17):  # x = -c: c's own multiple of 2^low (c = m 2^(e - 23), m < 2^24)
        if np.isfinite(c[k]) and c[k] != 0.0:
            low[k] = lsb_of(float(c[k]))
            x[k] = -c[k]
            sig[k] = int(-c[k] / 2.0 ** low[k])
    got = np.array([steps.accumulate_exact64(float(c[k]), float(x[k]), int(low[k]), spec) for k in range(n)])
    want = np.array([accumulate(float(c[k]), int(sig[k]), int(low[k]), spec) for k in range(n)])
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok].view(np.int64), want[ok].view(np.int64))
    assert (want[ok] != c[ok]).mean() > 0.5  # the sums count
    assert (np.abs(want[ok]) >= 2.0 ** 127).any()  # the top binade (Inf or the largest value)
    assert ((np.abs(want) < 2.0 ** -126) & (want != 0)).any()  # subnormal results


@pytest.mark.parametrize("promotes", [False, True])
def test_fpsgemm6_after_group_fp32_equals_after_group(promotes):
    """after_group_fp32 on float32 values = after_group under a spec whose additions are all
    FP32 RNE, for each action: random FP32 triples (the chain's c is never -0 in the FP32
    kernel: it starts at +0 and only -0 + -0 gives -0), sums past FLT_MAX (Inf), sums that
    cancel (+0), Inf and NaN."""
    spec = chain_spec(get_model("decoded-fp32", promotion_rounding="rne"))._replace(promotes=promotes)
    rng = np.random.default_rng(2403 + promotes)
    n = 3000
    c, big, total = (_fp32_values(rng, n) for _ in range(3))
    c[c == 0.0] = 0.0
    big[::5] = -c[::5]
    total[1::7] = 0.0
    total[2::11] = -c[2::11]
    for action in (CONTINUE, PROMOTE, END_SLICE):
        got = np.array([steps.after_group_fp32(np.float32(c[k]), np.float32(big[k]), np.float32(total[k]), action,
                                               promotes) for k in range(n)], dtype=np.float64)
        want = np.array([after_group(float(c[k]), float(big[k]), float(total[k]), action, spec) for k in range(n)])
        assert np.array_equal(np.isnan(got), np.isnan(want)), action
        ok = ~np.isnan(want)
        assert np.array_equal(got[ok].view(np.int64), want[ok].view(np.int64)), action
