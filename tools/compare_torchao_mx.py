"""Run torchao's MXFP4 quantizer (``to_mx``) on a vector pack's mxfp4 sets and write its outputs as results.

Usage (torchao 0.18.0 importable, e.g. from a scratch venv made with
``python3 -m venv --system-site-packages V && V/bin/pip install torchao==0.18.0``)::

    V/bin/python -m tools.compare_torchao_mx vectors/v1 --out /tmp/tao-mx
    python3 -m fpspec check vectors/v1 /tmp/tao-mx --declare vectors/declarations/torchao-0.18.yaml

torchao is not a dependency of fpspec and none of its code is in this file.  For
each ``quantize`` set of scheme mxfp4 with RNE payloads the script picks the
torchao ``ScaleCalculationMode`` from the set's profile (``floor``, ``ceil``,
``even``, ``rceil`` or ``torchao-0.18-<mode>``; ``--mode`` forces one), calls
``torchao.prototype.mx_formats.mx_tensor.to_mx(x, torch.float4_e2m1fn_x2, 32,
scaling_mode=...)`` on each case, and writes: the E2M1 codes (unpacked from the
fp4x2 bytes, even column in the low nibble), the E8M0 scale bytes, decode_scale
1.0 and the dequantized values of torchao's own ``to_dtype`` (q * 2^(byte-127)).
Sets with ties-away payloads are skipped (torchao rounds ties to even only).

``--npy FILE`` quantizes one (M, K) float32 array instead and prints the scale
bytes and codes (``--save OUT.npz`` keeps them).  ``--device cuda`` runs torchao
on a GPU: torch's CUDA division by a Python scalar multiplies by the binary32
reciprocal, which changes RCEIL's amax/6 (see /work/coord/refs-notes.md).
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np

from tools.refs_pack import Case, pack_arguments, run_pack

MODES = ("floor", "ceil", "even", "rceil")


def mode_of(profile: str) -> str | None:
    """torchao scale mode of an mxfp4 profile name (None: not a torchao-style profile)."""
    name = profile.split("/")[-1]
    if name.startswith("torchao-0.18-"):
        name = name[len("torchao-0.18-"):]
    if name.endswith("-cuda"):  # the same call; the profile says which device's arithmetic
        name = name[:-len("-cuda")]
    return name if name in MODES else None


class TorchaoMX:
    """torchao 0.18 ``to_mx`` / ``to_dtype`` for MXFP4, on one device."""

    def __init__(self, device: str = "cpu"):
        warnings.filterwarnings("ignore")
        import torch
        from torchao.prototype.mx_formats.config import ScaleCalculationMode
        from torchao.prototype.mx_formats.kernels import unpack_uint4
        from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx

        self.torch, self.scm, self.unpack = torch, ScaleCalculationMode, unpack_uint4
        self.to_mx, self.to_dtype, self.device = to_mx, to_dtype, device

    def __call__(self, v: np.ndarray, mode: str) -> dict[str, np.ndarray]:
        torch = self.torch
        xt = torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)).to(self.device)
        scale, packed = self.to_mx(xt, torch.float4_e2m1fn_x2, 32, scaling_mode=self.scm(mode))
        raw = packed.view(torch.uint8)
        deq = self.to_dtype(raw, scale, torch.float4_e2m1fn_x2, 32, torch.float32)
        codes = self.unpack(raw.contiguous()).cpu().numpy().astype(np.uint8)
        return {"codes": codes, "scales": scale.view(torch.uint8).cpu().numpy().reshape(v.shape[0], -1),
                "decode_scale": np.float32(1.0), "dequant": deq.cpu().numpy().reshape(v.shape)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--npy", help="quantize this (M, K) float32 .npy instead of a pack")
    ap.add_argument("--save", help="with --npy: write scales/codes/dequant to this .npz")
    ap.add_argument("--mode", choices=MODES, help="force a torchao ScaleCalculationMode")
    ap.add_argument("--device", default="cpu", help="torch device (default cpu)")
    if not any(a.startswith("--npy") for a in (argv if argv is not None else sys.argv[1:])):
        pack_arguments(ap, "quantize-mxfp4-*")
    args = ap.parse_args(argv)
    ref = TorchaoMX(args.device)
    import torchao

    print(f"torchao {torchao.__version__}, torch {ref.torch.__version__}, device {args.device}")
    if args.npy:
        x = np.load(args.npy).astype(np.float32)
        out = ref(x.reshape(-1, x.shape[-1]), args.mode or "floor")
        print("scale bytes", out["scales"].tolist())
        print("codes", out["codes"].tolist())
        if args.save:
            np.savez(args.save, **{k: np.asarray(v) for k, v in out.items()})
        return 0

    def accept(p: dict) -> str | None:
        if p["scheme"] != "mxfp4":
            return "not mxfp4"
        if p["rounding"] != "rne":
            return f"payload rounding {p['rounding']} (torchao rounds E2M1 ties to even only)"
        if args.mode is None and mode_of(p["profile"]) is None:
            return f"profile {p['profile']} is not a torchao scale mode"
        return None

    def run_case(c: Case) -> dict[str, np.ndarray]:
        return ref(c.view, args.mode or mode_of(c.params["profile"]))

    return run_pack(args, accept, run_case)


if __name__ == "__main__":
    sys.exit(main())
