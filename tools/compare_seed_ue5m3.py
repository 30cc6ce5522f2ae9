"""Run the seed's portable UE5M3 reference (MrHuff/ue5m3-fp4 ``formats.py``) on a pack's ue5m3 sets.

Usage (the seed is not on the package index: get ``src/ue5m3_fp4/formats.py``
from the repository yourself; it needs only torch)::

    python3 -m tools.compare_seed_ue5m3 /tmp/seed/formats.py vectors/v1 --out /tmp/seed-res
    python3 -m fpspec check vectors/v1 /tmp/seed-res --declare vectors/declarations/seed-ue5m3.yaml

None of the seed's code is in this file.  For each ``quantize`` set of scheme
ue5m3 with scale format ue5m3 (``--select`` globs, default
``quantize-ue5m3-seed-*``), each case goes through the seed's
``quantize_dequantize_blocks_with_metadata(x, block_size=B, scale_format=UE5M3,
scale_target=T, rounding=R, tensor_reference=g, two_dimensional=(tile 16x16))``
(X^T for columnwise sets; g the set's amax, None where the set gives +0 so that
the seed measures it).  The E2M1 payload values are taken where the seed rounds
them (its ``round_to_format`` call with format E2M1, wrapped to record the
result and, for ``sr-midpoint`` sets, to hand it the pack's random bytes through
its own ``random_bits`` argument).  Outputs: codes of those payload values (sign
bit kept), scale bytes of the returned ``block_scale_codes`` values,
decode_scale = torch.reciprocal(global_encode_multiplier) (as the seed forms
its decode multiplier) and the dequantized values in one of two orders:

* ``portable``: the seed portable reference's own return value,
  payload * (scale * gd) (fpspec profile ``ue5m3/seed-portable``);
* ``kernel``: the order of the seed's Triton kernel
  (``backends/triton/quantization.py``: ``output = payload * scale`` then
  ``mul_rn(output, global_decode)``), computed here from the seed's payloads and
  scales: fp32(fp32(payload * scale) * gd) (fpspec profile ``ue5m3/seed-fp32``).

By default (``--dequant auto``) each set gets the order of its profile: ``portable``
for ``seed-portable`` sets, ``kernel`` for the others; ``--dequant portable`` or
``kernel`` forces one order for every set.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from tools.common import load_file
from tools.refs_pack import Case, e2m1_codes_of_values, pack_arguments, run_pack, scale_codes_of_values

ROUND = {"rne": "ties_to_even", "sr-midpoint": "stochastic_8bit_midpoint"}


def load_seed(path: str):
    return load_file(path, "seed_ue5m3_formats")  # registered: dataclasses(slots=True) looks it up by name


class SeedPortable:
    def __init__(self, path: str, dequant: str):
        import torch

        self.torch, self.mod, self.dequant = torch, load_seed(path), dequant
        self.payload = None
        self.rbits = None
        original = self.mod.round_to_format

        def recording(tensor, format, **kw):  # noqa: A002 - the seed's own argument name
            if format is self.mod.E2M1 and self.rbits is not None and \
                    self.mod.normalize_rounding(kw.get("rounding", "tte")) is \
                    self.mod.RoundingMode.STOCHASTIC_8BIT_MIDPOINT:
                kw["random_bits"] = self.rbits
            out = original(tensor, format, **kw)
            if format is self.mod.E2M1:
                self.payload = out
            return out

        self.mod.round_to_format = recording  # the seed calls it through its module globals

    def __call__(self, c: Case) -> dict[str, np.ndarray]:
        torch, mod, p = self.torch, self.mod, c.params
        order = self.dequant if self.dequant != "auto" else \
            ("portable" if p["profile"] == "seed-portable" else "kernel")
        v = torch.from_numpy(c.view.copy())
        self.rbits = None if c.r is None else torch.from_numpy(c.r.astype(np.int32))
        self.payload = None
        deq, meta = mod.quantize_dequantize_blocks_with_metadata(
            v, block_size=p["block"], scale_format=mod.UE5M3, scale_target=float(p["target"]),
            rounding=ROUND[p["rounding"]], tensor_reference=None if c.amax == 0 else float(c.amax),
            two_dimensional=p["tile"] == "BxB")
        assert self.payload is not None, "the seed did not round an E2M1 payload"
        ge = meta.global_encode_multiplier.to(torch.float32)
        gd = ge.reciprocal()
        scale_vals = meta.block_scale_codes
        if order == "kernel":
            b = p["block"]
            s = scale_vals.repeat_interleave(b, dim=-1)
            if p["tile"] == "BxB":
                s = s.repeat_interleave(b, dim=0)
            deq = (self.payload * s) * gd
        return {"codes": e2m1_codes_of_values(self.payload.numpy()),
                "scales": scale_codes_of_values(scale_vals.numpy(), "ue5m3"),
                "decode_scale": np.float32(gd.item()), "dequant": deq.numpy()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("formats_py", help="path to the seed's src/ue5m3_fp4/formats.py")
    pack_arguments(ap, "quantize-ue5m3-seed-*")
    ap.add_argument("--dequant", choices=("auto", "portable", "kernel"), default="auto",
                    help="dequantization order written (default auto: portable for seed-portable sets, "
                         "the kernel's for the others)")
    args = ap.parse_args(argv)
    ref = SeedPortable(args.formats_py, args.dequant)
    print(f"seed portable reference {args.formats_py}, torch {ref.torch.__version__}, dequant {args.dequant}")

    def accept(p: dict) -> str | None:
        if p["scheme"] != "ue5m3" or p["scale_format"] != "ue5m3":
            return "the seed's reference knows UE5M3 (max 61440) scales only"
        if p["rounding"] not in ROUND:
            return f"payload rounding {p['rounding']} is not one of the seed's"
        if not p["zero_scale_rule"]:
            return "the seed always applies the zero-scale-to-one rule"
        return None

    return run_pack(args, accept, ref)


if __name__ == "__main__":
    sys.exit(main())
