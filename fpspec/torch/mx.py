"""Torch MX block quantization: the torch twin of the MX profiles of :mod:`fpspec.fast.blocks`.

The three MX profile families of the exact spec (:mod:`fpspec.exact.blocks`) and the fast twin,
with the same names and numbered steps (docs/scheme-mxfp4.rst, docs/scheme-mxfp8.rst):

* ``Arithmetic.MX``           FPS-BLK-12/13 (``mxfp4`` floor, ceil, even, rceil), FPS-BLK-27/28 (``mxfp8``)
* ``Arithmetic.TORCHAO_MX``   FPS-BLK-23 (``mxfp4`` torchao-0.18-floor, -ceil, -even, -rceil, -rceil-cuda)
* ``Arithmetic.MICROXCALING`` FPS-BLK-24 (``mxfp4`` microxcaling)

Step 1 (no tensor scale: encode and decode scales are 1) is :func:`quantize_mx_torch`; the
per-block steps 2-3 that all three share are :func:`_mx_blocks`, run on whole (rows, K/B, B)
tensors (every data-dependent branch of the fast kernel is a ``torch.where`` select; every
choice the spec fixes, a Python branch).  The payload format is data (:class:`ElemArgs`, the
fast twin's own tuple: E2M1, E4M3 or E5M2, FPS-BLK-26), the profile's rules too (:class:`MxArgs`).

Why it is exact (every output is an integer decision on bit patterns, or the one binary32
operation the spec names):

* Block amax a_B = ``torch.amax(|x|)`` over each block: a maximum of exact magnitudes, with no
  rounding and no order dependence (FPS-BLK-6).
* 2. The scale exponent e (:func:`_mx_exponent`) is read from the bits of a_B widened to binary64
  (exact), as the fast twin reads them: floor(log2 a_B) is the exponent field minus 1023, and
  ``ceil``, ``even`` and ``rceil`` compare the 52-bit mantissa field with integer constants
  (``ElemArgs.even_field``, ``top_field``).  The binary32 rules take FL and CL (FPS-BLK-22) from
  the binary32 bits and the generated tables of :mod:`fpspec.fast.log2` (integer comparisons:
  :func:`float_log2_floor_torch`, :func:`float_log2_ceil_torch`).  ``rceil`` of torchao
  (FPS-BLK-23, FPS-BLK-29) first forms D = fp32(a_B / max) (CPU) or fp32(a_B fp32(1/max))
  (CUDA profile): one binary32 division or multiplication of two tensors, the rounding the
  spec asks for, written tensor by tensor so that torch's CUDA rule for a Python-number divisor
  (a multiplication by its reciprocal) never applies behind the profile's back.
* 3. The divisor d = 2^ed (:func:`_mx_divisor`) is a power of two held as its exponent ed.
  Except under ``microxcaling``, the quotient |x| / d is never formed in floating point: x is
  sig 2^ex (sign, integer significand and exponent from its bits), so |x| / d = sig 2^(ex - ed)
  exactly, and :func:`minifloat_magnitude` rounds that exact value with integer shifts and
  comparisons (FPS-RND-1..3, 5..7), saturating at the largest finite code.  This is the fast
  twin's :func:`fpspec.fast.blocks.minifloat_magnitude` (FP8 payloads) and, for E2M1 (a
  minifloat with m = 1, emin = 0, max code 7), its :func:`fpspec.fast.blocks.e2m1_magnitude`:
  the nearest modes' decision points 0.25, 0.75, ..., 5 d are the midpoints of neighbouring codes
  with the ties of RNE / RNA, and the stochastic thresholds theta are the ones of FPS-RND-5..7 on
  delta = rem / 2^s, the exact position between the neighbours.
* ``microxcaling`` (FPS-BLK-24) divides in binary32 as the spec says: A = fp32(x / d32), one IEEE
  division of two float32 tensors (d32 = 2^ed, exact in binary32 for ed in [-127, 127]); then
  t = |A| 2^(m - pe) (a power-of-two scaling that stays in binary32: exact; formed in binary64
  and narrowed, both exact), fp32(t + 1/2) and fp32(t - 1/2) (the two binary32 additions of the
  spec), their floors by truncating conversion to int64 (exact for values >= 0), and the
  magnitude min(r 2^(pe - m), max) as a code (:func:`minifloat_magnitude` of the exact value
  r 2^(pe - m): monotone, so the ``min`` is the saturation).  pe = max(FL(|A|), emin) from the
  bits of |A|.

Every other operation is an int64 operation (shifts clamped to 0..62, applied only where they
are meant), a select, or a comparison.  torch's elementwise float32 / float64 ``/``, ``*``,
``+``, ``-`` are IEEE operations rounding to nearest even, without flushing subnormals, on CPU
and CUDA; float -> int64 conversion truncates.

Roundings: the profiles accept ``rne`` and ``rna`` (OCP MX), ``rne`` (torchao) and ``rne``,
``rna``, ``rtz`` (microxcaling).  Beyond them, E2M1 payloads of the non-microxcaling profiles
also take ``rtz`` and the stochastic modes (a spec built with ``spec.with_(rounding=...)``),
exactly as the fast twin and the spec round them; ``up``, ``down``, ``rne-bits``, and stochastic
rounding of FP8 payloads or of microxcaling's quotients are refused (the fast kernel has no rule
for them: it would round them as ``rtz`` or ``rna``).

Only 1xB tiles: the MX schemes allow no other (``BlockScheme.tiles``), as the fast kernel.
Large inputs run in chunks of whole rows of about :data:`CHUNK` elements, so that every int64
temporary is a few times one chunk; outputs live on the input's device, and the only host reads
are scalar checks of the arguments.
"""

from __future__ import annotations

import numpy as np
import torch

from ..choices import RoundingMode
from ..errors import FpspecError
from ..fast.blocks import ElemArgs, MxArgs, elem_args
from ..fast.codes import (MODE_CODES, MX_CEIL, MX_EVEN, MX_FLOOR, MX_MODE_CODES, MX_RCEIL, MX_RCEIL_FP32, RNA,
                          RNE, RTZ, SRA, SRM, SRU, ZB_MIN_NORMAL, ZB_ONE, ZERO_BYTE_CODES)
from ..fast.log2 import ABOVE_COUNTS, BELOW_COUNTS
from ..schemes import Arithmetic, BlockSpec, TorchDevice
from .rounding import bit_length_torch

__all__ = ["quantize_mx_torch", "minifloat_magnitude", "float_log2_floor_torch", "float_log2_ceil_torch",
           "MX_ARITHMETICS", "CHUNK"]

#: Elements per chunk (whole rows; each int64 temporary of a chunk is 8 MiB).
CHUNK = 1 << 20

#: The arithmetics whose profiles this module quantizes.
MX_ARITHMETICS = frozenset({Arithmetic.MX, Arithmetic.TORCHAO_MX, Arithmetic.MICROXCALING})

#: Payload roundings with one rule in every twin: E2M1 (through the threshold helper of the fast
#: twin, which also takes rtz and the stochastic modes) and FP8 / microxcaling (rne, rna, rtz).
_E2M1_MODES = frozenset({RoundingMode.RNE, RoundingMode.RNA, RoundingMode.RTZ, RoundingMode.SR_MIDPOINT,
                         RoundingMode.SR_ADD, RoundingMode.SR_UNBIASED})
_NEAREST_MODES = frozenset({RoundingMode.RNE, RoundingMode.RNA, RoundingMode.RTZ})

_F64_MAN = (1 << 52) - 1
_F32_EXP1 = 1 << 23          # bits of the smallest binary32 normal's exponent step
_SHIFT_MAX = 62              # largest shift ever applied to an int64


# ------------------------------------------------------------------ bit helpers
def _pow2_f64(n: torch.Tensor) -> torch.Tensor:
    """2^n as float64 for int64 n in [-1022, 1023], built from its exponent bits (exact)."""
    return ((n + 1023) << 52).view(torch.float64)


def _lshift(v: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """v << s for int64 tensors, s clamped to 0..62 (callers use it only where s is meant)."""
    return torch.bitwise_left_shift(v, s.clamp(0, _SHIFT_MAX))


def _rshift(v: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """v >> s for int64 v >= 0, s clamped to 0..62 (v < 2^53: a shift of 53 or more gives 0)."""
    return torch.bitwise_right_shift(v, s.clamp(0, _SHIFT_MAX))


def _low_bits(v: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """v mod 2^s for int64 v in [0, 2^53), s >= 0 (clamped at 62: every bit of v is kept)."""
    return v & (_lshift(torch.ones_like(v), s) - 1)


def _float_fields(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sign, sig, ex) of a float32 or float64 tensor, |x| = sig 2^ex exactly (int64 sig < 2^53;
    a subnormal or zero keeps its fraction as sig and the smallest exponent)."""
    if x.dtype == torch.float32:
        b = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
        sign = (b >> 31) != 0
        expf = (b >> 23) & 0xFF
        frac = b & 0x7FFFFF
        sig = torch.where(expf > 0, frac | (1 << 23), frac)
        return sign, sig, expf.clamp(min=1) - 150
    b = x.view(torch.int64)
    sign = b < 0
    expf = (b >> 52) & 0x7FF
    frac = b & _F64_MAN
    sig = torch.where(expf > 0, frac | (1 << 52), frac)
    return sign, sig, expf.clamp(min=1) - 1075


def _f32_bits(v: torch.Tensor) -> torch.Tensor:
    """The raw bits of a float32 tensor as int64 (0 .. 2^32 - 1)."""
    return v.view(torch.int32).to(torch.int64) & 0xFFFFFFFF


# --------------------------------------------- FL and CL of binary32 (FPS-BLK-22)
_LOG2_TABLES: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def _log2_tables(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """below[k] and above[k] of :mod:`fpspec.fast.log2` as int64 tensors on ``device`` (moved once)."""
    if device not in _LOG2_TABLES:
        _LOG2_TABLES[device] = (torch.as_tensor(np.asarray(BELOW_COUNTS, dtype=np.int64), device=device),
                                torch.as_tensor(np.asarray(ABOVE_COUNTS, dtype=np.int64), device=device))
    return _LOG2_TABLES[device]


def _exponent32(b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """floor(log2 x) of positive finite binary32 values with bits b (int64), and bits(2^that)
    (twin of ``fpspec.fast.log2._exponent``: a subnormal's from its leading bit)."""
    expf = b >> 23
    j = bit_length_torch(b) - 1
    k0 = torch.where(expf > 0, expf - 127, j - 149)
    p = torch.where(expf > 0, expf << 23, _lshift(torch.ones_like(b), j))
    return k0, p


def float_log2_floor_torch(b: torch.Tensor) -> torch.Tensor:
    """FL (FPS-BLK-22) of positive finite binary32 values with bits b (int64): k0 = floor(log2 x),
    plus one where x lies in [B[k0 + 1], 2^(k0 + 1)) (twin of :func:`fpspec.fast.log2.float_log2_floor`);
    int64.  Lanes with b = 0 give an unspecified value (callers select them away)."""
    below, _ = _log2_tables(b.device)
    k0, p = _exponent32(b)
    nxt = torch.where(k0 < -126, p << 1, p + _F32_EXP1)  # bits(2^(k0+1)); 2^128 -> 0x7F800000
    idx = (k0 + 1 + 148).clamp(0, below.shape[0] - 1)
    return k0 + (b >= nxt - below[idx]).to(torch.int64)


def float_log2_ceil_torch(b: torch.Tensor) -> torch.Tensor:
    """CL (FPS-BLK-22) of positive finite binary32 values with bits b (int64): ceil(log2 x), minus
    one where x lies in (2^k0, A[k0]] (twin of :func:`fpspec.fast.log2.float_log2_ceil`); int64."""
    _, above = _log2_tables(b.device)
    k0, p = _exponent32(b)
    idx = (k0 + 149).clamp(0, above.shape[0] - 1)
    return torch.where(b == p, k0, k0 + (b > p + above[idx]).to(torch.int64))


# --------------------------------------------------- the payload rounding helper
def minifloat_magnitude(sig: torch.Tensor, ex: torch.Tensor, m: int, emin: int, max_code: int, mode: int,
                        r: torch.Tensor | None = None, nbits: int = 0) -> torch.Tensor:
    """Magnitude code (int64) of the exact value y = sig 2^ex >= 0 (int64 sig < 2^53, int64 ex) in a
    minifloat with subnormals (m mantissa bits, smallest normal exponent emin, largest finite
    magnitude code max_code), saturating (twin of :func:`fpspec.fast.blocks.minifloat_magnitude`,
    and for E2M1 of :func:`fpspec.fast.blocks.e2m1_magnitude`; the spec's step 4 of
    :func:`fpspec.exact.blocks.payload_code`).

    The binade of y is bit_length(sig) - 1 + ex; with eb = max(binade, emin) the quantum is
    2^(eb - m), so y / quantum = sig / 2^s, s = eb - m - ex: its integer part k (the toward-zero
    significand) and remainder rem < 2^s are exact shifts and masks, and the code is
    (eb - emin) 2^m + k, plus one when the mode rounds up:

    * ``rne``: rem > 2^(s-1), or rem = 2^(s-1) and k odd (FPS-RND-1); ``rna``: rem >= 2^(s-1)
      (FPS-RND-3); ``rtz``: never (FPS-RND-2);
    * ``sr-midpoint`` / ``sr-add``: rem 2^A >= U 2^s with (A, U) = (N + 1, 2^(N+1) - 2r - 1) /
      (N, 2^N - r), i.e. floor(rem 2^A / 2^s) >= U (U an integer) (FPS-RND-5, 6); ``sr-unbiased``:
      rem 2^N > r 2^s (FPS-RND-7): the floor exceeds r, or equals it with dropped bits nonzero.

    A code beyond max_code (y above the largest value, or rounded past it) is max_code.  ``mode``
    is a code of :mod:`fpspec.fast.codes`; ``r`` (int64, below 2^nbits) is read by the stochastic
    modes only.
    """
    binade = bit_length_torch(sig) - 1 + ex
    eb = binade.clamp(min=emin)
    s = eb - m - ex
    k = torch.where(s > 0, _rshift(sig, s), _lshift(sig, -s))  # s <= 0: y is a multiple of the quantum
    rem = torch.where(s > 0, _low_bits(sig, s), torch.zeros_like(sig))
    lo = (eb - emin) * (1 << m) + k
    if mode == RTZ:
        up = None
    elif mode in (RNE, RNA):
        half = _lshift(torch.ones_like(sig), s - 1)
        if mode == RNE:
            up = (rem > half) | ((rem == half) & ((k & 1) == 1))
        else:
            up = rem >= half
        up = up & (s > 0)
    elif mode in (SRM, SRA, SRU):
        assert r is not None
        a_bits = nbits + 1 if mode == SRM else nbits
        # q = floor(rem 2^A / 2^s), f: whether that floor dropped nonzero bits
        q = torch.where(s <= a_bits, _lshift(rem, a_bits - s), _rshift(rem, s - a_bits))
        if mode == SRU:
            f = torch.where(s <= a_bits, torch.zeros_like(sig), _low_bits(rem, s - a_bits)) != 0
            up = (q > r) | ((q == r) & f)
        else:
            u = ((1 << (nbits + 1)) - 2 * r - 1) if mode == SRM else ((1 << nbits) - r)
            up = q >= u
        up = up & (rem != 0)
    else:
        raise AssertionError(f"rounding code {mode} is not a payload rounding here")
    code = lo if up is None else lo + up.to(torch.int64)
    return code.clamp(max=max_code)


# ------------------------------------------------------------ step 2: the scale
def _mx_exponent(a: torch.Tensor, args: MxArgs, elem: ElemArgs) -> torch.Tensor:
    """Unbiased E8M0 exponent (int64) of block amaxes a >= 0 (float32 or float64) from their bits
    (twin of :func:`fpspec.fast.blocks._mx_exponent`), clamped to [-127, 127]; a zero block -127."""
    mode = args.mx_mode
    a64 = a.to(torch.float64)                                    # exact widening
    b64 = a64.view(torch.int64)
    fl = ((b64 >> 52) & 0x7FF) - 1023                            # floor(log2 a) of a normal binary64 a
    man = b64 & _F64_MAN
    if mode == MX_FLOOR:          # floor(log2 a) - emax
        e = fl - elem.emax
    elif mode == MX_CEIL:         # ceil(log2 a) - emax
        e = fl + (man != 0).to(torch.int64) - elem.emax
    elif mode == MX_EVEN:         # a >= (2 - 2^-(m+1)) 2^fl rounds up
        e = fl + (man >= elem.even_field).to(torch.int64) - elem.emax
    elif mode == MX_RCEIL:        # ceil(log2(a / top)): a <= (top / 2^emax) 2^fl gives fl - emax, else one more
        e = fl - elem.emax + (man > elem.top_field).to(torch.int64)
    elif mode == MX_RCEIL_FP32:   # CL(fp32(a / top)), a binary32; -127 for a zero quotient
        d = _scalar_quotient(a.to(torch.float32), elem.top, args.cuda)
        db = _f32_bits(d)
        e = torch.where(db > 0, float_log2_ceil_torch(db), torch.full_like(db, -127))
    else:                         # MX_FLOOR_FP32: FL(a) - emax, a binary32
        ab = _f32_bits(a.to(torch.float32))
        e = float_log2_floor_torch(ab) - elem.emax
    e = torch.where(a64 == 0, torch.full_like(e, -127), e)
    return e.clamp(-127, 127)


def _scalar_quotient(a32: torch.Tensor, c: float, cuda: bool) -> torch.Tensor:
    """torch's binary32 a / c for a Python number c, as the profile's device computes it
    (FPS-BLK-29; twin of ``fpspec.fast.blocks._scalar_quotient``): one division on the CPU,
    a * fp32(1 / c) on CUDA.  Both operands are tensors, so this device's own rule for a scalar
    divisor plays no part."""
    c32 = np.float32(c)
    if cuda:
        return a32 * torch.full_like(a32, float(np.float32(1.0) / c32))
    return a32 / torch.full_like(a32, float(c32))


# ---------------------------------------------------------- step 3: the divisor
def _mx_divisor(e: torch.Tensor, zero_byte: int) -> torch.Tensor:
    """The exponent ed of the divisor 2^ed of a block with exponent e (twin of
    :func:`fpspec.fast.blocks._mx_divisor`): e, except for e = -127 (byte 0): -126 (``min-normal``)
    or 0 (``one``)."""
    if zero_byte == ZB_MIN_NORMAL:
        return torch.where(e == -127, torch.full_like(e, -126), e)
    if zero_byte == ZB_ONE:
        return torch.where(e == -127, torch.zeros_like(e), e)
    return e


# ------------------------------------------------------------ step 3: payloads
def _payload_minifloat(xb: torch.Tensor, ed: torch.Tensor, rb: torch.Tensor | None, mode: int, nbits: int,
                       elem: ElemArgs) -> torch.Tensor:
    """Codes of the exact quotients |x| / 2^ed (twin of ``_payload_minifloat`` for FP8 payloads and
    of ``_payload_ratio`` / ``_payload_ratio_rne`` for E2M1), the sign bit of x copied (-0.0 keeps
    it).  xb: (rows, K/B, B); ed: (rows, K/B, 1)."""
    sign, sig, ex = _float_fields(xb)
    mag = minifloat_magnitude(sig, ex - ed, elem.m, elem.emin, elem.max_code, mode, rb, nbits)
    return mag | torch.where(sign, elem.sign_mask, 0)


def _microxcaling_code(a: torch.Tensor, mode: int, elem: ElemArgs) -> torch.Tensor:
    """microxcaling's rounding of binary32 values A (twin of
    :func:`fpspec.fast.blocks._microxcaling_code`, step 3 of ``payload_code``): the magnitude code
    (int64).  a = |A|; pe = max(FL(a), emin) (emin for a = 0); t = a 2^(m - pe) (exact); r =
    floor(t) (rtz) or floor(fp32(t + 1/2)), minus one under rne when fp32(t - 1/2) is an even
    integer >= 0; the code of min(r 2^(pe - m), max)."""
    a = a.abs()
    ab = _f32_bits(a)
    pe = torch.where(ab != 0, float_log2_floor_torch(ab), torch.zeros_like(ab)).clamp(min=elem.emin)
    t = (a.to(torch.float64) * _pow2_f64(elem.m - pe)).to(torch.float32)   # exact
    if mode == RTZ:
        r = t.to(torch.int64)                                             # floor (t >= 0)
    else:
        r = (t + 0.5).to(torch.int64)                                     # one binary32 addition
        if mode == RNE:
            hb = t - 0.5                                                  # one binary32 subtraction
            hi = hb.to(torch.int64)
            even_int = (hb >= 0) & (hi.to(torch.float64) == hb.to(torch.float64)) & ((hi & 1) == 0)
            r = r - even_int.to(torch.int64)
    return minifloat_magnitude(r, pe - elem.m, elem.m, elem.emin, elem.max_code, RNE)


def _payload_microxcaling(xb: torch.Tensor, ed: torch.Tensor, mode: int, elem: ElemArgs) -> torch.Tensor:
    """Codes of A = fp32(x / 2^ed) under microxcaling's rounding (twin of ``_payload_microxcaling``);
    A = -0.0 gives code 0x0 (the sign of A < 0 only)."""
    d32 = _pow2_f64(ed).to(torch.float32)                  # 2^ed, ed in [-127, 127]: exact in binary32
    q = xb / d32                                           # one binary32 division (two tensors)
    return _microxcaling_code(q, mode, elem) | torch.where(q < 0, elem.sign_mask, 0)


# ---------------------------------------------------------- the per-block steps
def _mx_blocks(xb: torch.Tensor, a_b: torch.Tensor, rb: torch.Tensor | None, mode: int, nbits: int,
               args: MxArgs, elem: ElemArgs) -> tuple[torch.Tensor, torch.Tensor]:
    """Steps 2-3 of :func:`fpspec.exact.blocks._mx_blocks` (FPS-BLK-12, FPS-BLK-13, FPS-BLK-23,
    FPS-BLK-24, FPS-BLK-27, FPS-BLK-28) on a chunk of whole rows, the twin of
    :func:`fpspec.fast.blocks._mx_blocks`: xb (rows, K/B, B), its block amaxes a_b (rows, K/B);
    returns (scale bytes, payload codes) as int64 of those shapes."""
    # 2. e from the bits of a_B (or its binary32 log2); c_B = e + 127
    e = _mx_exponent(a_b, args, elem)
    # 3. q = payload(x / d), d = 2^ed: the exact quotient's code from the bits of x; or
    #    microxcaling's binary32 steps
    ed = _mx_divisor(e, args.zero_byte).unsqueeze(-1)
    if args.fp32_quotient:
        codes = _payload_microxcaling(xb, ed, mode, elem)
    else:
        codes = _payload_minifloat(xb, ed, rb, mode, nbits, elem)
    return e + 127, codes


# ------------------------------------------------------------------ arguments
def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _check_spec(spec: BlockSpec) -> None:
    if spec.arithmetic not in MX_ARITHMETICS:
        raise FpspecError(f"quantize_mx_torch quantizes the MX profiles (arithmetic mx, torchao-mx, "
                          f"microxcaling); {spec.profile.scheme}/{spec.profile.name} is {spec.arithmetic.value}")
    if spec.tile != "1xB":
        raise FpspecError(f"{spec.profile.scheme}/{spec.profile.name} quantizes 1xB blocks only, got tile "
                          f"{spec.tile!r}")
    e2m1 = elem_args(spec.payload_format).e2m1
    allowed = _E2M1_MODES if (e2m1 and spec.arithmetic is not Arithmetic.MICROXCALING) else _NEAREST_MODES
    if spec.rounding not in allowed:
        what = "microxcaling" if spec.arithmetic is Arithmetic.MICROXCALING else f"{spec.payload_format.name} payloads"
        raise FpspecError(f"payload rounding {spec.rounding.value!r} has no MX rule for {what} of "
                          f"{spec.profile.scheme}/{spec.profile.name}; use "
                          f"{', '.join(sorted(m.value for m in allowed))}")


def _known_amax(block_amax: torch.Tensor | None, x: torch.Tensor, m: int, k: int, nb: int) -> torch.Tensor | None:
    """The given 1xB block amaxes as (M, K/B), checked as the fast twin checks them; None: measure."""
    if block_amax is None:
        return None
    if tuple(block_amax.shape) != (m * nb,) or block_amax.dtype != x.dtype:
        raise FpspecError(f"block amaxes must be {_dtype_name(x.dtype)}, one per block of the {m}x{k} view "
                          f"({m * nb}), got {_dtype_name(block_amax.dtype)} {tuple(block_amax.shape)}")
    if block_amax.device != x.device:
        raise FpspecError(f"block amaxes are on {block_amax.device}, the view on {x.device}")
    return block_amax.reshape(m, nb)


def _random_bits(rbits: torch.Tensor | None, spec: BlockSpec, m: int, k: int, x: torch.Tensor) -> torch.Tensor | None:
    if not spec.rounding.stochastic:
        return None
    if rbits is None or tuple(rbits.shape) != (m, k):
        raise FpspecError(f"stochastic rounding needs rbits of shape {(m, k)}")
    if rbits.device != x.device:
        raise FpspecError(f"rbits are on {rbits.device}, the view on {x.device}")
    return rbits


def quantize_mx_torch(x: torch.Tensor, spec: BlockSpec, amax: float = 0.0, rbits: torch.Tensor | None = None,
                      block_amax: torch.Tensor | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor, np.float32, np.float32]:
    """Quantize the (M, K) view ``x`` under an MX profile (FPS-BLK-12, 13, 23, 24, 27, 28): the torch
    twin of :func:`fpspec.fast.blocks.quantize_view_fast` for ``Arithmetic.MX``, ``TORCHAO_MX`` and
    ``MICROXCALING``.

    1. No tensor scale: encode and decode scales are 1 (``amax`` is the tensor's metadata only).
    2-3. :func:`_mx_blocks` on chunks of whole rows.

    ``x``: float32 or float64 (binary64 is kept by the exact-value ``mx`` profiles and narrowed
    to binary32, RNE, for the binary32 reproductions, as the fast twin does), K a multiple of
    the block.  ``rbits``: (M, K) integer tensor (uint8, int32, ...; values below 2^nbits, as the
    door checks) for a stochastic rounding, else ignored.  ``block_amax``: max |x| of every 1xB
    block, flat, of the view's dtype (the input scan's), or None to measure them.

    Returns (codes uint8 (M, K), scale bytes uint8 (M, K/B), encode_scale, decode_scale), on
    ``x``'s device.
    """
    _check_spec(spec)
    if x.ndim != 2:
        raise FpspecError(f"the view must be a matrix (M, K), got shape {tuple(x.shape)}")
    if spec.arithmetic.binary32_input or x.dtype != torch.float64:
        x = x.to(torch.float32)
    x = x.contiguous()
    m, k = (int(v) for v in x.shape)
    b = spec.block
    if k % b:
        raise FpspecError(f"K = {k} is not a multiple of the block {b} (view shape {(m, k)})")
    nb = k // b
    prof = spec.profile
    assert prof.mx_mode is not None and prof.mx_zero_byte is not None
    args = MxArgs(MX_MODE_CODES[prof.mx_mode], ZERO_BYTE_CODES[prof.mx_zero_byte],
                  spec.arithmetic is Arithmetic.MICROXCALING, prof.torch_device is TorchDevice.CUDA)
    elem = elem_args(spec.payload_format)
    mode, nbits = MODE_CODES[spec.rounding], spec.nbits
    known = _known_amax(block_amax, x, m, k, nb)
    rbits = _random_bits(rbits, spec, m, k, x)
    codes = torch.empty((m, k), dtype=torch.uint8, device=x.device)
    scales = torch.empty((m, nb), dtype=torch.uint8, device=x.device)
    rows = max(1, CHUNK // max(k, 1))
    for r0 in range(0, m, rows):
        r1 = min(m, r0 + rows)
        xb = x[r0:r1].reshape(r1 - r0, nb, b)
        a_b = torch.amax(xb.abs(), dim=2) if known is None else known[r0:r1]   # exact: a maximum
        rb = None if rbits is None else rbits[r0:r1].to(torch.int64).reshape(r1 - r0, nb, b)
        c_b, q = _mx_blocks(xb, a_b, rb, mode, nbits, args, elem)
        scales[r0:r1] = c_b.to(torch.uint8)
        codes[r0:r1] = q.reshape(r1 - r0, k).to(torch.uint8)
    return codes, scales, np.float32(1.0), np.float32(1.0)
