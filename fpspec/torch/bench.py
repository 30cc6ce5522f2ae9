"""``fpspec bench encode|quantize|gemm --device DEVICE``: the torch twin timed on a torch device.

Each row is fpspec's torch twin beside anchors measured in the same run on the same device, each
named with its package version: a device copy of the input (``clone``: the memory bound), torch's
own float8 cast where one exists, torchao's NVFP4 / MX quantizers when torchao is importable, a
torch bfloat16 matmul of the same shape for GEMMs.  Times are the best of ``--repeat`` runs after a
warm-up, each run closed by a device synchronisation (a CUDA kernel returns before it finishes).
The ratio is anchor time / fpspec time (> 1: fpspec faster).  Performance is never asserted by
tests; the figures in docs/torch.rst come from this command on the H200.
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

import numpy as np
import torch

__all__ = ["TORCH_BENCHMARKS", "device_best_time"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_best_time(fn: Callable[[], object], repeat: int, device: torch.device) -> tuple[float, float]:
    """(first call seconds, best of ``repeat`` further calls), each call closed by a synchronisation."""
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return first, best


def _row(case: str, elements: int, nbytes: int, ours: float, first: float, anchors: dict[str, float],
         **extra: object) -> dict:
    """A result row: fpspec's time and input bandwidth, and each anchor's time and ratio; the first
    anchor is the row's ``baseline`` (the CLI's table prints it)."""
    name, base = next(iter(anchors.items()))
    return {"case": case, "elements": elements, "fpspec_s": ours, "fpspec_elem_per_s": elements / ours,
            "input_gb_per_s": nbytes / ours / 1e9, "baseline": name, "baseline_s": base,
            "baseline_elem_per_s": elements / base, "ratio": base / ours, "first_call_s": first,
            "anchors": {k: {"s": v, "ratio": v / ours} for k, v in anchors.items()}, **extra}


def _device(args: argparse.Namespace) -> torch.device:
    return torch.device(args.device)


def _torch_name() -> str:
    return f"torch {torch.__version__}"


def bench_encode(args: argparse.Namespace) -> list[dict]:
    """float32 -> e2m1 / e4m3 (RNE) by the torch twin; anchors: a device copy, and torch's
    float8_e4m3fn cast for e4m3 (codes compared)."""
    from ..convert import encode

    dev = _device(args)
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    x = (torch.randn(args.n, generator=g) * 30).to(dev)
    rows = []
    for fmt in args.formats:
        first, ours = device_best_time(lambda: encode(x, fmt), args.repeat, dev)
        anchors = {f"device copy ({_torch_name()})": device_best_time(lambda: x.clone(), args.repeat, dev)[1]}
        extra: dict = {}
        if fmt == "e4m3":
            anchors[f"{_torch_name()} float8_e4m3fn cast"] = device_best_time(
                lambda: x.to(torch.float8_e4m3fn), args.repeat, dev)[1]
            extra["codes_equal_torch_cast"] = bool(torch.equal(
                encode(x, fmt), x.to(torch.float8_e4m3fn).view(torch.uint8)))
        rows.append(_row(f"float32->{fmt} rne", x.numel(), x.numel() * 4, ours, first, anchors, device=str(dev),
                         **extra))
    return rows


def _torchao_anchors(x: torch.Tensor, scheme: str, repeat: int, dev: torch.device) -> dict[str, float]:
    """torchao's quantizer of the same tensor, when torchao is importable (its version named)."""
    try:
        import torchao
    except ImportError:
        return {}
    out: dict[str, float] = {}
    try:
        if scheme == "nvfp4":
            from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

            out[f"torchao {torchao.__version__} NVFP4Tensor.to_nvfp4"] = device_best_time(
                lambda: NVFP4Tensor.to_nvfp4(x), repeat, dev)[1]
        elif scheme == "mxfp4":
            from torchao.prototype.mx_formats.mx_tensor import MXTensor

            out[f"torchao {torchao.__version__} MXTensor.to_mx"] = device_best_time(
                lambda: MXTensor.to_mx(x, torch.float4_e2m1fn_x2, 32), repeat, dev)[1]
    except Exception as exc:  # (an anchor that does not run is reported, not fatal)
        out[f"torchao {torchao.__version__} failed: {type(exc).__name__}"] = float("nan")
    return out


def bench_quantize(args: argparse.Namespace) -> list[dict]:
    """Block quantization of an (n // K, K) float32 tensor, amax given (delayed scaling: the
    issue's goal row), by the torch twin; anchors: a device copy, torchao's quantizer."""
    from ..quantization import quantize

    dev = _device(args)
    k = args.k
    m = max(1, args.n // k)
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    x = torch.randn((m, k), generator=g).to(dev)
    amax = float(x.abs().max())
    rows = []
    for scheme in args.schemes:
        block = 32 if scheme == "mxfp4" else 16
        given = None if scheme == "mxfp4" else amax

        def ours(scheme=scheme, given=given) -> object:
            return quantize(x, scheme, amax=given)

        first, t = device_best_time(ours, args.repeat, dev)
        anchors = {f"device copy ({_torch_name()})": device_best_time(lambda: x.clone(), args.repeat, dev)[1]}
        anchors.update(_torchao_anchors(x, scheme, args.repeat, dev))
        rows.append(_row(f"{scheme} 1x{block} rne", x.numel(), x.numel() * 4, t, first, anchors, device=str(dev),
                         amax="given" if given is not None else "none (MX)"))
    return rows


def bench_gemm(args: argparse.Namespace) -> list[dict]:
    """GEMM presets at each ``--size`` (M = N = K) on the torch twin, operands quantized on the
    device (the quantize time reported apart); anchor: a torch bfloat16 matmul of the same shape."""
    from ..convert import encode
    from ..matmul import gemm
    from ..quantization import quantize

    dev = _device(args)
    rows = []
    for size in args.size:
        g = torch.Generator(device="cpu").manual_seed(args.seed)
        x = torch.randn((size, size), generator=g).to(dev)
        w = torch.randn((size, size), generator=g).to(dev)
        xb, wb = x.to(torch.bfloat16), w.to(torch.bfloat16)
        anchor = device_best_time(lambda: xb @ wb.T, args.repeat, dev)[1]
        for model in args.models:
            kind = _operand_kind(model)
            if kind in ("e4m3", "bf16"):
                def make(kind=kind):
                    return (encode(x, kind), encode(w, kind)), {"fmt": kind}
            else:
                def make(kind=kind):
                    return (quantize(x, kind), quantize(w, kind)), {}
            t_q = device_best_time(make, 1, dev)[1]
            (a, bt), kw = make()
            try:
                first, t = device_best_time(lambda: gemm(a, bt, model, **kw), args.repeat, dev)
            except Exception as exc:  # a preset the twin declines is reported, not fatal
                rows.append({"case": f"{model} {size}^3", "elements": size ** 3, "error": str(exc)[:200]})
                continue
            rows.append(_row(f"{model} {size}^3", size ** 3, 2 * size * size * 4, t, first,
                             {f"{_torch_name()} bf16 matmul": anchor}, device=str(dev), quantize_s=t_q,
                             with_quantize_s=t + t_q, preset=model))
    return rows


#: The scale format -> the scheme a bench quantizes with (a preset's first quantized form says which).
_SCHEME_OF_SCALE = {"ue5m3": "ue5m3", "ue5m3fnu": "ue5m3", "ue4m3": "nvfp4", "ue8m0": "mxfp4"}


def _operand_kind(model: str) -> str:
    """The operands a bench GEMM of ``model`` is given: its contract's first quantized form's scheme,
    else its first plain format."""
    from ..models import contract_of

    c = contract_of(model)
    if c.quantized:
        return _SCHEME_OF_SCALE[c.quantized[0].scale_format]
    return c.plain[0]


#: bench name -> (run, options it adds beyond the common ones).
TORCH_BENCHMARKS: dict[str, Callable[[argparse.Namespace], list[dict]]] = {
    "encode": bench_encode, "quantize": bench_quantize, "gemm": bench_gemm,
}
