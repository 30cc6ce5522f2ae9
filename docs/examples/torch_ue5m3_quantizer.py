"""A small pure-torch UE5M3 block quantizer, checked by ``fpspec check`` (docs/checker.rst).

It implements the seed paper's FP32 kernel order (fpspec profile ``ue5m3/seed-fp32``,
docs/scheme-ue5m3.rst) with plain torch float32 tensor operations, on any device:

    global_encode = 6T / amax        (amax = 0 -> 1; capped at FLT_MAX)
    global_decode = 1 / global_encode
    scale         = block_amax * (global_encode * fp32(1/6)), min(., 61440), UE5M3 RNE
    scale code 0  -> code of 1.0     (the zero-scale rule)
    multiplier    = min(1 / (scale * global_decode), FLT_MAX)
    payload       = E2M1_RNE(x * multiplier), saturating at +-6, -0 keeps code 0x8
    dequantized   = (payload * scale) * global_decode

Every step is one IEEE binary32 operation (torch's float32 ``*`` and ``/`` are
correctly rounded on CPU and CUDA), and both roundings to a code are integer
bit manipulation, so nothing here depends on fpspec.

``bug`` makes a deliberately wrong variant that the checker must reject:
``"no-zero-scale-rule"`` keeps a zero scale, ``"ties-away"`` rounds payload ties
away from zero.

Run against a pack:  python docs/examples/torch_ue5m3_quantizer.py vectors/v1 --out /tmp/r
then:                fpspec check vectors/v1 /tmp/r --declare docs/examples/torch_ue5m3_seed_fp32.yaml
"""

from __future__ import annotations

import argparse
from typing import Any

import torch

FLT_MAX = 3.4028234663852886e38
UE5M3_MAX = 61440.0
UE5M3_ONE = 0x78


def ue5m3_rne(s: torch.Tensor) -> torch.Tensor:
    """Nonnegative finite float32 (<= 61440) -> UE5M3 code (int32), round to nearest even."""
    bits = s.contiguous().view(torch.int32)
    exp = (bits >> 23) - 127
    mant = bits & 0x7FFFFF
    keep = mant >> 20
    low = mant & 0xFFFFF
    up = (low > 0x80000) | ((low == 0x80000) & ((keep & 1) == 1))
    normal = ((exp + 15) << 3) + keep + up.to(torch.int32)
    # subnormal range (< 2^-14): quantum 2^-17; s * 2^17 is exact, torch.round is ties-to-even
    sub = torch.round(s * 131072.0).to(torch.int32)
    return torch.where(s >= 2.0 ** -14, normal, sub)


def ue5m3_value(code: torch.Tensor) -> torch.Tensor:
    """UE5M3 code (int32, finite) -> float32 value."""
    e = code >> 3
    m = (code & 7).to(torch.float32)
    normal = (8.0 + m) * torch.exp2((e - 18).to(torch.float32))
    sub = m * 2.0 ** -17
    return torch.where(e > 0, normal, sub).to(torch.float32)


_E2M1_MAG = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def e2m1_rne(y: torch.Tensor, ties_away: bool = False) -> torch.Tensor:
    """float32 -> E2M1 code (uint8): nearest, ties to the even code, saturating at 6."""
    a = y.abs()
    # RNE: ties at 0.25, 1.25, 2.5, 5 go down (even code), at 0.75, 1.75, 3.5 go up
    if ties_away:
        bounds = [(0.25, True), (0.75, True), (1.25, True), (1.75, True), (2.5, True), (3.5, True), (5.0, True)]
    else:
        bounds = [(0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False), (3.5, True), (5.0, False)]
    code = torch.zeros_like(a, dtype=torch.int32)
    for mid, tie_up in bounds:
        code += (a >= mid if tie_up else a > mid).to(torch.int32)
    sign = torch.signbit(y).to(torch.int32) << 3
    return (code | sign).to(torch.uint8)


def quantize_seed_fp32(x: torch.Tensor, amax: float, target: float = 448.0, block: int = 16,
                       tile: str = "1xB", columnwise: bool = False, bug: str | None = None) -> dict[str, torch.Tensor]:
    """Quantize a float32 (M, K) tensor; returns codes, scales, decode_scale and dequant."""
    dev = x.device
    f32 = lambda v: torch.tensor(v, dtype=torch.float32, device=dev)  # noqa: E731
    v = (x.T if columnwise else x).contiguous().to(torch.float32)
    m, k = v.shape
    six_t = f32(6.0) * f32(target)
    amax_t = f32(amax)
    if amax == 0.0:
        ge = f32(1.0)
    else:
        ge = torch.minimum(six_t / amax_t, f32(FLT_MAX))
        if ge.item() == 0.0:
            ge = f32(1.0)
    gd = f32(1.0) / ge
    mulf = ge * (f32(1.0) / f32(6.0))
    a = v.abs()
    if tile == "BxB":
        grid = a.reshape(m // block, block, k // block, block).amax(dim=(1, 3))
    else:
        grid = a.reshape(m, k // block, block).amax(dim=2)
    sc = torch.minimum(grid * mulf, f32(UE5M3_MAX))
    code = ue5m3_rne(sc)
    if bug != "no-zero-scale-rule":
        code = torch.where(code == 0, torch.full_like(code, UE5M3_ONE), code)
    s = ue5m3_value(code)
    mult = torch.minimum(f32(1.0) / (s * gd), f32(FLT_MAX))
    if tile == "BxB":
        mult_el = mult.repeat_interleave(block, 0).repeat_interleave(block, 1)
        s_el = s.repeat_interleave(block, 0).repeat_interleave(block, 1)
    else:
        mult_el = mult.repeat_interleave(block, 1)
        s_el = s.repeat_interleave(block, 1)
    q = e2m1_rne(v * mult_el, ties_away=(bug == "ties-away"))
    mag = _E2M1_MAG.to(dev)[(q & 7).long()]
    qv = torch.where((q & 8) != 0, -mag, mag)
    deq = (qv * s_el) * gd
    return {"codes": q, "scales": code.to(torch.uint8), "decode_scale": gd.reshape(()), "dequant": deq}


def run_set(meta: dict[str, Any], inputs: dict[str, Any], device: str = "cpu", bug: str | None = None) -> dict:
    """All outputs of one ``quantize`` set of profile ue5m3/seed-fp32, as tensors stacked over cases."""
    p = meta["params"]
    xs = torch.from_numpy(inputs["x"].view("int32").copy()).view(torch.float32).to(device)
    amax = torch.from_numpy(inputs["amax"].view("int32").copy()).view(torch.float32)
    outs: dict[str, list] = {"codes": [], "scales": [], "decode_scale": [], "dequant": []}
    for i in range(xs.shape[0]):
        o = quantize_seed_fp32(xs[i], float(amax[i]), target=float(p["target"]), block=p["block"],
                               tile=p["tile"], columnwise=p["columnwise"], bug=bug)
        for key in outs:
            outs[key].append(o[key])
    return {key: torch.stack(v) for key, v in outs.items()}


DECLARATION = {
    "name": "torch-ue5m3-seed-fp32-example",
    "operations": ["quantize"],
    "schemes": ["ue5m3"],
    "profiles": ["ue5m3/seed-fp32"],
    "formats": ["e2m1", "ue5m3", "fp32"],
    "rounding": {"e2m1": ["rne"]},
}


def main() -> int:
    from fpspec.adapters.torch_vectors import torch_to_bits
    from fpspec.vectors.declare import Declaration
    from fpspec.vectors.harness import Harness

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pack")
    ap.add_argument("--out", required=True, help="results folder for fpspec check")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bug", choices=("no-zero-scale-rule", "ties-away"))
    args = ap.parse_args()
    h = Harness(args.pack, Declaration.from_mapping(DECLARATION), to_bits=torch_to_bits)
    for s in h.sets():
        outs = run_set(s.meta, s.inputs, args.device, args.bug)
        s.submit({k: v for k, v in outs.items() if k in s.outputs})
    h.save(args.out)
    print(h.text())
    return h.report().exit_code


if __name__ == "__main__":
    raise SystemExit(main())
