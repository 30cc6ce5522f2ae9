"""Fit cuBLAS's K split from a sweep (tools/cublas/sweep.py), offline on a CPU.

    python3 -m tools.cublas.fit SWEEP [SWEEP ...] --out DIR

SWEEP is a sweep.jsonl (or a directory of them).  For every call record it:

1. regenerates the sampled rows of A and BT from the hash (checking the recorded
   operand checksums) and reads the launched GEMM kernel (tools/cublas/kernels.py:
   tile, K tile kt, CTAs = product of the grid; for nvjet and cutlass kernels the
   grid-derived S is :func:`fpspec.cublas.h200.plan_from_kernel`'s);
2. finds the slice lengths S for which the target's fpspec preset (``km-h100-bf16``
   for BF16 and FP16, ``km-h100-fp8-promote128`` for FP8 without fast accumulation,
   ``km-h100-fp8`` with it) with ``split_k = S`` reproduces every sampled output
   (FPS-GEMM-14; evaluated with :func:`fpspec.matmul.rowdot`, bit-exact
   for these presets).  Candidates: the grid-derived S (P = CTAs / T), no split, and
   every balanced split S = ceil(ceil(K/kt) / P) kt; K is zero-padded to whole K tiles
   (what a TMA load of the tail does; zero products take no part in the alignment);
3. where the preset explains nothing, tries the alternative hypotheses of
   :func:`hypotheses` (K groups of 8, slices with the residue first, a sequential
   FP32 chain) and otherwise records the call as unexplained;
4. fits issue 14's rule per target: S = ceil(K / (P kt)) kt with
   P = min(ceil(ceil(K/kt) / R) - 1, floor(B / T)), T the output tiles of the kernel's
   tile, R one integer per target, B one CTA budget per kernel (the B that reproduces
   the most measured splits), and reports how often the rule's S equals the
   grid-derived S and the S the bits show, and the share of sampled outputs that the
   preset with the rule's S reproduces.

Writes DIR/cublas_rule.json (the table a later ``fpspec.cublas.library.resolve`` can be
generated from: per target, per kernel, the rule's parameters and the shapes where
it fails), DIR/fit_records.jsonl (one result per call; ``--reuse`` reads it back and
skips the searches) and DIR/fit_summary.txt (what it prints).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fpspec.cublas.h200 import TARGETS

from .common import bits_from_hex, code_checksum, codes_numpy, read_records
from .kernels import (GEMM_CLASSES, balanced_slices, ctas, gemm_kernel, normalise_s, output_tiles, parse_kernel,
                      rule_s, slice_for_p)

RULE_TEXT = ("S = ceil(K / (P kt)) kt; P = min(ceil(ceil(K / kt) / R) - 1, floor(B / T)); no split when P <= 1; "
             "T = output tiles of the kernel's TM x TN tile in whole CM x CN clusters (nvjet: "
             "fpspec.cublas.h200.padded_tiles, cuBLAS m = torch N, an M x 1 output as 1 x M; other kernels: "
             "T = ceil(N/TM) ceil(M/TN) unless the family's tile_interpretation says otherwise); kt the kernel's "
             "K tile")
R_RANGE = range(4, 65)
R_ISSUE = 20


# ================================================================== hypotheses
@dataclass(frozen=True)
class Hypothesis:
    """A model of one call's reduction: a preset (with overrides), the unit that slices
    are made of, and where a partial unit goes ("back": the last K tile is the partial
    one; "front": the first slice holds the residue)."""

    name: str
    preset: str
    overrides: tuple[tuple[str, Any], ...]
    unit: int | None          # None: the kernel's K tile (or the target's kt)
    pad: str                  # "back" or "front"

    def model(self, split_k: int | None):
        from fpspec.named_models import get_model

        return get_model(self.preset, **dict(self.overrides), split_k=split_k)


def hypotheses(target: str) -> list[Hypothesis]:
    """The main hypothesis (the target's preset, slices of whole K tiles) first, then the
    alternatives tried on calls it does not explain: K groups of 8 (mma.sync on the sm75
    / sm80 kernels; issue 14), the A100 model (G = 8, neab = 1), each with the residue at
    the back or at the front of K, and a sequential FP32 chain (SIMT kernels)."""
    cfg = TARGETS[target]
    main = Hypothesis("main", cfg.preset, (), None, "back")
    if cfg.fmt == "e4m3":
        return [main, Hypothesis("front", cfg.preset, (), 32, "front"),
                Hypothesis("fp32-seq", "decoded-fp32", (), 8, "back")]
    return [main,
            Hypothesis("g8-back", cfg.preset, (("group_size", 8),), 8, "back"),
            Hypothesis("g8-front", cfg.preset, (("group_size", 8),), 8, "front"),
            Hypothesis("a100-back", "km-a100-bf16", (), 8, "back"),
            Hypothesis("a100-front", "km-a100-bf16", (), 8, "front"),
            Hypothesis("fp32-seq", "decoded-fp32", (), 8, "back")]


def padded(codes: np.ndarray, k_to: int, front: bool) -> np.ndarray:
    """Zero codes added to reach ``k_to`` columns, at the front or the back."""
    extra = k_to - codes.shape[1]
    if extra <= 0:
        return codes
    z = np.zeros((codes.shape[0], extra), dtype=codes.dtype)
    return np.concatenate([z, codes] if front else [codes, z], axis=1)


def model_bits(fmt: str, pa: np.ndarray, pb: np.ndarray, hyp: Hypothesis, s: int | None,
               unit: int | None = None) -> np.ndarray:
    """FP32 bits of the row-wise dots pa[i] . pb[i] under ``hyp`` with slices of ``s``
    (None: one chain).  K is zero-padded to whole units (back), or, for "front", so that
    the first slice (or the first unit without a split) holds the residue."""
    from fpspec.matmul import rowdot

    u = hyp.unit or unit or TARGETS_KT.get(fmt, 64)
    k = pa.shape[1]
    if hyp.pad == "front":
        k_to = math.ceil(k / s) * s if s else math.ceil(k / u) * u
    else:
        k_to = math.ceil(k / u) * u
    a, b = padded(pa, k_to, hyp.pad == "front"), padded(pb, k_to, hyp.pad == "front")
    s_eff = None if s is None or s >= k_to else s
    y = rowdot(a.astype(_CODE_DTYPE[fmt]), b.astype(_CODE_DTYPE[fmt]), hyp.model(s_eff), fmt=fmt)
    return np.asarray(y, dtype=np.float32).view(np.uint32)


TARGETS_KT = {t.fmt: t.kt for t in TARGETS.values()}
_CODE_DTYPE = {"bf16": np.uint16, "fp16": np.uint16, "e4m3": np.uint8}


# ================================================================== one record
class Pairs:
    """The sampled outputs of one record as row-wise dot products, with a cache of
    evaluated (hypothesis, S) -> matched count."""

    def __init__(self, rec: dict):
        fmt = rec["fmt"]
        m, n, k = rec["shape"]
        a = codes_numpy(fmt, rec["seed_a"], rec["rows"], k)
        bt = codes_numpy(fmt, rec["seed_b"], rec["cols"], k)
        self.operands_ok = True
        if "checksum_a" in rec and list(code_checksum(a)) != list(rec["checksum_a"]):
            self.operands_ok = False
        if "checksum_b" in rec and list(code_checksum(bt)) != list(rec["checksum_b"]):
            self.operands_ok = False
        r, c = len(rec["rows"]), len(rec["cols"])
        a, bt = a.astype(_CODE_DTYPE[fmt]), bt.astype(_CODE_DTYPE[fmt])
        self.pa, self.pb = np.repeat(a, c, axis=0), np.tile(bt, (r, 1))
        self.bits = bits_from_hex(rec["bits"])
        self.fmt, self.k, self.n = fmt, k, len(self.bits)
        q = sorted({0, self.n - 1, self.n // 2, min(1, self.n - 1), (3 * self.n) // 4})
        self.pre = np.asarray(q[:4])
        self.full: dict[tuple, int] = {}
        self.prefull: dict[tuple, bool] = {}
        self.evals = 0

    def count(self, hyp: Hypothesis, s: int | None, unit: int) -> int:
        key = (hyp.name, s)
        if key not in self.full:
            self.evals += 1
            y = model_bits(self.fmt, self.pa, self.pb, hyp, s, unit)
            self.full[key] = int((y == self.bits).sum())
        return self.full[key]

    def quick(self, hyp: Hypothesis, s: int | None, unit: int) -> bool:
        key = (hyp.name, s)
        if key in self.full:
            return self.full[key] == self.n
        if key not in self.prefull:
            self.evals += 1
            y = model_bits(self.fmt, self.pa[self.pre], self.pb[self.pre], hyp, s, unit)
            self.prefull[key] = bool((y == self.bits[self.pre]).all())
        return self.prefull[key]


def search_hypothesis(pairs: Pairs, hyp: Hypothesis, unit: int, first: list, exhaustive: bool,
                      deadline: float) -> tuple[list, bool]:
    """Slice lengths S (None: no split) for which ``hyp`` reproduces every sampled
    output, and whether the search ran to its end (``deadline``).

    ``first`` (the grid-derived S, then no split) are tried in order; once one matches,
    only the nearest alternatives are checked - no split and the balanced splits of one
    slice more and one fewer - to show that the samples separate them (a quick check on
    four outputs, in full only if those agree), unless ``exhaustive``.  Otherwise every
    balanced split of whole units is tried.
    """
    k = pairs.k
    family = balanced_slices(k, unit)
    order: list = []
    for s in first:
        s = normalise_s(k, s)
        if (s is None or s % unit == 0) and s not in order:
            order.append(s)
    matches: list = []
    seen: list = []
    for s in order:
        seen.append(s)
        if pairs.quick(hyp, s, unit) and pairs.count(hyp, s, unit) == pairs.n:
            matches.append(s)
            if not exhaustive:
                break
    if matches and not exhaustive:
        s = matches[0]
        near: list = [None]
        if s is None:
            near += family[:1]
        elif s in family:
            i = family.index(s)
            near += family[max(0, i - 1):i] + family[i + 1:i + 2]
        else:
            near += [s - unit, s + unit]
        rest = [normalise_s(k, v) for v in near if v is None or v > 0]
    else:
        rest = [None] + family
    complete = True
    for s in rest:
        if s in seen or (s is not None and s % unit):
            continue
        seen.append(s)
        if time.time() > deadline:
            complete = False
            break
        if pairs.quick(hyp, s, unit) and pairs.count(hyp, s, unit) == pairs.n:
            matches.append(s)
    return sorted(set(matches), key=lambda v: -1 if v is None else v), complete


# ================================================================== families
def interpretations(info) -> list[tuple[str, int, int, str]]:
    """Ways to read the name's tile as CTAs' output tiles: (label, tm, tn, orientation)."""
    tm, tn = info.tile_m, info.tile_n
    out = [("cublas", tm, tn, "cublas"), ("torch", tm, tn, "torch")]
    if "2cta" in info.flags:
        out += [("cublas-2cta-m", max(1, tm // 2), tn, "cublas"), ("cublas-2cta-n", tm, max(1, tn // 2), "cublas")]
    return out


def choose_interpretation(recs: list[dict], info) -> tuple[str, int, int, str]:
    """The tile reading under which CTAs is a whole multiple of the output tiles for the
    most calls of a kernel (ties: the first listed)."""
    best, best_n = None, -1
    for it in interpretations(info):
        _, tm, tn, orient = it
        n = 0
        for r in recs:
            c = r["_ctas"]
            t = output_tiles(r["shape"][0], r["shape"][1], tm, tn, orient)
            if c is not None and c >= t and c % t == 0:
                n += 1
        if n > best_n:
            best, best_n = it, n
    return best


# ================================================================== rule fit
def b_intervals(k: int, kt: int, t: int, r: int, s_meas) -> list[tuple[int, float]]:
    """The CTA budgets B (as disjoint [lo, hi) intervals) for which the rule's S is
    ``s_meas`` (an S, None for no split, or a list of acceptable ones)."""
    cap = math.ceil(math.ceil(k / kt) / r) - 1
    out = []
    ok = {normalise_s(k, v) for v in s_meas} if isinstance(s_meas, (list, tuple, set)) else {normalise_s(k, s_meas)}
    if normalise_s(k, slice_for_p(k, kt, 1)) in ok:
        out.append((0, 2 * t))
    for p in range(2, max(cap, 1) + 1):
        if slice_for_p(k, kt, p) in ok:
            out.append((p * t, (p + 1) * t if p < cap else math.inf))
    if cap <= 1 and out:
        out = [(0, math.inf)]
    return out


def best_b(points: list[dict], r: int) -> tuple[int, list[int], int]:
    """The budget B that makes the rule reproduce the most points (ties: the smallest
    B), the [lo, hi] range of B around it with as many (hi -1: unbounded), and how many
    points it gets.  A point's intervals are disjoint, so a sweep over the interval
    ends counts the points at every B."""
    delta: dict[int, int] = {1: 0}
    for pt in points:
        for lo, hi in b_intervals(pt["K"], pt["kt"], pt["T"], r, pt["S"]):
            lo = max(1, int(lo))
            if hi != math.inf and hi <= lo:
                continue
            delta[lo] = delta.get(lo, 0) + 1
            if hi != math.inf:
                delta[int(hi)] = delta.get(int(hi), 0) - 1
    marks = sorted(delta)
    counts, run = [], 0
    for x in marks:
        run += delta[x]
        counts.append(run)
    best_n = max(counts)
    i = counts.index(best_n)
    j = i
    while j + 1 < len(marks) and counts[j + 1] == best_n:
        j += 1
    hi = marks[j + 1] - 1 if j + 1 < len(marks) else -1
    return marks[i], [marks[i], hi], best_n


def fit_rule(points: list[dict]) -> dict:
    """R per target and B per kernel family maximising the points the rule reproduces."""
    fams = sorted({p["family"] for p in points})
    best = None
    per_r = {}
    for r in R_RANGE:
        total, fam_fit = 0, {}
        for f in fams:
            fp = [p for p in points if p["family"] == f]
            b, rng, n = best_b(fp, r)
            fam_fit[f] = {"B": b, "B_range": rng, "points": len(fp), "rule_matches": n}
            total += n
        per_r[r] = total
        key = (total, -abs(r - R_ISSUE))
        if best is None or key > best[0]:
            best = (key, r, fam_fit)
    if best is None:
        return {"R": R_ISSUE, "families": {}, "matches_by_R": {}}
    return {"R": best[1], "families": best[2], "matches_by_R": per_r}


# ================================================================== main
def analyse(records: list[dict], args, log) -> tuple[dict, list[dict]]:
    reuse = {}
    if args.reuse:
        for r in read_records([args.reuse]):
            if r.get("kind") == "fit":
                reuse[(r["target"], tuple(r["shape"]), r["id"])] = r
    calls = [r for r in records if r.get("kind") == "call" and r.get("bits") and not r.get("error")]
    errors = [r for r in records if r.get("kind") == "call" and (r.get("error") or not r.get("bits"))]
    if args.targets:
        keep = set(args.targets.split(","))
        calls = [r for r in calls if r["target"] in keep]
    for r in calls:
        r["_kernel"] = gemm_kernel(r.get("kernels") or [])
        r["_info"] = parse_kernel(r["_kernel"]["name"]) if r["_kernel"] else None
        r["_ctas"] = ctas(r["_kernel"]["grid"]) if r["_kernel"] else None
    # kernel families: one per (target, kernel name)
    fam_recs: dict[tuple[str, str], list[dict]] = {}
    for r in calls:
        if r["_info"] is not None:
            fam_recs.setdefault((r["target"], r["_info"].name), []).append(r)
    fam_interp = {}
    for key, recs in fam_recs.items():
        info = recs[0]["_info"]
        if info.tile_m and info.tile_n:
            fam_interp[key] = choose_interpretation(recs, info)
    t_all = time.time()
    todo = [r for r in calls if (r["target"], tuple(r["shape"]), r["id"]) not in reuse]
    log(f"fit: {len(calls)} calls ({len(calls) - len(todo)} reused), {len(errors)} device errors; "
        f"searching with {args.jobs} process(es)")
    fresh: dict[tuple, dict] = {}
    partial = open(Path(args.out) / "fit_records.partial.jsonl", "a")
    if args.jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.jobs) as pool:
            for i, res in enumerate(pool.map(_fit_worker, [(r, fam_interp, args) for r in todo], chunksize=4)):
                fresh[(res["target"], tuple(res["shape"]), res["id"])] = res
                partial.write(json.dumps(res, separators=(",", ":"), default=str) + "\n")
                if (i + 1) % 50 == 0:
                    partial.flush()
                    log(f"  {i + 1}/{len(todo)} calls searched ({time.time() - t_all:.0f}s)")
    else:
        for i, r in enumerate(todo):
            res = fit_record(r, fam_interp, args)
            fresh[(res["target"], tuple(res["shape"]), res["id"])] = res
            partial.write(json.dumps(res, separators=(",", ":"), default=str) + "\n")
            if (i + 1) % 50 == 0:
                partial.flush()
                log(f"  {i + 1}/{len(todo)} calls searched ({time.time() - t_all:.0f}s)")
    partial.close()
    results = []
    for r in calls:
        key = (r["target"], tuple(r["shape"]), r["id"])
        if key in reuse:
            # a reused search keeps its S; the grid reading is redone (it may have improved)
            x = dict(reuse[key])
            x.update(kernel=r["_info"].name if r["_info"] else None, **{"class": r["_info"].kclass if r["_info"] else None})
            t, p_grid = _grid_p(r, fam_interp)
            x.update(T=t, P_grid=p_grid, S_grid=_grid_s(r, x["shape"][2], x["kt"], p_grid) if p_grid else "unknown")
            results.append(x)
        else:
            results.append(fresh[key])
    table = build_table(calls, results, fam_interp, records, args, log)
    table["device_errors"] = [{"target": r.get("target"), "shape": r.get("shape"), "error": r.get("error")}
                              for r in errors]
    return table, results


def _fit_worker(job) -> dict:
    return fit_record(*job)


def _kt_of(r: dict) -> int:
    info = r["_info"]
    g = {"bf16": 16, "fp16": 16, "e4m3": 32}[r["fmt"]]
    if info is not None and info.kt and info.kt % g == 0:
        return info.kt
    return TARGETS[r["target"]].kt


def _grid_p(r: dict, fam_interp: dict) -> tuple[int | None, int | None]:
    """(T, P = CTAs / T): for nvjet kernels as :func:`fpspec.cublas.h200.plan_from_kernel`
    reads them (T counted in whole clusters, an M x 1 output as 1 x M, P = 1 without
    ``splitK`` in the name); for cutlass kernels T None and P = the grid's z; for other
    kernels under the family's tile reading.  P None when CTAs is not a whole multiple of T."""
    info = r["_info"]
    if info is not None and info.kclass in ("nvjet", "sm75", "sm80") and r["_kernel"] is not None \
            and r["_ctas"] is not None:
        from fpspec.cublas.h200 import parse_kernel_name, plan_from_kernel

        if info.kclass == "nvjet" or parse_kernel_name(r["_kernel"]["name"]).tile is not None:
            m, n, k = (int(v) for v in r["shape"])
            pl = plan_from_kernel(r["target"], m, n, k, r["_kernel"]["name"], r["_kernel"]["grid"])
            return pl.tiles, (pl.p if pl.confidence != "unknown" else None)
    if info is None or (r["target"], info.name) not in fam_interp or r["_ctas"] is None:
        return None, None
    _, tm, tn, orient = fam_interp[(r["target"], info.name)]
    t = output_tiles(r["shape"][0], r["shape"][1], tm, tn, orient)
    c = r["_ctas"]
    return t, (c // t if c >= t and c % t == 0 else None)


def _grid_s(r: dict, k: int, kt: int, p_grid: int | None) -> int | None:
    """The grid-derived S: slices of whole K tiles (nvjet) or of 8 elements (cutlass)."""
    if not p_grid:
        return None
    info = r["_info"]
    if info is not None and info.kclass in ("sm75", "sm80") and r["_kernel"] is not None:
        from fpspec.cublas.h200 import CUTLASS_SLICE_UNIT

        kt = CUTLASS_SLICE_UNIT
    return slice_for_p(k, kt, p_grid)


def fit_record(r: dict, fam_interp: dict, args) -> dict:
    """Search one call: the main hypothesis, then (where it explains nothing) the
    alternatives."""
    t0 = time.time()
    m, n, k = r["shape"]
    kt = _kt_of(r)
    t, p_grid = _grid_p(r, fam_interp)
    s_grid = _grid_s(r, k, kt, p_grid)
    info = r["_info"]
    out: dict[str, Any] = {"kind": "fit", "id": r["id"], "target": r["target"], "shape": r["shape"],
                           "kernel": info.name if info else None, "class": info.kclass if info else None,
                           "ctas": r["_ctas"], "T": t, "P_grid": p_grid, "kt": kt,
                           "S_grid": s_grid if p_grid else "unknown", "outputs": len(r["bits"])}
    pairs = Pairs(r)
    out["operands_ok"] = pairs.operands_ok
    if not pairs.operands_ok:
        out.update(explained_by=None, S_bits=[], main_counts={},
                   note="operand checksums differ from the CPU regeneration")
        return out
    hyps = hypotheses(r["target"])
    deadline = time.time() + args.record_seconds
    first = ([s_grid] if p_grid else []) + [None]
    matches, complete = search_hypothesis(pairs, hyps[0], kt, first, args.exhaustive, deadline)
    out["S_bits"] = matches
    out["search_complete"] = complete
    out["explained_by"] = "main" if matches else None
    if not matches and not args.no_alternatives:
        # phase 1: every alternative at the grid-derived split (in its unit) and unsplit;
        # phase 2: every balanced split, until the deadline
        alt_deadline = time.time() + args.alt_seconds
        for phase in (1, 2):
            for h in hyps[1:]:
                u = h.unit or kt
                first_alt = ([math.ceil(k / (p_grid * u)) * u] if p_grid and p_grid > 1 else []) + [None]
                if phase == 1:
                    hit = [s for s in first_alt if pairs.quick(h, normalise_s(k, s), u)
                           and pairs.count(h, normalise_s(k, s), u) == pairs.n]
                    am = sorted({normalise_s(k, s) for s in hit}, key=lambda v: -1 if v is None else v)
                else:
                    am, _ = search_hypothesis(pairs, h, u, first_alt, False, alt_deadline)
                if am:
                    out["explained_by"] = h.name
                    out["S_alt"] = am
                    break
                if time.time() > alt_deadline:
                    out["alternatives_truncated"] = True
                    break
            if out["explained_by"] is not None or out.get("alternatives_truncated"):
                break
    if out["explained_by"] is None:
        tried = [(cnt, name, s) for (name, s), cnt in pairs.full.items()]
        if tried:
            cnt, name, s = max(tried, key=lambda x: x[0])
            out["best_partial"] = {"hypothesis": name, "S": s, "matched": cnt}
    out["main_counts"] = {("none" if s is None else str(s)): cnt for (name, s), cnt in pairs.full.items()
                          if name == "main"}
    out["evaluations"] = pairs.evals
    out["seconds"] = round(time.time() - t0, 2)
    return out


def _s_measured(x: dict) -> list | None:
    """The slice lengths a call is known to use (normalised; None in the list: no split),
    or None when unknown: the grid-derived S where the bits agree with it (or where the
    preset explains nothing, so the bits cannot say), else every S the bits allow."""
    k = x["shape"][2]
    grid = normalise_s(k, x["S_grid"]) if x.get("P_grid") else "unknown"
    if x.get("explained_by") == "main" and x.get("S_bits"):
        bits = sorted({normalise_s(k, v) for v in x["S_bits"]}, key=lambda v: -1 if v is None else v)
        return [grid] if grid in bits else bits
    if grid != "unknown" and x.get("explained_by") is None:
        return [grid]
    return None


def _rule_outputs(x: dict, rec: dict, s_rule, target: str) -> int:
    """Sampled outputs that the preset with the rule's S reproduces (cached counts first)."""
    k = x["shape"][2]
    sr = normalise_s(k, s_rule)
    if x.get("explained_by") == "main" and sr in x["S_bits"]:
        return x["outputs"]
    key = "none" if sr is None else str(sr)
    if key in x.get("main_counts", {}):
        return x["main_counts"][key]
    return Pairs(rec).count(hypotheses(target)[0], sr, x["kt"])


def build_table(calls: list[dict], results: list[dict], fam_interp: dict, records: list[dict], args, log) -> dict:
    """The machine-readable table (see the module docstring)."""
    meta = next((r for r in records if r.get("kind") == "meta"), {})
    by_id = {(r["target"], r["id"]): r for r in calls}
    table: dict[str, Any] = {"schema": "fpspec-cublas-rule/1", "rule": RULE_TEXT,
                             "sweep": {k: meta.get(k) for k in ("started", "gpu", "nvidia_smi", "torch", "cuda_runtime",
                                                                "cublas_compiled", "cublaslt_version", "sm_count",
                                                                "preferred_blas_library", "backend", "grid", "env")},
                             "evaluator": "fpspec.matmul.rowdot (fast path, tested bit-equal to the exact spec)",
                             "padding": "main hypothesis: K zero-padded at the back to whole K tiles",
                             "hypotheses": {t: [h.__dict__ | {"overrides": dict(h.overrides)} for h in hypotheses(t)]
                                            for t in TARGETS},
                             "targets": {}, "kernel_names": {}}
    for r in calls:
        if r["_info"] is not None:
            i = r["_info"]
            d = table["kernel_names"].setdefault(i.name, {"class": i.kclass, "pattern": i.pattern,
                                                          "parsed": i.to_dict(), "calls": 0, "targets": []})
            d["calls"] += 1
            if r["target"] not in d["targets"]:
                d["targets"].append(r["target"])
    for target in TARGETS:
        res = [x for x in results if x["target"] == target]
        if not res:
            continue
        cfg = TARGETS[target]
        shapes, points = [], []
        for x in res:
            rec = by_id[(target, x["id"])]
            s_meas = _s_measured(x)
            if (x.get("kernel") and x.get("T") and x.get("class") in GEMM_CLASSES
                    and s_meas is not None and x.get("explained_by") in ("main", None)):
                points.append({"K": x["shape"][2], "kt": x["kt"], "T": x["T"], "S": s_meas,
                               "family": x["kernel"], "nvjet": x.get("class") == "nvjet"})
            shapes.append({"shape": x["shape"], "requested_shape": rec.get("requested_shape"), "kernel": x.get("kernel"),
                           "class": x.get("class"), "ctas": x.get("ctas"), "T": x.get("T"), "P_grid": x.get("P_grid"),
                           "S_grid": x.get("S_grid"), "S_bits": x.get("S_bits"), "S_measured": s_meas,
                           "explained_by": x.get("explained_by"), "S_alt": x.get("S_alt"),
                           "grid_bits_agree": (x["S_grid"] in x["S_bits"]) if (x.get("P_grid") and
                                                                               x.get("explained_by") == "main") else None,
                           "reps_equal": rec.get("reps_equal"), "kernels_reps_equal": rec.get("kernels_reps_equal")})
        # R from the Hopper (nvjet) kernels, then B per kernel with that R
        nv = [p for p in points if p["nvjet"]]
        fit = fit_rule(nv if nv else points)
        r_fit = fit["R"]
        fams = {}
        for f in sorted({p["family"] for p in points}):
            fp = [p for p in points if p["family"] == f]
            b, rng, nmatch = best_b(fp, r_fit)
            b20, rng20, n20 = best_b(fp, R_ISSUE)
            info = parse_kernel(f)
            it = fam_interp.get((target, f))
            fams[f] = {"class": info.kclass, "tile": [info.tile_m, info.tile_n], "kt": fp[0]["kt"],
                       "stages": info.stages, "cluster": list(info.cluster) if info.cluster else None,
                       "flags": info.flags, "tile_interpretation": it[0] if it else None,
                       "B": b, "B_range": rng, "points": len(fp), "rule_matches": nmatch,
                       "at_R20": {"B": b20, "B_range": rng20, "rule_matches": n20}}
        failures = []
        tally = {c: {"grid": [0, 0], "bits": [0, 0], "outputs": [0, 0]} for c in ("nvjet", "other")}
        for x, sh in zip(res, shapes):
            fam, k = x.get("kernel"), x["shape"][2]
            s_rule = rule_s(k, x["kt"], x["T"], r_fit, fams[fam]["B"]) if fam in fams and x.get("T") else None
            sh["S_rule"] = s_rule
            tl = tally["nvjet" if x.get("class") == "nvjet" else "other"]
            if x.get("P_grid") and fam in fams:
                tl["grid"][1] += 1
                tl["grid"][0] += normalise_s(k, s_rule) == normalise_s(k, x["S_grid"])
            hit = x.get("explained_by") == "main" and normalise_s(k, s_rule) in x["S_bits"]
            if x.get("explained_by") == "main":
                tl["bits"][1] += 1
                tl["bits"][0] += hit
            if fam in fams and not hit:
                failures.append({"shape": x["shape"], "kernel": fam, "S_rule": s_rule, "S_grid": x.get("S_grid"),
                                 "S_bits": x.get("S_bits"), "explained_by": x.get("explained_by")})
            if args.output_rate and x.get("operands_ok", True):
                cnt = _rule_outputs(x, by_id[(target, x["id"])], s_rule, target)
                sh["rule_outputs_matched"] = cnt
                tl["outputs"][0] += cnt
                tl["outputs"][1] += x["outputs"]
        unexplained = [{"shape": x["shape"], "kernel": x.get("kernel"), "class": x.get("class"),
                        "best_partial": x.get("best_partial")} for x in res if x.get("explained_by") is None]
        alt = [{"shape": x["shape"], "kernel": x.get("kernel"), "hypothesis": x["explained_by"], "S": x.get("S_alt")}
               for x in res if x.get("explained_by") not in ("main", None)]
        table["targets"][target] = {
            "preset": cfg.preset, "fmt": cfg.fmt, "kt_default": cfg.kt, "call": cfg.call,
            "R": r_fit, "R_fitted_on": "nvjet kernels" if nv else "all kernels with a tile",
            "matches_by_R": fit.get("matches_by_R"), "families": fams,
            "rates": {"calls": len(res),
                      "explained_by_preset": sum(1 for x in res if x.get("explained_by") == "main"),
                      "explained_by_alternative": len(alt), "unexplained": len(unexplained),
                      "operands_mismatch": sum(1 for x in res if not x.get("operands_ok", True)),
                      "grid_bits_agree": [sum(1 for sh in shapes if sh["grid_bits_agree"]),
                                          sum(1 for sh in shapes if sh["grid_bits_agree"] is not None)],
                      "nondeterministic": sum(1 for sh in shapes if sh["reps_equal"] is False),
                      "kernel_changed_between_reps": sum(1 for sh in shapes if sh["kernels_reps_equal"] is False),
                      **{f"{c}_rule_vs_grid": tally[c]["grid"] for c in tally},
                      **{f"{c}_rule_vs_bits": tally[c]["bits"] for c in tally},
                      **({f"{c}_rule_outputs": tally[c]["outputs"] for c in tally} if args.output_rate else {})},
            "rule_failures": failures, "alternative_explained": alt, "unexplained": unexplained, "shapes": shapes}
    return table


def summary_lines(table: dict) -> list[str]:
    L = [f"rule: {table['rule']}", ""]
    for target, d in table["targets"].items():
        rt = d["rates"]
        pct = lambda a, b: f"{a}/{b} ({100 * a / b:.1f} %)" if b else "0/0"  # noqa: E731
        L.append(f"== {target}  (preset {d['preset']}, R = {d['R']})")
        L.append(f"   calls {rt['calls']}: preset + S explains {rt['explained_by_preset']}, alternatives "
                 f"{rt['explained_by_alternative']}, unexplained {rt['unexplained']}; grid-derived S among the "
                 f"bits' S {pct(*rt['grid_bits_agree'])}; operand checksum mismatches {rt['operands_mismatch']}, "
                 f"repeats that differ {rt['nondeterministic']}, kernel changes {rt['kernel_changed_between_reps']}")
        for c in ("nvjet", "other"):
            L.append(f"   {c:5s} kernels: rule S == grid-derived S {pct(*rt[c + '_rule_vs_grid'])}; rule S among "
                     f"the S the bits show {pct(*rt[c + '_rule_vs_bits'])}"
                     + (f"; outputs reproduced with the rule's S {pct(*rt[c + '_rule_outputs'])}"
                        if c + "_rule_outputs" in rt else ""))
        for f, ff in sorted(d["families"].items(), key=lambda kv: -kv[1]["points"]):
            L.append(f"   {f}: tile {ff['tile']} kt {ff['kt']} ({ff['tile_interpretation']}), B = {ff['B']} "
                     f"(range {ff['B_range']}), {ff['rule_matches']}/{ff['points']} shapes; at R = 20: "
                     f"B = {ff['at_R20']['B']}, {ff['at_R20']['rule_matches']}")
        for a in d["alternative_explained"][:12]:
            L.append(f"   alt {a['hypothesis']}: {'x'.join(map(str, a['shape']))} {a['kernel']} S={a['S']}")
        for u in d["unexplained"][:12]:
            L.append(f"   unexplained: {'x'.join(map(str, u['shape']))} {u['kernel']} ({u['class']}) "
                     f"best {u['best_partial']}")
        for fl in d["rule_failures"][:12]:
            L.append(f"   rule fails: {'x'.join(map(str, fl['shape']))} {fl['kernel']} rule {fl['S_rule']} "
                     f"grid {fl['S_grid']} bits {fl['S_bits']}")
        L.append("")
    L.append("kernel names seen:")
    for name, d in sorted(table["kernel_names"].items(), key=lambda kv: -kv[1]["calls"]):
        p = d["parsed"]
        L.append(f"   {d['calls']:5d}  {d['class']:9s} {d['pattern']:9s} tile {p['tile_m']}x{p['tile_n']} kt {p['kt']}"
                 f"  {name[:110]}")
    return L


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweep", nargs="+", help="sweep.jsonl files or directories holding them")
    p.add_argument("--out", help="directory for cublas_rule.json, fit_records.jsonl, fit_summary.txt")
    p.add_argument("--targets", help="comma-separated targets to fit (default: all in the sweep)")
    p.add_argument("--reuse", help="fit_records.jsonl (or .partial.jsonl) of an earlier fit: reuse its searches")
    p.add_argument("--jobs", type=int, default=1, help="worker processes for the searches (default 1)")
    p.add_argument("--exhaustive", action="store_true", help="test every balanced split on every call")
    p.add_argument("--no-alternatives", action="store_true", help="skip the alternative hypotheses")
    p.add_argument("--record-seconds", type=float, default=60.0, help="time cap of one call's main search")
    p.add_argument("--alt-seconds", type=float, default=10.0, help="time cap of one call's alternative searches")
    p.add_argument("--no-output-rate", dest="output_rate", action="store_false",
                   help="skip the share of outputs the rule reproduces (one more evaluation per rule miss)")
    args = p.parse_args(argv)
    if not args.out:
        p.error("--out is required")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []

    def log(s: str) -> None:
        print(s, flush=True)

    records = list(read_records(args.sweep))
    t0 = time.time()
    table, results = analyse(records, args, log)
    files = []
    for s in args.sweep:
        pth = Path(s)
        for f in (sorted(pth.glob("*.jsonl")) if pth.is_dir() else [pth]):
            files.append({"file": str(f), "sha256": hashlib.sha256(f.read_bytes()).hexdigest()})
    table["sweep"]["files"] = files
    table["fit_seconds"] = round(time.time() - t0, 1)
    (out / "cublas_rule.json").write_text(json.dumps(table, indent=1, default=str) + "\n")
    with open(out / "fit_records.jsonl", "w") as f:
        for r in results:
            f.write(json.dumps(r, separators=(",", ":"), default=str) + "\n")
    (out / "fit_records.partial.jsonl").unlink(missing_ok=True)
    lines = summary_lines(table)
    (out / "fit_summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"fit: {len(results)} calls in {time.time() - t0:.0f}s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
