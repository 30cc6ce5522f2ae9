"""``fpspec quantize`` and ``fpspec dequantize`` (FPS-BLK-*, docs/scheme-*.rst)."""

from __future__ import annotations

import argparse
import tracemalloc

import ml_dtypes
import numpy as np

from ..choices import DEFAULT_SR_BITS
from ..convert import encode
from ..errors import FpspecError
from ..fast.rounding import MAX_SR_BITS
from ..io import check_output, load_npy, save_npy
from ..quantization import dequantize, quantize, tensor_amax
from ..quantized import QuantizedTensor
from ..schemes import PROFILES, SCHEMES, profiles_of
from .bench import best_time, interleaved_times, register_benchmark, result_row
from .options import TILES, add_payload_format, parse_number, parse_size, parse_target, parse_tile


def _cmd_quantize(args: argparse.Namespace) -> int:
    check_output(args.out, suffix=".npz", inputs=[args.input, args.rbits])
    if args.profile is not None and not args.profile.strip():
        raise FpspecError(f"--profile must name a profile of {args.scheme} ({', '.join(profiles_of(args.scheme))}), "
                          f"got {args.profile!r}; leave it out for the default, {SCHEMES[args.scheme]}")
    target = parse_target(args.target)
    amax = parse_number(args.amax, "--amax")
    tile, block = parse_tile(args.tile, args.block)
    nbits = parse_size(args.nbits, "--nbits", 1, MAX_SR_BITS)
    x = load_npy(args.input)
    rbits = load_npy(args.rbits) if args.rbits else None
    if rbits is not None and rbits.dtype.kind != "u":
        raise FpspecError(f"{args.rbits}: random values must be unsigned integers, got {rbits.dtype}")
    zr = None if args.zero_scale_rule is None else args.zero_scale_rule == "on"
    qt = quantize(x, args.scheme, profile=args.profile, block=block, tile=tile, target=target,
                  amax=amax, rounding=args.rounding, rbits=rbits, nbits=nbits, columnwise=args.columnwise,
                  rht=args.rht, scale_format=args.scale_format, zero_scale_rule=zr, pad=args.pad,
                  impl=args.impl, payload_format=args.payload_format)
    if args.npz_format == "plain":
        qt.to_plain_npz(args.out)
    else:
        qt.to_npz(args.out, dequant=dequantize(qt))
    return 0


def _cmd_dequantize(args: argparse.Namespace) -> int:
    check_output(args.out, suffix=".npy", inputs=[args.input])
    qt = QuantizedTensor.from_npz(args.input)
    save_npy(args.out, dequantize(qt, impl=args.impl))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    profiles = "; ".join(f"{s}: {', '.join(n for (s2, n) in PROFILES if s2 == s)} (default {d})"
                         for s, d in SCHEMES.items())
    p = sub.add_parser("quantize", help="block-quantize a float .npy tensor to E2M1 (or MXFP8: FP8) codes and block scales",
                       description="Block-quantize IN.npy (float, shape (M, K); a tensor (..., K) is flattened to "
                                   "(M, K) and dequantize restores its shape) under a scheme and profile. "
                                   "OUT.npz holds codes (uint8, one payload code per element of the quantized "
                                   "view: E2M1, or E4M3 / E5M2 for mxfp8), scales (uint8, one per block, row-major block order), "
                                   "encode_scale, decode_scale, amax (float32), dequant (float32) and meta.")
    p.add_argument("input", metavar="IN.npy")
    p.add_argument("--scheme", required=True, choices=list(SCHEMES))
    p.add_argument("--profile", metavar="NAME", help=f"arithmetic profile; {profiles}")
    p.add_argument("--block", type=int, choices=[16, 32], help="block length B (default 16; 32 for mxfp4 and mxfp8)")
    add_payload_format(p)
    p.add_argument("--tile", default="1xB", metavar="TILE",
                   help=f"{', '.join(TILES)}: 1xB blocks along K or BxB tiles; 1x16 is 1xB with "
                        "--block 16 (default 1xB)")
    p.add_argument("--target", metavar="T", help="target T (default 448): a positive binary32 value, "
                   "e.g. 448, 2048, 1/2, 2^11")
    p.add_argument("--amax", metavar="A", help="a given (held) tensor amax; default: measured")
    p.add_argument("--rounding", default="rne", help="payload rounding: rne, sr (8-bit midpoint), rna, ...")
    p.add_argument("--rbits", metavar="R.npy", help="random values below 2^N (uint8 for N = 8; uint16 or uint32 "
                   "when every value fits; a value of 2^N or more is refused), one per element of the quantized view")
    p.add_argument("--nbits", default=str(DEFAULT_SR_BITS), metavar="N",
                   help=f"width N of each random value (default {DEFAULT_SR_BITS}, the seed paper's byte)")
    p.add_argument("--columnwise", action="store_true", help="quantize X^T (the backward-GEMM layout)")
    p.add_argument("--rht", action="store_true", help="16-point random Hadamard transform along K first")
    p.add_argument("--scale-format", metavar="NAME", help="scale format (ue5m3 scheme: ue5m3 or ue5m3fnu)")
    p.add_argument("--zero-scale-rule", choices=["on", "off"], help="zero-scale-to-one rule (default: profile's)")
    p.add_argument("--pad", action="store_true", help="zero-pad to whole blocks instead of refusing")
    p.add_argument("--impl", choices=["fast", "exact"], default="fast", help=argparse.SUPPRESS)
    p.add_argument("--npz-format", choices=["fpspec", "plain"], default="fpspec",
                   help="fpspec: the file described above (default); plain: a plain operand v1 file of plain "
                        "arrays, no dequant (docs/operands.rst)")
    p.add_argument("--out", required=True, metavar="OUT.npz", help="output (.npz; written atomically)")
    p.set_defaults(func=_cmd_quantize)

    p = sub.add_parser("dequantize", help="dequantize an OUT.npz of fpspec quantize (or a plain operand file) "
                       "to float32",
                       description="Recompute the float32 values of a quantized tensor with its profile's "
                                   "dequantization formula (a tensor built from codes, scheme codes: q s rounded "
                                   "once to binary32), in the source's shape when it had more than two "
                                   "dimensions and was quantized rowwise, else in the quantized view's. The "
                                   "file is validated first (scheme, profile, block, target, amax, codes).")
    p.add_argument("input", metavar="OUT.npz")
    p.add_argument("--out", required=True, metavar="X.npy", help="output float32 values (.npy; written atomically)")
    p.add_argument("--impl", choices=["fast", "exact"], default="fast", help=argparse.SUPPRESS)
    p.set_defaults(func=_cmd_dequantize)


# ------------------------------------------------------- fpspec bench quantize
def peak_memory(fn, nbytes: int) -> float:
    """Peak bytes allocated while ``fn()`` runs, plus ``nbytes`` (the input), over ``nbytes``."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return (peak + nbytes) / nbytes


def bench_quantize(args: argparse.Namespace) -> list[dict]:
    """Full block quantization vs ml_dtypes' bare float32 -> E2M1 cast.

    The fpspec side is :func:`fpspec.quantization.quantize` on the fast path (input
    check, tensor amax, block amax, scale code and payload codes: all of it); the
    baseline is ``x.astype(ml_dtypes.float4_e2m1fn)`` on the same array, timed
    alternately with it in the same run.  The ratio is baseline time / fpspec time
    (> 1: fpspec faster).  Each row also reports the peak memory that quantize and
    quantize + dequantize allocate (tracemalloc, NumPy arrays included), as a
    multiple of the input's size, input included, and the best time of the two element
    passes no block quantizer of a fresh tensor avoids (``element_passes_s``): the tensor
    amax scan and a float32 -> E2M1 encode of the same array (one read each, the encode
    also writing a byte per element), timed in the same run, so that the row says how
    much of fpspec's time is block work (``of_element_passes``: fpspec time / that time), and
    the best time of :func:`fpspec.quantization.dequantize` of the result (``dequantize_s``,
    the other half of a quantize-dequantize round trip, with its rate
    ``dequantize_elem_per_s``).
    """
    k = args.k
    m = max(1, args.n // k)
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((m, k), dtype=np.float32)
    rows = []
    for profile in args.profiles:
        def ours() -> object:
            return quantize(x, "ue5m3", profile=profile, block=args.block)

        def element_passes() -> object:
            tensor_amax(x)
            return encode(x, "e2m1")

        first, t_ours, t_theirs = interleaved_times(ours, lambda: x.astype(ml_dtypes.float4_e2m1fn), args.repeat)
        _, t_passes = best_time(element_passes, args.repeat)
        q = ours()
        _, t_dequant = best_time(lambda: dequantize(q), args.repeat)
        rows.append(result_row(f"ue5m3/{profile} B={args.block} rne", x.size, t_ours,
                               f"ml_dtypes {ml_dtypes.__version__} astype e2m1", t_theirs, first,
                               element_passes_s=t_passes, of_element_passes=round(t_ours / t_passes, 2),
                               dequantize_s=t_dequant, dequantize_elem_per_s=x.size / t_dequant,
                               peak_memory_x_input=round(peak_memory(ours, x.nbytes), 2),
                               peak_memory_with_dequant_x_input=round(
                                   peak_memory(lambda: dequantize(ours()), x.nbytes), 2)))
    return rows


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=int, default=4096, help="row length K (the tensor is (n // K, K))")
    p.add_argument("--block", type=int, default=16, choices=[16, 32])
    p.add_argument("--profiles", nargs="+", default=["exact", "seed-fp32"], choices=["exact", "seed-fp32"])
    p.add_argument("--schemes", nargs="+", default=["ue5m3", "nvfp4", "mxfp4"], choices=["ue5m3", "nvfp4", "mxfp4"],
                   help="with --device: the schemes quantized on the device")


register_benchmark("quantize", "ue5m3 block quantization (fast path, RNE) vs ml_dtypes float32 -> e2m1 astype",
                   bench_quantize, _bench_arguments)
