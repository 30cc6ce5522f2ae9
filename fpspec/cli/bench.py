"""``fpspec bench NAME``: throughput benchmarks against a baseline measured in the same run.

Every benchmark is a function registered in :data:`BENCHMARKS` under its CLI name.
It takes the parsed arguments and returns a list of result rows, each a dict with
at least ``case``, ``elements``, ``fpspec_s``, ``baseline``, ``baseline_s`` and
``ratio`` (baseline time / fpspec time: above 1 means fpspec is faster).  To add
a benchmark, write ``def bench_x(args) -> list[dict]`` in your own module and
register it with :func:`register_benchmark` (optionally with extra argparse
options) at import time, and add your module's name to :data:`BENCHMARK_MODULES`;
``fpspec bench x`` then runs it and prints the rows as a table or JSON.

Timings are wall-clock, best of ``--repeat`` runs, after one warm-up call (which
also absorbs Numba compilation; its time is reported separately as
``first_call_s``).  Performance is never asserted by tests (COMMON.md).
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
from dataclasses import dataclass, field
from typing import Callable

import ml_dtypes
import numpy as np

from ..convert import encode
from ..fast.parallel import set_threads

__all__ = ["BENCHMARKS", "BENCHMARK_MODULES", "Benchmark", "register_benchmark", "best_time",
           "interleaved_times", "result_row"]


@dataclass(frozen=True)
class Benchmark:
    """One ``fpspec bench NAME`` entry."""

    name: str
    help: str
    run: Callable[[argparse.Namespace], list[dict]]
    #: adds benchmark-specific options to its subparser
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    extra: dict = field(default_factory=dict)


#: Registered benchmarks by CLI name.
BENCHMARKS: dict[str, Benchmark] = {}

#: Modules that call :func:`register_benchmark` when imported (each command module holds
#: the benchmark of its own command); they are imported when the ``bench`` command is registered.
BENCHMARK_MODULES: list[str] = [
    "fpspec.cli.quantize",
    "fpspec.cli.gemm",
]


def register_benchmark(name: str, help: str, run: Callable[[argparse.Namespace], list[dict]],
                       add_arguments: Callable[[argparse.ArgumentParser], None] | None = None) -> None:
    """Make ``fpspec bench NAME`` run ``run(args)``."""
    if name in BENCHMARKS:
        raise ValueError(f"benchmark {name!r} registered twice")
    BENCHMARKS[name] = Benchmark(name, help, run, add_arguments)


def best_time(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(first call seconds, best of ``repeat`` further calls seconds)."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return first, best


def interleaved_times(ours: Callable[[], object], theirs: Callable[[], object],
                      repeat: int) -> tuple[float, float, float]:
    """(first call of ours, best of ours, best of theirs), timing the two alternately so that
    both see the same machine load; ``theirs`` gets a warm-up call too."""
    t0 = time.perf_counter()
    ours()
    first = time.perf_counter() - t0
    theirs()
    best_ours = best_theirs = float("inf")
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        ours()
        best_ours = min(best_ours, time.perf_counter() - t0)
        t0 = time.perf_counter()
        theirs()
        best_theirs = min(best_theirs, time.perf_counter() - t0)
    return first, best_ours, best_theirs


def result_row(case: str, elements: int, fpspec_s: float, baseline: str, baseline_s: float,
               first_call_s: float, **extra: object) -> dict:
    """A result row with elements/s for both sides and the ratio (> 1: fpspec faster)."""
    return {
        "case": case, "elements": elements,
        "fpspec_s": fpspec_s, "fpspec_elem_per_s": elements / fpspec_s,
        "baseline": baseline, "baseline_s": baseline_s, "baseline_elem_per_s": elements / baseline_s,
        "ratio": baseline_s / fpspec_s, "first_call_s": first_call_s, **extra,
    }


# ------------------------------------------------------------------ bench encode
def _encode_inputs(n: int, seed: int) -> np.ndarray:
    """float32 values spread over the e2m1/e4m3 ranges, with signs, zeros and some specials."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * rng.choice([0.01, 1.0, 30.0, 300.0], n)).astype(np.float32)
    return x


def bench_encode(args: argparse.Namespace) -> list[dict]:
    """float32 -> e2m1 and e4m3 under RNE: fpspec.encode vs ml_dtypes astype."""
    x = _encode_inputs(args.n, args.seed)
    targets = {"e2m1": ml_dtypes.float4_e2m1fn, "e4m3": ml_dtypes.float8_e4m3fn}
    rows = []
    for name in args.formats:
        dtype = targets[name]
        first, ours, theirs = interleaved_times(lambda: encode(x, name, "rne"),
                                                lambda: x.astype(dtype), args.repeat)
        # Sanity: same codes (NaN-free input with the default policies, where ml_dtypes agrees).
        same = bool(np.array_equal(encode(x, name, "rne"), x.astype(dtype).view(np.uint8)))
        rows.append(result_row(f"float32->{name} rne", x.size, ours, f"ml_dtypes {ml_dtypes.__version__} astype", theirs,
                               first, codes_equal=same))
    return rows


def _encode_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--formats", nargs="+", default=["e2m1", "e4m3"], choices=["e2m1", "e4m3"])


register_benchmark("encode", "float32 -> e2m1 / e4m3 under RNE vs ml_dtypes astype", bench_encode,
                   _encode_arguments)


# ---------------------------------------------------------------------- the CLI
def _ratio_text(ratio: float) -> str:
    """A ratio for people: 2.71 above 1, 1/3.7 or 1/28 below (0.04 would hide the goal's
    scale; one decimal below 1/20, where a goal of 1/4 is told from 1/3.7)."""
    if ratio >= 1:
        return f"{ratio:.2f}"
    return f"1/{1 / ratio:.1f}" if 1 / ratio < 20 else f"1/{1 / ratio:.0f}"


#: Optional row keys printed after the fixed columns, as ``key=value`` (a benchmark's extras).
NOTE_KEYS = ("path", "partials", "fallback_share", "resum_share", "of_element_passes", "dequantize_s", "goal",
             "meets_goal")


def _note(key: str, value: object) -> str:
    if isinstance(value, float):
        return f"{key}={value:.3g}"
    return f"{key}={value}"


def _print_rows(rows: list[dict], nthreads: int) -> None:
    print(f"threads: {nthreads}")
    print(f"{'case':28} {'elements':>10} {'fpspec Melem/s':>15} {'baseline':>18} "
          f"{'Melem/s':>9} {'ratio':>7} {'first call s':>12}")
    for r in rows:
        notes = " ".join(_note(k, r[k]) for k in NOTE_KEYS if k in r)
        print(f"{r['case']:28} {r['elements']:>10} {r['fpspec_elem_per_s'] / 1e6:>15.1f} "
              f"{r['baseline']:>18} {r['baseline_elem_per_s'] / 1e6:>9.1f} {_ratio_text(r['ratio']):>7} "
              f"{r['first_call_s']:>12.3f}  {notes}".rstrip())


def _cmd_bench(args: argparse.Namespace) -> int:
    nthreads = set_threads(args.threads)
    if args.device is not None:  # the torch twin on a torch device (fpspec/torch/bench.py)
        from ..torch.bench import TORCH_BENCHMARKS

        rows = TORCH_BENCHMARKS[args.bench_name](args)
    else:
        rows = BENCHMARKS[args.bench_name].run(args)
    if args.json:
        print(json.dumps({"benchmark": args.bench_name, "threads": nthreads, "device": args.device or "numpy",
                          "results": rows}, indent=2))
    else:
        _print_rows(rows, nthreads)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="throughput benchmarks with a same-run baseline and ratio",
                       description="Run a benchmark; each prints fpspec's elements/s beside a baseline "
                                   "measured in the same run, and the ratio (baseline time / fpspec time).")
    for module in BENCHMARK_MODULES:
        importlib.import_module(module)
    bsub = p.add_subparsers(dest="bench_name", metavar="NAME")
    bsub.required = True
    for bench in BENCHMARKS.values():
        bp = bsub.add_parser(bench.name, help=bench.help, description=bench.help)
        bp.add_argument("-n", type=int, default=1 << 24, help="number of elements (default 16M)")
        bp.add_argument("--repeat", type=int, default=5, help="timed runs after the warm-up; best is kept")
        bp.add_argument("--seed", type=int, default=0)
        bp.add_argument("--json", action="store_true", help="machine-readable output")
        bp.add_argument("--threads", type=int, default=None,
                        help="fpspec worker threads (default: every available CPU; the baseline "
                             "runs as it does, e.g. ml_dtypes astype on one thread)")
        bp.add_argument("--device", default=None,
                        help="time the torch twin on this torch device (cuda, cpu) instead of the fast path on "
                             "numpy; anchors on the same device (fpspec/torch/bench.py)")
        if bench.add_arguments is not None:
            bench.add_arguments(bp)
        bp.set_defaults(func=_cmd_bench)
