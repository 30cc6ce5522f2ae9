"""``fpspec gemm-sample``: sampled rows and columns of a big GEMM, computed or checked (FPS-OPD-9)."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ..cublas.h200 import call_shape, resolve_choice
from ..errors import FpspecError
from ..io import check_output, load_npy, save_npy
from ..matmul import CODE_FORMATS
from ..cublas.library import LIBRARY
from ..models import parse_overrides
from ..presets import PRESETS
from ..sampled import bits_dtype, check_gemm_sample, gemm_sample, gemm_shape, parse_selection
from .gemm import read_operands


def _value(bits: int, dtype: np.dtype) -> str:
    raw = np.array([bits], dtype=bits_dtype(dtype))
    width = 4 if dtype == np.float16 else 8
    return f"0x{bits:0{width}x} ({float(raw.view(dtype)[0])!r})"


def _cmd_gemm_sample(args: argparse.Namespace) -> int:
    if args.out is None and args.check is None:
        raise FpspecError("give --check C.npy (the kernel's output, to compare) and/or --out S.npy "
                          "(fpspec's sampled outputs)")
    inputs = [args.a, args.bt, args.check]
    if args.out is not None:
        check_output(args.out, suffix=".npy", inputs=inputs)
    overrides = parse_overrides(args.set)
    if args.allow_what_if:
        overrides["allow_what_if"] = True
    a, bt, fmt = read_operands(args)
    m, n, k = gemm_shape(a, bt)
    rows = parse_selection(args.rows, m, seed=args.seed, what="--rows")
    cols = parse_selection(args.cols, n, seed=args.seed + 1, what="--cols")
    if args.model in LIBRARY:
        print(f"fpspec gemm-sample: {args.model} at {m}x{n}x{k} (the full shape): "
              f"{resolve_choice(args.model, call_shape(args.model, (m, n, k))).describe()}", file=sys.stderr)
    if args.check is None:
        y = gemm_sample(a, bt, args.model, rows=rows, cols=cols, fmt=fmt, impl=args.impl, **overrides)
        save_npy(args.out, y.view(bits_dtype(y.dtype)) if args.bits else y)
        return 0
    c = load_npy(args.check)
    try:
        result = check_gemm_sample(c, a, bt, args.model, rows=rows, cols=cols, sampled=args.sampled, fmt=fmt,
                                   impl=args.impl, **overrides)
    except FpspecError as exc:
        raise FpspecError(f"{args.check}: {exc}") from None
    if args.out is not None:
        save_npy(args.out, result.expected_bits if args.bits else result.expected)
    bad = result.mismatch_count
    print(f"gemm-sample {args.model} {m}x{n}x{k}: {rows.size} rows x {cols.size} columns, "
          f"{result.compared - bad} of {result.compared} outputs equal bit for bit")
    for mm in result.mismatches(args.max_report):
        print(f"  C[{mm.row}, {mm.col}]: expected {_value(mm.expected, result.expected.dtype)}, "
              f"got {_value(mm.got, result.expected.dtype)}")
    if bad > args.max_report:
        print(f"  ... and {bad - args.max_report} more")
    print("PASS" if result.passed else "FAIL")
    return 0 if result.passed else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gemm-sample", help="sampled rows and columns of a big GEMM: fpspec's outputs there, or a kernel's "
                            "full output checked there bit for bit",
        description="Compute C = A (M x K) @ BT (N x K)^T under a model at the sampled rows and columns only, "
                    "bit for bit what the full GEMM gives there (a library preset cublas-h200-* is resolved at the "
                    "full shape M x N x K), and with --check compare a kernel's output with it. Exit status: 0 "
                    "equal, 1 a mismatch, 2 bad input. Operands as for 'fpspec gemm': two .npz (from 'fpspec "
                    "quantize' or plain operand v1 files, docs/operands.rst) or two .npy code arrays with "
                    "--operand-format.")
    p.add_argument("a", metavar="A", help="A (M x K): .npz quantized tensor or plain operand file, or .npy codes")
    p.add_argument("bt", metavar="BT", help="BT (N x K): as A")
    p.add_argument("--model", required=True, help=f"preset: {', '.join(PRESETS)}; library presets: "
                   f"{', '.join(LIBRARY)}")
    p.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE",
                   help="override a model parameter (repeatable; see 'fpspec models')")
    p.add_argument("--allow-what-if", action="store_true",
                   help="run operands outside the model's operand contract, as 'fpspec gemm --allow-what-if' does")
    p.add_argument("--operand-format", choices=CODE_FORMATS, default=None, metavar="FORMAT",
                   help=f"code format of .npy operands: {', '.join(CODE_FORMATS)}")
    p.add_argument("--bt-format", choices=CODE_FORMATS, default=None, metavar="FORMAT",
                   help="code format of BT when it differs from A's")
    p.add_argument("--rows", default=None, metavar="SEL",
                   help="rows of C: comma-separated numbers i, ranges a:b, random:N (N distinct, --seed), all "
                        "(default all)")
    p.add_argument("--cols", default=None, metavar="SEL", help="columns of C, as --rows (default all)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of random:N (rows: default_rng(seed), columns: default_rng(seed + 1); default 0)")
    p.add_argument("--check", metavar="C.npy", default=None,
                   help="the kernel's output: the full M x N C (float32 values or uint32 bits; float16 / uint16 "
                        "for an FP16 output), or with --sampled only its outputs at the sample")
    p.add_argument("--sampled", action="store_true",
                   help="--check holds only the outputs at the sampled rows x columns, in the order selected")
    p.add_argument("--max-report", type=int, default=20, help="mismatches printed (default 20)")
    p.add_argument("--out", metavar="S.npy", default=None,
                   help="write fpspec's outputs at the sample (rows x columns, in the order selected)")
    p.add_argument("--bits", action="store_true", help="--out holds bit patterns (uint32; uint16 for FP16)")
    p.add_argument("--impl", choices=["fast", "exact"], default="fast")
    p.set_defaults(func=_cmd_gemm_sample)
