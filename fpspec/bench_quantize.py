"""``fpspec bench quantize``: full block quantization vs ml_dtypes' bare float32 -> E2M1 cast.

The fpspec side is :func:`fpspec.quantization.quantize` on the fast path (tensor
amax, block amax, scale code, payload codes and dequantized values, all of it);
the baseline is ``x.astype(ml_dtypes.float4_e2m1fn)`` on the same array, timed
in the same run.  The ratio is baseline time / fpspec time (> 1: fpspec faster).
"""

from __future__ import annotations

import argparse

import numpy as np

from .cli.bench import best_time, register_benchmark, result_row

__all__ = ["bench_quantize"]


def bench_quantize(args: argparse.Namespace) -> list[dict]:
    import ml_dtypes

    from .quantization import quantize

    k = args.k
    m = max(1, args.n // k)
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((m, k), dtype=np.float32)
    rows = []
    for profile in args.profiles:
        first, ours = best_time(lambda: quantize(x, "ue5m3", profile=profile, block=args.block), args.repeat)
        _, theirs = best_time(lambda: x.astype(ml_dtypes.float4_e2m1fn), args.repeat)
        rows.append(result_row(f"ue5m3/{profile} B={args.block} rne", x.size, ours,
                               "ml_dtypes astype e2m1", theirs, first))
    return rows


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=int, default=4096, help="row length K (the tensor is (n // K, K))")
    p.add_argument("--block", type=int, default=16, choices=[16, 32])
    p.add_argument("--profiles", nargs="+", default=["exact", "seed-fp32"], choices=["exact", "seed-fp32"])


register_benchmark("quantize", "ue5m3 block quantization (fast path, RNE) vs ml_dtypes float32 -> e2m1 astype",
                   bench_quantize, _arguments)
