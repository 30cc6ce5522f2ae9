"""Searching for inputs that separate a binary32 operation-order mutant from its profile (FPS-MUT-4).

Two binary32 orders of the same real formula part only where one of them rounds across a
decision point that the other does not: about once in 2 M random blocks for a divide-first
block scale.  Random cases never find them, so they are built: each search round takes one
tensor amax g and many blocks (one per row of a (R, 16) view) whose block amax a_B puts the
profile's unrounded scale within a few ulps of a scale-format midpoint, and whose elements put
the scaled value x * mult within a few ulps of an E2M1 decision point; then it runs the
profile's steps and the mutant's on the same view and keeps the blocks whose outputs differ.
Every draw comes from one PCG64 stream and every operation is binary32 (NumPy) or fpspec's
own conversion, so a search gives the same witnesses on every machine.
"""

from __future__ import annotations

import numpy as np

from ..convert import decode
from ..schemes import BlockSpec
from .binary32 import F32, FLT_MAX, Fp32Steps, block_steps, global_scales, quantize_view_fp32_steps

__all__ = ["search_witnesses", "WITNESS_ROWS"]

#: Blocks per search round.
WITNESS_ROWS = 2048
#: The E2M1 decision points (midpoints of neighbouring values) the elements are aimed at.
_E2M1_POINTS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], np.float32)


def _ulps(v: np.ndarray, k: np.ndarray) -> np.ndarray:
    """v moved by k ulps (binary32 bit patterns of non-negative values), kept finite and >= 0."""
    bits = v.astype(np.float32).view(np.int32).astype(np.int64) + k
    return np.clip(bits, 0, 0x7F7FFFFF).astype(np.int32).view(np.float32)


def _round_blocks(rng: np.random.Generator, spec: BlockSpec, g: np.float32) -> np.ndarray:
    """One round's (R, 16) view: block amaxes aimed at scale midpoints, elements at E2M1 points."""
    b = spec.block
    sf = spec.scale_format
    top = int(sf.max_finite_code)
    ge, gd = global_scales(Fp32Steps(), spec, g)
    with np.errstate(over="ignore", divide="ignore", under="ignore", invalid="ignore"):
        mulf = ge * (F32(1) / F32(6))
        codes = rng.integers(0, top, size=WITNESS_ROWS, dtype=np.int64).astype(np.uint8)
        lo = decode(codes, sf)
        hi = decode((codes + 1).astype(np.uint8), sf)
        mid = ((lo + hi) / 2).astype(np.float32)
        a_b = _ulps(np.minimum(mid / mulf, FLT_MAX).astype(np.float32),
                    rng.integers(-3, 4, size=WITNESS_ROWS, dtype=np.int64))
        a_b = np.where(a_b == 0, F32(2.0 ** -149), a_b).astype(np.float32)
        mult = block_steps(Fp32Steps(), spec, a_b, ge, gd)[2]
        t = _E2M1_POINTS[rng.integers(0, len(_E2M1_POINTS), size=(WITNESS_ROWS, b), dtype=np.int64)]
        x = _ulps((t / mult[:, None]).astype(np.float32), rng.integers(-2, 3, size=(WITNESS_ROWS, b), dtype=np.int64))
        x = np.minimum(x, a_b[:, None])
        x[:, 0] = a_b
        sign = np.where(rng.integers(0, 2, size=(WITNESS_ROWS, b), dtype=np.int64) == 1, F32(-1), F32(1))
    return (x * sign).astype(np.float32)


def _tensor_amax(rng: np.random.Generator) -> np.float32:
    """A held tensor amax, log-uniform over binary32's range (tiny ones make 1 / (s gd) overflow)."""
    e = int(rng.integers(-135, 121))
    return F32(np.ldexp(1.0 + float(rng.integers(0, 1 << 23)) / (1 << 23), e))


def _differing_rows(view: np.ndarray, spec: BlockSpec, g: np.float32, steps: Fp32Steps) -> np.ndarray:
    """Rows (blocks) whose codes, scale or dequantized values differ between the profile and the mutant."""
    good = quantize_view_fp32_steps(view, spec, g)
    bad = quantize_view_fp32_steps(view, spec, g, steps=steps)
    rows = (good["scales"] != bad["scales"]).any(axis=1)
    for k in ("codes", "dequant"):
        rows |= (good[k] != bad[k]).any(axis=1)
    return np.flatnonzero(rows)


def search_witnesses(spec: BlockSpec, steps: Fp32Steps, seed: int, cases: int = 2, rounds: int = 24,
                     shape: tuple[int, int] = (16, 32)) -> list[tuple[np.ndarray, float]]:
    """Up to ``cases`` tensors (``shape``, 1xB blocks of ``spec``) with their held amax g, each
    holding blocks on which ``steps`` and the profile's own steps differ; [] if none is found."""
    rng = np.random.Generator(np.random.PCG64(seed))
    m, k = shape
    per_case = m * k // spec.block
    out: list[tuple[np.ndarray, float]] = []
    for _ in range(rounds):
        g = _tensor_amax(rng)
        view = _round_blocks(rng, spec, g)
        hits = _differing_rows(view, spec, g, steps)
        if not len(hits):
            continue
        filler = np.setdiff1d(np.arange(WITNESS_ROWS), hits)[: per_case]
        rows = np.concatenate([hits[: per_case // 2], filler, hits[per_case // 2:]])[:per_case]
        out.append((view[rows].reshape(m, k), float(g)))
        if len(out) == cases:
            break
    return out
