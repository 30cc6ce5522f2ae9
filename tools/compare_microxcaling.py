"""Run microsoft/microxcaling's Python MX quantizer on a vector pack's mxfp4 sets and write results.

Usage (microxcaling is not on the package index: fetch the repository yourself and
point the script at the folder that holds its ``mx`` package)::

    python3 -m tools.compare_microxcaling /tmp/microxcaling vectors/v1 --out /tmp/mx-res
    python3 -m fpspec check vectors/v1 /tmp/mx-res --declare vectors/declarations/microxcaling.yaml

None of microxcaling's code is in this file.  For each ``quantize`` set of scheme
mxfp4 (profile ``floor``, the OCP rule, or ``microxcaling``), each case is
quantized with ``mx.mx_ops._quantize_mx(x, 8, "fp4_e2m1",
shared_exp_method="max", axes=[-1], block_size=32, round=R)`` on CPU with the
pure-PyTorch path (``custom_cuda=False``, ``flush_fp32_subnorms=False``: the
defaults of ``mx.specs.MxSpecs``), where R is microxcaling's name of the set's
payload rounding: ``rne`` -> ``even``, ``rna`` -> ``nearest``, ``rtz`` -> ``floor``.

microxcaling returns the dequantized values only (q * 2^e).  The script takes
the scale exponent e from microxcaling's own ``mx.mx_ops._shared_exponents``
followed by the two steps ``_quantize_mx`` applies to it (subtract emax = 2, clamp
below at -127), writes byte e + 127, and recovers each code from the returned
value divided by 2^e (exact: a power of two), keeping the sign bit of the value
(microxcaling turns -0.0 into +0.0 and a negative value that rounds to zero into
-0.0).  It stops if a value divided by 2^e is not an E2M1 value, so a wrong
exponent cannot go unnoticed.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from tools.common import import_package
from tools.refs_pack import e2m1_codes_of_values, pack_arguments, run_pack

#: fpspec payload rounding -> microxcaling ``round`` argument.
ROUND = {"rne": "even", "rna": "nearest", "rtz": "floor"}


class Microxcaling:
    def __init__(self, root: str):
        import torch

        import_package(root, "mx")
        from mx import mx_ops

        self.torch, self.ops = torch, mx_ops

    def __call__(self, v: np.ndarray, rounding: str) -> dict[str, np.ndarray]:
        torch, ops = self.torch, self.ops
        a = torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32))
        out = ops._quantize_mx(a, 8, "fp4_e2m1", shared_exp_method="max", axes=[-1], block_size=32,
                               round=ROUND[rounding], flush_fp32_subnorms=False, custom_cuda=False).numpy()
        # the block exponent, as _quantize_mx derives it (emax of fp4_e2m1 is 2; scale_bits 8)
        blocks = a.reshape(v.shape[0], v.shape[1] // 32, 32)
        e = ops._shared_exponents(blocks, method="max", axes=[-1], ebits=0) - 2
        e = torch.clamp(e, min=-127).numpy().reshape(v.shape[0], -1)
        if np.isnan(e).any() or (e > 127).any():
            raise SystemExit("a block exponent above 127 (NaN scale): non-finite input is not supported")
        e = e.astype(np.int64)
        q = out.astype(np.float64).reshape(v.shape[0], -1, 32) / np.ldexp(1.0, e)[..., None]
        codes = e2m1_codes_of_values(q.reshape(v.shape))  # the sign of out survives /2^e, -0.0 included
        return {"codes": codes, "scales": (e + 127).astype(np.uint8), "decode_scale": np.float32(1.0),
                "dequant": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("microxcaling", help="folder holding microxcaling's mx package")
    pack_arguments(ap, "quantize-mxfp4-*")
    args = ap.parse_args(argv)
    ref = Microxcaling(args.microxcaling)
    print(f"microxcaling from {args.microxcaling}, torch {ref.torch.__version__}")

    def accept(p: dict) -> str | None:
        if p["scheme"] != "mxfp4":
            return "not mxfp4"
        if p["profile"] not in ("floor", "microxcaling"):
            return f"profile {p['profile']}: microxcaling takes floor(log2 amax) - 2 only"
        if p["rounding"] not in ROUND:
            return f"payload rounding {p['rounding']} has no microxcaling equivalent"
        return None

    return run_pack(args, accept, lambda c: ref(c.view, c.params["rounding"]))


if __name__ == "__main__":
    sys.exit(main())
