"""``fpspec gemm``, ``fpspec models`` and ``fpspec bench gemm`` (FPS-GEMM-11, docs/gemm.rst)."""

from __future__ import annotations

import argparse
import json
import sys
import warnings

import ml_dtypes
import numpy as np

from ..errors import FpspecError
from ..io import check_output, load_npy, save_npy
from ..gemm_operands import WHAT_IF_HINT
from ..matmul import CODE_FORMATS, GemmWhatIfWarning, explain_gemm, gemm, gemm_and_path
from ..cublas.h200 import call_shape, resolve_choice
from ..cublas.library import LIBRARY, resolve
from ..models import CONTRACTS, PARAMETER_HELP, parse_overrides
from ..named_models import presets_json
from ..presets import PRESETS
from ..quantization import quantize
from ..quantized import QuantizedTensor
from ..sampled import bits_dtype
from .bench import best_time, register_benchmark, result_row
from .options import add_alias


def read_operands(args: argparse.Namespace):
    """A and BT as ``fpspec gemm`` and ``fpspec gemm-sample`` read them: two .npz (fpspec's or plain
    operand v1), or two .npy code arrays with --operand-format (and --bt-format); the code format
    (None for .npz operands)."""
    if args.bt_format is not None and args.operand_format is None:
        raise FpspecError("--bt-format needs --operand-format (A's code format)")
    if args.operand_format is None:
        for path in (args.a, args.bt):
            if not str(path).endswith(".npz"):
                raise FpspecError(f"{path}: expected an .npz (from 'fpspec quantize', or a plain operand file) "
                                  "or give --operand-format for .npy code arrays")
        return QuantizedTensor.from_npz(args.a), QuantizedTensor.from_npz(args.bt), None
    fmt = args.operand_format if args.bt_format is None else (args.operand_format, args.bt_format)
    return load_npy(args.a), load_npy(args.bt), fmt


def _cmd_gemm(args: argparse.Namespace) -> int:
    if args.out is None and not args.explain:
        raise FpspecError("--out is required (or --explain, to print how the GEMM would be computed)")
    if args.json and not args.explain:
        raise FpspecError("--json is for --explain: the GEMM's output is the .npy of --out")
    if args.out is not None:
        check_output(args.out, suffix=".npy", inputs=[args.a, args.bt])
    overrides = parse_overrides(args.set)
    a, bt, fmt = read_operands(args)
    kw = {"impl": args.impl, "shape": _shape(args.shape), **overrides}
    if fmt is not None:
        kw["fmt"] = fmt
    try:
        if args.explain:
            _print_explanation(args, _what_if(args, explain_gemm, a, bt, **kw))
        if args.out is None:
            return 0
        y, path = _what_if(args, gemm_and_path, a, bt, **kw)
    except FpspecError as exc:
        if fmt is None:
            raise
        raise FpspecError(f"{args.a}, {args.bt}: {exc}") from None
    found = path.resolution
    if found is not None and not args.explain:  # say which kernel the output stands for, and how sure that is
        print(f"fpspec gemm: {args.model} at {'x'.join(map(str, found.shape))}: {found.choice.describe()}",
              file=sys.stderr)
    save_npy(args.out, y.view(bits_dtype(y.dtype)) if args.bits else y)
    return 0


def _print_explanation(args: argparse.Namespace, path: dict) -> None:
    """``--explain``: the path of :func:`fpspec.matmul.explain_gemm`, as lines or one JSON object."""
    if args.json:
        print(json.dumps(path, sort_keys=True))
        return
    print(f"model: {path['model']}")
    print("  " + ", ".join(f"{k}={v}" for k, v in path["parameters"].items()))
    lib = path.get("library")
    if lib is not None:
        print(f"library: {lib['preset']} at {'x'.join(map(str, lib['call_shape']))}: {lib['kernel']}")
        print(f"  basis: {lib['basis']}" + (" (a guess, not a fact)" if lib["basis"] == "nearest" else ""))
    print(f"implementation: {path['implementation']}: {path['reason']}")
    if path["implementation"] == "fast":
        blas = "yes (behind the exactness guard; outputs it cannot prove go to the term kernel)" \
            if path["blas_partials"] else "no"
        print(f"  exact group sums through BLAS first: {blas}; term kernel: {path['kernel']}")


def _what_if(args: argparse.Namespace, verb, a, bt, **kw):
    """A verb of :mod:`fpspec.matmul` (``gemm_and_path``, ``explain_gemm``) with ``--allow-what-if``: a run outside the model's operand
    contract prints its :class:`~fpspec.matmul.GemmWhatIfWarning` as one warning line on stderr
    (FPS-GEMM-25); the refusal's hint names the flag."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", GemmWhatIfWarning)
        try:
            y = verb(a, bt, args.model, allow_what_if=args.allow_what_if, **kw)
        except FpspecError as exc:
            raise FpspecError(str(exc).replace(f"(for {WHAT_IF_HINT})", "(--allow-what-if runs it as a "
                                                                         "hypothetical)")) from None
    for w in caught:
        if issubclass(w.category, GemmWhatIfWarning):
            print(f"fpspec gemm: warning: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return y


def _shape(text: str | None) -> tuple[int, int, int] | None:
    """``--shape M,N,K`` (FPS-CUB-6)."""
    if text is None:
        return None
    try:
        m, n, k = (int(v) for v in text.replace("x", ",").split(","))
    except ValueError:
        raise FpspecError(f"--shape expects M,N,K (three integers), got {text!r}") from None
    return m, n, k


def _resolved(shape: tuple[int, int, int], names: list[str]) -> list[dict]:
    """The library presets ``names`` resolved at ``shape`` (FPS-CUB-6): the kernel choice
    and, where the kernel is modelled, the concrete model's parameters (else the reason)."""
    rows = []
    for name in names:
        run = call_shape(name, shape)
        choice = resolve_choice(name, run)
        try:
            model, why = resolve(name, run).to_dict(), None
        except FpspecError as exc:
            model, why = None, str(exc)
        rows.append({"preset": name, "shape": list(shape), "call_shape": list(run), "choice": choice.to_json(),
                     "model": model, "not_modelled": why})
    return rows


def _cmd_models_at_shape(args: argparse.Namespace) -> int:
    """``fpspec models --shape M,N,K [--model PRESET] [--json]``."""
    names = [args.model] if args.model else list(LIBRARY)
    for name in names:
        if name not in LIBRARY:
            raise FpspecError(f"--model {name!r} is not a library preset; --shape resolves one of "
                              f"{', '.join(LIBRARY)}")
    rows = _resolved(_shape(args.shape), names)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for r in rows:
        ran = "" if r["call_shape"] == r["shape"] else f" (run as {'x'.join(map(str, r['call_shape']))})"
        print(f"{r['preset']} at {'x'.join(map(str, r['shape']))}{ran}")
        print(f"    {r['choice']['describe']}")
        if r["model"] is None:
            print(f"    not modelled: {r['not_modelled']}")
        else:
            print("    " + ", ".join(f"{k}={v}" for k, v in r["model"].items()))
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    if args.shape is not None:
        return _cmd_models_at_shape(args)
    if args.model:
        raise FpspecError("--model goes with --shape (a library preset resolved at that shape)")
    if args.json:
        print(presets_json())
        return 0
    for name, p in {**PRESETS, **LIBRARY}.items():
        print(f"{name}")
        print(f"    {p.summary}")
        if p.instruction:
            print(f"    instruction: {p.instruction} ({p.architecture})")
        print(f"    source: {p.source}")
        b = p.backing
        where = f"; {b.device}, {b.outputs:,} outputs at {len(b.shapes)} shapes" if b.kind == "measured" else ""
        print(f"    backed by: {b.kind} ({b.detail}{where}; {b.reference})")
        c = CONTRACTS[name]
        print(f"    operands: {c.rule()}; tensor scales: {c.tensor_scales_text(p.model)}")
        if p.library:
            print(f"    library preset: resolved per shape (fpspec.cublas.library.resolve; gemm --shape M,N,K); "
                  f"the chain below is that of its Hopper kernels without a K split")
        d = p.model.to_dict()
        print("    " + ", ".join(f"{k}={v}" for k, v in d.items()))
    print("\nparameters (--set PARAM=VALUE; aliases G, F, N_C, L, neab; the value rz is read as rtz):")
    for k, v in PARAMETER_HELP.items():
        print(f"  {k:22} {v}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gemm", help="A @ BT^T under a GEMM accumulation model (float32 output)",
        description="Compute A (M x K) @ BT (N x K)^T -> C (M x N) float32 (float16 for an FP16 output) "
                    "under an accumulation model. Operands: two .npz from 'fpspec quantize' (BT quantized "
                    "rowwise from the N x K matrix), or with --operand-format two .npy code arrays (uint8 "
                    "e4m3/e5m2/e4m3fnuz/e5m2fnuz, uint16 fp16/bf16, uint32 tf32).")
    p.add_argument("a", metavar="A", help="A: .npz quantized tensor, or .npy codes with --operand-format")
    p.add_argument("bt", metavar="BT", help="BT (N x K): .npz quantized tensor, or .npy codes with "
                   "--operand-format")
    p.add_argument("--model", required=True, help=f"preset: {', '.join(PRESETS)}; library presets (resolved at "
                   f"--shape): {', '.join(LIBRARY)}")
    p.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE",
                   help="override a model parameter (repeatable; see 'fpspec models')")
    p.add_argument("--operand-format", choices=CODE_FORMATS, default=None, metavar="FORMAT",
                   help=f"code format of .npy operands: {', '.join(CODE_FORMATS)}")
    add_alias(p, "--format", "operand_format", choices=CODE_FORMATS, metavar="FORMAT")
    p.add_argument("--bt-format", choices=CODE_FORMATS, default=None, metavar="FORMAT",
                   help="code format of BT when it differs from A's (mixed operands, e.g. e4m3 x e5m2)")
    p.add_argument("--bits", action="store_true",
                   help="write the bit patterns (uint32; uint16 for an FP16 output)")
    p.add_argument("--impl", choices=["fast", "exact"], default="fast")
    p.add_argument("--shape", default=None, metavar="M,N,K",
                   help="the GEMM shape a library preset (cublas-h200-*) is resolved at: the operands may be "
                        "sampled rows of A and BT of a larger GEMM (K equal); default: the operands' shape")
    p.add_argument("--allow-what-if", action="store_true",
                   help="run operands outside the model's operand contract (what its hardware or library takes; "
                        "'fpspec models' lists each) as a hypothetical, flagged by a warning line on stderr")
    p.add_argument("--explain", action="store_true",
                   help="print how the GEMM is computed (the concrete model; for a library preset the kernel and "
                        "whether that comes from a recorded call, the rule or a nearest-shape guess; the "
                        "implementation and why; the fast path's kernel); computes nothing unless --out is given")
    p.add_argument("--json", action="store_true", help="with --explain: print the explanation as one JSON object")
    p.add_argument("--out", metavar="C.npy", help="output (.npy; written atomically); required unless --explain")
    p.set_defaults(func=_cmd_gemm)

    q = sub.add_parser("models", help="list the GEMM model presets and their parameters",
                       description="List every GEMM accumulation preset with its parameters and source.")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.add_argument("--shape", default=None, metavar="M,N,K",
                   help="resolve the library presets (cublas-h200-*) at this GEMM shape: the kernel cuBLAS runs, "
                        "how it cuts K, whether that was measured, follows by rule or is a guess, and the "
                        "concrete model")
    q.add_argument("--model", default=None, metavar="PRESET", help="with --shape: only this library preset")
    q.set_defaults(func=_cmd_models)


# ------------------------------------------------------------ fpspec bench gemm
#: (case name, operand kind, preset, goal ratio or None) of ``fpspec bench gemm`` (issue 11's
#: goals: the seed models at >= 1/4 and km-h100-fp8-promote128 at >= 1/20 of numpy float32
#: matmul; the block-scaled instruction preset and the cuBLAS BF16 library preset, resolved
#: at the bench's shape, are reported without a goal).
GEMM_BENCH_CASES = (
    ("seed nvfp4", "nvfp4", "seed-probe-matched", 1 / 4),
    ("seed ue5m3", "ue5m3", "seed-probe-matched", 1 / 4),
    ("km-promote128 e4m3", "e4m3", "km-h100-fp8-promote128", 1 / 20),
    ("sm100-mxf4nvf4 nvfp4", "mxf4nvf4", "sm100-mxf4nvf4", None),
    ("cublas-h200 bf16", "bf16", "cublas-h200-bf16", None),
)
#: The presets ``fpspec bench gemm --device`` times (issue 30's goal rows).
DEVICE_BENCH_PRESETS = ("seed-probe-matched", "seed-triton-h200", "sm100-mxf4nvf4", "sm90-fp8",
                        "km-h100-fp8-promote128", "cublas-h200-bf16")
#: The operand kinds of :data:`GEMM_BENCH_CASES` (``--cases``).
GEMM_BENCH_KINDS = tuple(kind for _, kind, _, _ in GEMM_BENCH_CASES)
#: ml_dtypes casts of the code-operand kinds (RNE from float32).
_CODE_DTYPES = {"e4m3": (ml_dtypes.float8_e4m3fn, np.uint8), "bf16": (ml_dtypes.bfloat16, np.uint16)}


def _bench_operands(kind: str, x: np.ndarray, w: np.ndarray):
    """A GEMM call of one bench case on the float32 matrices x (A) and w (BT)."""
    if kind in _CODE_DTYPES:
        dtype, view = _CODE_DTYPES[kind]
        a, b = x.astype(dtype).view(view), w.astype(dtype).view(view)
        return lambda model: gemm(a, b, model, fmt=kind)
    scheme = "nvfp4" if kind == "mxf4nvf4" else kind
    qa, qb = quantize(x, scheme), quantize(w, scheme)
    return lambda model: gemm(qa, qb, model)


def bench_gemm(args: argparse.Namespace) -> list[dict]:
    """The GEMM cases of issue 11 at every ``--size`` against numpy float32 matmul of the same
    shape, each the best of ``--repeat`` calls, one right after the other; each row says
    which path ran (``blas``: BLAS partial sums, fpspec/fast/partials.py; ``terms``: the
    term kernels), the partials' type (float32 or float64), the share of (output, group)
    pairs that fell back from BLAS to the product terms and the share of float32 partials
    summed again in float64."""
    from ..fast import partials
    from ..fast.parallel import threads

    rows = []
    for size in args.size:
        rng = np.random.default_rng(args.seed)
        x = rng.standard_normal((size, size)).astype(np.float32)
        w = rng.standard_normal((size, size)).astype(np.float32)
        macs = size ** 3
        for case, kind, model, goal in GEMM_BENCH_CASES:
            if args.cases and kind not in args.cases:
                continue
            run = _bench_operands(kind, x, w)
            partials._LAST[0] = None
            # best of --repeat for each side, one after the other (not interleaved: numpy's BLAS
            # threads keep spinning for a while after each call and would slow the next fpspec call)
            first, ours = best_time(lambda run=run, model=model: run(model), args.repeat)
            stats = partials.last_stats()
            _, base = best_time(lambda: x @ w.T, args.repeat)
            goal_text = "-" if goal is None else f">= 1/{round(1 / goal)}"
            rows.append(result_row(
                f"{case} {size}^3", macs, ours, "numpy f32 matmul", base, first, size=size, preset=model,
                threads=threads(), path="terms" if stats is None else "blas",
                partials=None if stats is None else stats.dtype,
                fallback_share=None if stats is None else stats.share,
                resum_share=None if stats is None else stats.resum_share, goal=goal_text,
                meets_goal=None if goal is None else bool(base / ours >= goal)))
    return rows


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size", type=int, nargs="+", default=[1024, 2048], help="M = N = K, one run per size "
                   "(default 1024 2048)")
    p.add_argument("--cases", nargs="*", choices=list(GEMM_BENCH_KINDS), default=None)
    p.add_argument("--models", nargs="+", default=list(DEVICE_BENCH_PRESETS),
                   help="with --device: the presets timed on the device")


register_benchmark("gemm", "GEMM models (seed NVFP4 / UE5M3, FP8 promote128, sm100-mxf4nvf4, cuBLAS BF16 on the "
                   "H200) vs numpy float32 matmul; -n is ignored, see --size", bench_gemm, _bench_arguments)
