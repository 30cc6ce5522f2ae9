"""Coverage model ``mutant-witness``: quantize sets built to fail the binary32 operation-order mutants.

For each binary32 profile with sets in the pack, one set ``quantize-<scheme>-<profile>-1x16-witness``
holds, for every operation-order mutant of that profile in the catalogue (and the named choices
whose effect random blocks never reach: an uncapped multiplier, flushed subnormal inputs), one
case that :func:`fpspec.mutants.witness.search_witnesses` found to separate the mutant from the
profile (FPS-MUT-4).  The expected outputs come from fpspec's quantizer, as for every quantize
set; the case's held amax is the search round's g.
"""

from __future__ import annotations

import zlib

import numpy as np

from ..convert import encode
from ..matmul import gemm
from ..named_models import get_model
from ..quantization import quantize
from ..schemes import resolve_spec
from ..vectors import coverage
from ..vectors.blocks import _cfg, _plan
from ..vectors.gemm_sets import K, M, N, _q_inputs
from ..vectors.gemm_sets import _plan as gemm_plan
from ..vectors.schema import tag_mask
from .catalogue import CATALOGUE
from .variations import Fp32Order
from .witness import search_witnesses

__all__ = ["WITNESS_PROFILES", "witness_mutants", "model_mutant_witness"]

#: The binary32 profiles that get a witness set, in set order.
WITNESS_PROFILES = ("ue5m3/seed-fp32", "ue5m3/seed-portable", "nvfp4/te-fp32", "nvfp4/te-kernel")
#: Families whose mutants get witnesses, and the named choices that need built inputs too.
_FAMILIES = ("operation-order",)
_CHOICES = ("multiplier-uncapped", "subnormal-inputs-flushed")


def witness_mutants(profile: str) -> list:
    """The catalogue's binary32 mutants of one profile that a witness case is searched for."""
    return [m for m in CATALOGUE if m.name.startswith(profile + ":") and isinstance(m.variation, Fp32Order)
            and (m.family in _FAMILIES or m.name.split(":", 1)[1] in _CHOICES)
            and m.variation.steps.dequant == "profile"]


def model_mutant_witness(level: int) -> list[coverage.SetPlan]:
    """mutant-witness: per binary32 profile (seed-fp32, seed-portable, te-fp32, te-kernel), one
    1x16 set with a searched case per operation-order mutant (divide-first and other block-scale
    orders, g/s and other multipliers, a divided payload, the global scales' orders, an uncapped
    multiplier, flushed subnormal inputs): block amaxes a few ulps from scale-format midpoints and
    elements a few ulps from E2M1 decision points, under a held tensor amax drawn over binary32's
    range, kept where the mutant's outputs differ from the profile's."""
    plans = []
    for i, profile in enumerate(WITNESS_PROFILES):
        scheme, name = profile.split("/")
        c = _cfg(scheme, name)
        spec = resolve_spec(scheme, name)
        cases = []
        for m in witness_mutants(profile):
            seed = zlib.crc32(m.name.encode()) + level
            for x, g in search_witnesses(spec, m.variation.steps, seed, cases=1):
                cases.append((x, g, tag_mask("profile_dependent", "tie")))
        set_name = f"quantize-{scheme}-{name}-1x16-witness"
        plans.append(_plan(c, level, 6000 + i, "mutant-witness", set_name, cases,
                           f"{profile} cases that separate its binary32 operation order from plausible others",
                           ["FPS-BLK-3", "FPS-MUT-4", "FPS-VEC-8"]))
    plans += [_sr_fp32_plan(level), _gemm_snap_plan(level), _gemm_alpha_plan(level)]
    return plans


def _sr_fp32_plan(level: int) -> coverage.SetPlan:
    """seed-fp32 with sr-midpoint: scaled values y in [2^-4, 2^-3) where the exact sum
    delta + (2r+1) 2^-9 is 1 - 2^-26, which binary32 rounds to 1 (FPS-BLK-19): the seed's FP32
    evaluation rounds them up, the exact one down.  g = 6T and block amax 6 make the multiplier 1,
    so y = x."""
    c = _cfg("ue5m3", "seed-fp32", rounding="sr-midpoint")
    x = np.zeros((16, 32), np.float32)
    r = np.zeros((16, 32), np.uint8)
    for blk in range(32):
        i, j0 = blk // 2, 16 * (blk % 2)
        x[i, j0] = 6.0
        for j in range(1, 16):
            rv = 192 + (blk * 15 + j) % 32
            y = (512 - (2 * rv + 1)) / 1024 - 2.0 ** -27
            x[i, j0 + j] = y if (blk + j) % 2 else -y
            r[i, j0 + j] = rv
    plan = _plan(c, level, 6100, "mutant-witness", "quantize-ue5m3-seed-fp32-1x16-sr-midpoint-witness",
                 [(x, 2688.0, tag_mask("sr_threshold", "profile_dependent"))],
                 "ue5m3/seed-fp32 stochastic rounding at sums that binary32 rounds up to 1",
                 ["FPS-BLK-19", "FPS-MUT-4", "FPS-VEC-8"])
    plan.inputs["r"][0] = r
    return plan


coverage.COVERAGE_MODELS["mutant-witness"] = model_mutant_witness


# ------------------------------------------------------------------ GEMM witnesses
def _narrow_bf16(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """BF16 codes of +-(1 + k/128) 2^e, e in -8..-2: sums whose bits below 2^-10 a snap removes."""
    e = rng.integers(-8, -1, size=shape, dtype=np.int64).astype(np.int32)
    mant = 1 + rng.integers(0, 128, size=shape, dtype=np.int64) / 128
    sign = np.where(rng.integers(0, 2, size=shape, dtype=np.int64) == 1, -1.0, 1.0)
    return encode((sign * np.ldexp(mant, e)).astype(np.float32), "bf16", "rne")


def _gemm_snap_plan(level: int) -> coverage.SetPlan:
    """seed-triton-h200-snap on narrow BF16 operands: outputs below 2^13, where the snap to the
    lattice 2^-10 changes bits (the wide sets' outputs are too large for it to act)."""
    plan = gemm_plan("gemm-seed-triton-h200-snap-bf16-witness", "seed-triton-h200-snap", "bf16", level, 6200, False)
    rng = np.random.Generator(np.random.PCG64(6201))
    n = plan.meta["cases"]
    plan.inputs["a"] = np.stack([_narrow_bf16(rng, (M, K)) for _ in range(n)])
    plan.inputs["bt"] = np.stack([_narrow_bf16(rng, (N, K)) for _ in range(n)])
    plan.meta.update(coverage_model="mutant-witness", requirements=["FPS-GEMM-1", "FPS-MUT-4", "FPS-VEC-8"],
                     description="narrow-range bf16 operands (2^-8..2^-2), FP32 outputs of model "
                                 "seed-triton-h200-snap: the snap to 2^-10 acts on every output")
    return plan


def _gemm_alpha_plan(level: int) -> coverage.SetPlan:
    """seed-probe-matched on UE5M3 operands quantized with held amaxes for which the seed's
    binary32 alpha (fp32-reciprocal) and an alpha rounded twice differ (FPS-GEMM-3): the first
    pairs of a seeded stream that separate them (integer draws only: a stable stream)."""
    plan = gemm_plan("gemm-seed-probe-matched-ue5m3-alpha-witness", "seed-probe-matched", "ue5m3", level, 6300, False)
    rng = np.random.Generator(np.random.PCG64(6301))
    good, bad = get_model("seed-probe-matched"), get_model("seed-probe-matched").replace(alpha_rounding="twice")

    def operand(rows: int) -> tuple[np.ndarray, np.float32]:
        """A tensor of sums of four uniforms (normal-ish, as the block sets draw them) and a held amax
        1 to 2 times its own."""
        u = rng.integers(0, 1 << 20, size=(4, rows, K), dtype=np.uint64).astype(np.float64) / (1 << 20)
        v = ((u.sum(axis=0) - 2.0) * 3).astype(np.float32)
        stale = 1 + int(rng.integers(0, 1 << 20)) / (1 << 20)
        return v, np.float32(float(np.max(np.abs(v))) * stale)

    qa, qb = [], []
    for _ in range(64):
        (va, ga), (vb, gb) = operand(M), operand(N)
        a = quantize(va, "ue5m3", profile="exact", target=448.0, amax=float(ga))
        b = quantize(vb, "ue5m3", profile="exact", target=448.0, amax=float(gb))
        if not np.array_equal(gemm(a, b, good).view(np.uint32), gemm(a, b, bad).view(np.uint32)):
            qa.append(a)
            qb.append(b)
            if len(qa) == plan.meta["cases"]:
                break
    assert len(qa) == plan.meta["cases"], "64 held-amax pairs gave too few whose two alpha orders differ"
    plan.inputs.update({**_q_inputs(qa, "a"), **_q_inputs(qb, "bt")})
    plan.meta.update(coverage_model="mutant-witness", requirements=["FPS-GEMM-3", "FPS-MUT-4", "FPS-VEC-8"],
                     description="UE5M3 operands with held tensor amaxes where the seed's binary32 alpha and "
                                 "an alpha rounded twice differ, FP32 outputs of model seed-probe-matched")
    return plan
