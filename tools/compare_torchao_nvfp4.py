"""Compare fpspec's nvfp4/torchao-0.18 profile with torchao 0.18's nvfp4_quantize, bit for bit.

Usage (from the repository root; torchao 0.18.0 importable, e.g. installed with
``pip install --no-deps --target /tmp/taolib torchao==0.18.0`` and
``PYTHONPATH=/tmp/taolib``)::

    python3 -m tools.compare_torchao_nvfp4 [--seed 0] [--rows 256]

torchao is not a dependency of fpspec.  The script quantizes random and edge-case
binary32 tensors with torchao's two-level NVFP4 (``per_tensor_amax_to_scale`` of
the tensor amax, then ``nvfp4_quantize``) and with ``quantize(x, "nvfp4",
profile="torchao-0.18")``, and counts differing E2M1 codes and scale bytes; it
also reports how many blocks of each case torchao 0.18 and TE (``te-fp32``)
quantize differently.  Exit status 0 when torchao and fpspec agree everywhere.

With ``--pack PACK --out RESULTS`` it instead runs torchao on the 1x16 rowwise
``quantize`` sets of scheme nvfp4 of a vector pack (``--select`` globs, default
``quantize-nvfp4-*``; torchao has no 16x16 tiles, columnwise view or Hadamard
transform, so those sets are skipped) and writes torchao's outputs as results for
``python3 -m fpspec check PACK RESULTS --declare
vectors/declarations/torchao-0.18.yaml``: per case ``NVFP4Tensor.to_nvfp4(x,
per_tensor_scale=per_tensor_amax_to_scale(g))`` with the set's amax g (the
measured max |x| where the set gives +0), its codes and scale bytes, decode_scale
= the per-tensor scale, and ``NVFP4Tensor.dequantize(torch.float32)``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from fpspec.errors import FpspecError
from fpspec.quantization import quantize
from tools.compare_te_nvfp4 import edge_cases
from tools.refs_pack import fp4x2_codes, run_pack


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--pack", help="run on this vector pack's nvfp4 quantize sets instead")
    ap.add_argument("--out", help="with --pack: results folder")
    ap.add_argument("--select", default="quantize-nvfp4-*", help="with --pack: set-name globs")
    ap.add_argument("--device", default="cpu", help="with --pack: torch device (default cpu; cuda on a GPU)")
    args = ap.parse_args(argv)
    if args.pack:
        if not args.out:
            ap.error("--pack needs --out")
        return run_on_pack(args)
    import torch
    from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale

    rng = np.random.default_rng(args.seed)
    failures = 0
    total = 0
    for name, x in edge_cases(rng, args.rows):
        if not np.any(x):
            print(f"skip {name:28}: torchao divides 0/0 for a zero tensor amax (fpspec refuses it)")
            continue
        xt = torch.from_numpy(x.copy())
        pts = per_tensor_amax_to_scale(xt.abs().max())
        scales, packed = nvfp4_quantize(xt, 16, pts)
        codes = fp4x2_codes(packed)
        sbytes = scales.view(torch.uint8).numpy().reshape(x.shape[0], -1)
        try:
            mine = quantize(x, "nvfp4", profile="torchao-0.18")
        except FpspecError as exc:
            print(f"skip {name:28}: fpspec refuses ({exc}); torchao gives scale bytes "
                  f"{sorted(set(scales.view(torch.uint8).numpy().ravel().tolist()))[:4]}...")
            continue
        te = quantize(x, "nvfp4", profile="te-fp32")
        dc = int(np.sum(codes != mine.codes))
        ds = int(np.sum(sbytes != mine.scales))
        blocks_te = int(np.sum(np.any((mine.codes != te.codes).reshape(x.shape[0], -1, 16), axis=2)
                               | (mine.scales != te.scales)))
        total += codes.size
        status = "OK " if dc == ds == 0 else "DIFF"
        print(f"{status} {name:28}: codes {dc}/{codes.size}, scales {ds}/{sbytes.size}; "
              f"blocks where torchao-0.18 != te-fp32: {blocks_te}/{sbytes.size}")
        failures += (dc + ds) > 0
    print(f"{'all match' if failures == 0 else f'{failures} mismatching cases'}; {total} codes compared")
    return 0 if failures == 0 else 1


def run_on_pack(args: argparse.Namespace) -> int:
    """torchao 0.18's NVFP4Tensor on a pack's nvfp4 sets, written as fpspec results."""
    import warnings

    warnings.filterwarnings("ignore")
    import torch
    import torchao
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale

    print(f"torchao {torchao.__version__}, torch {torch.__version__}, device {args.device}")

    def accept(p: dict) -> str | None:
        if p["scheme"] != "nvfp4":
            return "not nvfp4"
        if p["tile"] != "1xB" or p["columnwise"] or p["rht"]:
            return "torchao 0.18 quantizes 1x16 rowwise blocks only"
        if p["rounding"] != "rne":
            return f"payload rounding {p['rounding']} (torchao rounds ties to even)"
        if p["target"] != 448.0:
            return f"target {p['target']} (torchao's per-tensor scale maps the amax to 448 * 6)"
        return None

    def run_case(c) -> dict:
        x = torch.from_numpy(c.view.copy()).to(args.device)
        pts = per_tensor_amax_to_scale(torch.tensor(c.given_amax, dtype=torch.float32, device=args.device))
        t = NVFP4Tensor.to_nvfp4(x, 16, per_tensor_scale=pts)
        return {"codes": fp4x2_codes(t.qdata.view(torch.uint8).cpu()),
                "scales": t.scale.view(torch.uint8).cpu().numpy().reshape(x.shape[0], -1),
                "decode_scale": np.float32(pts.item()),
                "dequant": t.dequantize(torch.float32).cpu().numpy()}

    return run_pack(args, accept, run_case)


if __name__ == "__main__":
    sys.exit(main())
