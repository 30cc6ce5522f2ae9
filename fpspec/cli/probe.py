"""``fpspec probe``: identify a GEMM's accumulation model and accept it (FPS-PRB-17)."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from ..errors import FpspecError

HELP = """\
Probe a GEMM: run exact single-product probes batched on the diagonal of a few GEMM
calls, fit fpspec's GEMM accumulation model to what comes back (group size and
membership, alignment window and how terms below it are cut, bits and rounding of a
group result, promotion interval, split of K, output lattice, tensor-scale
epilogue, determinism), name the nearest preset, then run a random acceptance test
on wide-exponent-range operands comparing every sampled FP32 output bit for bit
with the fitted model.  100 % is the only pass (exit status 0; 1 on a mismatch,
2 on bad input).

Targets:
  fpspec:PRESET          fpspec's own model (see `fpspec models`), --format picks operands
  numpy                  numpy float32 matmul of decoded operands (CPU BLAS)
  torch-scaled-mm        torch._scaled_mm, float8_e4m3fn, FP32 out, use_fast_accum=False (CUDA)
  torch-scaled-mm-fast   the same with use_fast_accum=True (CUDA)
  torch-bf16, torch-fp16 torch.mm(A, B, out_dtype=float32) on BF16 / FP16 (CUDA)
  py:MODULE:FACTORY      your own GEMM: MODULE.FACTORY(fmt) returns the target

Probing a new GEMM: write a small Python object with
    operand_format = "e4m3" | "e5m2" | "fp16" | "bf16"
    def matmul(self, a, bt):   # a: M x K codes, bt: N x K codes (uint8 / uint16)
        ...                     # return the FP32 result A @ BT^T as float32 (M, N)
(optionally matmul_scaled(a, bt, scale_a, scale_b) for the epilogue probe), put a
factory for it in an importable module and run
    fpspec probe --target py:mymodule:make_target --format e4m3 --report out.json
or call fpspec.probe.probe_gemm(target) from Python.  Operands reach the GEMM as
bit patterns: never round them on the way in.  Libraries pick kernels (and splits
of K) by shape: probe at the shape you care about (--shape, --k) and list the
acceptance shapes you use (--accept-shapes).  docs/probe.rst explains every recipe.
"""


def _load_target(spec: str, fmt: str | None):
    if spec.startswith("py:"):
        try:
            _, mod, attr = spec.split(":", 2)
        except ValueError:
            raise FpspecError(f"--target py:MODULE:FACTORY expected, got {spec!r}") from None
        try:
            factory = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as exc:
            raise FpspecError(f"cannot load {spec!r}: {exc}") from None
        return factory(fmt) if fmt else factory()
    from ..adapters import make_target

    return make_target(spec, fmt)


def _cmd_probe(args: argparse.Namespace) -> int:
    from ..probe import probe_gemm
    from ..probe.accept import shapes_for_outputs, shapes_from_text

    target = _load_target(args.target, args.format)
    fmt = args.format or getattr(target, "operand_format", None)
    if fmt is None:
        raise FpspecError("the target does not say its operand format: give --format")
    shape = "auto"
    if args.shape:
        try:
            m, n = (int(x) for x in args.shape.lower().split("x"))
        except ValueError:
            raise FpspecError(f"--shape expects MxN, got {args.shape!r}") from None
        shape = (m, n)
    if args.no_accept:
        shapes = None
    elif args.accept_shapes:
        shapes = shapes_from_text(args.accept_shapes)
    else:
        gpu = args.target.startswith(("torch", "py:"))
        shapes = shapes_for_outputs(args.accept_outputs or (100_000 if gpu else 4096))
    report = probe_gemm(target, fmt, K=args.k, shape=shape, scan_k=args.scan_k, acceptance_shapes=shapes,
                        seed=args.seed)
    text = report.to_json(raw=args.raw)
    if args.report:
        Path(args.report).write_text(text + "\n")
    print(text if args.json else report.summary())
    return 0 if report.passed in (None, True) else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("probe", help="identify a black-box GEMM's accumulation model and accept it",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True, metavar="SPEC",
                   help="fpspec:PRESET | numpy | torch-scaled-mm[-fast] | torch-bf16 | torch-fp16 | py:MODULE:FACTORY")
    p.add_argument("--format", choices=["e4m3", "e5m2", "fp16", "bf16"],
                   help="operand format (default: the target's own)")
    p.add_argument("--k", type=int, default=1024, help="K of the probe GEMMs (default 1024)")
    p.add_argument("--shape", metavar="MxN", help="M and N of every probe GEMM (default 256x256 for "
                   "libraries; fpspec models use row-wise dot products)")
    p.add_argument("--scan-k", type=int, default=512, help="how far the group-membership scan looks (default 512)")
    p.add_argument("--accept-outputs", type=int, metavar="N",
                   help="at least N sampled outputs in the acceptance test (default 100000 for GPU and "
                        "py: targets, 4096 for CPU ones), over K = 256..16384 and M, N = 64..4096")
    p.add_argument("--accept-shapes", metavar="MxNxK[:RxC],...", help="explicit acceptance shapes "
                   "(R x C outputs sampled per shape)")
    p.add_argument("--no-accept", action="store_true", help="probe and fit only")
    p.add_argument("--seed", type=int, default=2026, help="acceptance operand seed (default 2026)")
    p.add_argument("--json", action="store_true", help="print the whole report as JSON")
    p.add_argument("--raw", action="store_true", help="include every probe output (hex) in the JSON")
    p.add_argument("--report", metavar="OUT.json", help="write the JSON report here")
    p.set_defaults(func=_cmd_probe)
