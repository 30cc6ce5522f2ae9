"""The offline cuBLAS shape rule (fpspec/cublas/h200.py): its recorded calls and its
measured rates, from a sweep (tools/cublas/sweep.py) and, for the rates, the fit's
per-call search results (tools/cublas/fit.py).  Run from the repository root:

    python3 -m tools.cublas.rule emit SWEEP [SWEEP ...] --out fpspec/cublas/h200_calls.json.gz
    python3 -m tools.cublas.rule evaluate SWEEP --fit-records DIR/fit_records.jsonl [--out REPORT.json]
    python3 -m tools.cublas.rule scan [SWEEP] [--aspect]
    python3 -m tools.cublas.rule bases HELDOUT [HELDOUT ...] [--json]
    python3 -m tools.cublas.rule curve HELDOUT [HELDOUT ...] [--fractions 0.25 0.5 1] [--seeds 3] [--json]

``emit`` writes the recorded calls (gzip-compressed JSON, fpspec.cublas.h200.CALLS_SCHEMA)
from one or more sweep files (in order): every swept call as shape, GEMM kernel (short
name) and launch grid, and the first sweep's device and software.
tests/test_cublas_h200.py regenerates it from the committed runs and compares the JSON
text.

``evaluate`` measures, per target and with every shape left out of the table in turn
(leave one shape out): (i) the share of calls whose predicted S is among the S that
reproduce the sampled outputs (the fit's ``S_bits``), (ii) the share of sampled outputs
that the target's preset reproduces with the predicted S, for ``nvjet`` calls and over
all calls (where S is unknown, the preset without a split).  Outputs the fit did not
count for the predicted S are counted here with the fit's evaluator.

``scan`` prints the leave-one-shape-out share of nvjet calls whose predicted S equals
the kernel's, for a grid of the nearest-shape constants (how they were chosen), on a
sweep or on the committed table (no SWEEP); ``--aspect`` scans the aspect weight.

``bases`` scores the offline answers by where they come from (FPS-CUB-6): on held-out runs
that are not in the table, per target and basis (recorded, rule, nearest, unknown), the
share of calls whose offline model (``resolve``) is the observer's (``model_for_kernel``
of the kernel that ran), the same model or none.

``curve`` is the rule's learning curve: predictors built from random shares of the
committed table's calls (whole targets' calls drawn with a seeded generator), each scored
on held-out runs that are not in the table, as the share of their nvjet calls whose
predicted S is the kernel's (the measure ``scan`` uses).  A flat curve says that more
sweeps of the same kind would not raise the offline rate.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from fpspec.cublas import h200 as ch
from fpspec.errors import FpspecError

from .common import ROOT, bits_from_hex, codes_numpy, run_text

#: where ``emit`` writes by default (the package's data file), relative to the repository root
DEFAULT_OUT = f"fpspec/cublas/{ch.CALLS_FILE.name}"
META_KEYS = ("started", "gpu", "nvidia_smi", "compute_capability", "sm_count", "torch", "cuda_runtime",
             "cublas_compiled", "cublaslt_version", "preferred_blas_library", "allow_bf16_reduced_precision_reduction",
             "allow_fp16_reduced_precision_reduction", "env")


def _rel(path: Path) -> str:
    p = Path(path).resolve()
    try:
        return p.relative_to(ROOT).as_posix()
    except ValueError:
        return p.as_posix()


def read_sweep(path: str | Path) -> tuple[dict, list[dict]]:
    """(meta line, call lines) of a sweep.jsonl."""
    meta: dict = {}
    calls: list[dict] = []
    for line in run_text(path).splitlines():
        line = line.strip()
        if not line:
            continue
        rec = json.loads(line)
        if rec.get("kind") == "meta":
            meta = rec
        elif rec.get("kind") == "call":
            calls.append(rec)
    return meta, calls


def call_kernel(rec: dict) -> tuple[str, tuple[int, int, int]] | None:
    """The GEMM kernel (short name) and grid of one sweep call, None without kernels."""
    kernels = [(k["name"], k.get("grid") or [1, 1, 1]) for k in rec.get("kernels") or []]
    got = ch.pick_gemm_kernel(kernels)
    if got is None:
        return None
    name, grid = got
    g = [int(v) for v in grid] + [1] * (3 - len(grid))
    return ch.short_kernel_name(name), (g[0], g[1], g[2])


def observations(calls: list[dict], log=None) -> dict[str, list[ch.Observation]]:
    """Per target, the calls that ran without error and with a GEMM kernel, one per shape
    run (FP8 runs N and K rounded up to 16, so two requested shapes can run as one: the
    first is kept, and a second with another kernel or grid is reported to ``log``)."""
    out: dict[str, list[ch.Observation]] = {}
    seen: dict[tuple, ch.Observation] = {}
    for rec in calls:
        if rec.get("error") or rec.get("target") not in ch.TARGETS:
            continue
        kg = call_kernel(rec)
        if kg is None:
            continue
        m, n, k = (int(v) for v in rec["shape"])
        o = ch.Observation(m, n, k, kg[0], kg[1], persistent_p(rec, kg, log))
        key = (rec["target"], m, n, k)
        if key in seen:
            if seen[key] != o and log is not None:
                log(f"{rec['target']} {m}x{n}x{k}: a second call ran {o.kernel} {o.grid}, kept {seen[key].kernel}")
            continue
        seen[key] = o
        out.setdefault(rec["target"], []).append(o)
    return out


def persistent_p(rec: dict, kg: tuple[str, tuple[int, int, int]], log=None) -> int | None:
    """A persistent split launch's slice count, settled by the call's recorded outputs
    (FPS-CUB-10, :func:`fpspec.adapters.settle.settle_choice`); None for any other call,
    and for one whose outputs do not settle it (reported to ``log``: the table then keeps
    the candidates, and ``predict`` at that shape says so)."""
    m, n, k = (int(v) for v in rec["shape"])
    choice = ch.plan_from_kernel(rec["target"], m, n, k, kg[0], kg[1])
    if choice.confidence != "candidates":
        return None
    from fpspec.adapters.settle import settle_choice

    dt = np.uint8 if rec["fmt"] == "e4m3" else np.uint16
    a = codes_numpy(rec["fmt"], rec["seed_a"], rec["rows"], k).astype(dt)
    bt = codes_numpy(rec["fmt"], rec["seed_b"], rec["cols"], k).astype(dt)
    try:
        return settle_choice(choice, a, bt, bits_from_hex(rec["bits"])).p
    except FpspecError as exc:
        if log is not None:
            log(f"{rec['target']} {m}x{n}x{k}: P not settled, the table keeps the candidates ({exc})")
        return None


# ================================================================== emit
def calls_text(sweep: str | Path | Sequence[str | Path]) -> str:
    """The JSON text of the recorded calls (:data:`fpspec.cublas.h200.CALLS_SCHEMA`) for one
    or more sweep-format runs (deterministic: the same runs give the same text, one call per
    line).  The first run's meta line gives the device; a shape run in an earlier file wins
    over a later one (``observations``)."""
    paths = [Path(sweep)] if isinstance(sweep, (str, Path)) else [Path(p) for p in sweep]
    if not paths:
        raise SystemExit("calls_text: no sweep file given")
    digests = [hashlib.sha256(run_text(p).encode()).hexdigest() for p in paths]  # of the run, compressed or not
    metas, calls = [], []
    for p in paths:
        meta_p, calls_p = read_sweep(p)
        metas.append(meta_p)
        calls += calls_p
    obs = observations(calls, log=lambda s: print(s, file=sys.stderr))
    kernels = sorted({o.kernel for rows in obs.values() for o in rows})
    kid = {name: i for i, name in enumerate(kernels)}
    rels = [_rel(p) for p in paths]
    command = "python3 -m tools.cublas.rule emit " + " ".join(rels) + f" --out {DEFAULT_OUT}"
    head = {"schema": ch.CALLS_SCHEMA, "command": command, "sources": [[r, d] for r, d in zip(rels, digests)],
            "device": {key: metas[0][key] for key in META_KEYS if key in metas[0]}}
    lines = ["{"] + [f"{json.dumps(key)}: {json.dumps(value, sort_keys=True)}," for key, value in head.items()]
    lines.append('"kernels": [')
    lines += [f"{json.dumps(name)}," for name in kernels]
    lines[-1] = lines[-1].rstrip(",")
    lines.append('],\n"calls": {')
    targets = [t for t in ch.TARGETS if t in obs]
    for i, target in enumerate(targets):
        rows = sorted(obs[target], key=lambda o: (o.m, o.n, o.k))
        lines.append(f"{json.dumps(target)}: [")
        lines += [json.dumps([o.m, o.n, o.k, kid[o.kernel], list(o.grid), o.p]) + "," for o in rows]
        lines[-1] = lines[-1].rstrip(",")
        lines.append("]" + ("," if i < len(targets) - 1 else ""))
    lines += ["}", "}", ""]
    return "\n".join(lines)


def emit(sweep: str | Path | Sequence[str | Path], out: str | Path) -> Path:
    """Write :func:`calls_text` gzip-compressed to ``out`` (no file name or time in the gzip
    header, so that the same runs give the same bytes with one zlib)."""
    out = Path(out)
    data = calls_text(sweep).encode()
    with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as f:
        f.write(data)
    return out


# ================================================================== evaluate
def _norm(k: int, s: Any) -> int | None:
    return None if s is None or s == "none" or int(s) >= k else int(s)


def loo_predictions(pred: ch.Predictor, target: str) -> dict[tuple[int, int, int], ch.KernelChoice]:
    """Each swept shape of a target predicted with that shape left out of the table."""
    return {s: pred.without(target, s).predict(target, *s) for s in pred.shapes(target)}


def evaluate(sweep: str | Path, fit_records: str | Path, log=print) -> dict:
    """Rates (i) and (ii) of the module docstring, leave one shape out and in-table."""
    from . import fit

    meta, calls = read_sweep(sweep)
    recs = {(c["target"], c["id"]): c for c in calls}
    fits = {}
    for line in Path(fit_records).read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            fits[(r["target"], r["id"])] = r
    pred = ch.Predictor(observations(calls))
    report: dict[str, Any] = {"sweep": _rel(Path(sweep)), "targets": {}}
    for target in ch.TARGETS:
        loo = loo_predictions(pred, target)
        rows = []
        for (t, cid), rec in sorted(recs.items(), key=lambda kv: kv[0][1]):
            if t != target or rec.get("error") or (t, cid) not in fits:
                continue
            fr = fits[(t, cid)]
            shape = tuple(int(v) for v in rec["shape"])
            k = shape[2]
            table = pred.predict(target, *shape)
            out = {"shape": shape, "kclass": table.kclass, "outputs": fr["outputs"]}
            bits = [_norm(k, s) for s in fr.get("S_bits") or []] if fr.get("explained_by") == "main" else []
            for label, ch_ in (("table", table), ("loo", loo[shape])):
                s = ch_.s if ch_.modelled else None
                out[f"{label}_conf"] = ch_.confidence
                out[f"{label}_S"] = s
                out[f"{label}_S_ok"] = bool(ch_.modelled and s in bits)
                out[f"{label}_outputs"] = _outputs(fit, fr, rec, target, s)
            rows.append(out)
        report["targets"][target] = _summary(rows)
        report["targets"][target]["misses"] = [
            {"shape": list(r["shape"]), "kclass": r["kclass"], "loo_conf": r["loo_conf"], "loo_S": r["loo_S"],
             "table_S": r["table_S"], "loo_outputs": r["loo_outputs"], "outputs": r["outputs"]}
            for r in rows if r["kclass"] == "nvjet" and not r["loo_S_ok"]]
        log(_summary_line(target, report["targets"][target]))
    return report


_COUNTS: dict[tuple, int] = {}


def _outputs(fit, fr: dict, rec: dict, target: str, s: int | None) -> int:
    """Sampled outputs the target's preset reproduces with slices of S (None: one chain)."""
    k = int(rec["shape"][2])
    s = _norm(k, s)
    if fr.get("explained_by") == "main" and s in [_norm(k, v) for v in fr.get("S_bits") or []]:
        return int(fr["outputs"])
    key = "none" if s is None else str(s)
    counts = fr.get("main_counts") or {}
    if key in counts:
        return int(counts[key])
    ck = (target, rec["id"], s)
    if ck not in _COUNTS:
        pairs = fit.Pairs(rec)
        _COUNTS[ck] = pairs.count(fit.hypotheses(target)[0], s, ch.TARGETS[target].kt)
    return _COUNTS[ck]


def _summary(rows: list[dict]) -> dict:
    def part(sel) -> dict:
        rs = [r for r in rows if sel(r)]
        d: dict[str, Any] = {"calls": len(rs), "outputs": sum(r["outputs"] for r in rs)}
        for label in ("table", "loo"):
            d[f"{label}_S_ok"] = sum(r[f"{label}_S_ok"] for r in rs)
            d[f"{label}_outputs_ok"] = sum(r[f"{label}_outputs"] for r in rs)
        d["loo_by_confidence"] = {}
        for r in rs:
            c = d["loo_by_confidence"].setdefault(r["loo_conf"], {"calls": 0, "S_ok": 0, "outputs": 0, "outputs_ok": 0})
            c["calls"] += 1
            c["S_ok"] += r["loo_S_ok"]
            c["outputs"] += r["outputs"]
            c["outputs_ok"] += r["loo_outputs"]
        return d

    return {"nvjet": part(lambda r: r["kclass"] == "nvjet"), "all": part(lambda r: True)}


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100.0 * a / b:.1f} %)" if b else "0/0"


def _summary_line(target: str, d: dict) -> str:
    nv, al = d["nvjet"], d["all"]
    return (f"{target}: nvjet calls {nv['calls']}: S right {_pct(nv['loo_S_ok'], nv['calls'])} leave-one-out, "
            f"{_pct(nv['table_S_ok'], nv['calls'])} in table; outputs {_pct(nv['loo_outputs_ok'], nv['outputs'])} "
            f"leave-one-out, {_pct(nv['table_outputs_ok'], nv['outputs'])} in table | all calls {al['calls']}: "
            f"outputs {_pct(al['loo_outputs_ok'], al['outputs'])} leave-one-out, "
            f"{_pct(al['table_outputs_ok'], al['outputs'])} in table")


# ================================================================== scan
def scan(sweep: str | Path | None, log=print, aspect: bool = False) -> list[tuple]:
    """Leave-one-shape-out share of nvjet calls whose predicted S equals the kernel's, on a
    sweep (None: the committed table, every source), over a grid of the nearest-shape
    constants (area floor, K weight, votes), or with ``aspect`` over the aspect weights at
    today's other constants."""
    pred = ch.Predictor(observations(read_sweep(sweep)[1]) if sweep is not None else ch.observations_from_table())
    names = ("NEAREST_AREA_FLOOR", "NEAREST_K_WEIGHT", "NEAREST_VOTES", "NEAREST_ASPECT_WEIGHT")
    saved = tuple(getattr(ch, n) for n in names)
    if aspect:
        grid = [saved[:3] + (w,) for w in (0.0, 0.0625, 0.125, 0.25, 0.5, 1.0, 2.0)]
    else:
        grid = [(floor, wk, votes, saved[3]) for floor in (1, 32, 64, 128) for wk in (0.5, 1.0, 2.0)
                for votes in (1, 3, 5)]
    out = []
    try:
        for values in grid:
            for n, v in zip(names, values):
                setattr(ch, n, v)
            row = list(values)
            for target in ch.TARGETS:
                loo = loo_predictions(pred, target)
                ok = n = 0
                for s in pred.shapes(target):
                    truth = pred.predict(target, *s)
                    if truth.kclass != "nvjet":
                        continue
                    n += 1
                    ok += loo[s].s == truth.s and loo[s].confidence != "unknown"
                row.append((ok, n))
            out.append(tuple(row))
            log(" ".join(str(v) for v in row[:4]) + "  " + "  ".join(_pct(a, b) for a, b in row[4:]))
    finally:
        for n, v in zip(names, saved):
            setattr(ch, n, v)
    return out


CURVE_TARGETS = tuple(ch.TARGETS)


def nvjet_s_rate(pred: ch.Predictor, heldout: dict[str, list[ch.Observation]], target: str) -> tuple[int, int]:
    """(calls whose predicted S is the kernel's, nvjet calls with a known S) of one target's
    held-out calls; a call that splits in neither is right whatever its S."""
    ok = n = 0
    for o in heldout.get(target, []):
        truth = ch._observed_plan(target, o)
        if truth.kclass != "nvjet" or truth.confidence in ("unknown", "candidates"):
            continue
        got = pred.predict(target, o.m, o.n, o.k)
        n += 1
        ok += got.s == truth.s or ((got.p or 1) <= 1 and (truth.p or 1) <= 1)
    return ok, n


def curve(heldout_runs: Sequence[str | Path], fractions: Sequence[float], seeds: int, log=print) -> list[dict]:
    """The learning curve (see the module docstring): one row per (fraction, seed)."""
    heldout: dict[str, list[ch.Observation]] = {}
    for run in heldout_runs:
        for target, rows in observations(read_sweep(run)[1]).items():
            heldout.setdefault(target, []).extend(rows)
    table = ch.observations_from_table()
    seen = {(t, o.m, o.n, o.k) for t, rows in table.items() for o in rows}
    before = sum(len(v) for v in heldout.values())
    heldout = {t: [o for o in rows if (t, o.m, o.n, o.k) not in seen] for t, rows in heldout.items()}
    log(f"{before - sum(len(v) for v in heldout.values())} held-out calls left out: their shapes are in the table")
    out = []
    for frac in fractions:
        for seed in range(seeds if frac < 1 else 1):
            rng = np.random.default_rng(seed)
            part = {t: [o for o in rows if rng.random() < frac] for t, rows in table.items()}
            pred = ch.Predictor(part)
            row: dict[str, Any] = {"fraction": frac, "seed": seed,
                                   "table_calls": sum(len(v) for v in part.values())}
            for target in CURVE_TARGETS:
                ok, n = nvjet_s_rate(pred, heldout, target)
                row[target] = [ok, n]
            out.append(row)
            log(f"{frac:5.2f} seed {seed}  " + "  ".join(f"{t[6:]} {_pct(*row[t])}" for t in CURVE_TARGETS))
    return out


def bases(heldout_runs: Sequence[str | Path], log=print) -> dict[str, dict[str, list[int]]]:
    """Per target and :data:`fpspec.cublas.h200.BASIS` of the offline answer, [calls whose
    offline model is the observer's, calls] of the held-out runs' calls whose shape is not in
    the table (see the module docstring)."""
    from fpspec.cublas.library import kernel_model

    def model(choice: ch.KernelChoice):
        try:
            return kernel_model(choice)
        except FpspecError:
            return None

    seen = {(t, o.m, o.n, o.k) for t, rows in ch.observations_from_table().items() for o in rows}
    out: dict[str, dict[str, list[int]]] = {}
    for run in heldout_runs:
        for target, rows in observations(read_sweep(run)[1]).items():
            for o in rows:
                if (target, o.m, o.n, o.k) in seen:
                    continue
                seen.add((target, o.m, o.n, o.k))
                offline = ch.predict(target, o.m, o.n, o.k)
                observed = model(ch._observed_plan(target, o))
                row = out.setdefault(target, {}).setdefault(offline.basis, [0, 0])
                row[0] += observed is not None and model(offline) == observed
                row[1] += 1
    for target, by in out.items():
        log(f"{target}: " + "  ".join(f"{b} {_pct(*by[b])}" for b in sorted(by)))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("emit", help="write the recorded calls (the package's data file)")
    e.add_argument("sweep", nargs="+", help="sweep .jsonl files, in order (the first one's device)")
    e.add_argument("--out", default=str(ROOT / DEFAULT_OUT))
    v = sub.add_parser("evaluate", help="measure the rule's rates (leave one shape out)")
    v.add_argument("sweep")
    v.add_argument("--fit-records", required=True)
    v.add_argument("--out", help="write the report as JSON")
    s = sub.add_parser("scan", help="leave-one-out S rates over the nearest-shape constants")
    s.add_argument("sweep", nargs="?", default=None, help="a sweep .jsonl (default: the committed table)")
    s.add_argument("--aspect", action="store_true", help="scan the aspect weight (NEAREST_ASPECT_WEIGHT) instead")
    c = sub.add_parser("curve", help="the rule's learning curve on held-out runs (shares of the table)")
    c.add_argument("heldout", nargs="+", help="held-out sweep .jsonl(.gz) files, not in the table")
    c.add_argument("--fractions", nargs="+", type=float, default=[0.25, 0.5, 0.75, 1.0])
    c.add_argument("--seeds", type=int, default=3, help="draws per fraction below 1")
    c.add_argument("--json", action="store_true", help="print the rows as one JSON list")
    b = sub.add_parser("bases", help="offline answers by basis: the share that is the observer's model")
    b.add_argument("heldout", nargs="+", help="held-out sweep .jsonl(.gz) files, not in the table")
    b.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = p.parse_args(argv)
    if args.cmd == "emit":
        if any(Path(x).is_dir() for x in args.sweep):
            p.error("emit needs sweep .jsonl files, not directories")
        print(f"wrote {emit(args.sweep, args.out)}")
    elif args.cmd == "evaluate":
        rep = evaluate(args.sweep, args.fit_records)
        if args.out:
            Path(args.out).write_text(json.dumps(rep, indent=1, default=list) + "\n")
    elif args.cmd == "bases":
        counts = bases(args.heldout, log=(lambda *a: None) if args.json else print)
        if args.json:
            print(json.dumps(counts, indent=1))
    elif args.cmd == "curve":
        if any(not 0 < f <= 1 for f in args.fractions):
            p.error("fractions must lie in (0, 1]")
        rows = curve(args.heldout, args.fractions, args.seeds, log=(lambda *a: None) if args.json else print)
        if args.json:
            print(json.dumps(rows, indent=1))
    else:
        scan(args.sweep, aspect=args.aspect)
    return 0


if __name__ == "__main__":
    sys.exit(main())
