"""The torch observer on the H200: observe each call's kernel, model it, compare (FPS-CUB-8).

On the GPU machine, from the repository root (one command, a few minutes; writes
$OUT/observe.jsonl, $OUT/observe_summary.json and $OUT/log.txt):

    set -o pipefail; export PYTHONUNBUFFERED=1 PYTHONPATH=.; \\
    timeout 480 python3 -m tools.cublas.observe --out $OUT --budget 400 2>&1 | tee $OUT/log.txt

For every (target, shape) - default shapes: vectors/provenance/h200-cublas/heldout_shapes.txt,
targets: the four of the sweep - it generates the operands of the sweep's hash
(tools/cublas/common.py, same seeds and sampled rows and columns as
``tools/cublas/sweep.py --shapes ... --seed``), runs the torch call once unprofiled
and once under the profiler (:func:`fpspec.adapters.torch_gemm.observe_call`), reads the
kernel and its grid, takes the model :func:`fpspec.cublas.library.model_for_kernel` gives, and
compares fpspec's output under that model on the sampled outputs with the call's, bit for
bit; it also records the offline model's match (``fpspec.cublas.library.resolve``).  A persistent
split launch (FPS-CUB-10) has its slice count settled on outputs outside the sampled rows
and columns (:func:`fpspec.adapters.torch_gemm.settle_observation`), so the sample the
match is counted on played no part in choosing the model.  A kernel the
observer does not model (SIMT) is recorded with its reason and no observer match.
``--device cpu`` runs the same on torch's CPU ops (no kernels, no grid: the observer
models nothing there, and the CPU's FP32 results are not cuBLAS's) to test the script.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from fpspec.adapters.torch_gemm import observe_call, settle_observation, target_call
from fpspec.cublas.h200 import PRESET_TARGETS, TARGETS, kernel_family
from fpspec.cublas.library import resolve
from fpspec.errors import FpspecError
from fpspec.matmul import gemm

from .common import ROOT, bits_hex, code_checksum, codes_numpy, first_call, parse_shapes_text
from .sweep import TorchBackend, build_jobs

DEFAULT_SHAPES = ROOT / "vectors" / "provenance" / "h200-cublas" / "heldout_shapes.txt"
PRESET_OF = {t: p for p, t in PRESET_TARGETS.items()}
_DTYPE = {"bf16": np.uint16, "fp16": np.uint16, "e4m3": np.uint8}


def fpspec_bits(model, fmt: str, job: dict) -> np.ndarray:
    """fpspec's FP32 bits of the job's sampled outputs (rows x cols, row-major) under ``model``."""
    k = job["shape"][2]
    a = codes_numpy(fmt, job["seed_a"], job["rows"], k).astype(_DTYPE[fmt])
    bt = codes_numpy(fmt, job["seed_b"], job["cols"], k).astype(_DTYPE[fmt])
    return gemm(a, bt, model, fmt=fmt).astype(np.float32).reshape(-1).view(np.uint32)


def run_job(be: TorchBackend, job: dict) -> dict:
    """One call: operands, the observed call, the models, the match counts."""
    t = be.torch
    target = job["target"]
    fmt = TARGETS[target].fmt
    m, n, k = job["shape"]
    rec = {"kind": "observe", "target": target, "requested_shape": job["requested_shape"]}
    bt = be.operand(fmt, job["seed_b"], n, k)
    a, m, adjusted = first_call(fmt, m, lambda rows: be.operand(fmt, job["seed_a"], rows, k),
                                lambda a: target_call(t, target, a, bt))
    if adjusted is not None:
        job["shape"] = [m, n, k]
        rec["adjusted"] = adjusted
    obs = observe_call(lambda: target_call(t, target, a, bt), target, (m, n, k), torch=t)
    obs = settle_observation(obs, a, bt, avoid_rows=job["rows"], avoid_cols=job["cols"])  # FPS-CUB-10
    rows = t.tensor(job["rows"], dtype=t.int64, device=be.device)
    cols = t.tensor(job["cols"], dtype=t.int64, device=be.device)
    y = obs.result.index_select(0, rows).index_select(1, cols).float().cpu().numpy().astype(np.float32)
    got = y.reshape(-1).view(np.uint32)
    ok = (be.checksum(a, job["rows"]) == list(code_checksum(codes_numpy(fmt, job["seed_a"], job["rows"], k)))
          and be.checksum(bt, job["cols"]) == list(code_checksum(codes_numpy(fmt, job["seed_b"], job["cols"], k))))
    rec.update(shape=[m, n, k], seed_a=job["seed_a"], seed_b=job["seed_b"], rows=job["rows"], cols=job["cols"],
               operands_ok=ok, kernel=obs.kernel, grid=list(obs.grid) if obs.grid else None, method=obs.method,
               kernels=[[nm, list(g) if g else None] for nm, g in obs.kernels],
               family=kernel_family(obs.kernel) if obs.kernel else "none", outputs=int(got.size),
               bits=bits_hex(got), observer_error=obs.error,
               observer_model=obs.model.to_dict() if obs.model is not None else None,
               settled=obs.to_dict()["settled"])
    rec["observer_matched"] = None if obs.model is None else int((fpspec_bits(obs.model, fmt, job) == got).sum())
    try:
        offline = resolve(PRESET_OF[target], (m, n, k))
        rec["offline_matched"] = (rec["observer_matched"] if offline == obs.model
                                  else int((fpspec_bits(offline, fmt, job) == got).sum()))
    except FpspecError as exc:
        rec["offline_matched"], rec["offline_error"] = None, str(exc)
    return rec


def summary(records: list[dict]) -> dict:
    """Per target and kernel family: calls, outputs, outputs the observer and the offline
    model reproduce, calls not modelled."""
    out: dict = {}
    for r in records:
        if r.get("kind") != "observe" or "outputs" not in r:
            continue
        for key in ("all", r["family"]):
            d = out.setdefault(r["target"], {}).setdefault(key, {"calls": 0, "outputs": 0, "observer": 0,
                                                                 "offline": 0, "not_modelled": 0})
            d["calls"] += 1
            d["outputs"] += r["outputs"]
            d["observer"] += r["observer_matched"] or 0
            d["offline"] += r["offline_matched"] or 0
            d["not_modelled"] += int(r["observer_matched"] is None)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Observe cuBLAS's kernel per call, model it with fpspec, compare bits.")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="output directory (default $OUT)")
    ap.add_argument("--shapes", default=str(DEFAULT_SHAPES), help="shapes file (M N K per line)")
    ap.add_argument("--targets", default=",".join(TARGETS), help="comma-separated targets")
    ap.add_argument("--device", default="cuda", help="cuda (the H200) or cpu (tests: torch's CPU ops)")
    ap.add_argument("--seed", type=int, default=2000000, help="operand seed base (as the sweep's --seed)")
    ap.add_argument("--max-outputs", type=int, default=64, help="sampled outputs per call")
    ap.add_argument("--budget", type=float, default=400.0, help="start no new call after this many seconds")
    ap.add_argument("--limit", type=int, default=None, help="only the first N calls (cheapest first)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    targets = [s for s in args.targets.split(",") if s]
    for tg in targets:
        if tg not in TARGETS:
            raise SystemExit(f"unknown target {tg!r}; known: {', '.join(TARGETS)}")
    shapes = parse_shapes_text(Path(args.shapes).read_text(), args.shapes)
    jobs = build_jobs(targets, shapes, args.max_outputs, args.seed)[:args.limit]
    be = TorchBackend(args.device, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = [{"kind": "meta", "schema": "fpspec-h200-cublas-observe/1", "argv": sys.argv[1:] if argv is None
                else list(argv), "shapes_file": Path(args.shapes).name, **be.meta()}]
    with open(out / "observe.jsonl", "w") as f:
        f.write(json.dumps(records[0]) + "\n")
        for i, job in enumerate(jobs):
            if time.perf_counter() - t0 > args.budget:
                rec = {"kind": "skipped", "calls": len(jobs) - i, "reason": f"budget {args.budget} s"}
                records.append(rec)
                f.write(json.dumps(rec) + "\n")
                print(f"budget reached: {len(jobs) - i} calls skipped", flush=True)
                break
            try:
                rec = run_job(be, job)
            except Exception as exc:
                rec = {"kind": "observe", "target": job["target"], "shape": job["shape"], "error": repr(exc)[:500]}
            records.append(rec)
            f.write(json.dumps(rec) + "\n")
            f.flush()
            if "outputs" in rec:
                print(f"{i:4} {rec['target']:22} {'x'.join(map(str, rec['shape'])):>18} {rec['family']:15} "
                      f"observer {rec['observer_matched']}/{rec['outputs']} offline {rec['offline_matched']}"
                      + (f"  ({rec['observer_error'][:80]})" if rec.get("observer_error") else ""), flush=True)
            else:
                print(f"{i:4} {rec['target']:22} {rec['shape']} ERROR {rec['error'][:120]}", flush=True)
        summ = summary(records)
        done = {"kind": "done", "seconds": round(time.perf_counter() - t0, 1), "summary": summ}
        f.write(json.dumps(done) + "\n")
    (out / "observe_summary.json").write_text(json.dumps(summ, indent=1) + "\n")
    for tg, fams in summ.items():
        for fam, d in fams.items():
            print(f"{tg:22} {fam:15} calls {d['calls']:4} observer {d['observer']}/{d['outputs']} "
                  f"offline {d['offline']}/{d['outputs']} not modelled {d['not_modelled']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
