"""Stochastic rounding, fast path against the exact spec, on 10^8 (input, r) cases (FPS-RND-14).

Usage (from the repository root)::

    python3 -m tools.sr_sweep [--cases 100000000] [--seed 2026] [--triples 400000]

Prints one line ``cases C mismatches M seed S wall T s`` (docs/rounding.rst quotes a run) and,
on a mismatch, the first ones with their inputs; exit status 0 when nothing differs.

Why a threshold per input is a complete comparison (docs/rounding.rst, "Sweeping stochastic
rounding"): for a fixed input ``x``, mode and width ``N``, each SR test of FPS-RND-5..7 is one
linear inequality in ``r`` (``delta + (2r+1)/2^(N+1) >= 1``, ``delta + r/2^N >= 1``,
``r < delta 2^N``), so the set of ``r`` sent to the upper neighbour is an interval that
starts at 0 or ends at ``2^N - 1``.  The exact code is therefore ``c(0)`` for ``r < T`` and
``c(2^N - 1)`` for ``r >= T``, for one flip point ``T`` that bisection over ``r`` with
:func:`fpspec.exact.rounding.round_to_code` finds in at most ``N + 2`` exact calls.  Every
fast-path result at any ``r`` can then be compared with the exact one without a Fraction
per case.  The sweep also spot-checks the flip points by direct exact calls.

The inputs (float32 and float64, both signs where the target is signed): every finite value
of each 4- and 8-bit target and, for FP16/BF16 targets, a sample; the points at
``delta = 2^-n``, ``1 - 2^-n``, ``j/2^n`` and the midpoint and quarters of each gap, one
ulp of the input type either side of each; and values far below the smallest subnormal
(down to the smallest float64).  Every (input, mode) gets several widths ``N`` from 1..32
(every width is used), and each triple gets random ``r`` plus the values nearest 0,
``2^N - 1`` and its flip point.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from fpspec.choices import NanPolicy, NegativePolicy, Policies, default_policies
from fpspec.exact.rounding import round_to_code
from fpspec.fast.rounding import encode_fast
from fpspec.formats import get_format

#: Targets: every 4- and 8-bit format, and two 16-bit ones (sampled).
FORMATS = ("e2m1", "e4m3", "ue4m3", "ue5m3", "ue5m3fnu", "ue8m0", "e5m2", "fp16", "bf16")
SR_MODES = ("sr-midpoint", "sr-add", "sr-unbiased")
DTYPES = (np.float32, np.float64)
MAX_N = 32


def sweep_policies(fmt: str) -> Policies:
    """The format's defaults; inputs are finite and non-zero, so only overflow matters
    (negative inputs only reach signed formats)."""
    pol = default_policies(fmt)
    return Policies(overflow=pol.overflow, nan=NanPolicy.ERROR, negative=NegativePolicy.ERROR)


def boundary_inputs(fmt_name: str, dtype: type, rng: np.random.Generator) -> np.ndarray:
    """Finite non-zero inputs near every code boundary of ``fmt_name`` and far below it."""
    f = get_format(fmt_name)
    if f.bits <= 8:
        vals = [v for v in f.finite_values() if v > 0] if not f.has_zero else f.finite_values()
        vals = [v for v in vals if v >= 0]
    else:  # 16-bit targets: a sample of positive codes
        codes = rng.choice(f.max_finite_code + 1, size=600, replace=False)
        vals = sorted({f.decode_exact(int(c)) for c in codes} | {f.max_finite, Fraction(0)})
    top = f.max_finite + Fraction(2) ** (f.emax - f.man_bits)
    pts: list[float] = []
    for lo in vals:
        hi = top if lo == f.max_finite else min((v for v in vals if v > lo), default=top)
        if f.bits > 8:  # the exact next value, not the next sampled one
            c = round_to_code(lo, f, "rtz") if lo else 0
            hi = f.decode_exact(c + 1) if c + 1 <= f.max_finite_code else top
        gap = hi - lo
        fracs = [Fraction(1, 2), Fraction(1, 4), Fraction(3, 4)]
        for n in rng.choice(np.arange(1, 64), size=6, replace=False):
            n = int(n)
            fracs += [Fraction(1, 2 ** n), 1 - Fraction(1, 2 ** n),
                      Fraction(int(rng.integers(1, 2 ** min(n, 62))), 2 ** n)]
        pts += [float(lo + gap * q) for q in fracs]
    mp = f.min_positive
    # far below the smallest value: every factor 2^-k for k <= 128 (where a 53-bit significand
    # reaches past 64 bits below the quantum), then a sample down to the smallest float64
    far = list(range(1, 129)) * 2 + [int(k) for k in rng.choice(np.arange(129, 1100), size=60, replace=False)]
    for k in far:
        pts.append(float(mp * Fraction(2) ** -k * (1 + Fraction(int(rng.integers(0, 2 ** 52)), 2 ** 52))))
    pts += [5e-324, 2.0 ** -1022, 2.0 ** -149, 2.0 ** -126]
    with np.errstate(over="ignore", under="ignore"):
        base = np.array(pts, dtype=dtype)
    base = base[np.isfinite(base) & (base > 0)]
    x = np.unique(np.concatenate([base, np.nextafter(base, dtype(np.inf)), np.nextafter(base, dtype(0))]))
    x = x[np.isfinite(x) & (x > 0)]
    if f.signed:
        x = np.concatenate([x, -x])
    return x


def flip_point(x: float, fmt: str, mode: str, nbits: int, pol: Policies) -> tuple[int, int, int]:
    """``(c_low, c_high, T)``: the exact code is ``c_low`` for ``r < T`` and ``c_high`` for
    ``r >= T`` (``T = 2^N`` when the code does not depend on ``r``); bisection with the exact
    reference, relying on the monotonicity in ``r`` of every SR test (module docstring)."""
    top = (1 << nbits) - 1
    c0 = round_to_code(x, fmt, mode, r=0, nbits=nbits, policies=pol)
    c1 = round_to_code(x, fmt, mode, r=top, nbits=nbits, policies=pol)
    if c0 == c1:
        return c0, c1, top + 1
    lo, hi = 0, top  # invariant: c(lo) == c0, c(hi) == c1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if round_to_code(x, fmt, mode, r=mid, nbits=nbits, policies=pol) == c0:
            lo = mid
        else:
            hi = mid
    return c0, c1, hi


@dataclass
class Group:
    """All triples of one (target, input dtype, mode, N): one fast-path call."""

    fmt: str
    dtype: type
    mode: str
    nbits: int
    x: list[float] = field(default_factory=list)
    c_low: list[int] = field(default_factory=list)
    c_high: list[int] = field(default_factory=list)
    flip: list[int] = field(default_factory=list)


def plan(triples: int, seed: int) -> list[Group]:
    """Choose the (input, mode, N) triples and compute each flip point exactly."""
    rng = np.random.default_rng(seed)
    pools = {(fmt, dt): boundary_inputs(fmt, dt, rng) for fmt in FORMATS for dt in DTYPES}
    total = sum(p.size for p in pools.values())
    groups: dict[tuple, Group] = {}
    for (fmt, dt), pool in pools.items():
        pol = sweep_policies(fmt)
        share = max(1, round(triples * pool.size / total / len(SR_MODES)))
        for mode in SR_MODES:
            xs = pool[rng.integers(0, pool.size, size=share)]
            ns = (np.arange(share) % MAX_N) + 1  # every width, evenly
            rng.shuffle(ns)
            for x, n in zip(xs.tolist(), ns.tolist()):
                g = groups.setdefault((fmt, dt, mode, n), Group(fmt, dt, mode, n))
                c0, c1, t = flip_point(x, fmt, mode, n, pol)
                g.x.append(x)
                g.c_low.append(c0)
                g.c_high.append(c1)
                g.flip.append(t)
    return list(groups.values())


def random_values(g: Group, per: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``per`` values of r for each triple of ``g``: 0..3, 2^N-4..2^N-1, T-2..T+1, the rest uniform.
    Returns (triple index per case, r per case)."""
    top = (1 << g.nbits) - 1
    m = len(g.x)
    idx = np.repeat(np.arange(m), per)
    r = rng.integers(0, top, size=m * per, dtype=np.uint64, endpoint=True).reshape(m, per)
    flip = np.array(g.flip, dtype=np.int64)
    fixed = [np.full(m, v, np.int64) for v in (0, 1, 2, 3, top - 3, top - 2, top - 1, top)]
    fixed += [flip + d for d in (-2, -1, 0, 1)]
    for j, col in enumerate(fixed[:per]):
        r[:, j] = np.clip(col, 0, top).astype(np.uint64)
    return idx, r.reshape(-1).astype(np.uint32)


def run(cases: int, seed: int, triples: int, spot_checks: int = 2000, report=print) -> dict:
    """Plan, sweep and spot-check; returns a summary dict (``mismatches`` 0 means fast == exact)."""
    t0 = time.perf_counter()
    groups = plan(triples, seed)
    t_plan = time.perf_counter() - t0
    n_triples = sum(len(g.x) for g in groups)
    per = max(2, -(-cases // n_triples))
    rng = np.random.default_rng(seed + 1)
    done = bad = 0
    first: list[str] = []
    spots: list[tuple[Group, float, int, int]] = []
    for g in groups:
        idx, r = random_values(g, per, rng)
        x = np.array(g.x, dtype=g.dtype)[idx]
        flip = np.array(g.flip, dtype=np.int64)[idx]
        want = np.where(r.astype(np.int64) < flip, np.array(g.c_low)[idx], np.array(g.c_high)[idx])
        got = encode_fast(x, g.fmt, g.mode, rbits=r, nbits=g.nbits, policies=sweep_policies(g.fmt))
        miss = np.flatnonzero(got.astype(np.int64) != want)
        done += x.size
        bad += miss.size
        for i in miss[: max(0, 5 - len(first))]:
            first.append(f"{g.fmt} {np.dtype(g.dtype).name} {g.mode} N={g.nbits}: x={float(x[i])!r} "
                         f"r={int(r[i])} fast={int(got[i]):#x} exact={int(want[i]):#x}")
        for j in rng.integers(0, x.size, size=max(1, spot_checks // len(groups))):
            spots.append((g, float(x[j]), int(r[j]), int(want[j])))
    spot_bad = 0
    for g, xv, rv, w in spots:  # the flip points themselves, against direct exact calls
        if round_to_code(xv, g.fmt, g.mode, r=rv, nbits=g.nbits, policies=sweep_policies(g.fmt)) != w:
            spot_bad += 1
            first.append(f"flip point wrong: {g.fmt} {g.mode} N={g.nbits} x={xv!r} r={rv}")
    wall = time.perf_counter() - t0
    return {"cases": done, "mismatches": bad, "seed": seed, "wall_s": wall, "plan_s": t_plan,
            "triples": n_triples, "groups": len(groups), "per_triple": per,
            "spot_checks": len(spots), "spot_mismatches": spot_bad, "first": first}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=float, default=1e8, help="(input, r) cases to compare (default 1e8)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--triples", type=int, default=400_000,
                    help="(input, mode, N) triples whose flip point is computed exactly")
    ap.add_argument("--spot-checks", type=int, default=20_000,
                    help="sampled cases also computed by direct exact calls (checks the flip points)")
    args = ap.parse_args(argv)
    res = run(int(args.cases), args.seed, args.triples, args.spot_checks)
    print(f"cases {res['cases']} mismatches {res['mismatches']} seed {res['seed']} "
          f"wall {res['wall_s']:.1f} s")
    print(f"  {res['triples']} (input, mode, N) triples in {res['groups']} groups, {res['per_triple']} r each; "
          f"flip points computed exactly in {res['plan_s']:.1f} s; {res['spot_checks']} direct exact "
          f"spot checks, {res['spot_mismatches']} wrong")
    for line in res["first"]:
        print("  " + line)
    return 0 if res["mismatches"] == 0 and res["spot_mismatches"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
