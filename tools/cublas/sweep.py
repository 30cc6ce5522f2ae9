"""Sweep cuBLAS GEMMs over shapes on a CUDA GPU: the launched kernels and sampled FP32 output bits.

Run on the GPU machine, from the repository root (vectors/provenance/h200-cublas/README.md):

    PYTHONUNBUFFERED=1 PYTHONPATH=. python3 -m tools.cublas.sweep --out OUTDIR

Four targets (tools/cublas/common.py TARGETS): ``torch.mm(A, BT.t(),
out_dtype=torch.float32)`` on BF16 and FP16, and ``torch._scaled_mm`` on float8_e4m3fn
with ``use_fast_accum`` False and True (scales 1, FP32 output) - the calls of
tools/gpu/h200_probe.py and fpspec/adapters/torch_gemm.py.  For every (target, shape) it:

1. builds A (M x K) and BT (N x K) on the device from the counter-based hash of
   (seed, row, k) (tools/cublas/common.py; the CPU regenerates any row), and
   records a checksum of every sampled row and column of the operands as they went in;
2. calls the GEMM once unprofiled (an FP8 call that fails with M not a multiple of 16
   is retried with M rounded up, and says so), then ``--reps`` times under ``torch.profiler`` inside a
   ``record_function("fpspec:<id>:<rep>")`` and keeps up to 64 sampled outputs
   (a few rows x a few columns) as FP32 bits;
3. reads from the kineto trace the kernels each call launched: name, grid, block,
   duration, and the raw ``args`` (tools/cublas/kernels.py).

Jobs run cheapest first, a chunk of jobs per profiler session; every finished chunk is
appended to OUTDIR/sweep.jsonl (one JSON object per line: a "meta" line, one "call"
line per job, "chunk" lines with timing, a "done" line), so a run stopped by its time
limit still returns every finished chunk.  ``--budget`` stops starting new chunks
after that many seconds.  The first chunk's trace is kept as OUTDIR/trace_chunk0.json.gz.

``--local`` runs the same pipeline without torch: a synthetic stand-in for cuBLAS
(fpspec's models at sampled outputs, kernels and launch grids from issue 14's rule,
a kineto-like trace faked around them) to test this script and the fit on a CPU.
``--device cpu`` runs real torch on the CPU (torch.mm on float32 copies, the CPU
having no mm with out_dtype; the profiler's CPU ops stand in for kernels), to test the
torch code path.  ``--shapes FILE`` replaces the grid (held-out acceptance lists).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gzip
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from fpspec.cublas.h200 import TARGETS, call_shape

from .common import (CODE_BYTES, OPERANDS, SCHEMA, bits_hex, code_checksum, codes_numpy, codes_torch, default_grid,
                     first_call, parse_shapes_text, sample_counts, sample_index, small_grid)
from .kernels import attribute_kernels, trace_fields

TAG = "fpspec:"
GEN_CHUNK_ELEMS = 1 << 24   # rows of operands generated at a time (int64 temporaries)


# ================================================================== jobs
def build_jobs(targets: list[str], shapes: list[tuple[int, int, int]], max_outputs: int, seed: int) -> list[dict]:
    """One job per (target, shape), cheapest first (operand bytes + products), targets
    interleaved so that a run cut short keeps every target's cheap shapes."""
    jobs = []
    for si, shape in enumerate(shapes):
        for target in targets:
            m, n, k = call_shape(target, shape)
            js = seed + 1000 * si + 10 * list(TARGETS).index(target)   # the same for any subset of targets
            r, c = sample_counts(m, n, max_outputs)
            jobs.append({"target": target, "requested_shape": list(shape), "shape": [m, n, k],
                         "seed_a": js + 1, "seed_b": js + 2,
                         "rows": sample_index(m, r, js + 3).tolist(), "cols": sample_index(n, c, js + 4).tolist(),
                         "cost": (m + n) * k * CODE_BYTES[TARGETS[target].fmt] * 40 + m * n * k / 200})
    jobs.sort(key=lambda j: (j["cost"], j["target"]))
    for i, j in enumerate(jobs):
        j["id"] = i
    return jobs


def chunks(jobs: list[dict], max_jobs: int, max_bytes: float):
    """Consecutive jobs whose operands together stay under ``max_bytes``."""
    cur, size = [], 0.0
    for j in jobs:
        m, n, k = j["shape"]
        b = (m + n) * k * CODE_BYTES[TARGETS[j["target"]].fmt]
        if cur and (len(cur) >= max_jobs or size + b > max_bytes):
            yield cur
            cur, size = [], 0.0
        cur.append(j)
        size += b
    if cur:
        yield cur


# ================================================================== torch backend
class TorchBackend:
    """The real thing: torch on ``device`` ("cuda" on the GPU machine, "cpu" for tests)."""

    def __init__(self, device: str, reps: int):
        import torch

        self.torch = torch
        self.device = device
        self.cuda = device.startswith("cuda")
        if self.cuda and not torch.cuda.is_available():
            raise SystemExit(f"torch {torch.__version__} sees no CUDA device")
        self.reps = reps
        self.one = torch.tensor(1.0, dtype=torch.float32, device=device)
        self.fields_recorded = False
        self.no_profiler = False

    # ---------------------------------------------------------------- facts
    def meta(self) -> dict:
        t = self.torch
        d: dict[str, Any] = {"backend": "torch", "device": self.device, "torch": t.__version__,
                             "cuda_runtime": t.version.cuda}
        if self.cuda:
            props = t.cuda.get_device_properties(0)
            d.update(gpu=props.name, compute_capability=f"{props.major}.{props.minor}",
                     sm_count=props.multi_processor_count)
            for key, fn in (("cublas_compiled", lambda: t._C._cuda_getCompiledVersion()),
                            ("preferred_blas_library", lambda: str(t.backends.cuda.preferred_blas_library())),
                            ("allow_bf16_reduced_precision_reduction",
                             lambda: t.backends.cuda.matmul.allow_bf16_reduced_precision_reduction),
                            ("allow_fp16_reduced_precision_reduction",
                             lambda: t.backends.cuda.matmul.allow_fp16_reduced_precision_reduction),
                            ("cublaslt_version", _cublaslt_version)):
                try:
                    d[key] = fn()
                except Exception as exc:  # informational only
                    d[key] = f"unavailable: {exc!r}"
        return d

    # ---------------------------------------------------------------- operands
    def _dtype(self, fmt: str):
        t = self.torch
        return {"bf16": t.bfloat16, "fp16": t.float16, "e4m3": t.float8_e4m3fn}[fmt]

    def operand(self, fmt: str, seed: int, rows: int, k: int):
        """The rows x k operand as the GEMM's dtype, generated in row blocks."""
        t = self.torch
        out = t.empty((rows, k), dtype=self._dtype(fmt), device=self.device)
        step = max(1, GEN_CHUNK_ELEMS // k)
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            codes = codes_torch(t, fmt, seed, r0, r1, k, self.device)
            if fmt == "e4m3":
                out[r0:r1] = codes.to(t.uint8).view(t.float8_e4m3fn)
            else:  # 0..65535 -> the int16 with the same 16 bits
                out[r0:r1] = (codes - ((codes >> 15) << 16)).to(t.int16).view(self._dtype(fmt))
            del codes
        return out

    def checksum(self, x, idx: list[int]) -> list[int]:
        """code_checksum of the given rows of an operand, from the tensor that goes in."""
        t = self.torch
        sel = x.index_select(0, t.tensor(idx, dtype=t.int64, device=self.device))
        raw = sel.view(t.uint8 if x.element_size() == 1 else t.int16).to(t.int64)
        raw = raw & (0xFF if x.element_size() == 1 else 0xFFFF)
        w = t.arange(1, x.shape[1] + 1, dtype=t.int64, device=self.device)
        return [int(v) for v in (raw * w[None, :]).sum(dim=1).cpu().tolist()]

    def call(self, target: str, a, bt):
        t = self.torch
        cfg = TARGETS[target]
        if cfg.fmt == "e4m3":
            return t._scaled_mm(a, bt.t(), scale_a=self.one, scale_b=self.one, out_dtype=t.float32,
                                use_fast_accum=cfg.fast_accum)
        if not self.cuda:  # stand-in: the CPU has no mm with out_dtype
            return t.mm(a.float(), bt.float().t())
        return t.mm(a, bt.t(), out_dtype=t.float32)

    def warmup(self, targets: list[str]) -> dict:
        """One unprofiled call per target (cuBLAS handles, workspaces) and one tiny
        profiler session (CUPTI start-up); returns their times."""
        t = self.torch
        from torch.profiler import profile

        out = {}
        size = (256, 1024) if self.cuda else (16, 64)
        for target in targets:
            t0 = time.perf_counter()
            fmt = TARGETS[target].fmt
            a, bt = self.operand(fmt, 1, *size), self.operand(fmt, 2, *size)
            self.call(target, a, bt)
            if self.cuda:
                t.cuda.synchronize()
            out[target] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        if self.no_profiler:
            return out
        try:
            with profile(activities=self._activities()) as prof:
                (t.ones(4, device=self.device) + 1).sum().item()
            with tempfile.TemporaryDirectory() as tmp:
                prof.export_chrome_trace(str(Path(tmp) / "t.json"))
            out["profiler_start"] = round(time.perf_counter() - t0, 3)
        except Exception as exc:  # no profiler: bits only, no kernels
            self.no_profiler = True
            out["profiler_error"] = repr(exc)
            print(f"profiler unusable, collecting bits without kernels: {exc!r}", flush=True)
        return out

    def _activities(self):
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])

    # ---------------------------------------------------------------- a chunk
    def run_chunk(self, jobs: list[dict], keep_trace: Path | None) -> tuple[list[dict], dict]:
        t = self.torch
        from torch.profiler import profile, record_function

        t0 = time.perf_counter()
        ready = []
        for j in jobs:
            fmt = TARGETS[j["target"]].fmt
            m, n, k = j["shape"]
            try:
                bt = self.operand(fmt, j["seed_b"], n, k)
                a, m, adjusted = first_call(fmt, m, lambda rows: self.operand(fmt, j["seed_a"], rows, k),
                                            lambda a: self.call(j["target"], a, bt))
                if adjusted is not None:
                    j["shape"] = [m, n, k]
                    j["adjusted"] = adjusted
                j["checksum_a"] = self.checksum(a, j["rows"])
                j["checksum_b"] = self.checksum(bt, j["cols"])
                ready.append((j, a, bt))
            except Exception as exc:
                j["error"] = f"prepare (operands or the unprofiled call): {exc!r}"
        if self.cuda:
            t.cuda.synchronize()
        t_gen = time.perf_counter() - t0
        samples: dict[int, list] = {}
        cm = contextlib.nullcontext() if self.no_profiler else profile(activities=self._activities())
        with cm as prof:
            for j, a, bt in ready:
                rows = t.tensor(j["rows"], dtype=t.int64, device=self.device)
                cols = t.tensor(j["cols"], dtype=t.int64, device=self.device)
                samples[j["id"]] = []
                for rep in range(self.reps):
                    try:
                        with record_function(f"{TAG}{j['id']}:{rep}"):
                            y = self.call(j["target"], a, bt)
                        samples[j["id"]].append(y.index_select(0, rows).index_select(1, cols).contiguous())
                        del y
                    except Exception as exc:
                        j["error"] = f"gemm: {exc!r}"
                        break
            if self.cuda:
                t.cuda.synchronize()
        t_run = time.perf_counter() - t0 - t_gen
        del ready
        extra: dict[str, Any] = {}
        trace: dict = {"traceEvents": []}
        if prof is not None:
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    path = Path(tmp) / "trace.json"
                    prof.export_chrome_trace(str(path))
                    text = path.read_text()
                trace = json.loads(text)
                if keep_trace is not None:
                    with gzip.open(keep_trace, "wt") as f:
                        f.write(text)
            except Exception as exc:  # fall back on the FunctionEvent tree below
                extra["trace_error"] = repr(exc)
        if prof is not None and not self.fields_recorded:
            extra["trace_fields"] = trace_fields(trace)
            extra["function_event_fields"] = _event_fields(prof)
            self.fields_recorded = True
        owners = attribute_kernels(trace, TAG, ("kernel",) if self.cuda else ("cpu_op",))
        if prof is not None and self.cuda and any(not owners.get(f"{TAG}{j['id']}:0", {}).get("kernels")
                                                  for j in jobs):
            fallback = _kernels_from_events(prof)
            for tag, names in fallback.items():
                slot = owners.setdefault(tag, {"kernels": [], "method": None})
                if not slot["kernels"]:
                    slot["kernels"] = [{"name": n, "grid": None, "block": None, "ts": None, "dur_us": d, "args": {}}
                                       for n, d in names]
                    slot["method"] = "profiler-events (no grid)"
        records = []
        for j in jobs:
            outs = [s.float().cpu().numpy().astype(np.float32).view(np.uint32) for s in samples.get(j["id"], [])]
            records.append(finish_record(j, outs, owners))
        timing = {"generate_s": round(t_gen, 3), "profiled_s": round(t_run, 3),
                  "trace_s": round(time.perf_counter() - t0 - t_gen - t_run, 3), "trace_events": len(trace.get("traceEvents", []))}
        return records, timing | extra


def _cublaslt_version() -> int | str:
    """cublasLtGetVersion() of the libcublasLt this process loaded (from /proc/self/maps)."""
    import ctypes

    for line in Path("/proc/self/maps").read_text().splitlines():
        if "libcublasLt" in line:
            lib = ctypes.CDLL(line.split()[-1])
            lib.cublasLtGetVersion.restype = ctypes.c_size_t
            return int(lib.cublasLtGetVersion())
    return "libcublasLt not loaded"


def _event_fields(prof) -> dict:
    """What torch's profiler objects expose for device kernels (recorded once)."""
    out: dict[str, Any] = {}
    try:
        evs = list(prof.events())
        dev = [e for e in evs if "cuda" in str(getattr(e, "device_type", "")).lower()]
        sample = dev[0] if dev else (evs[0] if evs else None)
        if sample is not None:
            out["events_item"] = sorted(a for a in dir(sample) if not a.startswith("_"))
            out["events_item_example"] = {a: repr(getattr(sample, a, None))[:200]
                                          for a in ("name", "device_type", "device_index", "kernels", "id")}
        ka = list(prof.key_averages())
        if ka:
            out["key_averages_item"] = sorted(a for a in dir(ka[0]) if not a.startswith("_"))
    except Exception as exc:  # informational only
        out["error"] = repr(exc)
    return out


def _kernels_from_events(prof) -> dict[str, list[tuple[str, float]]]:
    """Fallback when the trace JSON links no kernel to an annotation: the kernels torch's
    FunctionEvent tree lists under each annotation (names and durations, no grid)."""
    out: dict[str, list] = {}
    try:
        for e in prof.events():
            if not str(e.name).startswith(TAG):
                continue
            names, stack = [], [e]
            while stack:
                c = stack.pop()
                names += [(str(k.name), float(getattr(k, "duration", 0) or 0)) for k in getattr(c, "kernels", [])]
                stack += list(getattr(c, "cpu_children", []))
            out[str(e.name)] = names
    except Exception:  # a fallback only
        pass
    return out


def finish_record(j: dict, outs: list[np.ndarray], owners: dict) -> dict:
    """The JSON line of one job."""
    rec = {"kind": "call", **{k: v for k, v in j.items() if k != "cost"},
           "fmt": TARGETS[j["target"]].fmt, "call": TARGETS[j["target"]].call, "operands": OPERANDS}
    rec.setdefault("error", None)
    if outs:
        rec["bits"] = bits_hex(outs[0])
        rec["reps"] = len(outs)
        rec["reps_equal"] = all(np.array_equal(o, outs[0]) for o in outs[1:])
        if not rec["reps_equal"]:
            rec["bits_reps"] = [bits_hex(o) for o in outs[1:]]
    kern = []
    for rep in range(len(outs) or 1):
        slot = owners.get(f"{TAG}{j['id']}:{rep}", {"kernels": [], "method": None})
        kern.append(slot)
    rec["kernels"] = kern[0]["kernels"]
    rec["attribution"] = kern[0]["method"]
    rec["kernels_reps"] = [[(k["name"], k["grid"]) for k in s["kernels"]] for s in kern[1:]]
    rec["kernels_reps_equal"] = all(r == [(k["name"], k["grid"]) for k in kern[0]["kernels"]]
                                    for r in rec["kernels_reps"])
    rec["gemm_us"] = round(sum(float(k.get("dur_us") or 0) for k in rec["kernels"]), 3)
    return rec


# ================================================================== local backend
class LocalBackend:
    """A synthetic cuBLAS for tests: fpspec's models at the sampled outputs, kernel names
    and grids from issue 14's rule, wrapped in a kineto-like trace that goes through the
    same attribution code.  Its choices (FAKE_*) are made up; only the pipeline is real."""

    #: fake CTA budgets per fake kernel family and the rule's R
    FAKE_R = 20
    FAKE_B = {"small": 96, "large": 120, "fp8": 112}

    def __init__(self, reps: int):
        self.reps = reps
        self.fields_recorded = False

    def meta(self) -> dict:
        return {"backend": "local (fpspec models; synthetic kernels)", "device": "cpu", "gpu": "none",
                "fake_rule": {"R": self.FAKE_R, "B": self.FAKE_B}}

    def warmup(self, targets: list[str]) -> dict:
        return {}

    def fake_kernel(self, target: str, m: int, n: int, k: int) -> tuple[str, list[int], dict]:
        """(kernel name, grid, how the outputs are made) for a shape."""
        from .kernels import rule_p, slice_for_p

        from fpspec.cublas.h200 import parse_kernel_name

        cfg = TARGETS[target]
        fmt, kt = cfg.fmt, cfg.kt
        if fmt != "e4m3" and min(m, n) <= 8:
            return "gemmSN_TN_kernel", [math.ceil(n / 32), m, 1], {"hyp": "fp32-seq", "s": None}
        if fmt != "e4m3" and (m % 2 or n % 2):
            p = max(1, min(4, k // 256))
            s = math.ceil(k / (p * 8)) * 8 if p > 1 else None
            name = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x32_stage4_warpsize2x2x1_tensor16x8x16_kernel"
            return name, [math.ceil(n / 64), math.ceil(m / 64), p], {"hyp": "g8-front", "s": s}
        if fmt == "e4m3":
            tm, tn, fam, name = 128, 128, "fp8", "nvjet_qqtst_128x128_128x4_1x1_v_bz_splitK_TNT"
        elif m * n <= 128 * 128:
            tm, tn, fam, name = 64, 64, "small", "nvjet_tst_64x64_64x8_2x1_v_bz_splitK_TNT"
        else:
            tm, tn, fam, name = 128, 256, "large", "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_splitK_TNT"
        # CTAs as cuBLAS launches them: whole clusters of tiles (fpspec.cublas.h200.padded_tiles)
        cl = parse_kernel_name(name).cluster or (1, 1)
        gx, gy = -(-math.ceil(n / tm) // cl[0]) * cl[0], -(-math.ceil(m / tn) // cl[1]) * cl[1]
        p = rule_p(k, kt, gx * gy, self.FAKE_R, self.FAKE_B[fam])
        return name, [gx, gy, p], {"hyp": "main", "s": slice_for_p(k, kt, p)}

    def run_chunk(self, jobs: list[dict], keep_trace: Path | None) -> tuple[list[dict], dict]:
        from .fit import hypotheses, model_bits

        t0 = time.perf_counter()
        events: list[dict] = []
        samples: dict[int, list] = {}
        clock = 0.0
        corr = 0
        for j in jobs:
            cfg = TARGETS[j["target"]]
            fmt = cfg.fmt
            m, n, k = j["shape"]
            a = codes_numpy(fmt, j["seed_a"], j["rows"], k)
            bt = codes_numpy(fmt, j["seed_b"], j["cols"], k)
            j["checksum_a"] = code_checksum(a).tolist()
            j["checksum_b"] = code_checksum(bt).tolist()
            name, grid, how = self.fake_kernel(j["target"], m, n, k)
            hyp = {h.name: h for h in hypotheses(j["target"])}[how["hyp"]]
            r, c = len(j["rows"]), len(j["cols"])
            pa, pb = np.repeat(a, c, axis=0), np.tile(bt, (r, 1))
            bits = model_bits(fmt, pa, pb, hyp, how["s"])
            samples[j["id"]] = [bits] * self.reps
            for rep in range(self.reps):
                corr += 1
                tag = f"{TAG}{j['id']}:{rep}"
                events.append({"ph": "X", "cat": "user_annotation", "name": tag, "pid": 1, "tid": 1,
                               "ts": clock, "dur": 10.0, "args": {"External id": corr}})
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                               "ts": clock + 5.0, "dur": 1.0, "args": {"correlation": corr, "External id": corr}})
                events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": clock + 20.0,
                               "dur": 3.0, "args": {"correlation": corr, "External id": corr, "grid": grid,
                                                    "block": [384, 1, 1], "registers per thread": 168,
                                                    "shared memory": 200000, "device": 0, "stream": 7}})
                clock += 100.0
        trace = {"traceEvents": events, "note": "synthetic (--local)"}
        if keep_trace is not None:
            with gzip.open(keep_trace, "wt") as f:
                json.dump(trace, f)
        extra = {}
        if not self.fields_recorded:
            extra["trace_fields"] = trace_fields(trace)
            self.fields_recorded = True
        owners = attribute_kernels(trace, TAG)
        records = [finish_record(j, samples.get(j["id"], []), owners) for j in jobs]
        return records, {"generate_s": 0.0, "profiled_s": round(time.perf_counter() - t0, 3), "trace_s": 0.0,
                         "trace_events": len(events)} | extra


# ================================================================== main
def gpu_facts() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as exc:  # informational
        return f"unavailable: {exc!r}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory for sweep.jsonl (appended) and trace_chunk0.json.gz")
    p.add_argument("--local", action="store_true", help="no torch: fpspec models and synthetic kernels (tests)")
    p.add_argument("--device", default="cuda", help="torch device: cuda (default) or cpu (tests of the torch path)")
    p.add_argument("--targets", default=",".join(TARGETS), help="comma-separated targets (default: all four)")
    p.add_argument("--shapes", help="file of shapes, one 'M N K' / 'MxNxK' per line (default: the built-in grid)")
    p.add_argument("--grid", choices=("default", "small"), default=None,
                   help="built-in grid (default: 'default', or 'small' with --local / --device cpu)")
    p.add_argument("--max-shapes", type=int, default=None, help="keep only the first N shapes of the grid (tests)")
    p.add_argument("--reps", type=int, default=2, help="calls per job (determinism and kernel choice; default 2)")
    p.add_argument("--max-outputs", type=int, default=64, help="sampled outputs per job (default 64)")
    p.add_argument("--seed", type=int, default=14000, help="base of the operand seeds")
    p.add_argument("--budget", type=float, default=420.0, help="seconds after which no new chunk starts (default 420)")
    p.add_argument("--chunk-jobs", type=int, default=48, help="jobs per profiler session (default 48)")
    p.add_argument("--chunk-bytes", type=float, default=6e9, help="operand bytes per chunk (default 6e9)")
    p.add_argument("--no-profiler", action="store_true", help="output bits only, no kernels (if the profiler fails)")
    args = p.parse_args(argv)

    t_start = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    bad = [t for t in targets if t not in TARGETS]
    if bad:
        p.error(f"unknown target(s) {bad}; known: {', '.join(TARGETS)}")
    if args.shapes:
        shapes = parse_shapes_text(Path(args.shapes).read_text(), args.shapes)
        grid_name = f"file {args.shapes}"
    else:
        grid_name = args.grid or ("small" if args.local or args.device == "cpu" else "default")
        shapes = small_grid() if grid_name == "small" else default_grid()
    if args.max_shapes:
        shapes = shapes[:args.max_shapes]
    backend = LocalBackend(args.reps) if args.local else TorchBackend(args.device, args.reps)
    if args.no_profiler and not args.local:
        backend.no_profiler = True
    jobs = build_jobs(targets, shapes, args.max_outputs, args.seed)
    log = open(out / "sweep.jsonl", "a")

    def write(obj: dict) -> None:
        log.write(json.dumps(obj, separators=(",", ":")) + "\n")
        log.flush()

    meta = {"kind": "meta", "schema": SCHEMA, "operands": OPERANDS, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                             time.gmtime()),
            "argv": sys.argv[1:] if argv is None else argv, "grid": grid_name, "shapes": len(shapes), "jobs": len(jobs),
            "targets": {t: dataclasses.asdict(TARGETS[t]) for t in targets},
            "nvidia_smi": gpu_facts() if not args.local else None,
            "python": sys.version.split()[0], "numpy": np.__version__, "platform": platform.platform(),
            "env": {k: os.environ.get(k) for k in ("CUBLASLT_WORKSPACE_SIZE", "CUBLAS_WORKSPACE_CONFIG",
                                                   "TORCH_BLAS_PREFER_CUBLASLT", "CUDA_VISIBLE_DEVICES")},
            **backend.meta()}
    write(meta)
    try:
        warm = backend.warmup(targets)
    except Exception as exc:
        traceback.print_exc()
        warm = {"error": repr(exc)}
    write({"kind": "warmup", "seconds": warm})
    print(f"sweep: {len(jobs)} jobs ({len(shapes)} shapes x {len(targets)} targets), grid {grid_name}; "
          f"warm-up {warm}", flush=True)
    done = 0
    for ci, chunk in enumerate(chunks(jobs, args.chunk_jobs, args.chunk_bytes)):
        elapsed = time.time() - t_start
        if elapsed > args.budget:
            left = jobs[done:]
            write({"kind": "skipped", "reason": f"budget {args.budget}s reached at {elapsed:.0f}s",
                   "jobs": [[j["target"], j["shape"]] for j in left]})
            print(f"budget reached: {len(left)} jobs not run", flush=True)
            break
        try:
            records, timing = backend.run_chunk(chunk, out / "trace_chunk0.json.gz" if ci == 0 else None)
        except Exception as exc:
            traceback.print_exc()
            write({"kind": "chunk-error", "chunk": ci, "error": repr(exc),
                   "jobs": [[j["target"], j["shape"]] for j in chunk]})
            done += len(chunk)
            continue
        for r in records:
            write(r)
        done += len(chunk)
        errs = sum(1 for r in records if r.get("error"))
        last = chunk[-1]
        names = sorted({r["kernels"][0]["name"][:40] for r in records if r.get("kernels")})[:3]
        write({"kind": "chunk", "chunk": ci, "jobs": len(chunk), "errors": errs,
               "elapsed_s": round(time.time() - t_start, 1), **timing})
        print(f"[{time.time() - t_start:6.1f}s] chunk {ci}: {done}/{len(jobs)} jobs, up to {last['target']} "
              f"{'x'.join(map(str, last['shape']))}; errors {errs}; gen {timing['generate_s']}s "
              f"run {timing['profiled_s']}s trace {timing['trace_s']}s; e.g. {names}", flush=True)
    write({"kind": "done", "jobs_run": done, "elapsed_s": round(time.time() - t_start, 1)})
    log.close()
    print(f"done: {done}/{len(jobs)} jobs in {time.time() - t_start:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
