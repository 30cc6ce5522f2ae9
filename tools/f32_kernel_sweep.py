"""The float32 RNE encode kernel against the general kernel on every float32 input (FPS-RND-14).

Usage (from the repository root)::

    python3 -m tools.f32_kernel_sweep [--formats e2m1 e4m3 e5m2] [--json]

``encode_fast`` sends float32 input under RNE into e2m1, e4m3 and e5m2 to the branch-free
kernel ``_encode_range_rne_f32``; every other input goes through the general kernel, which
is proven equal to the exact spec exhaustively on FP16/BF16 and by sweeps.  This runs all
2^32 float32 bit patterns through both (the general kernel is fed the same values as
float64: exact, NaN signs kept) for two policy pairs per format, in slices of 2^28, and
prints progress and one line per pair.  The test run holds a 524288-input grid of the
same comparison (``tests/test_rounding_f32_kernel.py``); this is the full domain, about
80 s per pair on 2 cores.  Exit status 0 when nothing differs; on a mismatch the first
ones are printed with their bits.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from fpspec.choices import Policies
from fpspec.fast.rounding import encode_fast

#: Two policy pairs per format: every NaN handling the kernel folds into selects, both overflows.
CASES = {
    "e2m1": [Policies(overflow="sat", nan="zero"), Policies(overflow="sat", nan="flipped-zero")],
    "e4m3": [Policies(overflow="sat", nan="nan"), Policies(overflow="nonfinite", nan="zero")],
    "e5m2": [Policies(overflow="nonfinite", nan="nan"), Policies(overflow="nonfinite", nan="max")],
}
SLICE_BITS = 28


def sweep(fmt: str, pol: Policies, progress: bool = False, slices: list[int] | None = None,
          slice_bits: int = SLICE_BITS) -> dict:
    """The float32 inputs of ``slices`` (slice s holds bit patterns s 2^slice_bits up to
    the next slice; default: all of them, every float32) through both kernels; the
    mismatch count and the first few."""
    t0 = time.perf_counter()
    todo = list(range(1 << (32 - slice_bits))) if slices is None else slices
    mismatches, first = 0, []
    for done, s in enumerate(todo):
        bits = (np.arange(1 << slice_bits, dtype=np.uint64) + (s << slice_bits)).astype(np.uint32)
        x = bits.view(np.float32)
        got = encode_fast(x, fmt, "rne", policies=pol)
        with np.errstate(invalid="ignore"):
            want = encode_fast(x.astype(np.float64), fmt, "rne", policies=pol)
        bad = np.flatnonzero(got != want)
        mismatches += int(bad.size)
        first += [(f"0x{int(bits[i]):08X}", int(got[i]), int(want[i])) for i in bad[:5 - len(first)]]
        if progress:
            print(f"\r  {fmt} {pol.overflow.value}/{pol.nan.value}: slice {done + 1}/{len(todo)}", end="",
                  file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return {"format": fmt, "overflow": pol.overflow.value, "nan": pol.nan.value, "inputs": len(todo) << slice_bits,
            "mismatches": mismatches, "first": first, "wall_s": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--formats", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--json", action="store_true", help="one JSON object with every pair's result")
    args = ap.parse_args(argv)
    rows = [sweep(f, pol, progress=not args.json) for f in args.formats for pol in CASES[f]]
    if args.json:
        print(json.dumps({"sweep": "f32-kernel", "results": rows}, indent=2))
    else:
        for r in rows:
            print(f"{r['format']} overflow={r['overflow']} nan={r['nan']}: {r['inputs']} inputs, "
                  f"{r['mismatches']} mismatches, {r['wall_s']} s")
            for bits, got, want in r["first"]:
                print(f"    input bits {bits}: float32 kernel 0x{got:02X}, general kernel 0x{want:02X}")
    return 1 if any(r["mismatches"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
