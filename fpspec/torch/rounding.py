"""Torch array encoder and decoder: the torch twin of :mod:`fpspec.fast.rounding` (FPS-RND-14).

Bit-equal to the fast twin and to the exact reference (:mod:`fpspec.exact.rounding`) by test
(tests/test_torch_rounding.py).  :func:`encode_bits_torch` is :func:`fpspec.fast.rounding._encode_one`
with the same numbered steps (those of :func:`fpspec.exact.rounding.round_to_code`, FPS-RND-0),
written on whole int64 tensors: every data-dependent branch of the element function is a
``torch.where`` select, every choice fixed by the call (format, mode, policies) a Python branch.

The exactness argument (docs/rounding.rst, "The fast path"): there is no floating-point
operation between the input and the code, and none between a code and its decoded value.

* The input's raw bits are read with a same-width integer view (``float16``/``bfloat16`` as
  ``int16``, ``float32`` as ``int32``, ``float64`` as ``int64``), widened to int64 and masked:
  they give the sign, the exponent field and the fraction exactly.  A subnormal input is
  normalised with an integer bit length (:func:`bit_length_torch`), so ``sig < 2^53`` and the
  binade ``e`` are exact.
* 6. The neighbours are ``k = sig >> shift`` and the remainder ``rem``, integers.  Shifts
  are clamped to 0..62 and only ever applied where they are meant (a shift of 64 or more is
  undefined on some devices): with ``shift`` past 54 the rule takes ``rsh = 54``, so ``k = 0``,
  ``rem = sig`` (every bit of a 53-bit ``sig`` is dropped) and ``half = 2^53 > rem``.  Every
  non-stochastic mode compares only ``rem`` with ``half`` and with 0, so it decides as the fast
  twin's stand-ins (``rem = 1``, ``half = 2`` past shift 64) do: ``rem`` non-zero, below half.
* 7. RNE/RNA/directed compare ``rem`` with the half quantum as integers.  The stochastic
  modes are decided in integers too, where the fast twin compares the exact float64
  ``delta = rem 2^-shift`` with thresholds that are multiples of 2^-(N+1) (each test there is
  the exact one, docs/rounding.rst).  Each is ``rem 2^A`` against ``U 2^shift`` for an integer
  ``U < 2^34`` and ``A = N`` or ``N + 1 <= 33``:

  - ``sr-midpoint``: delta + (2r+1)/2^(N+1) >= 1  <=>  rem 2^(N+1) >= (2^(N+1) - 2r - 1) 2^shift;
  - ``sr-add``:      delta + r/2^N >= 1            <=>  rem 2^N >= (2^N - r) 2^shift;
  - ``sr-unbiased``: r < delta 2^N                <=>  rem 2^N > r 2^shift.

  With ``q = floor(rem 2^A / 2^shift)`` (a left shift of ``rem`` by ``A - shift`` when
  ``shift <= A``, exact and below 2^A because ``rem < 2^shift``; a right shift by
  ``shift - A`` otherwise, clamped at 62, which leaves 0 for a ``rem < 2^53`` as the true
  quotient is) and ``f`` whether that quotient dropped non-zero bits: ``rem 2^A >= U 2^shift``
  iff ``q >= U`` (U is an integer), and ``rem 2^A > r 2^shift`` iff ``q > r`` or (``q == r`` and
  ``f``).  No product is formed, so nothing overflows int64 at any shift (an fp64 input's
  shift reaches about 1100), and the decision is the exact one, which the fast twin's is too.
* 8.-9. Overflow and the sign are integer selects and ORs.
* Decoding builds each value's float64 bit pattern from the code's fields: ``sig 2^(e - m)``
  with ``sig < 2^24`` has float64 exponent ``e - m + bit_length(sig) - 1`` (every value of every
  format lies in float64's normal range: 2^-149 .. 2^128) and fraction ``sig`` shifted to the top
  of 52 bits; zeros, Inf and NaN are written as bits (a binary32 NaN keeps its payload as
  :func:`fpspec.exact.rounding.fp32_nan_to_float64_bits` writes it).  The bits are viewed as
  float64 at the end: no conversion rounds, flushes or quiets anything.

Dtypes (torch's unsigned 16- and 32-bit types have few operations, so every step computes in
int64 and the result is converted once at the end):

* codes come back as ``torch.uint8``, ``torch.uint16`` or ``torch.uint32``, the torch dtype of
  ``fmt.storage_dtype`` (:data:`CODE_DTYPES`); torch 2.13 converts, copies, indexes, views and
  ``.numpy()``-s them, but compares, shifts and reduces ``uint16``/``uint32`` on few devices, so a
  caller computing on such codes does ``codes.to(torch.int64)`` (or ``.view(torch.int16)``) first;
* random values (``rbits``) may be ``torch.uint8``, ``uint16``, ``uint32`` (as the fast twin
  takes them) or ``torch.int16``, ``int32``, ``int64`` (what ``torch.randint`` makes), each value
  in [0, 2^nbits): a larger or negative one is refused, naming it and its index, before any
  element is encoded (as the door's :func:`fpspec.convert.check_random_values` does);
* :func:`decode_torch` takes codes of any torch integer dtype (as the fast twin takes any
  NumPy integer dtype) and refuses codes out of range by value and index.

Large inputs run in chunks of :data:`CHUNK` elements, so that each int64 temporary is a few
times one chunk; outputs are allocated on the input's device, and the only host reads are the
scalar ``.item()`` calls that find a refusal's index.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..arraykind import describe_array, is_torch
from ..choices import (
    DEFAULT_SR_BITS,
    MAX_SR_BITS,
    NanPolicy,
    NegativePolicy,
    OverflowPolicy,
    Policies,
    RoundingMode,
    ZeroPolicy,
    check_nbits,
    default_policies,
    quiet_nan_code,
    validate_mode,
    validate_policies,
)
from ..errors import FpspecError
from ..formats import FloatFormat, Specials, get_format

__all__ = ["encode_torch", "decode_torch", "encode_bits_torch", "decode_bits_torch", "bit_length_torch",
           "EncodeSpec", "encode_spec", "InputBits", "INPUT_LAYOUTS", "CODE_DTYPES", "RBITS_DTYPES", "CHUNK",
           "code_dtype"]

#: Elements per chunk of the encoder and the decoder (each int64 temporary is 32 MiB).
CHUNK = 1 << 22

#: The error kind of an element (as :mod:`fpspec.fast.codes` numbers them): none, or why it is refused.
OK, E_NAN, E_NEG, E_ZERO, E_OVF = 0, 1, 2, 3, 4

_INT64_SIGN = -(1 << 63)             # bit 63 of an int64 (float64's sign bit)
_F64_INF = 0x7FF << 52
_F64_QNAN = 0x7FF8 << 48


class InputBits(NamedTuple):
    """The fields of an input dtype's raw bits (:class:`fpspec.fast.codes.InputBits`)."""

    man: int            # mantissa bits
    exp_mask: int       # exponent field mask
    bias: int           # exponent bias
    sign_shift: int     # position of the sign bit


#: The accepted input dtypes: the same-width integer dtype their bits are viewed as, the mask
#: that makes the widened view the raw bits (None: float64's int64 view is used as is), the fields.
INPUT_LAYOUTS: dict[torch.dtype, tuple[torch.dtype, int | None, InputBits]] = {
    torch.float16: (torch.int16, 0xFFFF, InputBits(10, 0x1F, 15, 15)),
    torch.bfloat16: (torch.int16, 0xFFFF, InputBits(7, 0xFF, 127, 15)),
    torch.float32: (torch.int32, 0xFFFFFFFF, InputBits(23, 0xFF, 127, 31)),
    torch.float64: (torch.int64, None, InputBits(52, 0x7FF, 1023, 63)),
}

#: ``fmt.storage_dtype`` -> the torch dtype of the codes :func:`encode_torch` returns.
CODE_DTYPES: dict[str, torch.dtype] = {"uint8": torch.uint8, "uint16": torch.uint16, "uint32": torch.uint32}

#: The dtypes random values may have (unsigned as the fast twin takes them; signed as torch.randint makes them).
RBITS_DTYPES: tuple[torch.dtype, ...] = (torch.uint8, torch.uint16, torch.uint32, torch.int16, torch.int32,
                                         torch.int64)
_RBITS_WIDTH = {torch.uint8: 8, torch.uint16: 16, torch.uint32: 32}  # unsigned: every value is below 2^width

_CODE_INPUT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16, torch.uint32,
                      torch.uint64)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def code_dtype(fmt: FloatFormat | str) -> torch.dtype:
    """The torch dtype of ``fmt``'s codes (uint8, uint16 or uint32: ``fmt.storage_dtype``)."""
    return CODE_DTYPES[get_format(fmt).storage_dtype]


# ------------------------------------------------------------------ the target
class EncodeSpec(NamedTuple):
    """The target format and the policies of one conversion, as :func:`encode_bits_torch` reads them
    (:class:`fpspec.fast.rounding.EncodeSpec`, with the policies as members: here they are
    Python branches, not kernel codes); built by :func:`encode_spec`."""

    m: int                # mantissa bits
    emin: int             # smallest normal exponent
    subnormals: bool
    signed: bool
    sign_mask: int
    max_code: int         # largest finite magnitude code
    nonfinite_code: int   # what overflow becomes under 'nonfinite': the Inf code, else the NaN code, else -1
    inf_code: int         # -1: no Inf
    nan_code: int         # -1: no NaN
    nan_in_code: int      # the code a NaN input becomes (NaN policies nan, quiet, zero, max)
    fnuz: bool            # the NaN is the sign bit alone: no -0, a zero result is +0 (FPS-FMT-8)
    overflow: OverflowPolicy
    nan: NanPolicy
    negative: NegativePolicy
    zero: ZeroPolicy


def encode_spec(fmt: FloatFormat, pol: Policies) -> EncodeSpec:
    """The :class:`EncodeSpec` of a conversion to ``fmt`` under the (validated) policies ``pol``."""
    nonfinite = fmt.inf_code if fmt.has_inf else (fmt.nan_code if fmt.has_nan else -1)
    nan_code = fmt.nan_code if fmt.has_nan else -1
    nan_in_code = {NanPolicy.NAN: nan_code, NanPolicy.QUIET: quiet_nan_code(fmt), NanPolicy.ZERO: 0,
                   NanPolicy.MAX: fmt.max_finite_code}.get(pol.nan, 0)
    return EncodeSpec(fmt.man_bits, fmt.emin, fmt.subnormals, fmt.signed, fmt.sign_mask, fmt.max_finite_code,
                      nonfinite, fmt.inf_code if fmt.has_inf else -1, nan_code,
                      -1 if nan_in_code is None else nan_in_code, nan_code == fmt.sign_mask,
                      pol.overflow, pol.nan, pol.negative, pol.zero)


# ------------------------------------------------------------- integer helpers
def bit_length_torch(v: torch.Tensor) -> torch.Tensor:
    """``int.bit_length`` of every element of an int64 tensor with values in [0, 2^63): six
    halving steps of a binary search, integers only (0 gives 0)."""
    n = torch.zeros_like(v)
    for s in (32, 16, 8, 4, 2, 1):
        top = v >> s
        big = top != 0
        v = torch.where(big, top, v)
        n = n + torch.where(big, s, 0)
    return n + (v != 0).to(torch.int64)


def _settle(code: torch.Tensor, kind: torch.Tensor, mask: torch.Tensor | None, new_code, new_kind: int = OK):
    """``code`` and ``kind`` with the lanes of ``mask`` replaced (an earlier step settled them)."""
    if mask is None:
        return code, kind
    return torch.where(mask, new_code, code), torch.where(mask, new_kind, kind)


def _overflow_code(negative: torch.Tensor, mode: RoundingMode, spec: EncodeSpec):
    """The code of an overflowing magnitude under 'sat' or 'nonfinite' (fast ``_overflow_code``):
    max finite under 'sat' or a mode that rounds the magnitude down (IEEE 754 sec. 7.4), else the
    nonfinite code; an int when the call fixes it, else a tensor (``up``/``down`` read the sign)."""
    if spec.overflow is OverflowPolicy.SAT or mode is RoundingMode.RTZ:
        return spec.max_code
    if mode is RoundingMode.DOWN:
        return torch.where(negative, spec.nonfinite_code, spec.max_code)
    if mode is RoundingMode.UP:
        return torch.where(negative, spec.max_code, spec.nonfinite_code)
    return spec.nonfinite_code


def _or(a, b):
    """``a | b`` where either may be an int (an int 0 leaves the other as it is)."""
    if isinstance(b, int) and b == 0:
        return a
    if isinstance(a, int) and not isinstance(b, int):
        return b | a
    return a | b


# ------------------------------------------------------------- the steps
def _step1_nan(spec: EncodeSpec, negative: torch.Tensor):
    """1. NaN: the code (int or tensor) and the error kind of a NaN input (FPS-RND-10)."""
    if spec.nan is NanPolicy.ERROR:
        return 0, E_NAN
    if spec.nan in (NanPolicy.NAN, NanPolicy.QUIET):  # the NaN code with the input's sign
        if not spec.signed:
            return spec.nan_in_code, OK
        return torch.where(negative, spec.nan_in_code | spec.sign_mask, spec.nan_in_code), OK
    if spec.nan is NanPolicy.FLIPPED_ZERO:  # a zero of the opposite sign
        if spec.fnuz:
            return 0, OK
        return torch.where(negative, 0, spec.sign_mask), OK
    return spec.nan_in_code, OK  # zero, max: a code without sign


def _step2_sign(spec: EncodeSpec, negative: torch.Tensor, is_zero: torch.Tensor):
    """2. sign, unsigned formats (FPS-RND-11): (the lanes the negative policy settles, their code,
    their kind, the sign the later steps read).  -0 is zero; ``abs`` takes the code of |x|."""
    if spec.signed:
        return None, 0, OK, negative
    settled = None
    code, kind = 0, OK
    if spec.negative is not NegativePolicy.ABS:
        settled = negative & ~is_zero
        if spec.negative is NegativePolicy.ERROR:
            kind = E_NEG
        elif spec.negative is NegativePolicy.NAN:
            code = spec.nan_code
    return settled, code, kind, torch.zeros_like(negative)


def _step3_inf(spec: EncodeSpec, mode: RoundingMode, negative: torch.Tensor, sgn):
    """3. infinity: the Inf code, else overflow (step 8's rule): (code, kind)."""
    if spec.inf_code >= 0:
        return _or(spec.inf_code, sgn), OK
    if spec.overflow is OverflowPolicy.ERROR:
        return 0, E_OVF
    return _or(_overflow_code(negative, mode, spec), sgn), OK


def _step4_zero(spec: EncodeSpec, zsgn):
    """4. zero: the (signed) zero, or the zero policy where the format has none (FPS-RND-12)."""
    if spec.subnormals:
        return zsgn, OK
    if spec.zero is ZeroPolicy.ERROR:
        return 0, E_ZERO
    if spec.zero is ZeroPolicy.NAN:
        return spec.nan_code, OK
    return 0, OK  # min


def _step5_binade(layout: InputBits, spec: EncodeSpec, exf: torch.Tensor, frac: torch.Tensor):
    """5. binade of |x| = sig 2^(e - in_man), a subnormal input normalised (its leading bit moved to
    ``in_man``): (sig, e, eb = max(e, emin), the lanes below a format without subnormals)."""
    in_man, _, in_bias, _ = layout
    is_sub = exf == 0
    d = torch.where(is_sub, in_man + 1 - bit_length_torch(frac), 0)
    sig = torch.where(is_sub, frac, frac | (1 << in_man)) << d
    e = torch.where(is_sub, 1 - in_bias, exf - in_bias) - d
    below = None if spec.subnormals else e < spec.emin
    return sig, e, e.clamp(min=spec.emin), below


def _step6_neighbours(layout: InputBits, spec: EncodeSpec, sig: torch.Tensor, e: torch.Tensor, eb: torch.Tensor):
    """6. neighbours: k = floor(|x| / 2^(eb - m)), the remainder ``rem`` of ``shift`` dropped bits,
    ``half = 2^(shift - 1)`` (module docstring: shifts clamped, ``rsh = 54`` standing for any
    larger shift), and the magnitude code of the lower neighbour: (code, rem, half, shift)."""
    shift = (layout.man - spec.m) + (eb - e)
    rsh = shift.clamp(0, 54)
    lsh = (-shift).clamp(0, 62)  # an input no wider than the target here: k = sig << -shift, exact
    k = (sig << lsh) >> rsh
    rem = sig & ((1 << rsh) - 1)
    half = 1 << (rsh - 1).clamp(min=0)
    code = ((eb - spec.emin) << spec.m) + k
    if not spec.subnormals:
        code = code - (1 << spec.m)
    return code, rem, half, shift


def _stochastic_up(mode: RoundingMode, rem: torch.Tensor, shift: torch.Tensor, r: torch.Tensor, nbits: int):
    """7., stochastic modes (FPS-RND-5..7), in integers (module docstring): whether ``rem 2^A``
    reaches ``U 2^shift`` (sr-midpoint, sr-add), or exceeds ``r 2^shift`` (sr-unbiased)."""
    a = nbits + 1 if mode is RoundingMode.SR_MIDPOINT else nbits
    lsa = (a - shift).clamp(0, 62)
    rsa = (shift - a).clamp(0, 62)
    q = (rem << lsa) >> rsa  # floor(rem 2^a / 2^shift); one of the two shifts is 0
    nz = rem != 0
    if mode is RoundingMode.SR_MIDPOINT:    # delta + (2r+1)/2^(N+1) >= 1
        return nz & (q >= (1 << (nbits + 1)) - 1 - 2 * r)
    if mode is RoundingMode.SR_ADD:         # delta + r/2^N >= 1
        return nz & (q >= (1 << nbits) - r)
    dropped = (rem & ((1 << rsa) - 1)) != 0  # sr-unbiased: r < delta 2^N
    return nz & ((q > r) | ((q == r) & dropped))


def _step7_round(mode: RoundingMode, spec: EncodeSpec, code: torch.Tensor, rem: torch.Tensor, half: torch.Tensor,
                 shift: torch.Tensor, negative: torch.Tensor, r: torch.Tensor | None, nbits: int) -> torch.Tensor:
    """7. rounding: the mode picks the lower neighbour or the next one (FPS-RND-1..8, FPS-RND-15)."""
    if mode is RoundingMode.RNE or (mode is RoundingMode.RNE_BITS and spec.subnormals):
        up = (rem > half) | ((rem == half) & ((code & 1) == 1))
    elif mode is RoundingMode.RNA:
        up = rem >= half
    elif mode is RoundingMode.RTZ:
        return code
    elif mode is RoundingMode.UP:
        up = (rem != 0) & ~negative
    elif mode is RoundingMode.DOWN:
        up = (rem != 0) & negative
    elif mode.stochastic:
        assert r is not None
        up = _stochastic_up(mode, rem, shift, r, nbits)
    else:  # RNB in ue8m0: the lowest binade goes up past its bottom; elsewhere ties go up
        up = (rem != 0) & ((code == 0) | (rem >= half))
    return code + up.to(torch.int64)


def _step8_overflow(mode: RoundingMode, spec: EncodeSpec, code: torch.Tensor, negative: torch.Tensor,
                    kind: torch.Tensor):
    """8. overflow: a code past max finite is refused (policy 'error') or becomes the overflow code."""
    over = code > spec.max_code
    if spec.overflow is OverflowPolicy.ERROR:
        return code, torch.where(over, E_OVF, kind)
    return torch.where(over, _overflow_code(negative, mode, spec), code), kind


def _step9_sign(code: torch.Tensor, sgn, zsgn) -> torch.Tensor:
    """9. sign: the sign bit put back (a zero result takes ``zsgn``: +0 in an FNUZ format)."""
    if isinstance(sgn, int) and sgn == 0:
        return code
    return code | torch.where(code != 0, sgn, zsgn)


def encode_bits_torch(b: torch.Tensor, layout: InputBits, spec: EncodeSpec, mode: RoundingMode,
                      r: torch.Tensor | None, nbits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Encode input bit patterns ``b`` (int64, the raw bits of the dtype ``layout`` describes);
    return (codes int64, error kinds uint8), the twin of :func:`fpspec.fast.rounding._encode_one`.

    The steps of :func:`fpspec.exact.rounding.round_to_code` on int64 tensors: the finite path
    (steps 5-9) runs on every lane, then the lanes an earlier step settles are replaced, in the
    reverse order of the steps, so the earliest step wins (below the smallest code, 4. zero,
    3. infinity, 2. the negative policy, 1. NaN).  ``r`` holds the random values of a stochastic
    ``mode`` (int64, each below ``2^nbits``, checked by the caller).  A kind other than OK
    means the element is refused (its code is then meaningless).
    """
    in_man, in_exp_mask, _, in_sign_shift = layout
    negative_in = ((b >> in_sign_shift) & 1) == 1
    exf = (b >> in_man) & in_exp_mask
    frac = b & ((1 << in_man) - 1)
    top = exf == in_exp_mask
    is_nan = top & (frac != 0)
    is_inf = top & (frac == 0)
    is_zero = (exf == 0) & (frac == 0)
    # 2. sign, unsigned formats (decided first: the later steps read the sign it leaves)
    neg_settled, neg_code, neg_kind, negative = _step2_sign(spec, negative_in, is_zero)
    sgn = torch.where(negative, spec.sign_mask, 0) if spec.signed else 0
    zsgn = 0 if spec.fnuz else sgn
    # 5.-9. the finite path, on every lane
    sig, e, eb, below = _step5_binade(layout, spec, exf, frac)
    code, rem, half, shift = _step6_neighbours(layout, spec, sig, e, eb)
    code = _step7_round(mode, spec, code, rem, half, shift, negative, r, nbits)
    kind = torch.zeros(b.shape, dtype=torch.uint8, device=b.device)
    code, kind = _step8_overflow(mode, spec, code, negative, kind)
    code = _step9_sign(code, sgn, zsgn)
    # the lanes earlier steps settle, the latest step first
    code, kind = _settle(code, kind, below, sgn)                     # 5. below a format without zero
    code, kind = _settle(code, kind, is_zero, *_step4_zero(spec, zsgn))
    code, kind = _settle(code, kind, is_inf, *_step3_inf(spec, mode, negative, sgn))
    code, kind = _settle(code, kind, neg_settled, neg_code, neg_kind)
    code, kind = _settle(code, kind, is_nan, *_step1_nan(spec, negative_in))
    return code, kind


# ------------------------------------------------------------------ encoding
def _unravel(i: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(j) for j in np.unravel_index(i, shape)) if shape else ()


def _input_bits(chunk: torch.Tensor, view_dtype: torch.dtype, mask: int | None) -> torch.Tensor:
    """The raw bits of a chunk of input values as int64 (a same-width view, widened, masked)."""
    bits = chunk.view(view_dtype).to(torch.int64)
    return bits if mask is None else bits & mask


def _check_rbits(rbits: object, x: torch.Tensor, shape: tuple[int, ...], mode: RoundingMode,
                 nbits: int) -> torch.Tensor:
    """The random values, flat, after the fast twin's checks (present, shape, dtype) and the door's
    (every value below 2^nbits, and not negative), each refusal naming what and where."""
    if rbits is None:
        raise FpspecError(f"stochastic mode {mode.value} needs random bits (rbits)")
    if not is_torch(rbits):
        raise FpspecError(f"rbits must be a torch tensor on the input's device ({x.device}), got "
                          f"{describe_array(rbits)}")
    if tuple(rbits.shape) != shape:
        raise FpspecError(f"rbits shape {tuple(rbits.shape)} does not match input shape {shape}")
    if rbits.dtype not in RBITS_DTYPES:
        raise FpspecError(f"rbits must be uint8, uint16, uint32, int16, int32 or int64, got "
                          f"{_dtype_name(rbits.dtype)}")
    if rbits.device != x.device:
        raise FpspecError(f"rbits is on {rbits.device}, the input on {x.device}: fpspec never moves data "
                          "between devices; move them to one device first")
    flat = rbits.detach().reshape(-1)
    if _RBITS_WIDTH.get(rbits.dtype, 64) <= nbits:
        return flat  # every value of an unsigned dtype this narrow is below 2^nbits
    for lo in range(0, flat.shape[0], CHUNK):
        r = flat[lo:lo + CHUNK].to(torch.int64)
        bad = (r < 0) | (r >= (1 << nbits))
        if bool(bad.any()):
            i = int(torch.argmax(bad.to(torch.uint8)).item())
            value = int(r[i].item())
            why = "is negative: random values lie in [0, 2^%d)" % nbits if value < 0 else \
                f"is not below 2^{nbits}"
            raise FpspecError(f"random value {value} {why} (nbits = {nbits})", _unravel(lo + i, shape))
    return flat


def _refusal(fmt: FloatFormat, kind: int, nbits: int, where: tuple[int, ...]) -> FpspecError:
    """The error of a refused element, as :func:`fpspec.fast.rounding.encode_fast` words it."""
    msg = {
        E_NAN: f"NaN input to {fmt.name} under NaN policy 'error'",
        E_NEG: f"negative input to unsigned {fmt.name} under negative policy 'error'",
        E_ZERO: f"zero input to {fmt.name}, which has no zero, under zero policy 'error'",
        E_OVF: f"overflow: value beyond max finite {fmt.max_finite} of {fmt.name} "
               "under overflow policy 'error'",
    }[kind]
    return FpspecError(msg, where)


def encode_torch(x: torch.Tensor, fmt: FloatFormat | str, mode: RoundingMode | str = RoundingMode.RNE,
                 *, rbits: torch.Tensor | None = None, nbits: int = DEFAULT_SR_BITS,
                 policies: Policies | None = None) -> torch.Tensor:
    """Encode a float tensor to codes of ``fmt`` (FPS-RND-0, FPS-RND-14); the contract of
    :func:`fpspec.fast.rounding.encode_fast` on torch tensors.

    Args:
        x: a float16, bfloat16, float32 or float64 tensor of any shape, on any device.
        fmt: the target format.
        mode: the rounding mode.
        rbits: for a stochastic mode, the random values: a tensor of ``x``'s shape and device,
            of a dtype in :data:`RBITS_DTYPES`, each value in [0, 2^nbits).
        nbits: the width N of the random values, 1..32.
        policies: overflow / NaN / negative / zero policies; default
            :func:`fpspec.choices.default_policies` of ``fmt``.

    Returns:
        the codes, of ``x``'s shape and device, in :func:`code_dtype` of ``fmt``
        (torch.uint8 / uint16 / uint32).

    Raises:
        FpspecError: an argument is invalid, a random value is out of range, or a policy
            ``error`` applies (the first such element by index, in encode_fast's words).
    """
    fmt = get_format(fmt)
    mode = RoundingMode.parse(mode)
    pol = policies or default_policies(fmt)
    validate_policies(fmt, pol)
    validate_mode(fmt, mode)
    if not is_torch(x):
        raise FpspecError(f"input must be a torch tensor (float16/bfloat16/float32/float64), got {describe_array(x)}")
    if x.dtype not in INPUT_LAYOUTS:
        raise FpspecError(f"input must be a float array (float16/bfloat16/float32/float64), got "
                          f"{_dtype_name(x.dtype)}")
    view_dtype, mask, layout = INPUT_LAYOUTS[x.dtype]
    shape = tuple(x.shape)
    r_flat = None
    if mode.stochastic:
        nbits = check_nbits(nbits, MAX_SR_BITS)
        r_flat = _check_rbits(rbits, x, shape, mode, nbits)
    spec = encode_spec(fmt, pol)
    flat = x.detach().reshape(-1)
    n = flat.shape[0]
    out = torch.empty(n, dtype=code_dtype(fmt), device=x.device)
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        r = r_flat[lo:hi].to(torch.int64) if r_flat is not None else None
        code, kind = encode_bits_torch(_input_bits(flat[lo:hi], view_dtype, mask), layout, spec, mode, r, nbits)
        refused = kind != OK
        if bool(refused.any()):
            i = int(torch.argmax(refused.to(torch.uint8)).item())
            raise _refusal(fmt, int(kind[i].item()), nbits, _unravel(lo + i, shape))
        out[lo:hi] = code  # int64 -> the code dtype: every code is below 2^fmt.bits
    return out.reshape(shape)


# ------------------------------------------------------------------ decoding
def decode_bits_torch(c: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """The float64 bit patterns (int64) of the values of codes ``c`` (int64, in range) of ``fmt``:
    the exact value of a finite code (FPS-FMT-3) with the code's sign (-0 where the format has
    it), +-Inf, and NaN with the code's sign (a binary32 NaN with its trailing significand, as
    :func:`fpspec.exact.rounding.fp32_nan_to_float64_bits` writes it)."""
    m = fmt.man_bits
    mag = c & fmt.magnitude_mask
    expf = mag >> m
    man = mag & fmt.man_max_field
    if fmt.subnormals:
        sub = expf == 0
        sig = torch.where(sub, man, man | (1 << m))
        e = torch.where(sub, fmt.emin, expf - fmt.bias)
    else:
        sig = man | (1 << m)
        e = expf - fmt.bias
    # |value| = sig 2^(e - m), sig < 2^24: float64 exponent e - m + bl - 1, in the normal range
    bl = bit_length_torch(sig)
    frac = (sig << (53 - bl).clamp(0, 53)) & ((1 << 52) - 1)
    bits = torch.where(sig == 0, 0, ((e - m + bl - 1 + 1023) << 52) | frac)
    top = expf == fmt.exp_max_field
    nan = {Specials.NONE: None, Specials.IEEE: top & (man != 0), Specials.FN: top & (man == fmt.man_max_field),
           Specials.RESERVED_BINADE_NAN: top, Specials.FNUZ: c == fmt.sign_mask}[fmt.specials]
    if fmt.has_inf:
        bits = torch.where(top & (man == 0), _F64_INF, bits)
    if nan is not None:
        nan_bits = _F64_QNAN | ((c & 0x7FFFFF) << 29) if fmt.bits == 32 else _F64_QNAN
        bits = torch.where(nan, nan_bits, bits)
    if fmt.signed:
        bits = torch.where((c & fmt.sign_mask) != 0, bits | _INT64_SIGN, bits)
    return bits


def decode_torch(codes: torch.Tensor, fmt: FloatFormat | str) -> torch.Tensor:
    """Decode codes to float64 values (exact: every value of these formats is a float64); the
    contract of :func:`fpspec.fast.rounding.decode_fast` on torch tensors.

    ``codes``: a tensor of any integer dtype (uint16/uint32 included), any shape and device.
    Returns float64 values of its shape on its device (NaN and Inf codes give NaN and Inf with
    their sign).  A code out of range is refused, naming it and its index.
    """
    fmt = get_format(fmt)
    if not is_torch(codes):
        raise FpspecError(f"codes must be a torch tensor, got {describe_array(codes)}")
    if codes.dtype not in _CODE_INPUT_DTYPES:
        raise FpspecError(f"codes must be an unsigned integer array, got {_dtype_name(codes.dtype)}")
    shape = tuple(codes.shape)
    flat = codes.detach().reshape(-1)
    n = flat.shape[0]
    out = torch.empty(n, dtype=torch.int64, device=codes.device)
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        c = flat[lo:hi].to(torch.int64)  # (a uint64 code past 2^63 turns negative: refused below)
        bad = (c < 0) | (c >= fmt.num_codes)
        if bool(bad.any()):
            i = int(torch.argmax(bad.to(torch.uint8)).item())
            raise FpspecError(f"code {int(flat[lo + i].item())} out of range for {fmt.name} ({fmt.bits} bits)",
                              _unravel(lo + i, shape))
        out[lo:hi] = decode_bits_torch(c, fmt)
    return out.view(torch.float64).reshape(shape)
