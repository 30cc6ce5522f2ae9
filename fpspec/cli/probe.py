"""``fpspec probe``: identify a GEMM's accumulation model and accept it (FPS-PRB-17)."""

from __future__ import annotations

import argparse
import importlib
import time
from typing import Any, TextIO

import numpy as np

from ..adapters import make_target
from ..errors import FpspecError
from ..io import check_output, write_text
from ..probe import DEFAULT_PROBE_SHAPE, probe_gemm
from ..probe.accept import MAX_K, check_gemm_size, shapes_for_outputs, shapes_from_text
from .options import add_alias, add_quiet, parse_size, progress_stream, require

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
  fpspec:PRESET          fpspec's own model (see `fpspec models`), --operand-format picks operands
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
    fpspec probe --gemm py:mymodule:make_target --operand-format e4m3 --report out.json
or call fpspec.probe.probe_gemm(target) from Python.  Operands reach the GEMM as
bit patterns: never round them on the way in.  Libraries pick kernels (and splits
of K) by shape: probe at the shape you care about (--shape, --k) and list the
acceptance shapes you use (--accept-shapes).  Sizes are bounded: K <= 2^17, M, N <= 2^16,
max(M, N) * K and M * N <= 2^26.  On a terminal the GEMM calls are counted on stderr
(--quiet: silent).  docs/probe.rst explains every recipe.
"""


def _load_target(spec: str, fmt: str | None) -> Any:
    if spec.startswith("py:"):
        try:
            _, mod, attr = spec.split(":", 2)
        except ValueError:
            raise FpspecError(f"--gemm py:MODULE:FACTORY expected, got {spec!r}") from None
        try:
            factory = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as exc:
            raise FpspecError(f"cannot load {spec!r}: {exc}") from None
        return factory(fmt) if fmt else factory()
    return make_target(spec, fmt)


class _CountingTarget:
    """The target under test, counting its GEMM calls on a terminal (FPS-CLI-6).

    Every attribute is the wrapped target's; ``matmul``, ``matmul_scaled`` and
    ``rowdot`` (only where the target has them) also print a running count.
    """

    _COUNTED = ("matmul", "matmul_scaled", "rowdot")

    def __init__(self, target: Any, stream: TextIO):
        self._target, self._stream, self._calls, self._t0 = target, stream, 0, time.monotonic()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if name not in self._COUNTED:
            return attr

        def counted(*args: Any, **kw: Any) -> Any:
            self._calls += 1
            shape = "x".join(str(d) for d in np.shape(args[0])) if args else "?"
            self._stream.write(f"\rfpspec probe: GEMM call {self._calls} ({name}, A {shape}), "
                               f"{time.monotonic() - self._t0:.1f} s\033[K")
            self._stream.flush()
            return attr(*args, **kw)
        return counted

    def done(self) -> None:
        if self._calls:
            self._stream.write("\n")
            self._stream.flush()


#: Operand codes of ``--observe``: (exponent field bias, exponent spread, mantissa bits, code
#: dtype) of each format.  cuBLAS picks its kernel from the shape and types, never the values;
#: the values have random signs and one exponent per block of _OBSERVE_BLOCK k, spread over
#: 2 x spread + 1 binades, so that partial sums of K blocks differ by many binades and the
#: outputs tell slice plans apart where the call's outputs settle one (FPS-CUB-10).
_OBSERVE_CODES = {"bf16": (127, 6, 7, np.uint16), "fp16": (15, 6, 10, np.uint16), "e4m3": (7, 6, 3, np.uint8)}
_OBSERVE_BLOCK = 128


def _observe_operand(fmt: str, rows: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Random finite codes of ``fmt`` (normal numbers, both signs; see _OBSERVE_CODES)."""
    bias, spread, mbits, dtype = _OBSERVE_CODES[fmt]
    width = 8 * np.dtype(dtype).itemsize
    sign = rng.integers(0, 2, (rows, k)) << (width - 1)
    blocks = rng.integers(-spread, spread + 1, (rows, -(-k // _OBSERVE_BLOCK)))
    expo = (bias + np.repeat(blocks, _OBSERVE_BLOCK, axis=1)[:, :k]) << mbits
    mant = rng.integers(0, 1 << mbits, (rows, k))
    return (sign | expo | mant).astype(dtype)


def _cmd_observe(args: argparse.Namespace) -> int:
    """``fpspec probe --observe``: the model of one torch call at one shape (FPS-CUB-8)."""
    import json

    from ..adapters.torch_gemm import observation
    from ..cublas.h200 import PRESET_TARGETS, TARGETS

    spec = require(args, "gemm", "--gemm")
    target = PRESET_TARGETS.get(spec, spec)
    if target not in TARGETS:
        raise FpspecError(f"--observe needs a cuBLAS target: {', '.join(TARGETS)} (or {', '.join(PRESET_TARGETS)})")
    if not args.shape:
        raise FpspecError("--observe needs --shape MxN (and --k)")
    try:
        m, n = (int(x) for x in args.shape.lower().split("x"))
    except ValueError:
        raise FpspecError(f"--shape expects MxN, got {args.shape!r}") from None
    k = parse_size(args.k, "--k", 1, MAX_K)
    check_gemm_size(m, n, k, "--shape and --k give")
    fmt = TARGETS[target].fmt
    rng = np.random.default_rng(0)
    a, bt = _observe_operand(fmt, m, k, rng), _observe_operand(fmt, n, k, rng)
    obs = observation(a, bt, target)
    if args.json:
        print(json.dumps(obs.to_dict(), indent=2))
    else:
        print(f"{target} at {m}x{n}x{k}: kernel {obs.kernel} grid {list(obs.grid) if obs.grid else None} "
              f"(attributed by {obs.method})")
        if obs.model is None:
            print(f"not modelled: {obs.error}")
        else:
            d = obs.model.to_dict()
            print("model: " + ", ".join(f"{key}={v}" for key, v in d.items() if key != "slice_plan")
                  + (f", slice_plan=({len(d['slice_plan'])} slices: {d['slice_plan'][0]} ... "
                     f"{d['slice_plan'][-1]})" if d["slice_plan"] else ""))
            if obs.to_dict()["settled"]:
                print(obs.to_dict()["settled"])
    return 0 if obs.model is not None else 1


def _cmd_probe(args: argparse.Namespace) -> int:
    if args.observe:
        return _cmd_observe(args)
    spec = require(args, "gemm", "--gemm")
    if args.report:
        check_output(args.report, flag="--report")
    K = parse_size(args.k, "--k", 1, MAX_K)
    scan_k = parse_size(args.scan_k, "--scan-k", 1, MAX_K)
    seed = parse_size(args.seed, "--seed", 0, (1 << 32) - 1)
    shape: tuple[int, int] | str = "auto"
    if args.shape:
        try:
            m, n = (int(x) for x in args.shape.lower().split("x"))
        except ValueError:
            raise FpspecError(f"--shape expects MxN, got {args.shape!r}") from None
        check_gemm_size(m, n, K, "--shape and --k give")
        shape = (m, n)
    else:
        check_gemm_size(DEFAULT_PROBE_SHAPE[0], DEFAULT_PROBE_SHAPE[1], K, "--k gives the probe GEMM")
    accept_outputs = parse_size(args.accept_outputs, "--accept-outputs", 1, 10**8)
    if args.no_accept and (args.accept_shapes or accept_outputs is not None):
        raise FpspecError("--no-accept contradicts --accept-shapes / --accept-outputs")
    if args.accept_shapes and accept_outputs is not None:
        raise FpspecError("give --accept-shapes or --accept-outputs, not both")
    target = _load_target(spec, args.operand_format)
    fmt = args.operand_format or getattr(target, "operand_format", None)
    if fmt is None:
        raise FpspecError("the target does not say its operand format: give --operand-format")
    if args.no_accept:
        shapes = None
    elif args.accept_shapes:
        shapes = shapes_from_text(args.accept_shapes)
    else:
        gpu = spec.startswith(("torch", "py:"))
        shapes = shapes_for_outputs(accept_outputs if accept_outputs is not None else (100_000 if gpu else 4096))
    stream = progress_stream(args)
    counting = _CountingTarget(target, stream) if stream is not None else None
    try:
        report = probe_gemm(counting or target, fmt, K=K, shape=shape, scan_k=scan_k,
                            acceptance_shapes=shapes, seed=seed)
    finally:
        if counting is not None:
            counting.done()
    text = report.to_json(raw=args.raw)
    if args.report:
        write_text(args.report, text + "\n")
    print(text if args.json else report.summary())
    return 0 if report.passed in (None, True) else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("probe", help="identify a black-box GEMM's accumulation model and accept it",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gemm", metavar="SPEC",
                   help="the GEMM under test (required): fpspec:PRESET | numpy | torch-scaled-mm[-fast] | "
                        "torch-bf16 | torch-fp16 | py:MODULE:FACTORY")
    add_alias(p, "--target", "gemm", metavar="SPEC")
    p.add_argument("--operand-format", choices=["e4m3", "e5m2", "fp16", "bf16"], metavar="FORMAT",
                   help="operand format: e4m3, e5m2, fp16, bf16 (default: the target's own)")
    add_alias(p, "--format", "operand_format", choices=["e4m3", "e5m2", "fp16", "bf16"])
    p.add_argument("--k", default="1024", help=f"K of the probe GEMMs (default 1024, at most {MAX_K})")
    p.add_argument("--shape", metavar="MxN", help="M and N of every probe GEMM (default 256x256 for "
                   "libraries; fpspec models use row-wise dot products)")
    p.add_argument("--scan-k", default="512", help="how far the group-membership scan looks (default 512)")
    p.add_argument("--accept-outputs", metavar="N",
                   help="at least N (> 0) sampled outputs in the acceptance test (default 100000 for GPU and "
                        "py: targets, 4096 for CPU ones), over K = 256..16384 and M, N = 64..4096")
    p.add_argument("--accept-shapes", metavar="MxNxK[:RxC],...", help="explicit acceptance shapes "
                   "(R x C outputs sampled per shape)")
    p.add_argument("--no-accept", action="store_true", help="probe and fit only")
    p.add_argument("--observe", action="store_true",
                   help="no probe: run the cuBLAS target (torch-bf16, torch-fp16, torch-scaled-mm[-fast] or a "
                        "cublas-h200-* preset) once at --shape and --k under the torch profiler and print the "
                        "fpspec model of the kernel it launched (exit 1 when that kernel is not modelled)")
    p.add_argument("--seed", default="2026", help="acceptance operand seed (default 2026)")
    p.add_argument("--json", action="store_true", help="print the whole report as JSON")
    p.add_argument("--raw", action="store_true", help="include every probe output (hex) in the JSON")
    p.add_argument("--report", metavar="OUT.json", help="write the JSON report here (atomically)")
    add_quiet(p)
    p.set_defaults(func=_cmd_probe)
