"""A kernel engineer's binary32 block quantizer with every operation order as a named step (FPS-MUT-2).

This is the quantizer a CUDA or Triton kernel team writes from ``docs/implementers.rst``: the
binary32 profiles (``seed-fp32``, ``seed-portable``, ``seed-triton``, ``te-fp32``, ``te-kernel``;
FPS-BLK-3, FPS-BLK-8, FPS-BLK-9), vectorized over a view with NumPy ``float32`` operations
(each one IEEE binary32, correctly rounded, never contracted) and fpspec's own conversions
(:func:`fpspec.convert.encode`).  With the default :class:`Fp32Steps` it is one more twin of
:func:`fpspec.exact.blocks._fp32_profile` (the mutation tests hold it to every binary32 set of
the pack); each other value of a step is one plausible wrong kernel of the mutant catalogue
(:mod:`fpspec.mutants.catalogue`).  The steps, numbered as the exact profile numbers them::

    1. ge = fp32(fp32(6T) / g)          [global_encode]      g = 0: amax_zero
    2. gd = fp32(1 / ge)                [global_decode]
    3. sc = fp32(a_B * fp32(ge * 1/6))  [block_scale]        min(sc, FLT_MAX, U); c_B = round(sc)
    4. zero-scale rule; s_B = value(c_B)                     [zero_scale_rule, scale_flush]
    5. mult = fp32(1 / fp32(s_B * gd))  [multiplier]         capped at FLT_MAX
    6. q = E2M1(fp32(x * mult))         [payload_rounding, signed_zero]
    7. dequantized value                [dequant]
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from ..convert import decode, encode
from ..errors import FpspecError
from ..fast.blocks import block_amax_grid_fast
from ..schemes import AmaxZero, Arithmetic, BlockSpec, Dequant, SignedZero

__all__ = ["Fp32Steps", "quantize_view_fp32_steps", "global_scales", "block_steps"]

F32 = np.float32
FLT_MAX = F32(np.finfo(np.float32).max)

GlobalEncode = Literal["six-t-over-g", "six-times-t-over-g", "six-t-times-recip-g"]
GlobalDecode = Literal["reciprocal", "g-over-six-t"]
BlockScale = Literal["mul-ge-sixth", "divide-first", "mul-then-divide", "mul-ge-then-sixth", "a-over-six-gd"]
Multiplier = Literal["recip-of-product", "ge-over-s", "recip-s-times-ge", "divide-by-product"]
DequantOrder = Literal["profile", "seed-kernel", "seed-portable", "te", "q-s-over-ge", "q-times-s-g-over-six-t"]


@dataclass(frozen=True)
class Fp32Steps:
    """One choice per step of the binary32 sequence; the defaults are the profiles' own.

    ``None`` means "as the :class:`BlockSpec` says" (its rounding, zero-scale rule, the
    profile's signed-zero rule, multiplier cap, zero-amax rule and dequantization formula).
    """

    global_encode: GlobalEncode = "six-t-over-g"
    global_decode: GlobalDecode = "reciprocal"
    block_scale: BlockScale = "mul-ge-sixth"
    scale_rounding: str = "rne"
    scale_saturate: bool = True
    scale_flush: bool = False
    multiplier: Multiplier = "recip-of-product"
    payload_rounding: str | None = None
    signed_zero: SignedZero | None = None
    zero_scale_rule: bool | None = None
    cap_multiplier: bool | None = None
    amax_zero: AmaxZero | None = None
    dequant: DequantOrder = "profile"
    ftz_input: bool = False

    def with_(self, **kw: object) -> "Fp32Steps":
        return replace(self, **kw)  # type: ignore[arg-type]


def _expand(grid: np.ndarray, block: int, tile: str, shape: tuple[int, int]) -> np.ndarray:
    """A per-block array repeated onto the elements of the view."""
    e = np.repeat(grid, block, axis=1)
    if tile == "BxB":
        e = np.repeat(e, block, axis=0)
    return e[: shape[0], : shape[1]]


def global_scales(steps: Fp32Steps, spec: BlockSpec, g: np.float32) -> tuple[np.float32, np.float32]:
    """Steps 1 and 2: ge and gd."""
    assert spec.target is not None
    t = F32(float(spec.target))
    six_t = F32(6) * t
    amax_zero = steps.amax_zero or spec.profile.amax_zero
    if g == 0:
        if amax_zero is AmaxZero.REFUSE:
            raise FpspecError(spec.profile.zero_amax_refusal())
        ge = F32(1) if amax_zero is AmaxZero.ONE else FLT_MAX
        return ge, F32(1) / ge
    with np.errstate(over="ignore", divide="ignore", under="ignore"):
        if steps.global_encode == "six-t-over-g":
            ge = six_t / g
        elif steps.global_encode == "six-times-t-over-g":
            ge = F32(6) * (t / g)
        else:
            ge = six_t * (F32(1) / g)
        ge = min(ge, FLT_MAX)
        if ge == 0:
            ge = F32(1)
        gd = F32(1) / ge if steps.global_decode == "reciprocal" else g / six_t
    return F32(ge), F32(gd)


def _unrounded_scales(steps: Fp32Steps, a_b: np.ndarray, ge: np.float32, gd: np.float32) -> np.ndarray:
    """Step 3 before rounding: the binary32 block scale of every block."""
    sixth = F32(1) / F32(6)
    if steps.block_scale == "mul-ge-sixth":
        return a_b * (ge * sixth)
    if steps.block_scale == "divide-first":
        return (a_b / F32(6)) * ge
    if steps.block_scale == "mul-then-divide":
        return (a_b * ge) / F32(6)
    if steps.block_scale == "mul-ge-then-sixth":
        return (a_b * ge) * sixth
    return (a_b / F32(6)) / gd


def block_steps(steps: Fp32Steps, spec: BlockSpec, a_b: np.ndarray, ge: np.float32,
                gd: np.float32) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Steps 3 to 5 for every block amax ``a_b`` (binary32): the scale codes, their values s_B,
    and the payload multipliers (None when the payload is divided by fp32(s_B gd) instead)."""
    prof = spec.profile
    sf = spec.scale_format
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        sc = _unrounded_scales(steps, a_b, ge, gd)                                  # 3
        if steps.scale_saturate:
            sc = np.minimum(np.minimum(sc, FLT_MAX), F32(float(sf.max_finite)))
        overflow = "sat" if steps.scale_saturate else "nonfinite"
        scales = encode(sc.astype(np.float32), sf, steps.scale_rounding, overflow=overflow).astype(np.uint8)
        if steps.scale_flush and sf.subnormals:
            scales = np.where(scales < (1 << sf.man_bits), 0, scales).astype(np.uint8)
        zsr = spec.zero_scale_rule if steps.zero_scale_rule is None else steps.zero_scale_rule
        if zsr:                                                                     # 4
            scales = np.where(scales == 0, spec.one_code, scales).astype(np.uint8)
        s = decode(scales, sf).astype(np.float32)
        if steps.multiplier == "divide-by-product":                                 # 5
            return scales, s, None
        if steps.multiplier == "recip-of-product":
            mult = F32(1) / (s * gd)
        elif steps.multiplier == "ge-over-s":
            mult = ge / s
        else:
            mult = (F32(1) / s) * ge
        cap = prof.cap_multiplier if steps.cap_multiplier is None else steps.cap_multiplier
        return scales, s, (np.minimum(mult, FLT_MAX) if cap else mult).astype(np.float32)


def quantize_view_fp32_steps(v: np.ndarray, spec: BlockSpec, g: np.float32, rbits: np.ndarray | None = None,
                             steps: Fp32Steps = Fp32Steps()) -> dict[str, np.ndarray]:
    """Quantize the (M, K) binary32 view ``v`` with tensor amax ``g`` by the steps given.

    Returns the outputs of a quantize vector set for one case: ``codes``, ``scales``,
    ``decode_scale`` and ``dequant`` (FP32 bit patterns as uint32).
    """
    if spec.arithmetic is not Arithmetic.FP32:
        raise FpspecError(f"the binary32 step quantizer models binary32 profiles; {spec.profile.name} is "
                          f"{spec.arithmetic.value}")
    prof = spec.profile
    b, tile = spec.block, spec.tile
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        x = v.astype(np.float32)
        if steps.ftz_input:
            x = np.where(np.abs(x) < F32(2.0 ** -126), np.copysign(F32(0), x), x).astype(np.float32)
        ge, gd = global_scales(steps, spec, F32(g))
        a_b = block_amax_grid_fast(x, b, tile).astype(np.float32)
        scales, s, mult = block_steps(steps, spec, a_b, ge, gd)                     # 3-5
        if mult is None:                                                            # 6
            y = x / _expand(s * gd, b, tile, x.shape)
        else:
            y = x * _expand(mult, b, tile, x.shape)
        y = y.astype(np.float32)
        mode = spec.rounding.value if steps.payload_rounding is None else steps.payload_rounding
        sr = mode.startswith("sr-")
        # a NaN scaled value (0 times an infinite multiplier) becomes code 0, as TE's reference cast
        codes = encode(y, spec.payload_format, mode, overflow="sat", nan="zero", rbits=rbits if sr else None,
                       nbits=spec.nbits).astype(np.uint8)
        signed_zero = steps.signed_zero or prof.signed_zero
        if signed_zero is SignedZero.POSITIVE:
            codes = np.where(y == 0, 0, codes).astype(np.uint8)
        q = decode(codes, spec.payload_format).astype(np.float32)
        deq = _dequantize(steps, spec, q, s, ge, gd, F32(g))                          # 7
    return {"codes": codes, "scales": scales, "decode_scale": np.array(gd, np.float32).view(np.uint32),
            "dequant": deq.astype(np.float32).view(np.uint32)}


def _dequantize(steps: Fp32Steps, spec: BlockSpec, q: np.ndarray, s: np.ndarray, ge: np.float32,
                gd: np.float32, g: np.float32) -> np.ndarray:
    """Step 7, in the profile's order or a named other one."""
    order = steps.dequant
    if order == "profile":
        order = {Dequant.SEED_KERNEL: "seed-kernel", Dequant.SEED_PORTABLE: "seed-portable",
                 Dequant.TE: "te"}[spec.profile.dequant]
    b, tile = spec.block, spec.tile
    ex = lambda a: _expand(a, b, tile, q.shape)  # noqa: E731
    assert spec.target is not None
    six_t = F32(6) * F32(float(spec.target))
    if order == "seed-kernel":
        return (q * ex(s)) * gd
    if order == "seed-portable":
        return q * ex(s * gd)
    if order == "te":
        return q * ex((s * g) * (F32(1) / six_t))
    if order == "q-s-over-ge":
        return (q * ex(s)) / ge
    return q * ex((s * g) / six_t)
