"""Run the MMA-Sim reference operands of the Hopper presets through cuBLAS on an H200.

The MMA-Sim sets (``vectors/provenance/mmasim/``) hold, per set, operand codes A (M x K)
and B (K x N), K = 256, and MMA-Sim's outputs: ``d_first`` (one instruction from
C = 0) and ``d`` (the chain of K/k instructions).  On a Hopper GPU, cuBLAS runs the same
``wgmma`` instructions; where it neither splits K nor reorders the chain, its FP32
output is the chain's.  This script evaluates, for the sm90 sets (and, for
comparison, every FP16/BF16/FP8/TF32 set whose operands cuBLAS can take):

* ``first``: ``A[:, :k] @ B[:k, :]`` (one instruction's worth of K);
* ``full``: ``A @ B`` over all K = 256;

with ``torch.mm(A, BT.t(), out_dtype=torch.float32)`` for FP16/BF16, ``torch._scaled_mm``
(scales 1, FP32 out, ``use_fast_accum`` True and False) for FP8 (e4m3, e5m2, mixed),
and ``torch.mm`` on float32 with TF32 allowed for TF32, recording the launched kernel
names.  Output: one ``.npz`` with a bits array per (set, call) and a JSON of the
kernels: ``vectors/provenance/h200-mmasim/`` holds the committed one (its README says how the
sets were carried).  Run on the GPU machine, from the repository root (the sets are carried in an
ignored folder)::

    python3 -m tools.gpu.h200_mmasim_check --sets DIR --out $OUT/h200_mmasim.npz

``--device cpu`` runs the same code on the CPU (float32 products; only to test the
script).  The comparison with MMA-Sim and with fpspec's presets is made offline.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

K_OF = {"fp16": 16, "bf16": 16, "e4m3": 32, "e5m2": 32, "tf32": 8}


def _meta(z) -> dict:
    return json.loads(bytes(z["__meta__"]).decode("utf-8"))


def _tensor(torch, codes: np.ndarray, fmt: str, device: str):
    if fmt in ("fp16", "bf16"):
        t = torch.from_numpy(codes.astype(np.uint16).view(np.int16).copy())
        t = t.view(torch.float16 if fmt == "fp16" else torch.bfloat16)
    elif fmt in ("e4m3", "e5m2"):
        t = torch.from_numpy(codes.astype(np.uint8).copy())
        t = t.view(torch.float8_e4m3fn if fmt == "e4m3" else torch.float8_e5m2)
    elif fmt == "tf32":
        t = torch.from_numpy(codes.astype(np.uint32).view(np.int32).copy()).view(torch.float32)
    else:
        raise ValueError(fmt)
    return t.to(device)


def _calls(torch, fa: str, fb: str, device: str):
    """(name, fn(A, BT) -> float32 tensor) for one operand-format pair."""
    out = []
    if fa == fb and fa in ("fp16", "bf16"):
        if device == "cuda":
            out.append(("mm", lambda a, bt: torch.mm(a, bt.t(), out_dtype=torch.float32)))
        else:
            out.append(("mm", lambda a, bt: torch.mm(a.float(), bt.float().t())))
    elif fa in ("e4m3", "e5m2") and fb in ("e4m3", "e5m2"):
        one = torch.ones((), dtype=torch.float32, device=device)
        for fast in (True, False):
            if device == "cuda":
                out.append((f"scaled_mm_fast{int(fast)}",
                            lambda a, bt, fast=fast: torch._scaled_mm(a, bt.t(), scale_a=one, scale_b=one,
                                                                      out_dtype=torch.float32,
                                                                      use_fast_accum=fast)))
            else:
                out.append((f"scaled_mm_fast{int(fast)}", lambda a, bt: torch.mm(a.float(), bt.float().t())))
    elif fa == fb == "tf32":
        def tf32(a, bt):
            torch.backends.cuda.matmul.allow_tf32 = True
            try:
                return torch.mm(a, bt.t())
            finally:
                torch.backends.cuda.matmul.allow_tf32 = False
        out.append(("mm_tf32", tf32))
    return out


def _kernels(torch, fn, a, bt, device: str) -> list[str]:
    if device != "cuda":
        return []
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(a, bt)
        torch.cuda.synchronize()
    names = []
    for ev in prof.events():
        if getattr(ev, "device_type", None) is not None and "CUDA" in str(ev.device_type):
            names.append(ev.name)
    return sorted(set(names))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", required=True, help="folder of MMA-Sim set files (*.npz)")
    ap.add_argument("--out", required=True, help="output .npz (bits); a .json of kernels is written beside it")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--only", default="", help="comma-separated set-name prefixes (default: every set cuBLAS takes)")
    args = ap.parse_args(argv)
    import torch

    files = sorted(Path(args.sets).glob("*.npz"))
    prefixes = [p for p in args.only.split(",") if p]
    bits: dict[str, np.ndarray] = {}
    info: dict[str, dict] = {"torch": torch.__version__, "device": args.device, "sets": {}}
    if args.device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
    t0 = time.time()
    for f in files:
        name = f.stem
        if prefixes and not any(name.startswith(p) for p in prefixes):
            continue
        with np.load(f, allow_pickle=False) as z:
            meta = _meta(z)
            if "a_scale" in z.files:
                continue  # block-scaled sets: no cuBLAS call on Hopper
            a, b = z["a"], z["b"]
        fa, fb = meta["a_format"], meta["b_format"]
        calls = _calls(torch, fa, fb, args.device)
        if not calls:
            continue
        k1 = K_OF[fa]
        rec = info["sets"].setdefault(name, {"a_format": fa, "b_format": fb, "k_first": k1, "calls": {}})
        for cname, fn in calls:
            for part, kk in (("first", k1), ("full", a.shape[1])):
                key = f"{name}/{cname}/{part}"
                try:
                    ta = _tensor(torch, np.ascontiguousarray(a[:, :kk]), fa, args.device)
                    tbt = _tensor(torch, np.ascontiguousarray(b[:kk, :].T), fb, args.device)
                    y = fn(ta, tbt)
                    if args.device == "cuda":
                        torch.cuda.synchronize()
                    y2 = fn(ta, tbt)
                    bits[key] = y.float().cpu().numpy().view(np.uint32)
                    same = bool(np.array_equal(bits[key], y2.float().cpu().numpy().view(np.uint32)))
                    rec["calls"][f"{cname}/{part}"] = {"kernels": _kernels(torch, fn, ta, tbt, args.device),
                                                        "repeat_equal": same}
                except Exception as exc:  # record and go on: one unsupported call must not lose the rest
                    rec["calls"][f"{cname}/{part}"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        print(f"[{time.time() - t0:6.1f}s] {name}: {sorted(rec['calls'])}", flush=True)
    out = Path(args.out)
    np.savez(out, **bits)
    out.with_suffix(".json").write_text(json.dumps(info, indent=1))
    print(f"wrote {len(bits)} arrays to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
