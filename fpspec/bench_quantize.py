"""``fpspec bench quantize``: full block quantization vs ml_dtypes' bare float32 -> E2M1 cast.

The fpspec side is :func:`fpspec.quantization.quantize` on the fast path (input
check, tensor amax, block amax, scale code and payload codes: all of it); the
baseline is ``x.astype(ml_dtypes.float4_e2m1fn)`` on the same array, timed
alternately with it in the same run.  The ratio is baseline time / fpspec time
(> 1: fpspec faster).  Each row also reports the peak memory that quantize and
quantize + dequantize allocate (tracemalloc, NumPy arrays included), as a
multiple of the input's size, input included.
"""

from __future__ import annotations

import argparse
import tracemalloc

import numpy as np

from .cli.bench import interleaved_times, register_benchmark, result_row

__all__ = ["bench_quantize", "peak_memory"]


def peak_memory(fn, nbytes: int) -> float:
    """Peak bytes allocated while ``fn()`` runs, plus ``nbytes`` (the input), over ``nbytes``."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return (peak + nbytes) / nbytes


def bench_quantize(args: argparse.Namespace) -> list[dict]:
    import ml_dtypes

    from .quantization import dequantize, quantize

    k = args.k
    m = max(1, args.n // k)
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((m, k), dtype=np.float32)
    rows = []
    for profile in args.profiles:
        def ours() -> object:
            return quantize(x, "ue5m3", profile=profile, block=args.block)

        first, t_ours, t_theirs = interleaved_times(ours, lambda: x.astype(ml_dtypes.float4_e2m1fn), args.repeat)
        rows.append(result_row(f"ue5m3/{profile} B={args.block} rne", x.size, t_ours,
                               "ml_dtypes astype e2m1", t_theirs, first,
                               peak_memory_x_input=round(peak_memory(ours, x.nbytes), 2),
                               peak_memory_with_dequant_x_input=round(
                                   peak_memory(lambda: dequantize(ours()), x.nbytes), 2)))
    return rows


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=int, default=4096, help="row length K (the tensor is (n // K, K))")
    p.add_argument("--block", type=int, default=16, choices=[16, 32])
    p.add_argument("--profiles", nargs="+", default=["exact", "seed-fp32"], choices=["exact", "seed-fp32"])


register_benchmark("quantize", "ue5m3 block quantization (fast path, RNE) vs ml_dtypes float32 -> e2m1 astype",
                   bench_quantize, _arguments)
