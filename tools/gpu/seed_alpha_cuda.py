"""Check fpspec's seed alpha orders against torch on a GPU (FPS-GEMM-8; run on a CUDA machine).

The seed (MrHuff/ue5m3-fp4, ``_encoded_global_alpha``) computes
``(amax_a * amax_b).to(torch.float32) / ((T_a * 6.0) * (T_b * 6.0))`` with float32 CUDA
tensors and a Python-float denominator.  fpspec models it as ``alpha_rounding=
"fp32-reciprocal"`` (torch's CUDA kernel multiplies by the FP32 reciprocal of a CPU
scalar) and the CPU result as ``"fp32-divide"``.  This script evaluates the expression
on random amax pairs and targets on CUDA and on the CPU and compares the bits::

    python3 -m tools.gpu.seed_alpha_cuda --pairs 100000

Exit status 0 when CUDA equals fp32-reciprocal and the CPU equals fp32-divide on every
pair; 1 otherwise (the first mismatches are printed).
"""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction

import numpy as np


def main(argv: list[str] | None = None) -> int:
    import torch

    from fpspec.exact.accumulate import Operand, alpha_exact
    from fpspec.named_models import get_model

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=2026)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("seed_alpha_cuda: no CUDA device", file=sys.stderr)
        return 2
    rng = np.random.default_rng(args.seed)
    amax = (rng.random((args.pairs, 2)) * 10.0 ** rng.uniform(-4, 4, (args.pairs, 2))).astype(np.float32)
    targets = rng.choice(np.array([448.0, 2048.0, 61440.0, 1.5, 100.25, 6.0]), size=(args.pairs, 2))
    models = {name: get_model("seed-probe-matched", alpha_rounding=name) for name in ("fp32-reciprocal", "fp32-divide")}
    bad = {"cuda": 0, "cpu": 0}
    for i in range(args.pairs):
        a, b = (torch.tensor([float(x)], dtype=torch.float32) for x in amax[i])
        den = (float(targets[i, 0]) * 6.0) * (float(targets[i, 1]) * 6.0)
        got = {"cuda": ((a.cuda() * b.cuda()).to(torch.float32) / den).cpu().numpy()[0],
               "cpu": ((a * b).to(torch.float32) / den).numpy()[0]}
        ops = [Operand(values=[], exponents=[], amax=Fraction(float(amax[i, j])), target=Fraction(float(targets[i, j])),
                       decode_scale=Fraction(1), payload_max=Fraction(6)) for j in range(2)]
        for where, name in (("cuda", "fp32-reciprocal"), ("cpu", "fp32-divide")):
            want = np.float32(float(alpha_exact(ops[0], ops[1], models[name])))
            if want.view(np.uint32) != got[where].view(np.uint32):
                bad[where] += 1
                if bad[where] <= 5:
                    print(f"{where}: amax {amax[i].tolist()} T {targets[i].tolist()}: torch "
                          f"{got[where].view(np.uint32):#010x}, fpspec {name} {want.view(np.uint32):#010x}")
    print(f"{args.pairs} pairs: CUDA vs fp32-reciprocal {args.pairs - bad['cuda']} equal; "
          f"CPU vs fp32-divide {args.pairs - bad['cpu']} equal")
    return 0 if not any(bad.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
