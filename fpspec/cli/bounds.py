"""``fpspec bounds``: range bounds of the tensor-scale target T (FPS-BND-*, docs/bounds.rst)."""

from __future__ import annotations

import argparse
import json

from ..bounds import SCALE_FORMATS, RangeBounds, range_bounds
from .options import parse_target


def _headroom_value(b: RangeBounds) -> str:
    """U/T exactly and as a float ('960/7 = 137.14x'); a huge one as a float alone ('3.79779e+35x')."""
    h = float(b.headroom)
    return f"{b.headroom} = {h:.2f}x" if h < 1e6 else f"{h:.6g}x"


def _cmd_bounds(args: argparse.Namespace) -> int:
    b = range_bounds(args.scale_format, parse_target(args.target))
    if args.json:
        print(json.dumps(b.as_dict(), indent=1))
        return 0
    t = b.target
    print(f"scale format {b.scale_format}, target T = {t} ({float(t):g})")
    print(f"  max scale U           = {b.max_scale} ({float(b.max_scale):g})")
    print(f"  headroom U/T          = {_headroom_value(b)} "
          "(every block unsaturated iff T*rho <= U, rho = block amax / tensor amax)")
    if b.min_nonzero_exclusive:
        print(f"  nonzero scale iff rho > {b.min_nonzero_ratio} = {float(b.min_nonzero_ratio):.6g} "
              f"(s_min/2T; the tie rho = s_min/2T rounds to scale code 0)")
    else:
        print(f"  nonzero scale for every block ({b.scale_format} has no zero)")
    print(f"  full scale precision iff rho >= {b.min_normal_ratio} = {float(b.min_normal_ratio):.6g} "
          f"(2^emin / T)")
    dr = b.dynamic_range
    if dr is not None:
        print(f"  usable ratio span     = {float(dr):.6g}x")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bounds", help="range bounds of a block-scale format for a target T",
                       description="Headroom U/T, the smallest block-to-tensor amax ratio with a nonzero "
                                   "scale code, and the ratio below which scales are subnormal, exactly.")
    p.add_argument("--scale-format", required=True, choices=list(SCALE_FORMATS), metavar="NAME",
                   help=f"scale format: {', '.join(SCALE_FORMATS)}")
    p.add_argument("--target", default="448", metavar="T", help="target T (default 448): a positive binary32 value, e.g. 448, 2048, 1/2, 2^11")
    p.add_argument("--json", action="store_true",
                   help="JSON: scale_format, target, max_scale, headroom, min_nonzero_ratio, min_normal_ratio "
                        "(floats) and *_exact (fractions as strings)")
    p.set_defaults(func=_cmd_bounds)
