"""Probe torch's GEMMs on a CUDA GPU and keep everything the local fit needs (FPS-PRB-15).

Makes ``vectors/provenance/h200/`` and the reports ``docs/probe-reports/h200-*.json``.  On the GPU
machine, from the repository root (see docs/probe-h200.rst)::

    python3 -m tools.gpu.h200_probe --out OUTDIR

For each target (torch._scaled_mm e4m3 with use_fast_accum False and True, torch.mm
BF16 and FP16 with FP32 output) it runs the probe recipes at 256 x 256 x 1024, then
the recipes again at every acceptance shape (the library picks its kernel, and its
split of K, by shape), then collects the acceptance samples (the GEMM's FP32 bits at sampled outputs of
the DEFAULT_SHAPES).  Writes OUTDIR/h200_reports.json and OUTDIR/h200_samples.npz
(the committed ones are in vectors/provenance/h200/);
``python3 -m tools.gpu.h200_probe --finish OUTDIR --reports docs/probe-reports`` then fits each
target from its recorded findings and accepts it on the CPU with fpspec's own GEMM
(the operands are regenerated from their seeds); ``--preset-check OUTDIR`` accepts the
nearest preset with the library's split of K set per shape (``split_k``).

``--local`` swaps each torch target for an fpspec preset, to test this script
without a GPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from fpspec.probe import DEFAULT_SHAPES, probe_at, probe_gemm
from fpspec.probe.accept import check_samples, collect_samples, shapes_from_text
from fpspec.probe.fit import FittedModel, fit, nearest_preset

TARGETS = [
    ("torch-scaled-mm", "e4m3", "fpspec:km-h100-fp8-promote128"),
    ("torch-scaled-mm-fast", "e4m3", "fpspec:km-h100-fp8"),
    ("torch-bf16", "bf16", "fpspec:km-h100-bf16"),
    ("torch-fp16", "fp16", "fpspec:km-h100-bf16"),
    # the same BF16 GEMM with torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction off
    ("torch-bf16-rpr0", "bf16", "fpspec:km-h100-bf16"),
]


def gpu_facts() -> dict:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout
        return {"nvidia_smi": out.strip()}
    except Exception as exc:  # pragma: no cover - informational
        return {"nvidia_smi": f"unavailable: {exc}"}


def make(spec: str, fmt: str, local: str | None):
    from fpspec.adapters import make_target

    if local:
        return make_target(local, fmt)
    if spec == "torch-bf16-rpr0":
        from fpspec.adapters.torch_gemm import TorchMatmulTarget

        return TorchMatmulTarget("bf16", reduced_precision_reduction=False)
    return make_target(spec, fmt)


def run_target(spec: str, fmt: str, local: str | None, shapes) -> tuple[dict, dict]:
    target = make(spec, fmt, local)
    t0 = time.time()
    rep = probe_gemm(target, fmt, K=1024, scan_k=512, shape=(256, 256), acceptance_shapes=None)
    entry = {"probe": rep.to_dict(raw=True), "seconds_probe": round(time.time() - t0, 1), "per_shape": []}
    print(rep.summary(), flush=True)
    for (m, n, k, _, _) in shapes:
        t1 = time.time()
        try:
            f, fm, calls = probe_at(target, fmt, m, n, k)
            entry["per_shape"].append({"shape": [m, n, k], "findings": f, "fitted": fm.to_dict(),
                                       "nearest_preset": nearest_preset(fm), "calls": len(calls),
                                       "seconds": round(time.time() - t1, 1)})
            print(f"  at {m}x{n}x{k}: G={fm.model.group_size} F={fm.model.window_bits} "
                  f"acc_bits={fm.model.accumulate_bits} promo={fm.model.promotion_interval} "
                  f"split={fm.model.split_k} boundaries={f['boundaries'].get('boundaries', [])[:6]} "
                  f"({time.time() - t1:.1f}s, {len(calls)} calls)", flush=True)
        except Exception as exc:
            entry["per_shape"].append({"shape": [m, n, k], "error": repr(exc)})
            traceback.print_exc()
    t2 = time.time()
    samples = collect_samples(target, fmt, shapes)
    entry["seconds_acceptance_gemms"] = round(time.time() - t2, 1)
    arrays = {}
    meta = []
    for i, s in enumerate(samples):
        arrays[f"{spec}__{i}"] = s["bits"]
        meta.append({k: v for k, v in s.items() if k != "bits"} | {"key": f"{spec}__{i}"})
    entry["samples"] = meta
    return entry, arrays


def main_collect(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shapes = shapes_from_text(args.shapes) if args.shapes else DEFAULT_SHAPES
    result: dict = {"schema": "fpspec-h200-probe/1", "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "gpu": gpu_facts(), "python": sys.version, "numpy": np.__version__, "targets": {}}
    arrays: dict = {}
    chosen = [t for t in TARGETS if not args.only or t[0] in args.only.split(",")]
    for spec, fmt, local in chosen:
        print(f"== {spec} ({fmt})", flush=True)
        try:
            entry, arr = run_target(spec, fmt, local if args.local else None, shapes)
            result["targets"][spec] = entry
            arrays.update(arr)
        except Exception as exc:
            traceback.print_exc()
            result["targets"][spec] = {"error": repr(exc)}
        (out / "h200_reports.json").write_text(json.dumps(result, indent=1, default=str))
        np.savez_compressed(out / "h200_samples.npz", **arrays)
    print("done", flush=True)
    return 0


def main_finish(args) -> int:
    """Fit each target from its recorded findings (the fit of this checkout, not the one
    the device run printed) and accept it against its samples, the model probed at each
    acceptance shape checked at that shape."""
    src = Path(args.finish)
    data = json.loads((src / "h200_reports.json").read_text())
    arrays = np.load(src / "h200_samples.npz")
    dest = Path(args.reports)
    dest.mkdir(parents=True, exist_ok=True)
    for spec, entry in data["targets"].items():
        if "error" in entry:
            print(f"{spec}: error on the device: {entry['error']}")
            continue
        probe = entry["probe"]
        fmt = probe["operand_format"]
        per_shape_entries = []
        for e in entry.get("per_shape", []):
            if "findings" in e:
                pfm = fit(e["findings"], fmt)
                e = dict(e, fitted=pfm.to_dict(), nearest_preset=nearest_preset(pfm))
            per_shape_entries.append(e)
        if args.model and spec in args.model:
            fm = FittedModel.from_dict(args.model[spec])
            per_shape = None
        else:
            fm = fit(probe["findings"], fmt)
            per_shape = {"x".join(map(str, e["shape"])): FittedModel.from_dict(e["fitted"])
                         for e in per_shape_entries if "fitted" in e}
        probe["fitted"] = fm.to_dict()
        probe["nearest_preset"] = nearest_preset(fm)
        samples = [dict(m, bits=arrays[m["key"]]) for m in entry["samples"]]
        t0 = time.time()
        acc = check_samples(samples, fmt, fm, per_shape_models=per_shape)
        print(f"{spec}: {acc.matched}/{acc.compared} ({100 * acc.match_rate:.4f} %) in {time.time() - t0:.0f}s")
        for s in acc.per_shape:
            print(f"   {s['shape']}: {s['matched']}/{s['compared']}  [{s['model']}]")
        probe["acceptance"] = acc.to_dict()
        probe["accepted_model"] = fm.to_dict()
        probe.pop("raw_outputs_hex", None)
        report = {"gpu": data["gpu"], "started": data["started"], "python": data.get("python"),
                  **probe, "per_shape": per_shape_entries,
                  "acceptance_gemm_seconds": entry.get("seconds_acceptance_gemms")}
        (dest / f"h200-{spec}.json").write_text(json.dumps(report, indent=1, default=str))
    return 0


def main_preset_check(args) -> int:
    """Add to each report how the nearest preset itself fares on every sample: the preset
    unchanged except for the library's split of K at each shape (``split_k``, from the
    model probed at that shape: FPS-GEMM-14), evaluated by fpspec.matmul."""
    from fpspec.presets import PRESETS
    from fpspec.probe.fit import library_split

    src = Path(args.preset_check)
    data = json.loads((src / "h200_reports.json").read_text())
    arrays = np.load(src / "h200_samples.npz")
    for spec, entry in data["targets"].items():
        path = Path(args.reports) / f"h200-{spec}.json"
        if "error" in entry or not path.exists():
            continue
        rep = json.loads(path.read_text())
        name = rep["nearest_preset"]["name"]
        preset = PRESETS[name].model
        splits = {}
        for e in rep["per_shape"]:
            if "fitted" in e:
                splits["x".join(map(str, e["shape"]))] = library_split(
                    FittedModel.from_dict(e["fitted"]).model, preset).split_k
        per_shape = {key: FittedModel(preset.replace(split_k=sk)) for key, sk in splits.items()}
        samples = [dict(m, bits=arrays[m["key"]]) for m in entry["samples"]]
        acc = check_samples(samples, rep["operand_format"], FittedModel(preset), per_shape_models=per_shape)
        rep["preset_check"] = {"preset": name, "evaluator": "fpspec.matmul (fast path)",
                               "shapes": "every acceptance shape, split_k set per shape",
                               **{k: v for k, v in acc.to_dict().items() if k != "per_shape"},
                               "per_shape": [{"shape": s["shape"], "compared": s["compared"],
                                              "matched": s["matched"],
                                              "split_k": splits.get("x".join(map(str, s["shape"])))}
                                             for s in acc.per_shape]}
        print(f"{spec}: preset {name} (+ split_k per shape): {acc.matched}/{acc.compared}")
        for s in rep["preset_check"]["per_shape"]:
            print(f"   {s['shape']}: split_k={s['split_k']} {s['matched']}/{s['compared']}")
        path.write_text(json.dumps(rep, indent=1, default=str))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="collect: directory for h200_reports.json and h200_samples.npz")
    p.add_argument("--local", action="store_true", help="use fpspec presets instead of torch (no GPU)")
    p.add_argument("--only", help="comma-separated target names")
    p.add_argument("--shapes", help="acceptance shapes MxNxK[:RxC],... (default: DEFAULT_SHAPES)")
    p.add_argument("--finish", help="fit and accept from a collected directory")
    p.add_argument("--reports", default="docs/probe-reports", help="finish: where the report JSONs go")
    p.add_argument("--preset-check", metavar="DIR", help="add the nearest preset's own match rate "
                   "(split_k set per shape) to the reports in --reports, from a collected DIR")
    p.add_argument("--model-json", help="finish: {target: {parameters: {...GemmModel fields}}} to accept instead")
    args = p.parse_args(argv)
    args.model = json.loads(Path(args.model_json).read_text()) if args.model_json else None
    if args.finish:
        return main_finish(args)
    if args.preset_check:
        return main_preset_check(args)
    if not args.out:
        p.error("--out or --finish is required")
    return main_collect(args)


if __name__ == "__main__":
    sys.exit(main())
