"""Acceptance of the cuBLAS-on-H200 models against a sweep-format run (FPS-CUB-9).

    python3 -m tools.cublas.accept RUN.jsonl [--json REPORT.json] [--rst FRAGMENT.rst]
    python3 -m tools.cublas.accept --render REPORT.json --rst FRAGMENT.rst [--check]

RUN.jsonl is what ``tools/cublas/sweep.py`` writes (``sweep.jsonl``, or the
held-out ``heldout.jsonl``).  For every call it regenerates the sampled rows of A and
columns of BT (tools/cublas/common.py, checked against the recorded checksums) and
compares the recorded FP32 output bits with two fpspec models:

* **offline**: ``fpspec.cublas.library.resolve(preset, shape)``, the library preset of the call's
  target resolved from the shape alone (FPS-CUB-6);
* **observer**: ``fpspec.cublas.library.model_for_kernel`` from the recorded kernel name and
  launch grid (FPS-CUB-8), what ``fpspec.adapters.torch_gemm.observe`` does live.

A call whose kernel is not modelled (SIMT) counts its outputs as not reproduced.  The
report gives per target the two match rates over sampled outputs, and per kernel family
(:func:`fpspec.cublas.h200.kernel_family` of the kernel that ran) the same; ``--rst``
writes the reStructuredText fragment that docs/cublas-h200.rst includes (generated from
the JSON, so the page cannot drift from it; ``--check`` exits 1 when it is stale).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from fpspec.adapters.settle import settle_choice
from fpspec.cublas.h200 import (PRESET_TARGETS, TARGETS, choice_for_kernel, default_predictor, kernel_family,
                                pick_gemm_kernel)
from fpspec.cublas.library import kernel_model, resolve
from fpspec.errors import FpspecError
from fpspec.matmul import gemm

from .common import bits_from_hex, code_checksum, codes_numpy, read_records, run_name, run_text

PRESET_OF = {t: p for p, t in PRESET_TARGETS.items()}
_DTYPE = {"bf16": np.uint16, "fp16": np.uint16, "e4m3": np.uint8}
ORDER = list(TARGETS)
FAMILIES = ["nvjet", "cutlass-s16816", "cutlass-wmma", "cutlass-s1688", "simt", "other", "none"]


def _bits(model, a: np.ndarray, bt: np.ndarray, fmt: str) -> np.ndarray:
    return gemm(a, bt, model, fmt=fmt).astype(np.float32).reshape(-1).view(np.uint32)


def loo_model(target: str, shape: tuple[int, int, int]):
    """The offline model with the call's own shape left out of the table (leave one shape
    out): what ``resolve`` would say had this shape never been measured."""
    pred = default_predictor()
    return kernel_model(pred.without(target, shape).predict(target, *shape))


def check_call(rec: dict, loo: bool = False) -> dict:
    """One call: outputs, and how many of them the offline and the observer model reproduce
    (None where the model is not available: the reason in ``*_error``).  ``loo``: the
    offline model is :func:`loo_model` instead of ``resolve``."""
    fmt, (m, n, k) = rec["fmt"], rec["shape"]
    a = codes_numpy(fmt, rec["seed_a"], rec["rows"], k).astype(_DTYPE[fmt])
    bt = codes_numpy(fmt, rec["seed_b"], rec["cols"], k).astype(_DTYPE[fmt])
    ok = (list(code_checksum(a)) == list(rec.get("checksum_a", code_checksum(a)))
          and list(code_checksum(bt)) == list(rec.get("checksum_b", code_checksum(bt))))
    want = bits_from_hex(rec["bits"])
    picked = pick_gemm_kernel([(x["name"], x.get("grid") or [1, 1, 1]) for x in rec.get("kernels") or []])
    out = {"id": rec.get("id"), "target": rec["target"], "shape": [m, n, k], "outputs": int(want.size),
           "operands_ok": ok, "kernel": picked[0] if picked else None, "grid": picked[1] if picked else None,
           "family": kernel_family(picked[0]) if picked else "none"}
    preset = PRESET_OF[rec["target"]]
    models = {}
    try:
        models["offline"] = loo_model(rec["target"], (m, n, k)) if loo else resolve(preset, (m, n, k))
    except FpspecError as exc:
        out["offline_error"] = str(exc)
    scored = np.ones(want.size, dtype=bool)  # the outputs the observer is scored on
    if picked:
        try:
            choice = choice_for_kernel(preset, (m, n, k), picked[0], picked[1])
            if choice.confidence == "candidates":  # FPS-CUB-10: settle on half the sample, score the rest
                choice, scored = settle_on_half(choice, a, bt, want)
                out["settled"] = choice.note
            models["observer"] = kernel_model(choice)
        except FpspecError as exc:
            out["observer_error"] = str(exc)
    else:
        out["observer_error"] = "no kernel recorded"
    out["observer_outputs"] = int(scored.sum())
    done: dict = {}
    for which in ("offline", "observer"):
        model = models.get(which)
        if model is None:
            out[which] = None
            continue
        if model not in done:
            done[model] = _bits(model, a, bt, fmt) == want
        out[which] = int((done[model] & scored).sum()) if which == "observer" else int(done[model].sum())
    return out


def settle_on_half(choice, a: np.ndarray, bt: np.ndarray, want: np.ndarray):
    """A persistent launch's slice count settled (FPS-CUB-10) on the sampled columns of even
    index, and the mask of the outputs left to score it on (the odd columns), so that no
    output scored had a part in the choice."""
    cols = np.arange(bt.shape[0])
    use = cols % 2 == 0
    grid = want.reshape(a.shape[0], bt.shape[0])
    settled = settle_choice(choice, a, bt[use], grid[:, use].reshape(-1))
    return settled, np.broadcast_to(~use, grid.shape).reshape(-1).copy()


def _rate() -> dict:
    return {"calls": 0, "outputs": 0, "observer_outputs": 0, "offline": 0, "observer": 0, "offline_calls": 0,
            "observer_calls": 0, "not_modelled_offline": 0, "not_modelled_observer": 0, "settled_calls": 0}


def _add(acc: dict, r: dict) -> None:
    acc["calls"] += 1
    acc["outputs"] += r["outputs"]
    acc["observer_outputs"] += r.get("observer_outputs", r["outputs"])
    acc["settled_calls"] += int("settled" in r)
    for which in ("offline", "observer"):
        scored = r.get("observer_outputs", r["outputs"]) if which == "observer" else r["outputs"]
        got = r[which]
        if got is None:
            acc[f"not_modelled_{which}"] += scored
            continue
        acc[which] += got
        acc[f"{which}_calls"] += int(got == scored)


def _observer_outputs(d: dict) -> int:
    """Outputs the observer is scored on (reports before FPS-CUB-10 have no such count)."""
    return d.get("observer_outputs", d["outputs"])


def accept(paths: list[str], limit: int | None = None, progress: bool = False, loo: bool = False) -> dict:
    """The acceptance report of one or more sweep-format files (``loo``: offline with each
    call's shape left out of the table, :func:`loo_model`)."""
    records = [r for r in read_records(paths) if r.get("kind") == "call" and r.get("bits") and not r.get("error")]
    if limit:
        records = records[:limit]
    digest = hashlib.sha256()
    for p in paths:
        digest.update(run_text(p).encode())  # the run's bytes, compressed on disk or not
    results = []
    for i, rec in enumerate(records):
        results.append(check_call(rec, loo))
        if progress and i % 50 == 0:
            print(f"  {i}/{len(records)}", file=sys.stderr, flush=True)
    targets: dict = {}
    for r in results:
        t = targets.setdefault(r["target"], {"all": _rate(), "families": {}})
        _add(t["all"], r)
        _add(t["families"].setdefault(r["family"], _rate()), r)
    failures = [{k: r[k] for k in ("target", "shape", "family", "kernel", "grid", "outputs", "offline", "observer")
                 if k in r} | {k: r[k] for k in ("offline_error", "observer_error", "settled") if k in r}
                for r in results if r["offline"] != r["outputs"] or r["observer"] != r["observer_outputs"]
                or "settled" in r]
    return {"schema": "fpspec-cublas-accept/1", "source": [run_name(p) for p in paths],
            "offline_mode": "leave-one-shape-out" if loo else "table",
            "sha256": digest.hexdigest(), "calls": len(results),
            "operand_mismatches": sum(not r["operands_ok"] for r in results),
            "targets": {t: targets[t] for t in ORDER if t in targets}, "failures": failures}


def pct(m: int, n: int) -> str:
    return f"{m:,}/{n:,} ({100 * m / n:.2f} %)" if n else "-"


def text_report(rep: dict) -> str:
    lines = [f"acceptance of {', '.join(rep['source'])} ({rep['calls']} calls; operand checksum mismatches "
             f"{rep['operand_mismatches']}; offline: {_mode(rep)})"]
    for t, d in rep["targets"].items():
        a = d["all"]
        lines.append(f"== {t} ({PRESET_OF[t]}): offline {pct(a['offline'], a['outputs'])}, observer "
                     f"{pct(a['observer'], _observer_outputs(a))}; calls fully reproduced offline {a['offline_calls']}/"
                     f"{a['calls']}, observer {a['observer_calls']}/{a['calls']}")
        for fam in FAMILIES:
            f = d["families"].get(fam)
            if f:
                lines.append(f"   {fam:16} calls {f['calls']:4}  offline {pct(f['offline'], f['outputs']):>28}  "
                             f"observer {pct(f['observer'], _observer_outputs(f)):>28}")
    settled = [f for f in rep["failures"] if "settled" in f]
    if settled:
        lines.append(f"persistent launches settled by outputs (FPS-CUB-10; observer scored on the other half of "
                     f"their sample): {len(settled)}")
    lines.append(f"calls listed below (not fully reproduced by one of the two, or settled): {len(rep['failures'])}")
    for f in rep["failures"][:60]:
        lines.append(f"   {f['target']} {'x'.join(map(str, f['shape']))} {f['family']} offline {f['offline']} "
                     f"observer {f['observer']} of {f.get('observer_outputs', f['outputs'])}  "
                     f"{(f.get('kernel') or '')[:70]}"
                     + ("  [settled]" if "settled" in f else ""))
    return "\n".join(lines)


def _mode(rep: dict) -> str:
    return ("each shape left out of the table" if rep.get("offline_mode") == "leave-one-shape-out"
            else "resolve with the committed table")


def rst_fragment(rep: dict) -> str:
    """The reStructuredText fragment of a report (included by docs/cublas-h200.rst)."""
    out = [f".. Generated by python3 -m tools.cublas.accept from {', '.join(rep['source'])} "
           f"(sha256 {rep['sha256'][:16]}); do not edit.", "",
           ".. list-table::", "   :header-rows: 1", "",
           "   * - target (preset)", "     - kernel family", "     - calls",
           "     - offline (``resolve``)" if rep.get("offline_mode") != "leave-one-shape-out"
           else "     - offline, shape left out", "     - observer (``model_for_kernel``)"]
    for t, d in rep["targets"].items():
        rows = [("all", d["all"])] + [(fam, d["families"][fam]) for fam in FAMILIES if fam in d["families"]]
        for fam, f in rows:
            out += [f"   * - ``{t}`` (``{PRESET_OF[t]}``)" if fam == "all" else "   * - ",
                    f"     - {'**all**' if fam == 'all' else fam}", f"     - {f['calls']}",
                    f"     - {pct(f['offline'], f['outputs'])}", f"     - {pct(f['observer'], _observer_outputs(f))}"]
    out += ["", f"{rep['calls']} calls; operand checksum mismatches: {rep['operand_mismatches']}; calls not fully "
            f"reproduced by one of the two models: {len(rep['failures'])}.", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", help="sweep-format .jsonl files (or directories of them)")
    ap.add_argument("--json", help="write the report as JSON")
    ap.add_argument("--rst", help="write the reStructuredText fragment")
    ap.add_argument("--render", help="read a JSON report (no evaluation) instead of runs")
    ap.add_argument("--check", action="store_true", help="with --render and --rst: exit 1 when the fragment is stale")
    ap.add_argument("--limit", type=int, default=None, help="only the first N calls")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--leave-one-out", action="store_true",
                    help="offline: predict each call with its shape left out of the table (how the rule generalises)")
    args = ap.parse_args(argv)
    if args.render:
        rep = json.loads(Path(args.render).read_text())
    elif args.runs:
        rep = accept(args.runs, args.limit, args.progress, args.leave_one_out)
        print(text_report(rep))
    else:
        ap.error("give runs or --render")
    if args.json and not args.render:
        Path(args.json).write_text(json.dumps(rep, indent=1) + "\n")
    if args.rst:
        text = rst_fragment(rep)
        if args.check:
            if not Path(args.rst).exists() or Path(args.rst).read_text() != text:
                print(f"{args.rst} is stale: rerun with --render {args.render} --rst {args.rst}", file=sys.stderr)
                return 1
            return 0
        Path(args.rst).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
