"""Measure on a CUDA GPU the reference behaviours a CPU cannot show (issue 10, docs/disagreements.rst).

Makes ``vectors/provenance/h200-refs-cuda/`` (its README says which run made which file).  On the
GPU machine, from the repository root (torch with CUDA and Triton; torchao 0.18.0 importable for
part 3; a local copy of the seed's Triton GEMM for part 2)::

    python3 -m tools.gpu.h200_refs_cuda --out OUT [--seed-gemm PATH/gemm.py] [--pack vectors/v1]

Nothing from the references is in this file: part 3 runs the repository's own
``tools.compare_torchao_mx`` and ``tools.compare_torchao_nvfp4`` with ``--device cuda``; part 2
imports the seed's ``backends/triton/gemm.py`` from the path given (it is not part of fpspec).
What it writes under OUT:

1. ``log2.npz``: the floor and ceiling of the GPU's binary32 log2 on every positive
   finite binary32 x, as exceptions to the exact floor / ceiling of log2 x: for torch's
   CUDA ``torch.log2`` and for Triton's ``tl.log2`` (the seed's ``_round_finite_float``
   takes its binade from ``floor(tl.log2(a))``), the bit patterns where they differ and
   by how much.  Also ``tl.exp2`` of every integer in [-300, 300] (the seed's ``_ldexp``).
2. ``seed_gemm.npz``: operands and outputs of the seed's ``issue_rz_bf16_gemm`` (with and
   without the 1/1024 snap) at shapes that select both of its tile sizes.
3. ``tao_mx_cuda.tgz``, ``tao_nv_cuda.tgz``: torchao's MXFP4 ``to_mx`` (four scale modes)
   and NVFP4 ``NVFP4Tensor`` run on CUDA over the pack's quantize sets, as fpspec results
   folders (``fpspec check PACK RESULTS --declare ...`` judges them on any machine).
4. ``meta.json``: versions of everything involved.

Each part is independent; a failing part is reported and the others still run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import time
import traceback
from pathlib import Path

import numpy as np

from tools.common import load_file

ROOT = Path(__file__).resolve().parents[2]

#: Positive finite binary32 bit patterns: 0x00000001 .. 0x7F7FFFFF.
FIRST, LAST = 1, 0x7F7FFFFF
CHUNK = 1 << 27


def exact_floor_log2(bits):
    """floor(log2 x) of positive finite binary32 bit patterns (torch int64 tensor), exactly."""
    import torch

    e = (bits >> 23) - 127
    m = bits & 0x7FFFFF
    sub = e == -127
    # subnormal: x = m 2^-149, floor(log2 x) = bitlen(m) - 1 - 149
    msub = torch.where(sub, m, torch.ones_like(m)).to(torch.float64)
    blen = torch.floor(torch.log2(msub)).to(torch.int64)  # exact: m < 2^23, float64 log2 of an integer
    return torch.where(sub, blen - 149, e)


def torch_where_pow2(e, m):
    """Whether binary32 fields (exponent e, mantissa m) hold a power of two."""
    normal_pow2 = (e > 0) & (m == 0)
    sub_pow2 = (e == 0) & (m != 0) & ((m & (m - 1)) == 0)
    return normal_pow2 | sub_pow2


def scan_log2(log2_fn, label: str) -> dict[str, np.ndarray]:
    """Exceptions of floor/ceil of ``log2_fn`` (a float32 CUDA tensor -> float32 tensor)."""
    import torch

    fl_bits, fl_delta, cl_bits, cl_delta = [], [], [], []
    t0 = time.time()
    for lo in range(FIRST, LAST + 1, CHUNK):
        hi = min(lo + CHUNK, LAST + 1)
        bits = torch.arange(lo, hi, dtype=torch.int64, device="cuda")
        x = bits.to(torch.int32).view(torch.float32)
        y = log2_fn(x)
        ef = exact_floor_log2(bits)
        ec = ef + (~torch_where_pow2(bits >> 23, bits & 0x7FFFFF)).to(torch.int64)
        gf = torch.floor(y).to(torch.int64)
        gc = torch.ceil(y).to(torch.int64)
        bad_f = gf != ef
        bad_c = gc != ec
        fl_bits.append(bits[bad_f].cpu().numpy().astype(np.uint32))
        fl_delta.append((gf - ef)[bad_f].cpu().numpy().astype(np.int32))
        cl_bits.append(bits[bad_c].cpu().numpy().astype(np.uint32))
        cl_delta.append((gc - ec)[bad_c].cpu().numpy().astype(np.int32))
        del bits, x, y, ef, ec, gf, gc
    out = {f"{label}_floor_bits": np.concatenate(fl_bits), f"{label}_floor_delta": np.concatenate(fl_delta),
           f"{label}_ceil_bits": np.concatenate(cl_bits), f"{label}_ceil_delta": np.concatenate(cl_delta)}
    print(f"  {label}: floor exceptions {out[f'{label}_floor_bits'].size}, ceil exceptions "
          f"{out[f'{label}_ceil_bits'].size} ({time.time() - t0:.1f} s)", flush=True)
    return out


def triton_log2():
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _log2_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=1.0)
        tl.store(y_ptr + offs, tl.log2(x), mask=mask)

    @triton.jit
    def _exp2_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        tl.store(y_ptr + offs, tl.exp2(x), mask=mask)

    def log2(x):
        y = torch.empty_like(x)
        n = x.numel()
        _log2_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y

    def exp2(x):
        y = torch.empty_like(x)
        n = x.numel()
        _exp2_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y

    return log2, exp2


def part_log2(out: Path, meta: dict) -> None:
    import torch

    arrays = {}
    arrays.update(scan_log2(torch.log2, "torch"))
    tl_log2, tl_exp2 = triton_log2()
    arrays.update(scan_log2(tl_log2, "triton"))
    n = torch.arange(-300, 301, dtype=torch.float32, device="cuda")
    arrays["exp2_n"] = n.cpu().numpy().astype(np.int32)
    arrays["triton_exp2_bits"] = tl_exp2(n).view(torch.int32).cpu().numpy().astype(np.uint32)
    arrays["torch_exp2_bits"] = torch.exp2(n).view(torch.int32).cpu().numpy().astype(np.uint32)
    np.savez_compressed(out / "log2.npz", **arrays)
    meta["log2"] = {k: int(v.size) for k, v in arrays.items()}


def bf16_operands(rng: np.random.Generator, rows: int, k: int, style: str) -> np.ndarray:
    """BF16 bit patterns (uint16) of a rows x k operand: 'wide' exponents over 2^-20..2^20 with
    random signs and mantissas, or 'narrow' (2^-3..2^3, cancellation-prone)."""
    span = 20 if style == "wide" else 3
    e = rng.integers(-span, span + 1, size=(rows, k))
    mant = rng.integers(0, 128, size=(rows, k))
    sign = rng.integers(0, 2, size=(rows, k))
    bits = (sign << 15) | ((e + 127) << 7) | mant
    zero = rng.random((rows, k)) < 0.05
    bits[zero] = 0
    return bits.astype(np.uint16)


def part_seed_gemm(out: Path, meta: dict, path: str) -> None:
    import torch

    mod = load_file(path, "seed_triton_gemm")
    rng = np.random.default_rng(20261201)
    arrays = {}
    shapes = [(64, 64, 1024, "wide"), (64, 64, 1024, "narrow"), (1024, 1024, 512, "wide"), (96, 200, 640, "wide")]
    for idx, (m, n, k, style) in enumerate(shapes):
        a = bf16_operands(rng, m, k, style)
        bt = bf16_operands(rng, n, k, style)
        ta = torch.from_numpy(a.view(np.int16)).cuda().view(torch.bfloat16)
        tb = torch.from_numpy(np.ascontiguousarray(bt.T).view(np.int16)).cuda().view(torch.bfloat16)
        y = mod.issue_rz_bf16_gemm(ta, tb)
        ys = mod.issue_rz_bf16_gemm(ta, tb, snap_to_1_over_1024=True)
        torch.cuda.synchronize()
        arrays[f"s{idx}_a"] = a
        arrays[f"s{idx}_bt"] = bt
        arrays[f"s{idx}_out"] = y.view(torch.int32).cpu().numpy().astype(np.uint32)
        arrays[f"s{idx}_snap"] = ys.view(torch.int32).cpu().numpy().astype(np.uint32)
        print(f"  seed gemm {m}x{n}x{k} {style}: done", flush=True)
    np.savez_compressed(out / "seed_gemm.npz", **arrays)
    meta["seed_gemm"] = {"path": path, "shapes": [list(s) for s in shapes]}


def part_torchao(out: Path, meta: dict, pack: str) -> None:
    for name, module, extra in (("tao_mx_cuda", "tools.compare_torchao_mx", []),
                                ("tao_nv_cuda", "tools.compare_torchao_nvfp4", ["--pack"])):
        res = Path("/tmp") / name
        cmd = [sys.executable, "-m", module, *extra, pack, "--out", str(res), "--device", "cuda"]
        print("  $", " ".join(cmd), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        print(r.stdout[-3000:], r.stderr[-3000:], flush=True)
        meta[name] = {"rc": r.returncode, "stdout_tail": r.stdout[-2000:], "stderr_tail": r.stderr[-2000:]}
        if res.is_dir():
            with tarfile.open(out / f"{name}.tgz", "w:gz") as tf:
                tf.add(res, arcname=name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed-gemm", help="path of a copy of the seed's backends/triton/gemm.py (part 2)")
    ap.add_argument("--pack", default=str(ROOT / "vectors" / "v1"), help="vector pack for part 3")
    ap.add_argument("--parts", default="log2,seed_gemm,torchao")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    meta = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        import triton

        meta["triton"] = triton.__version__
    except Exception as exc:  # noqa: BLE001 - reported, not hidden
        meta["triton"] = f"unavailable: {exc}"
    try:
        import torchao

        meta["torchao"] = torchao.__version__
    except Exception as exc:  # noqa: BLE001
        meta["torchao"] = f"unavailable: {exc}"
    parts = args.parts.split(",")
    jobs = {"log2": lambda: part_log2(out, meta),
            "seed_gemm": lambda: part_seed_gemm(out, meta, args.seed_gemm),
            "torchao": lambda: part_torchao(out, meta, args.pack)}
    for p in parts:
        if p == "seed_gemm" and not args.seed_gemm:
            meta[p] = "skipped: no --seed-gemm"
            continue
        print(f"part {p}", flush=True)
        t0 = time.time()
        try:
            jobs[p]()
        except Exception:  # noqa: BLE001 - one part's failure must not lose the others
            meta[f"{p}_error"] = traceback.format_exc()
            print(meta[f"{p}_error"], flush=True)
        meta[f"{p}_seconds"] = round(time.time() - t0, 1)
    (out / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
