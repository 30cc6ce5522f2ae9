"""``fpspec formats``, ``codebook``, ``encode``, ``decode`` (FPS-CLI-1)."""

from __future__ import annotations

import argparse
import json
import math
from fractions import Fraction

from ..choices import DEFAULT_SR_BITS, NanPolicy, NegativePolicy, OverflowPolicy, RoundingMode, ZeroPolicy
from ..choices import default_policies
from ..convert import decode, encode
from ..errors import FpspecError
from ..formats import FORMATS, CodeKind, FloatFormat, get_format
from ..io import check_output, load_npy, save_npy
from .options import add_alias, require


def _json_value(v: Fraction | float | None) -> float | str | None:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return float(v)


def codebook(fmt: FloatFormat) -> dict:
    """The codebook of a format of at most 16 bits as a JSON-ready dict."""
    if fmt.bits > 16:
        raise FpspecError(f"{fmt.name} has 2^{fmt.bits} codes; codebook lists formats of at most 16 bits")
    codes = []
    for c in range(fmt.num_codes):
        v = fmt.decode_exact(c)
        kind = fmt.kind(c)
        if kind is CodeKind.ZERO and fmt.signed and c & fmt.sign_mask:
            value: float | str | None = -0.0
        else:
            value = _json_value(v)
        exact = str(v) if isinstance(v, Fraction) else value
        codes.append({"code": c, "bits": format(c, f"0{fmt.bits}b"), "value": value,
                      "exact": exact, "kind": kind.value})
    return {
        "name": fmt.name,
        "description": fmt.description,
        "bits": fmt.bits, "exp_bits": fmt.exp_bits, "man_bits": fmt.man_bits, "bias": fmt.bias,
        "signed": fmt.signed, "subnormals": fmt.subnormals, "specials": fmt.specials.value,
        "max_finite": float(fmt.max_finite),
        "min_normal": float(fmt.min_normal),
        "min_subnormal": _json_value(fmt.min_subnormal),
        "codes": codes,
    }


def _cmd_formats(args: argparse.Namespace) -> int:
    rows = []
    for f in FORMATS.values():
        pol = default_policies(f)
        rows.append({"name": f.name, "bits": f.bits, "exp_bits": f.exp_bits, "man_bits": f.man_bits,
                     "bias": f.bias, "signed": f.signed, "max_finite": float(f.max_finite),
                     "min_normal": float(f.min_normal), "min_subnormal": _json_value(f.min_subnormal),
                     "specials": f.specials.value, "default_overflow": pol.overflow.value,
                     "default_nan": pol.nan.value, "description": f.description})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'name':9} {'bits':>4} {'E':>2} {'M':>3} {'bias':>5} {'sign':>4} {'max_finite':>12} "
          f"{'min_normal':>11} {'min_sub':>11} {'overflow':>9}  specials")
    for r in rows:
        ms = r["min_subnormal"]
        print(f"{r['name']:9} {r['bits']:>4} {r['exp_bits']:>2} {r['man_bits']:>3} {r['bias']:>5} "
              f"{'yes' if r['signed'] else 'no':>4} {r['max_finite']:>12.6g} {r['min_normal']:>11.4g} "
              f"{(f'{ms:.4g}' if ms is not None else '-'):>11} {r['default_overflow']:>9}  {r['specials']}")
    return 0


def _cmd_codebook(args: argparse.Namespace) -> int:
    fmt = get_format(args.name)
    book = codebook(fmt)
    if args.json:
        print(json.dumps(book, indent=1))
        return 0
    print(f"{fmt.name}: {fmt.description}")
    width = (fmt.bits + 3) // 4
    print(f"{'code':>{width + 2}}  {'bits':>{fmt.bits}}  {'kind':9}  value")
    for c in book["codes"]:
        print(f"0x{c['code']:0{width}X}  {c['bits']}  {c['kind']:9}  {c['value']!s:>14}  ({c['exact']})")
    print(f"max_finite={book['max_finite']!r} min_normal={book['min_normal']!r} "
          f"min_subnormal={book['min_subnormal']!r}")
    return 0


def _cmd_encode(args: argparse.Namespace) -> int:
    fmt = get_format(require(args, "to", "--to"))
    check_output(args.out, suffix=".npy", inputs=[args.input, args.rbits])
    x = load_npy(args.input)
    rbits = load_npy(args.rbits) if args.rbits else None
    if RoundingMode.parse(args.rounding).stochastic and rbits is None:
        raise FpspecError(f"--rounding {args.rounding} needs --rbits R.npy (uint8/16/32, shape {x.shape})")
    codes = encode(x, fmt, args.rounding, rbits=rbits, nbits=args.nbits, overflow=args.overflow,
                   nan=args.nan, negative=args.negative, zero=args.zero, impl=args.impl)
    save_npy(args.out, codes)
    return 0


def _cmd_decode(args: argparse.Namespace) -> int:
    fmt = get_format(require(args, "from_", "--from"))
    check_output(args.out, suffix=".npy", inputs=[args.input])
    codes = load_npy(args.input)
    if codes.dtype.kind not in "ui":
        raise FpspecError(f"{args.input}: codes must be an unsigned integer array, got {codes.dtype}")
    try:
        values = decode(codes, fmt, impl=args.impl)
    except FpspecError as exc:
        raise FpspecError(f"{args.input}: {exc}") from None
    save_npy(args.out, values)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    names = ", ".join(FORMATS)
    p = sub.add_parser("formats", help="list the predefined formats with their derived values",
                       description="List every predefined format with its layout, range and default policies.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_formats)

    p = sub.add_parser("codebook", help="every code of a format with its bits, exact value and kind",
                       description="Print every code of a format (at most 16 bits) with its bit "
                                   "pattern, exact value and kind (zero, subnormal, normal, inf, nan).")
    p.add_argument("name", choices=list(FORMATS), metavar="NAME", help=f"format: {names}")
    p.add_argument("--json", action="store_true",
                   help="JSON object: name, codes=[{code,bits,value,kind}], max_finite, min_normal, min_subnormal")
    p.set_defaults(func=_cmd_codebook)

    modes = ", ".join(m.value for m in RoundingMode)
    p = sub.add_parser("encode", help="round a float .npy array to codes of a format",
                       description="Round every element of IN.npy (float16/bfloat16/float32/float64) once, "
                                   "from its exact value, to a code of FORMAT. Codes are written one per "
                                   "element: uint8 for formats of at most 8 bits, uint16 for fp16/bf16, "
                                   "uint32 for fp32.")
    p.add_argument("input", metavar="IN.npy")
    p.add_argument("--to", choices=list(FORMATS), metavar="FORMAT",
                   help=f"the format to round into (required): {names}")
    add_alias(p, "--format", "to", choices=list(FORMATS), metavar="FORMAT")
    p.add_argument("--rounding", default="rne", metavar="MODE",
                   help=f"rounding mode: {modes} (sr = sr-midpoint); default rne")
    p.add_argument("--rbits", metavar="R.npy", help="random values for stochastic modes: uint8/16/32, same shape, "
                   "each below 2^N (a value of 2^N or more is refused)")
    p.add_argument("--nbits", type=int, default=DEFAULT_SR_BITS,
                   help=f"width N of each random value (default {DEFAULT_SR_BITS}, the seed paper's byte)")
    p.add_argument("--overflow", choices=[o.value for o in OverflowPolicy],
                   help="overflow policy (default per format, see `fpspec formats`)")
    p.add_argument("--nan", choices=[o.value for o in NanPolicy],
                   help="NaN-input policy (default: nan where the format has a NaN code, else error)")
    p.add_argument("--negative", choices=[o.value for o in NegativePolicy],
                   help="negative input to an unsigned format (default error)")
    p.add_argument("--zero", choices=[o.value for o in ZeroPolicy],
                   help="zero input to a format without zero, ue8m0 (default error)")
    p.add_argument("--impl", choices=["fast", "exact"], default="fast",
                   help="fast (Numba, default) or exact (the Fraction spec); bit-equal")
    p.add_argument("--out", required=True, metavar="CODES.npy", help="output codes (.npy; written atomically)")
    p.set_defaults(func=_cmd_encode)

    p = sub.add_parser("decode", help="decode a code array to float64 values",
                       description="Decode CODES.npy (unsigned integers) of FORMAT to exact float64 values.")
    p.add_argument("input", metavar="CODES.npy")
    p.add_argument("--from", dest="from_", choices=list(FORMATS), metavar="FORMAT",
                   help=f"the format of the codes (required): {names}")
    add_alias(p, "--format", "from_", choices=list(FORMATS), metavar="FORMAT")
    p.add_argument("--impl", choices=["fast", "exact"], default="fast",
                   help="fast: a table lookup (default); exact: the executable spec, code by code "
                        "(the same values, bit for bit)")
    p.add_argument("--out", required=True, metavar="X.npy", help="output float64 values (.npy; written atomically)")
    p.set_defaults(func=_cmd_decode)
