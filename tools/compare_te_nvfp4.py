"""Compare fpspec's nvfp4/te-fp32 profile with TransformerEngine's NVFP4QuantizerRef, bit for bit.

Usage (from the repository root, with CPU torch installed)::

    python3 -m tools.compare_te_nvfp4 /tmp/teref/reference_nvfp4.py [--seed 0] [--rows 256]

The reference file is NOT part of fpspec: fetch TransformerEngine yourself and
point this script at ``transformer_engine/pytorch/custom_recipes/reference_nvfp4.py``.
The script loads that file with small stand-ins for the three TransformerEngine
modules it imports (only the names it needs at import time), quantizes a set of
random and edge-case tensors with both implementations and reports, per case,
the number of differing E2M1 codes, scale bytes and amax values
(docs/scheme-nvfp4.rst records a run).  Exit status 0 when everything matches.

``--bf16`` runs every case with bfloat16 inputs (the reference transforms them with
``x @ H`` in bfloat16) against ``quantize(..., rht_output="bf16")`` (FPS-BLK-20).  A case
that fpspec refuses (a transform past binary32: FPS-BLK-10) is reported with the
reference's amax and counted as matching when the reference's amax is not finite.

With ``--pack PACK --out RESULTS`` it instead runs the reference on a vector
pack's ``quantize`` sets of scheme nvfp4 (``--select`` globs, default
``quantize-nvfp4-*``) and writes its outputs as results for ``python3 -m fpspec
check PACK RESULTS --declare vectors/declarations/transformer-engine.yaml``.  Per
case: the view (X, or X^T for columnwise sets, through the reference's own
``_apply_rht`` for RHT sets), the set's tensor amax g (TE's current scaling
measures it; the pack gives it, the measured max where it gives +0), and
``NVFP4QuantizerRef._quantize_blockwise_reference(view, g, 16, tile_rows,
pow_2_scales=False, eps=0.0)``: its codes and scale bytes (one row per 16x16
tile), decode_scale = fp32(1 / S_enc) with S_enc formed as the reference forms
it, and the dequantized value of TE's dequantize kernel
(``transformer_engine/common/cast/nvfp4/dequantize_nvfp4.cuh``:
fp32(q * fp32(fp32(s * g) * fp32(1/2688)))), which the Python reference lacks.
"""

from __future__ import annotations

import argparse
import enum
import sys
import types

import numpy as np

from fpspec.errors import FpspecError
from fpspec.quantization import quantize
from tools.common import load_file
from tools.refs_pack import fp4x2_codes, run_pack


def _install_stubs() -> None:
    """Stand-ins for the TransformerEngine modules the reference imports (names only)."""
    te = types.ModuleType("transformer_engine")
    pt = types.ModuleType("transformer_engine.pytorch")
    cr = types.ModuleType("transformer_engine.pytorch.custom_recipes")
    gemm = types.ModuleType("transformer_engine.pytorch.custom_recipes.gemm")
    ru = types.ModuleType("transformer_engine.pytorch.custom_recipes.reference_utils")
    qt = types.ModuleType("transformer_engine.pytorch.quantized_tensor")
    import torch

    class GEMMType(enum.Enum):
        FPROP = "fprop"
        DGRAD = "dgrad"
        WGRAD = "wgrad"

    class MMParams:  # noqa: D401 - a name used in annotations only
        pass

    gemm.GEMMType = GEMMType
    gemm.MMParams = MMParams

    class Fp4Formats(enum.Enum):
        E2M1 = "e2m1"

    ru.Fp4Formats = Fp4Formats
    ru.HIGH_PRECISION_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
    ru.roundup_div = lambda a, b: (a + b - 1) // b

    class QuantizedTensorStorage:
        pass

    class Quantizer:
        def __init__(self, rowwise: bool = True, columnwise: bool = True):
            self.rowwise_usage = rowwise
            self.columnwise_usage = columnwise

    qt.QuantizedTensorStorage = QuantizedTensorStorage
    qt.Quantizer = Quantizer
    cr.gemm = gemm
    cr.reference_utils = ru
    for name, mod in [("transformer_engine", te), ("transformer_engine.pytorch", pt),
                      ("transformer_engine.pytorch.custom_recipes", cr),
                      ("transformer_engine.pytorch.custom_recipes.gemm", gemm),
                      ("transformer_engine.pytorch.custom_recipes.reference_utils", ru),
                      ("transformer_engine.pytorch.quantized_tensor", qt)]:
        sys.modules[name] = mod


def _load_reference(path: str):
    _install_stubs()
    return load_file(path, "te_reference_nvfp4")


def edge_cases(rng: np.random.Generator, rows: int) -> list[tuple[str, np.ndarray]]:
    """Named float32 tensors (random, heavy-tailed, zero and tiny blocks, E2M1 ties, near FLT_MAX) that both
    NVFP4 comparisons run (this one and ``tools.compare_torchao_nvfp4``)."""
    k = 128
    cases = []
    cases.append(("normal", rng.standard_normal((rows, k))))
    cases.append(("student-t df=2", rng.standard_t(2, (rows, k))))
    cases.append(("wide range 2^U[-30,30]", rng.standard_normal((rows, k)) * 2.0 ** rng.uniform(-30, 30, (rows, k))))
    z = rng.standard_normal((rows, k))
    z[::3, :16] = 0.0
    z[1::3, 16:32] = -0.0
    z[2::3, 32:48] *= 2.0 ** -40   # blocks whose scale underflows to 0x00
    z[0, 0] = 1e4                  # one large value: most blocks far below the amax
    cases.append(("zero, -0 and tiny blocks", z))
    # exact E2M1 ties after scaling: amax 6*448/2688 = 1 per block, payload = x * 6 / (s * ...)
    t = rng.choice(np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0]) / 6.0, (rows, k))
    t *= rng.choice([-1.0, 1.0], (rows, k))
    t[:, ::16] = 1.0
    cases.append(("E2M1 ties", t))
    cases.append(("all zeros", np.zeros((32, k))))
    cases.append(("subnormal binary32", rng.standard_normal((32, k)) * 2.0 ** -140))
    cases.append(("near FLT_MAX", rng.uniform(-1, 1, (32, k)) * 3.0e38))
    return [(n, a.astype(np.float32)) for n, a in cases]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reference", help="path to TransformerEngine's reference_nvfp4.py")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--bf16", action="store_true", help="bfloat16 inputs, rht_output='bf16'")
    ap.add_argument("--pack", help="run on this vector pack's nvfp4 quantize sets instead")
    ap.add_argument("--out", help="with --pack: results folder")
    ap.add_argument("--select", default="quantize-nvfp4-*", help="with --pack: set-name globs")
    args = ap.parse_args(argv)
    if args.pack:
        if not args.out:
            ap.error("--pack needs --out")
        return run_on_pack(args)
    import torch

    ref = _load_reference(args.reference)
    rng = np.random.default_rng(args.seed)
    failures = 0
    total = 0
    for name, x in edge_cases(rng, args.rows):
        xt = torch.from_numpy(x.copy())
        if args.bf16:
            xt = xt.to(torch.bfloat16)
            x = xt.to(torch.float32).numpy()  # the same values, exactly
        for tile_shape, tile in [((1, 16), "1xB"), ((16, 16), "BxB")]:
            for rht in (False, True):
                if rht and tile == "BxB":
                    continue
                q = ref.NVFP4QuantizerRef(dtype=ref.reference_utils.Fp4Formats.E2M1, rowwise=True,
                                          columnwise=True, quant_tile_shape=tile_shape, with_rht=rht)
                qx, sx, qx_t, sx_t, amax_r, amax_c = q._quantize(xt.clone())
                for cw, (qd, sd, am) in ((False, (qx, sx, amax_r)), (True, (qx_t, sx_t, amax_c))):
                    tag = f"{name:28} tile={tile_shape} rht={int(rht and cw)} {'col' if cw else 'row'}"
                    try:
                        mine = quantize(x, "nvfp4", profile="te-fp32", tile=tile, columnwise=cw,
                                        rht=rht and cw, rht_output="bf16" if args.bf16 else "fp32")
                    except FpspecError as exc:
                        te_amax = float(am.float().item())
                        ok = not np.isfinite(te_amax)
                        print(f"{'OK ' if ok else 'DIFF'} {tag}: refused ({exc}); reference amax {te_amax}")
                        failures += not ok
                        continue
                    codes = fp4x2_codes(qd)
                    scales = sd.view(torch.uint8).numpy()
                    if tile == "BxB":
                        scales = scales[::16]  # TE repeats each tile's scale on its 16 rows
                    dc = int(np.sum(codes != mine.codes))
                    ds = int(np.sum(scales != mine.scales))
                    da = int(np.float32(am.float().item()) != mine.amax)
                    total += codes.size
                    status = "OK " if dc == ds == da == 0 else "DIFF"
                    print(f"{status} {tag}: codes {dc}/{codes.size}, scales {ds}/{scales.size}, amax {da}")
                    failures += (dc + ds + da) > 0
    print(f"{'all match' if failures == 0 else f'{failures} mismatching cases'}; {total} codes compared")
    return 0 if failures == 0 else 1


def run_on_pack(args: argparse.Namespace) -> int:
    """NVFP4QuantizerRef's blockwise quantizer on a pack's nvfp4 sets, written as fpspec results."""
    import torch

    ref = _load_reference(args.reference)
    fp4 = ref.reference_utils.Fp4Formats.E2M1
    f32 = torch.float32
    print(f"TransformerEngine reference {args.reference}, torch {torch.__version__}")

    def accept(p: dict) -> str | None:
        if p["scheme"] != "nvfp4":
            return "not nvfp4"
        if p["rounding"] != "rne":
            return f"payload rounding {p['rounding']} (the reference rounds to nearest even)"
        if p["target"] != 448.0:
            return f"target {p['target']} (TE maps the amax to 448 * 6)"
        return None

    def run_case(c) -> dict:
        rows = 16 if c.params["tile"] == "BxB" else 1
        q = ref.NVFP4QuantizerRef(dtype=fp4, rowwise=True, columnwise=False, quant_tile_shape=(rows, 16),
                                  with_rht=c.params["rht"])
        v = torch.from_numpy(c.view.copy())
        if c.params["rht"]:
            v = q._apply_rht(v)
        g = c.amax if c.amax != 0 else np.float32(v.abs().max().item())
        gt = torch.tensor([g], dtype=f32)
        qx, sx = q._quantize_blockwise_reference(v, gt, 16, rows, pow_2_scales=False, eps=0.0)
        # S_enc as the reference forms it (min(2688 / g, FLT_MAX), 1 if that is 0), then S_dec = 1 / S_enc
        s_enc = torch.min(torch.div(torch.tensor(448.0, dtype=f32) * torch.tensor(6.0, dtype=f32), gt),
                          torch.tensor(torch.finfo(f32).max, dtype=f32))
        if s_enc.item() == 0:
            s_enc = torch.tensor([1.0], dtype=f32)
        s_dec = torch.div(1.0, s_enc)
        scales = sx.view(torch.uint8).numpy()
        if rows == 16:
            scales = scales[::16]
        codes = fp4x2_codes(qx)
        # TE's dequantize kernel: final_scale = (s * amax) * (1 / (6 * 448)), value = q * final_scale
        lut = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=f32)
        qv = lut[torch.from_numpy(codes.astype(np.int64))]
        s = sx.to(f32).repeat_interleave(16, dim=1)
        final = (s * gt) * torch.tensor(1.0 / 2688.0, dtype=f32)
        return {"codes": codes, "scales": scales, "decode_scale": np.float32(s_dec.item()),
                "dequant": (qv * final).numpy()}

    return run_pack(args, accept, run_case)


if __name__ == "__main__":
    sys.exit(main())
