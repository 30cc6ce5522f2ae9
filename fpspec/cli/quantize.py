"""``fpspec quantize`` and ``fpspec dequantize`` (FPS-BLK-*, docs/scheme-*.rst)."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import FpspecError
from ..io import load_npy, save_npy
from ..quantization import dequantize, quantize
from ..quantized import QuantizedTensor
from ..schemes import PROFILES, SCHEMES


def _atomic_npz(qt: QuantizedTensor, out: str, dequant: np.ndarray) -> None:
    """Write OUT.npz only once everything has succeeded (nothing is left behind on error)."""
    parent = Path(out).parent
    fd, tmp = tempfile.mkstemp(suffix=".npz", dir=parent if str(parent) else ".")
    os.close(fd)
    try:
        qt.to_npz(tmp, dequant=dequant)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _number_or_none(text: str | None, flag: str) -> float | None:
    """A numeric option's value, or None when it was not given."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise FpspecError(f"{flag} must be a number, got {text!r}") from None


def _cmd_quantize(args: argparse.Namespace) -> int:
    x = load_npy(args.input)
    rbits = load_npy(args.rbits) if args.rbits else None
    if rbits is not None and rbits.dtype != np.uint8:
        raise FpspecError(f"{args.rbits}: random bits must be uint8, got {rbits.dtype}")
    target = _number_or_none(args.target, "--target")
    amax = _number_or_none(args.amax, "--amax")
    zr = None if args.zero_scale_rule is None else args.zero_scale_rule == "on"
    tile = args.tile
    qt = quantize(x, args.scheme, profile=args.profile, block=args.block, tile=tile, target=target,
                  amax=amax, rounding=args.rounding, rbits=rbits, columnwise=args.columnwise, rht=args.rht,
                  scale_format=args.scale_format, zero_scale_rule=zr, pad=args.pad, impl=args.impl)
    _atomic_npz(qt, args.out, dequantize(qt))
    return 0


def _cmd_dequantize(args: argparse.Namespace) -> int:
    qt = QuantizedTensor.from_npz(args.input)
    save_npy(args.out, dequantize(qt))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    profiles = "; ".join(f"{s}: {', '.join(n for (s2, n) in PROFILES if s2 == s)} (default {d})"
                         for s, d in SCHEMES.items())
    p = sub.add_parser("quantize", help="block-quantize a float .npy tensor to E2M1 codes and block scales",
                       description="Block-quantize IN.npy (float, shape (M, K)) under a scheme and profile. "
                                   "OUT.npz holds codes (uint8, one E2M1 code per element of the quantized "
                                   "view), scales (uint8, one per block, row-major block order), "
                                   "encode_scale, decode_scale, amax (float32), dequant (float32) and meta.")
    p.add_argument("input", metavar="IN.npy")
    p.add_argument("--scheme", required=True, choices=list(SCHEMES))
    p.add_argument("--profile", metavar="NAME", help=f"arithmetic profile; {profiles}")
    p.add_argument("--block", type=int, choices=[16, 32], help="block length B (default 16; 32 for mxfp4)")
    p.add_argument("--tile", choices=["1xB", "BxB"], default="1xB", help="1xB blocks along K, or BxB tiles")
    p.add_argument("--target", metavar="T", help="target T (default 448)")
    p.add_argument("--amax", metavar="A", help="a given (held) tensor amax; default: measured")
    p.add_argument("--rounding", default="rne", help="payload rounding: rne, sr (8-bit midpoint), rna, ...")
    p.add_argument("--rbits", metavar="R.npy", help="uint8 random bytes, one per element of the quantized view")
    p.add_argument("--columnwise", action="store_true", help="quantize X^T (the backward-GEMM layout)")
    p.add_argument("--rht", action="store_true", help="16-point random Hadamard transform along K first")
    p.add_argument("--scale-format", metavar="NAME", help="scale format (ue5m3 scheme: ue5m3 or ue5m3fnu)")
    p.add_argument("--zero-scale-rule", choices=["on", "off"], help="zero-scale-to-one rule (default: profile's)")
    p.add_argument("--pad", action="store_true", help="zero-pad to whole blocks instead of refusing")
    p.add_argument("--impl", choices=["fast", "exact"], default="fast", help=argparse.SUPPRESS)
    p.add_argument("--out", required=True, metavar="OUT.npz")
    p.set_defaults(func=_cmd_quantize)

    p = sub.add_parser("dequantize", help="dequantize an OUT.npz of fpspec quantize to float32",
                       description="Recompute the float32 values of a quantized tensor with its profile's "
                                   "dequantization formula (shape of codes: the quantized view).")
    p.add_argument("input", metavar="OUT.npz")
    p.add_argument("--out", required=True, metavar="X.npy")
    p.set_defaults(func=_cmd_dequantize)
