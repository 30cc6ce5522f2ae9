"""Public block-quantization API: :func:`quantize` and :func:`dequantize` (FPS-BLK-*).

``quantize`` turns a float tensor into a :class:`fpspec.quantized.QuantizedTensor`
under a named scheme and profile (:mod:`fpspec.schemes`); ``dequantize`` turns
it back into float32 with the profile's own dequantization formula.  The
normative steps are in docs/scheme-ue5m3.rst, scheme-nvfp4.rst and
scheme-mxfp4.rst; in brief, for a tensor X:

0. Refuse non-finite values (FPS-BLK-1); take the view V = X, or X^T when
   ``columnwise``; pad with zeros to whole blocks when ``pad`` (else refuse);
   apply the 16-point Hadamard transform along K when ``rht``; binary32
   profiles narrow V to binary32 (RNE).
1. Tensor amax g: the given ``amax`` (binary32, finite, > 0) or max |V|
   rounded to binary32 (current scaling).
2. Block amax, scale code, payload codes: the profile
   (:mod:`fpspec.exact.blocks` is the spec, :mod:`fpspec.fast.blocks` its twin).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Literal

import numpy as np

from .errors import FpspecError
from .exact.blocks import BlockResult, quantize_view_exact, rht16_exact
from .fast.blocks import absmax_float32, quantize_view_fast, rht16_fast
from .fast.rounding import decode_table
from .formats import get_format
from .quantized import QuantizedTensor
from .schemes import BlockSpec, get_profile, resolve_spec

__all__ = ["quantize", "dequantize", "quantize_view", "prepare_view", "tensor_amax"]

_FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _check_input(x: np.ndarray) -> tuple[np.ndarray, np.float32 | None]:
    """The (M, K) binary32/binary64 array, refusing non-finite values; and max |x| when it came free."""
    x = np.asarray(x)
    if x.dtype.name not in _FLOAT_DTYPES:
        raise FpspecError(f"input must be a float array ({', '.join(_FLOAT_DTYPES)}), got {x.dtype}")
    if x.ndim < 2:
        raise FpspecError(f"input must have at least 2 dimensions (M, K), got shape {x.shape}")
    if x.ndim > 2:
        x = x.reshape(-1, x.shape[-1])
    amax: np.float32 | None = None
    if x.dtype == np.float32:
        amax, finite = absmax_float32(x)
    else:
        finite = bool(np.isfinite(x).all())
    if not finite:
        bad = ~np.isfinite(x)
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise FpspecError(f"non-finite input value {x[idx]!r} (fpspec refuses NaN and Inf in block "
                          "quantization)", idx)
    if x.dtype.name in ("float16", "bfloat16"):
        x = x.astype(np.float32)  # exact widening
    return x, amax


def prepare_view(x: np.ndarray, spec: BlockSpec, *, columnwise: bool = False, pad: bool = False,
                 rht: bool = False, impl: str = "fast") -> tuple[np.ndarray, tuple[int, int], np.float32 | None]:
    """Step 0: the (M, K) view that is quantized, its shape before padding, and max |view| when
    it is already known (transposing and zero-padding do not change it) (FPS-BLK-1)."""
    x, known_amax = _check_input(x)
    v = np.ascontiguousarray(x.T if columnwise else x)
    m, k = v.shape
    b = spec.block
    need_m = spec.tile == "BxB"
    pk = (-k) % b
    pm = (-m) % b if need_m else 0
    if pk or pm:
        if not pad:
            what = f"K = {k} is not a multiple of the block {b}" if pk else \
                f"M = {m} is not a multiple of the {b}x{b} tile"
            raise FpspecError(f"{what} (view shape {(m, k)}); pass pad=True (--pad) to zero-pad")
        v = np.pad(v, ((0, pm), (0, pk)))
    if rht:
        if v.shape[1] % 16:
            raise FpspecError(f"the Hadamard transform needs K = {v.shape[1]} to be a multiple of 16")
        v = rht16_exact(v) if impl == "exact" else rht16_fast(v)
        known_amax = None
    if spec.arithmetic.value in ("fp32", "torchao-fp32") and v.dtype != np.float32:
        v = v.astype(np.float32)  # binary32 profiles read binary32 (RNE narrowing)
        known_amax = None
    return v, (m, k), known_amax


def tensor_amax(v: np.ndarray, impl: str = "fast") -> np.float32:
    """max |v| rounded to binary32 (exact for binary32 input; max is order-independent)."""
    if v.size == 0:
        return np.float32(0)
    if v.dtype == np.float32 and impl == "fast":
        return absmax_float32(v)[0]
    return np.float32(np.max(np.abs(v)))


def _given_amax(amax: object) -> np.float32:
    try:
        a = float(amax)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FpspecError(f"amax must be a number, got {amax!r}") from None
    with np.errstate(over="ignore"):
        a32 = np.float32(a)
    if not math.isfinite(a) or a <= 0 or not np.isfinite(a32) or a32 == 0:
        raise FpspecError(f"a given amax must be finite and positive in binary32, got {amax!r}")
    return a32


def quantize_view(v: np.ndarray, spec: BlockSpec, amax: np.float32, rbits: np.ndarray | None = None,
                  impl: str = "fast", want_dequant: bool = True) -> BlockResult:
    """Steps 1-2 on a prepared view (used by quantize and by the GEMM models)."""
    if spec.rounding.stochastic:
        if rbits is None:
            raise FpspecError(f"rounding {spec.rounding.value} needs random bits (rbits, uint8, "
                              f"shape {v.shape})")
        rbits = np.asarray(rbits)
        if rbits.shape != v.shape or rbits.dtype.kind != "u" or rbits.dtype.itemsize * 8 < min(spec.nbits, 32):
            want = "uint8" if spec.nbits <= 8 else ("uint16" if spec.nbits <= 16 else "uint32")
            raise FpspecError(f"rbits must be {want} (or wider unsigned) of shape {v.shape} (the quantized "
                              f"view), got {rbits.dtype} {rbits.shape}")
    if impl == "exact":
        return quantize_view_exact(v, spec, float(amax), rbits)
    if impl == "fast":
        return quantize_view_fast(v, spec, float(amax), rbits, want_dequant=want_dequant)
    raise FpspecError(f"impl must be 'fast' or 'exact', got {impl!r}")


def quantize(x: np.ndarray, scheme: str = "ue5m3", *, profile: str | None = None, block: int | None = None,
             tile: str = "1xB", target: float | None = None, amax: float | None = None,
             rounding: str = "rne", rbits: np.ndarray | None = None, nbits: int = 8, columnwise: bool = False,
             rht: bool = False, scale_format: str | None = None, zero_scale_rule: bool | None = None,
             pad: bool = False, impl: Literal["fast", "exact"] = "fast") -> QuantizedTensor:
    """Block-quantize a float tensor (FPS-BLK-1..13).

    Args:
        x: float16/bfloat16/float32/float64 array, shape (M, K) (leading dims are flattened to
            M; the container records ``source_shape`` and ``dequantize`` restores it).
        scheme: ``ue5m3``, ``nvfp4`` or ``mxfp4``.
        profile: arithmetic profile name (default per scheme, see :mod:`fpspec.schemes`).
        block: block length B (default 16, 32 for mxfp4).
        tile: ``1xB`` (one scale per B consecutive elements along K) or ``BxB``.
        target: T, the scale the tensor amax maps to (default 448).
        amax: a given tensor amax (delayed scaling); None measures max |V|.
        rounding: payload rounding (``rne``, ``sr`` = 8-bit midpoint SR, ``rna``, ...).
        rbits: random values below 2^nbits (unsigned integers), one per element of the view,
            for stochastic rounding.
        nbits: the width N of each random value (default 8, the seed paper's byte).
        columnwise: quantize X^T (the backward GEMMs' operand layout).
        rht: apply the 16-point random Hadamard transform along K first.
        scale_format: the block scale format (ue5m3 scheme: ``ue5m3`` or ``ue5m3fnu``).
        zero_scale_rule: replace a scale that rounds to 0 by 1.0 (default: the profile's).
        pad: zero-pad the view to whole blocks instead of refusing.
        impl: ``fast`` (Numba) or ``exact`` (the Fraction spec); bit-equal.
    """
    if block is None:
        block = 32 if scheme == "mxfp4" else 16
    spec = resolve_spec(scheme, profile, block=block, tile=tile, target=target, scale_format=scale_format,
                        zero_scale_rule=zero_scale_rule, rounding=rounding, nbits=nbits)
    if impl not in ("fast", "exact"):
        raise FpspecError(f"impl must be 'fast' or 'exact', got {impl!r}")
    v, orig, known = prepare_view(x, spec, columnwise=columnwise, pad=pad, rht=rht, impl=impl)
    if amax is not None:
        g = _given_amax(amax)
    else:
        g = known if (known is not None and impl == "fast") else tensor_amax(v, impl)
    res = quantize_view(v, spec, g, rbits, impl, want_dequant=False)
    params = {
        "target": None if spec.target is None else str(spec.target),
        "zero_scale_rule": spec.zero_scale_rule,
        "rounding": spec.rounding.value,
        "rht": bool(rht),
        "amax_source": "measured" if amax is None else "given",
        "view_shape": [int(orig[0]), int(orig[1])],
        "padded": bool(v.shape != orig),
    }
    return QuantizedTensor(codes=res.codes, scales=res.scales, scale_format=spec.scale_format,
                           block=block, tile=tile, encode_scale=np.float32(res.encode_scale),
                           decode_scale=np.float32(res.decode_scale), amax=np.float32(g),
                           scheme=scheme, profile=spec.profile.name, columnwise=bool(columnwise),
                           params=params, source_shape=tuple(np.shape(x)))


_E2M1 = decode_table("e2m1")


def dequantize(qt: QuantizedTensor) -> np.ndarray:
    """float32 values of a quantized tensor, shape of ``qt.codes`` (FPS-BLK-14).

    A rowwise tensor quantized from a source of more than two dimensions comes back
    in its source shape (padding dropped); otherwise the shape is the quantized view's.

    The formula is the profile's (q the E2M1 value, s the scale value, g = amax):

    * ``exact`` profiles: q s g / (6T) rounded once to binary32 (q s when g = 0);
    * ``seed-fp32``: fp32(fp32(q * s) * decode_scale) (the seed kernel's order);
    * ``te-fp32`` / ``te-kernel``: fp32(q * fp32(fp32(s * g) * fp32(1 / 6T)));
    * ``torchao-0.18``: fp32(q * fp32(decode_scale * s)), decode_scale = fp32(g / 6T);
    * ``mxfp4``: q 2^(c - 127), exact.
    """
    values = _dequantize_view(qt)
    src = qt.source_shape
    if src is not None and len(src) > 2 and not qt.columnwise:
        rows, k = math.prod(src[:-1]), src[-1]
        return values[:rows, :k].reshape(src)
    return values


def _dequantize_view(qt: QuantizedTensor) -> np.ndarray:
    prof = get_profile(qt.scheme, qt.profile)
    q = _E2M1[qt.codes.astype(np.intp)]
    sfmt = get_format(qt.scale_format)
    s_codes = qt.scale_code_per_element()
    table = decode_table(sfmt)
    s = table[s_codes.astype(np.intp)]
    if prof.dequant == "mx":
        with np.errstate(over="ignore"):
            return (q * s).astype(np.float32)  # exact; +-inf beyond binary32 (ceil/rceil near FLT_MAX)
    t = Fraction(qt.params["target"])
    six_t = float(6 * t)
    g = float(qt.amax)
    with np.errstate(all="ignore"):
        if prof.dequant == "exact":
            val = (q * s * g) / six_t if g > 0 else q * s
            return val.astype(np.float32)
        q32 = q.astype(np.float32)
        s32 = s.astype(np.float32)
        if prof.dequant == "seed-kernel":
            return (q32 * s32) * np.float32(qt.decode_scale)
        if prof.dequant == "te":
            inv = np.float32(1.0) / np.float32(six_t)
            return q32 * ((s32 * np.float32(g)) * inv)
        if prof.dequant == "torchao":
            return q32 * (np.float32(qt.decode_scale) * s32)
    raise FpspecError(f"no dequantization formula {prof.dequant!r}")
