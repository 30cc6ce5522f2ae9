"""The integer codes the encoder and block kernels read their choices as, in one table.

A compiled kernel cannot take an enum, so every choice reaches it as an integer.  Each
choice's codes are named module constants here (Numba reads a module-level integer as a
compile-time constant, so ``mode == RNE`` costs what ``mode == 0`` cost), and one dict per
enum maps its members to them; Python code looks a resolved choice up in the dict, a kernel
compares with the names, never with a bare integer.  The module is one of
:data:`fpspec.fast.jit.BLOCK_SOURCES`: an edit of a code recompiles every kernel that reads it.

* :data:`MODE_CODES`: :class:`~fpspec.choices.RoundingMode` (FPS-RND-1..8, FPS-RND-15);
* :data:`OVERFLOW_CODES`, :data:`NEGATIVE_CODES`, :data:`ZERO_CODES`: the policies of
  FPS-RND-9, FPS-RND-11 and FPS-RND-12; the NaN policy (FPS-RND-10) reaches the encoder as
  one of four behaviours (``NAN_*``, chosen with the NaN code by ``fpspec.fast.rounding``);
* :data:`MX_MODE_CODES`, :data:`ZERO_BYTE_CODES`: :class:`~fpspec.schemes.MxScaleMode`
  and :class:`~fpspec.schemes.MxZeroByte` (FPS-BLK-12, FPS-BLK-13, FPS-BLK-23);
* the refusals the encoder reports (``E_*``) and the raw-bit layouts of its input dtypes
  (:data:`INPUT_LAYOUTS`);
* :data:`BLOCK_CHUNK`, the blocks per parallel work item of every block kernel, and the one
  loop over those work items (:func:`chunk_count`, :func:`chunk_bounds`), and where a
  block's scale lies in the scale grid (:func:`block_slot`).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from ..choices import NegativePolicy, OverflowPolicy, RoundingMode, ZeroPolicy
from ..schemes import MxScaleMode, MxZeroByte
from . import jit as _jit  # noqa: F401 - its cache locators must be in place before the helpers below

__all__ = ["RNE", "RTZ", "RNA", "UP", "DOWN", "SRM", "SRA", "SRU", "RNB", "MODE_CODES",
           "OVF_SAT", "OVF_NONFINITE", "OVF_ERROR", "OVERFLOW_CODES",
           "NAN_ERROR", "NAN_SIGNED", "NAN_UNSIGNED", "NAN_FLIPPED_ZERO",
           "NEG_ERROR", "NEG_NAN", "NEG_ZERO", "NEG_ABS", "NEGATIVE_CODES",
           "ZERO_ERROR", "ZERO_NAN", "ZERO_MIN", "ZERO_CODES",
           "MX_FLOOR", "MX_CEIL", "MX_EVEN", "MX_RCEIL", "MX_RCEIL_FP32", "MX_FLOOR_FP32", "MX_MODE_CODES",
           "ZB_EXACT", "ZB_MIN_NORMAL", "ZB_ONE", "ZERO_BYTE_CODES",
           "OK", "E_NAN", "E_NEG", "E_ZERO", "E_OVF", "E_RBITS", "InputBits", "INPUT_LAYOUTS", "BLOCK_CHUNK",
           "chunk_count", "chunk_bounds", "block_slot"]

# ------------------------------------------------------------- rounding modes
# In the order of RoundingMode.  The payload helpers rely on it: the directed modes lie below
# the stochastic ones (``mode < SRM``: a mode that is neither nearest nor stochastic).
RNE, RTZ, RNA, UP, DOWN, SRM, SRA, SRU, RNB = range(9)
#: RoundingMode -> its kernel code.
MODE_CODES: dict[RoundingMode, int] = {
    RoundingMode.RNE: RNE, RoundingMode.RTZ: RTZ, RoundingMode.RNA: RNA, RoundingMode.UP: UP,
    RoundingMode.DOWN: DOWN, RoundingMode.SR_MIDPOINT: SRM, RoundingMode.SR_ADD: SRA,
    RoundingMode.SR_UNBIASED: SRU, RoundingMode.RNE_BITS: RNB,
}

# ------------------------------------------------------------------- policies
#: Overflow (FPS-RND-9): clamp to max finite; Inf (or the NaN code); refuse.
OVF_SAT, OVF_NONFINITE, OVF_ERROR = 0, 1, 2
OVERFLOW_CODES: dict[OverflowPolicy, int] = {
    OverflowPolicy.SAT: OVF_SAT, OverflowPolicy.NONFINITE: OVF_NONFINITE, OverflowPolicy.ERROR: OVF_ERROR}

#: What the encoder does with a NaN input (FPS-RND-10): refuse; the NaN code with the input's sign
#: (policies ``nan`` and ``quiet``); a code without sign (``zero``, ``max``); a zero of the opposite
#: sign (``flipped-zero``).
NAN_ERROR, NAN_SIGNED, NAN_UNSIGNED, NAN_FLIPPED_ZERO = 0, 1, 2, 3

#: A negative input to an unsigned format (FPS-RND-11): refuse; the NaN code; 0; the code of |x|.
NEG_ERROR, NEG_NAN, NEG_ZERO, NEG_ABS = 0, 1, 2, 3
NEGATIVE_CODES: dict[NegativePolicy, int] = {
    NegativePolicy.ERROR: NEG_ERROR, NegativePolicy.NAN: NEG_NAN, NegativePolicy.ZERO: NEG_ZERO,
    NegativePolicy.ABS: NEG_ABS}

#: A zero input to a format without zero (FPS-RND-12): refuse; the NaN code; the smallest code.
ZERO_ERROR, ZERO_NAN, ZERO_MIN = 0, 1, 2
ZERO_CODES: dict[ZeroPolicy, int] = {ZeroPolicy.ERROR: ZERO_ERROR, ZeroPolicy.NAN: ZERO_NAN, ZeroPolicy.MIN: ZERO_MIN}

# ------------------------------------------------------------- MX scale rules
MX_FLOOR, MX_CEIL, MX_EVEN, MX_RCEIL, MX_RCEIL_FP32, MX_FLOOR_FP32 = range(6)
#: MxScaleMode -> its kernel code (FPS-BLK-12, FPS-BLK-23, FPS-BLK-24, FPS-BLK-27).
MX_MODE_CODES: dict[MxScaleMode, int] = {
    MxScaleMode.FLOOR: MX_FLOOR, MxScaleMode.CEIL: MX_CEIL, MxScaleMode.EVEN: MX_EVEN, MxScaleMode.RCEIL: MX_RCEIL,
    MxScaleMode.RCEIL_FP32: MX_RCEIL_FP32, MxScaleMode.FLOOR_FP32: MX_FLOOR_FP32}

ZB_EXACT, ZB_MIN_NORMAL, ZB_ONE = 0, 1, 2
#: MxZeroByte -> its kernel code (FPS-BLK-13, FPS-BLK-23).
ZERO_BYTE_CODES: dict[MxZeroByte, int] = {
    MxZeroByte.EXACT: ZB_EXACT, MxZeroByte.MIN_NORMAL: ZB_MIN_NORMAL, MxZeroByte.ONE: ZB_ONE}

# ------------------------------------------------------- the encoder's refusals
#: The error kind an encoder kernel reports for an element: none, or why it is refused.
OK, E_NAN, E_NEG, E_ZERO, E_OVF, E_RBITS = 0, 1, 2, 3, 4, 5


# ---------------------------------------------------------------- input layouts
class InputBits(NamedTuple):
    """The fields of an input dtype's raw bits, as the encoder kernels read them."""

    man: int            # mantissa bits
    exp_mask: int       # exponent field mask
    bias: int           # exponent bias
    sign_shift: int     # position of the sign bit


#: The accepted input dtypes: the integer dtype their bits are viewed as, and the fields.
INPUT_LAYOUTS: dict[str, tuple[type, InputBits]] = {
    "float16": (np.uint16, InputBits(10, 0x1F, 15, 15)),
    "bfloat16": (np.uint16, InputBits(7, 0xFF, 127, 15)),
    "float32": (np.uint32, InputBits(23, 0xFF, 127, 31)),
    "float64": (np.int64, InputBits(52, 0x7FF, 1023, 63)),
}

# --------------------------------------------------------------- scheduling
#: Blocks (or groups of 16) per parallel work item of the block kernels.
BLOCK_CHUNK = 1024


@numba.njit(cache=True, nogil=True, inline="always")
def chunk_count(n):
    """The number of work items of a loop over ``n`` blocks: ``numba.prange(chunk_count(n))``."""
    return (n + BLOCK_CHUNK - 1) // BLOCK_CHUNK


@numba.njit(cache=True, nogil=True, inline="always")
def chunk_bounds(c, n):
    """The blocks b0 <= b < b1 of work item ``c`` of a loop over ``n`` blocks.

    Every block kernel writes its loop as ``for c in numba.prange(chunk_count(n))`` and
    ``b0, b1 = chunk_bounds(c, n)``, then its per-block steps over range(b0, b1).  (One driver
    that takes the per-block steps as a compiled function argument would write the loop once
    more literally, but Numba's disk cache misses every kernel that takes a function argument,
    each process then compiles it again: 2.1 s for a one-line step on this machine.)"""
    b0 = c * BLOCK_CHUNK
    return b0, min(n, b0 + BLOCK_CHUNK)


@numba.njit(cache=True, nogil=True, inline="always")
def block_slot(bn, nbr, block, tile2d):
    """Index of block ``bn`` of the view (``nbr`` blocks per row) in the scale grid: bn itself
    (1xB), or its B x B tile (``tile2d``)."""
    if tile2d:
        i = bn // nbr
        return (i // block) * nbr + (bn - i * nbr)
    return bn
