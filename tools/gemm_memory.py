"""Peak resident memory of one large fpspec GEMM (issue 11: 4096^3 seed GEMM <= 2 GB).

Runs in a fresh process per case so that each peak is its own: quantizes two random
normal float32 matrices (M = N = K = --size), runs ``fpspec.matmul.gemm`` once and prints
the peak resident set (``resource.getrusage(RUSAGE_SELF).ru_maxrss``, inputs included),
the wall time, the path (BLAS partials or term kernels) and the fallback share.

    python3 -m tools.gemm_memory --size 4096 --case nvfp4
    python3 -m tools.gemm_memory --size 4096 --case e4m3      # km-h100-fp8-promote128
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import ml_dtypes
import numpy as np

from fpspec.fast import partials
from fpspec.matmul import gemm
from fpspec.quantization import quantize

CASES = {"nvfp4": "seed-probe-matched", "ue5m3": "seed-probe-matched", "e4m3": "km-h100-fp8-promote128"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--case", choices=sorted(CASES), default="nvfp4")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.size, args.size)).astype(np.float32)
    w = rng.standard_normal((args.size, args.size)).astype(np.float32)
    model = CASES[args.case]
    if args.case == "e4m3":
        a, b = (v.astype(ml_dtypes.float8_e4m3fn).view(np.uint8) for v in (x, w))
        kw = {"fmt": "e4m3"}
    else:
        a, b = quantize(x, args.case), quantize(w, args.case)
        kw = {}
    del x, w
    t0 = time.perf_counter()
    y = gemm(a, b, model, **kw)
    wall = time.perf_counter() - t0
    stats = partials.last_stats()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kilobytes
    print(json.dumps({"size": args.size, "case": args.case, "preset": model, "peak_rss_bytes": peak,
                      "peak_rss_gb": round(peak / 1e9, 3), "wall_s": round(wall, 2),
                      "path": "terms" if stats is None else "blas",
                      "fallback_share": None if stats is None else stats.share,
                      "finite_outputs": int(np.isfinite(y).sum())}))


if __name__ == "__main__":
    main()
