"""The torch twin on a CUDA device, held to the CPU fast path: the report of issue 30's H200 runs.

    python3 -m tools.gpu.torch_twin --out OUTDIR [--device cuda] [--conversions 100000000]
        [--blocks 1000000] [--gemm-size 4096] [--skip pack,convert,blocks,gemm]

Writes OUTDIR/torch_twin.json (environment, each part's counts and first mismatches) and
OUTDIR/torch_twin.txt (the same, for people):

1. **pack**: ``fpspec vectors run-reference PACK --impl torch:DEVICE`` then ``fpspec check``:
   every set of the level-1 pack computed on the device must pass.
2. **convert**: ``--conversions`` random float32 bit patterns (every pattern as likely: NaNs,
   infinities, subnormals included) encoded on the device to every format of at most 8 bits
   under RNE and midpoint SR (8 random bits), compared with ``encode_fast`` on the host.
3. **blocks**: ``--blocks`` 1x16 (1x32 for mxfp4) blocks per scheme and default profile, values
   spread over 2^-40..2^40 with zeros and negative zeros, quantized on the device and on the host
   (codes, scales and decode scale compared).
4. **gemm**: every preset the fast path carries at ``--gemm-size``^3 (M = N = K), operands
   quantized once on the host and moved, the device's GEMM compared with the host's on 64
   sampled rows and 64 sampled columns (:func:`fpspec.sampled.gemm_sample`), every sampled
   element bit for bit.

The host side runs the fast path on the machine's CPU cores.  Keep the output under
``vectors/provenance/h200-torch-twin/`` with a README naming this command.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

import fpspec
from fpspec.formats import FORMATS
from fpspec.named_models import presets_json

ROOT = Path(__file__).resolve().parents[2]
_CHUNK = 1 << 24


def _pack(out: Path, device: str) -> dict:
    res = out / "pack_results"
    t0 = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "fpspec", "vectors", "run-reference", str(ROOT / "vectors" / "v1"),
                          "--out", str(res), "--impl", f"torch:{device}", "--quiet"], capture_output=True, text=True)
    chk = subprocess.run([sys.executable, "-m", "fpspec", "check", str(ROOT / "vectors" / "v1"), str(res)],
                         capture_output=True, text=True)
    return {"run_reference_exit": run.returncode, "run_reference_stderr": run.stderr[-2000:],
            "check_exit": chk.returncode, "check_tail": chk.stdout[-3000:], "seconds": time.perf_counter() - t0}


def _convert(n: int, device: str, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    fmts = [f for f in FORMATS.values() if f.bits <= 8]
    out: dict = {"elements_per_format_and_mode": n, "formats": [f.name for f in fmts], "mismatches": {}}
    t0 = time.perf_counter()
    done = 0
    while done < n:
        size = min(_CHUNK, n - done)
        x = rng.integers(0, 1 << 32, size, dtype=np.uint32).view(np.float32)
        r = rng.integers(0, 256, size, dtype=np.uint8)
        xd, rd = torch.from_numpy(x).to(device), torch.from_numpy(r).to(device)
        for f in fmts:
            for mode in ("rne", "sr"):
                kw = {"rbits": r, "nbits": 8} if mode == "sr" else {}
                kwd = {"rbits": rd, "nbits": 8} if mode == "sr" else {}
                pol = {"nan": "zero"} if not f.has_nan else {}
                try:
                    want = fpspec.encode(x, f, mode, **kw, **pol)
                except fpspec.FpspecError:
                    continue  # (a mode the format does not take)
                got = fpspec.encode(xd, f, mode, **kwd, **pol).cpu().numpy()
                bad = np.flatnonzero(got != want)
                if bad.size:
                    key = f"{f.name}/{mode}"
                    out["mismatches"].setdefault(key, [])
                    out["mismatches"][key] += [{"x_bits": f"0x{int(x.view(np.uint32)[i]):08x}", "got": int(got[i]),
                                                "want": int(want[i])} for i in bad[:5]]
        done += size
    out["seconds"] = time.perf_counter() - t0
    return out


def _blocks(n: int, device: str, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out: dict = {"blocks_per_scheme": n, "mismatches": {}}
    for scheme in ("ue5m3", "nvfp4", "mxfp4", "mxfp8"):
        b = 32 if scheme.startswith("mx") else 16
        rows = n * b // 4096
        x = (rng.standard_normal((rows, 4096)) * 2.0 ** rng.uniform(-40, 40, (rows, 4096 // b)).repeat(b, 1))
        x = x.astype(np.float32)
        x[rng.random(x.shape) < 0.01] = 0.0
        x[rng.random(x.shape) < 0.01] = -0.0
        want = fpspec.quantize(x, scheme)
        got = fpspec.quantize(torch.from_numpy(x).to(device), scheme).to("numpy")
        bad = {k: int((getattr(got, k) != getattr(want, k)).sum()) for k in ("codes", "scales")}
        bad["decode_scale"] = int(got.decode_scale != want.decode_scale)
        if any(bad.values()):
            out["mismatches"][scheme] = bad
    return out


def _gemm(size: int, device: str, seed: int) -> dict:
    from fpspec.models import contract_of
    from fpspec.sampled import gemm_sample

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((size, size)).astype(np.float32)
    w = rng.standard_normal((size, size)).astype(np.float32)
    rows = np.sort(rng.choice(size, 64, replace=False))
    cols = np.sort(rng.choice(size, 64, replace=False))
    out: dict = {"size": size, "presets": {}}
    for name in sorted(presets_json()):
        c = contract_of(name)
        try:
            if c.quantized:
                scheme = {"ue5m3": "ue5m3", "ue5m3fnu": "ue5m3", "ue4m3": "nvfp4", "ue8m0": "mxfp4"}[
                    c.quantized[0].scale_format]
                a, bt = fpspec.quantize(x, scheme), fpspec.quantize(w, scheme)
                kw: dict = {}
                ad, bd = a.to(device), bt.to(device)
            else:
                fmt = c.plain[0]
                a, bt = fpspec.encode(x, fmt), fpspec.encode(w, fmt)
                kw = {"fmt": fmt}
                ad = torch.from_numpy(a.astype(np.int32) if a.dtype == np.uint16 else a).to(device)
                bd = torch.from_numpy(bt.astype(np.int32) if bt.dtype == np.uint16 else bt).to(device)
            t0 = time.perf_counter()
            got = fpspec.gemm(ad, bd, name, **kw)
            torch.cuda.synchronize()
            t_dev = time.perf_counter() - t0
            t0 = time.perf_counter()
            want = gemm_sample(a, bt, name, rows=rows, cols=cols, **kw)
            t_host = time.perf_counter() - t0
            g = got.cpu().numpy()[np.ix_(rows, cols)]
            view = np.uint16 if g.dtype == np.float16 else np.uint32
            bad = int((g.view(view) != np.asarray(want).view(view)).sum())
            out["presets"][name] = {"sampled": int(g.size), "mismatched": bad, "device_s": t_dev,
                                    "host_sample_s": t_host}
        except Exception as exc:  # noqa: BLE001 (reported, not fatal: the report names every preset)
            out["presets"][name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--conversions", type=int, default=100_000_000)
    ap.add_argument("--blocks", type=int, default=1_000_000)
    ap.add_argument("--gemm-size", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--skip", default="", help="comma-separated parts to leave out (pack, convert, blocks, gemm)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    report: dict = {"environment": {"python": platform.python_version(), "torch": torch.__version__,
                                    "device": torch.cuda.get_device_name() if torch.cuda.is_available() else args.device,
                                    "fpspec": fpspec.__version__ if hasattr(fpspec, "__version__") else "tree"}}
    parts = {"pack": lambda: _pack(out, args.device), "convert": lambda: _convert(args.conversions, args.device, args.seed),
             "blocks": lambda: _blocks(args.blocks, args.device, args.seed),
             "gemm": lambda: _gemm(args.gemm_size, args.device, args.seed)}
    for name, fn in parts.items():
        if name in skip:
            continue
        t0 = time.perf_counter()
        report[name] = fn()
        report[name]["wall_s"] = time.perf_counter() - t0
        print(f"{name}: {json.dumps(report[name])[:400]}", flush=True)
        (out / "torch_twin.json").write_text(json.dumps(report, indent=2, sort_keys=True))
    ok = all(not report.get(p, {}).get("mismatches") for p in ("convert", "blocks")) and \
        report.get("pack", {}).get("check_exit", 0) == 0 and \
        all(v.get("mismatched", 0) == 0 and "error" not in v for v in report.get("gemm", {}).get("presets", {}).values())
    (out / "torch_twin.txt").write_text(json.dumps(report, indent=2, sort_keys=True) + f"\nall equal: {ok}\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
