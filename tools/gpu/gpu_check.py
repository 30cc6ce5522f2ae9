"""Run the checker on a CUDA device: torch's float8 casts and the pure-torch UE5M3 quantizer.

    python3 -m tools.gpu.gpu_check --pack vectors/v1 --out OUTDIR [--device cuda]
        [--declaration vectors/declarations/torch-2.11.yaml]

Writes OUTDIR/gpu_check.json (environment, per-check exit codes and summaries), one text
report per check (OUTDIR/<check>.txt), and torch's float8 cast results for every output of
the float8 sets (OUTDIR/torch_float8_results/, a results folder), so that the same check can
be repeated anywhere:

    fpspec check vectors/v1 OUTDIR/torch_float8_results --select "<TORCH_FLOAT8_SETS>" \
        --declare vectors/declarations/torch-2.11.yaml

The float8 checks run once with the declaration (default: the file for the installed torch
version, torch-2.11.yaml before 2.12, torch-2.13.yaml from 2.12) and once without one
(every output expected: exit 1 on the behaviours the declaration names).  Runs on the GPU
machine from the repository root; docs/checker.rst records its results.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

from fpspec.adapters.torch_vectors import (TORCH_FLOAT8_SETS, check_torch_casts, torch_float8_declaration,
                                           write_torch_cast_results)
from fpspec.vectors.checker import check, format_text
from fpspec.vectors.declare import Declaration, load_declaration
from fpspec.vectors.harness import Harness
from tools.common import load_file

ROOT = Path(__file__).resolve().parents[2]


def _example():
    return load_file(ROOT / "docs" / "examples" / "torch_ue5m3_quantizer.py", "torch_ue5m3_quantizer")


def _summary(report) -> dict:
    fails = {f"{o.set}/{o.output}": {"bad": o.mismatched_cases, "cases": o.cases, "tags": o.tag_counts}
             for o in report.outputs if o.status == "fail"}
    return {"exit_code": report.exit_code, "counts": report.counts(), "failures": fails,
            "nan_equivalent": {f"{o.set}/{o.output}": o.nan_equivalent for o in report.outputs if o.nan_equivalent}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pack", default=str(ROOT / "vectors" / "v1"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--declaration", help="float8 declaration file (default: the one for the installed torch, "
                                          "vectors/declarations/torch-2.11.yaml or torch-2.13.yaml)")
    ap.add_argument("--float8-only", action="store_true", help="skip the UE5M3 quantizer checks")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = args.device
    env = {"python": sys.version.split()[0], "platform": platform.platform(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0) if dev.startswith("cuda") else "cpu"}
    res: dict = {"environment": env, "checks": {}}

    def record(name: str, report, t0: float) -> None:
        (out / f"{name}.txt").write_text(format_text(report, 25) + "\n")
        res["checks"][name] = dict(_summary(report), seconds=round(time.time() - t0, 2))
        print(f"{name}: exit {report.exit_code} {report.counts()}", flush=True)

    version = torch.__version__.split("+")[0]
    newer = torch_float8_declaration(version) is torch_float8_declaration("2.13")
    default_decl = ROOT / "vectors" / "declarations" / ("torch-2.13.yaml" if newer else "torch-2.11.yaml")
    decl_path = Path(args.declaration) if args.declaration else default_decl
    res["float8_declaration"] = str(decl_path)
    t0 = time.time()
    results = out / "torch_float8_results"
    write_torch_cast_results(args.pack, results, device=dev)
    res["float8_results"] = str(results)
    record("torch_float8_declared", check(args.pack, results, select=TORCH_FLOAT8_SETS,
                                          declaration=load_declaration(decl_path), max_report=25), t0)
    t0 = time.time()
    record("torch_float8_undeclared", check(args.pack, results, select=TORCH_FLOAT8_SETS, max_report=25), t0)
    # which E8M0 rounding does this torch use?  Ask the pack, not the docs.
    for mode in ("rne", "rna", "up", "rne-bits"):
        t0 = time.time()
        # default E8M0 policies (0.0 -> NaN): the one zero input then differs under every mode
        decl = dict(torch_float8_declaration(version), rounding={"ue8m0": [mode]}, policies={})
        rep, _ = check_torch_casts(args.pack, device=dev, select="encode-fp16-ue8m0-*", declaration=decl)
        record(f"torch_e8m0_as_{mode}", rep, t0)
    if args.float8_only:
        (out / "gpu_check.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
        return 0
    ex = _example()
    for bug in (None, "no-zero-scale-rule", "ties-away"):
        t0 = time.time()
        h = Harness(args.pack, Declaration.from_mapping(ex.DECLARATION))
        for s in h.sets():
            s.submit(ex.run_set(s.meta, s.inputs, dev, bug=bug))
        record(f"torch_ue5m3_quantizer{'_' + bug if bug else ''}", h.report(25), t0)
    (out / "gpu_check.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
