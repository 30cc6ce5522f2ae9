"""Draw a seeded list of GEMM shapes for ``tools/cublas/sweep.py --shapes`` (issue 14).

The held-out acceptance sets (``vectors/provenance/h200-cublas/heldout*_shapes.txt``) were
drawn by category with a seeded generator; this script is that generator written down, so
that a training set can be drawn from the same kind of shapes without repeating any shape
of the given files:

* ``odd``: M and N odd, 1 to 1500; K 400 to 7000 (any parity);
* ``one-odd``: one of M, N odd, the other a multiple of 8, up to 2000; K a multiple of 8,
  500 to 9000;
* ``mult8``: M, N multiples of 8 up to 2400, K a multiple of 8 from 500 to 12000;
* ``gemv``: 1 x N x K or M x 1 x K, the other size a multiple of 8 from 500 to 7000, K a
  multiple of 8 up to 24000;
* ``tall``: one size a multiple of 8 from 8 to 96, the other a multiple of 8 up to 7500,
  K a multiple of 8 from 500 to 11000;
* ``8192``: one size 8192, the other a multiple of 8 up to 8192, K a multiple of 8 from
  1000 to 12000;
* ``long-k``: M, N multiples of 8 from 200 to 1000, K 8000 to 30000 (any parity);
* ``llm`` (not in the held-out mix): a transformer layer's GEMM, M tokens (1 to 8192,
  log-uniform, any value) and N, K two of :data:`MODEL_DIMS`, the hidden and MLP sizes of
  common models;
* ``k64-n4`` (not in the held-out mix): N = 4 (mod 8) from 12 to 2044, M from 1 to 4096,
  K a multiple of 64 from 640 to 16384: BF16 / FP16 shapes that run cutlass ``sm80``
  kernels with K a multiple of 64 (where FPS-CUB-7's slice unit of 64 differs from 8).

Sizes are drawn log-uniformly (``numpy.random.default_rng(seed)``), category by
category in the order of the mix (``--mix``, default :data:`MIX`); a shape already drawn
or listed in an ``--exclude`` file is drawn again.

    python3 -m tools.cublas.shapes --seed 20261204 --count 1000 \\
        --exclude vectors/provenance/h200-cublas/heldout4_shapes.txt --out shapes.txt
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

#: category -> share of the shapes (the held-out sets' 14 : 12 : 12 : 18 : 10 : 6 : 10)
MIX = {"odd": 14, "one-odd": 12, "mult8": 12, "gemv": 18, "tall": 10, "8192": 6, "long-k": 10}
#: categories outside the held-out mix (``--mix`` names them)
EXTRA = ("llm", "k64-n4")
#: hidden and MLP sizes of common transformer models (the ``llm`` category's N and K)
MODEL_DIMS = (768, 1024, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192, 11008, 12288, 13824, 14336, 16384)


def _log_uniform(rng: np.random.Generator, lo: int, hi: int, step: int = 1, parity: int | None = None) -> int:
    """A size in [lo, hi], log-uniform; a multiple of ``step``; odd where ``parity`` is 1."""
    while True:
        x = int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
        x = max(step, x // step * step) if step > 1 else x
        if parity == 1 and x % 2 == 0:
            x += 1
        if lo <= x <= hi or (step > 1 and x == step and lo <= step):
            return x


def draw(category: str, rng: np.random.Generator) -> tuple[int, int, int]:
    """One shape (M, N, K) of ``category`` (module docstring)."""
    u = _log_uniform
    if category == "odd":
        return u(rng, 1, 1500, parity=1), u(rng, 1, 1500, parity=1), u(rng, 400, 7000)
    if category == "one-odd":
        odd, even = u(rng, 1, 2000, parity=1), u(rng, 8, 2000, 8)
        k = u(rng, 500, 9000, 8)
        return (odd, even, k) if rng.integers(2) else (even, odd, k)
    if category == "mult8":
        return u(rng, 8, 2400, 8), u(rng, 8, 2400, 8), u(rng, 500, 12000, 8)
    if category == "gemv":
        other, k = u(rng, 500, 7000, 8), u(rng, 500, 24000, 8)
        return (1, other, k) if rng.integers(2) else (other, 1, k)
    if category == "tall":
        small, big = u(rng, 8, 96, 8), u(rng, 500, 7500, 8)
        k = u(rng, 500, 11000, 8)
        return (small, big, k) if rng.integers(2) else (big, small, k)
    if category == "8192":
        other, k = u(rng, 8, 8192, 8), u(rng, 1000, 12000, 8)
        return (8192, other, k) if rng.integers(2) else (other, 8192, k)
    if category == "long-k":
        return u(rng, 200, 1000, 8), u(rng, 200, 1000, 8), u(rng, 8000, 30000)
    if category == "k64-n4":
        return u(rng, 1, 4096), 8 * int(rng.integers(1, 256)) + 4, 64 * u(rng, 10, 256)
    if category == "llm":
        n, k = (int(x) for x in rng.choice(MODEL_DIMS, 2))
        return u(rng, 1, 8192), n, k
    raise ValueError(f"unknown category {category!r}; known: {', '.join(MIX)}")


def read_shapes(path: str) -> set[tuple[int, int, int]]:
    """The shapes of a ``--shapes`` file ('M N K' or 'MxNxK' per line, '#' comments)."""
    out = set()
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.replace("x", " ").split()
            if len(parts) != 3 or not all(p.isdigit() for p in parts):
                raise SystemExit(f"{path}:{n}: expected 'M N K', got {line!r}")
            out.add(tuple(int(p) for p in parts))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--count", type=int, required=True, help="number of shapes")
    p.add_argument("--exclude", nargs="*", default=[], metavar="FILE", help="shape files not to repeat")
    p.add_argument("--exclude-table", action="store_true",
                   help="nor any shape of fpspec's committed table (fpspec/cublas/h200_calls.json.gz)")
    p.add_argument("--mix", default=None, metavar="CAT=PARTS,...",
                   help="categories and their parts, e.g. 'llm=1' (default: the held-out sets' mix)")
    p.add_argument("--out", default="-", help="output file (default: stdout)")
    args = p.parse_args(argv)
    if args.count < 1:
        p.error("--count must be at least 1")
    rng = np.random.default_rng(args.seed)
    seen: set[tuple[int, int, int]] = set()
    for path in args.exclude:
        seen |= read_shapes(path)
    if args.exclude_table:
        from fpspec.cublas.h200 import observations_from_table
        seen |= {(o.m, o.n, o.k) for rows in observations_from_table().values() for o in rows}
    mix = dict(MIX)
    if args.mix:
        try:
            mix = {k: int(v) for k, v in (item.split("=") for item in args.mix.split(","))}
        except ValueError:
            p.error(f"--mix: expected CAT=PARTS,..., got {args.mix!r}")
        for category in mix:
            if category not in (*MIX, *EXTRA):
                p.error(f"--mix: unknown category {category!r}; known: {', '.join((*MIX, *EXTRA))}")
    total = sum(mix.values())
    shapes = []
    for category, share in mix.items():
        want = round(args.count * share / total) if category != list(mix)[-1] else args.count - len(shapes)
        for _ in range(want):
            while True:
                s = draw(category, rng)
                if s not in seen:
                    break
            seen.add(s)
            shapes.append(s)
    lines = [f"# {args.count} shapes drawn by tools/cublas/shapes.py --seed {args.seed} "
             f"({', '.join(f'{k} {v}' for k, v in mix.items())} parts), excluding "
             f"{', '.join(args.exclude) or 'nothing'}{' and the committed table' if args.exclude_table else ''}",
             "# M N K"] + [f"{m} {n} {k}" for m, n, k in shapes]
    text = "\n".join(lines) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
