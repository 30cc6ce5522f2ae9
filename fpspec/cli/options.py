"""One vocabulary for the options several commands share (FPS-CLI-5).

Every command parses a tensor-scale target T, a tile, a size or a progress
switch through the one function here, so ``--target 1e39`` or ``--tile 1x16``
means the same thing (and fails the same way) wherever it is accepted.  Values
are checked inside the command, so a bad one is one ``FpspecError`` line with
exit status 2; argparse only checks the shape of the command line.

Option names (each meaning has its own name):

* ``--to FORMAT``: the format ``encode`` rounds into; ``--from FORMAT``: the format
  of the codes ``decode`` reads; ``--operand-format FORMAT``: the format of GEMM
  operand codes (``gemm``, ``probe``); ``--scale-format FORMAT``: a block-scale
  format.  The old spelling ``--format`` is still read (hidden).
* ``--payload-format FORMAT``: the element format of a block-quantized tensor
  (``quantize``): ``e2m1``, or ``e4m3`` / ``e5m2`` for ``mxfp8`` (FPS-BLK-26).
* ``--target T``: the tensor-scale target T (``quantize``, ``bounds``);
  ``probe --gemm SPEC`` names the GEMM under test (``--target`` is its hidden
  old spelling there).
"""

from __future__ import annotations

import argparse
import re
import sys
from fractions import Fraction
from typing import TextIO

import numpy as np

from ..errors import FpspecError
from ..exact.binary32 import FLT_MAX

__all__ = ["parse_target", "parse_number", "parse_size", "parse_tile", "add_alias", "require",
           "add_quiet", "progress_stream", "add_payload_format", "TILES"]

_FLT_MAX = Fraction(FLT_MAX)
_POW = re.compile(r"^\s*([+-]?\d+)\s*(?:\^|\*\*)\s*([+-]?\d+)\s*$")


def _exact_number(text: str) -> Fraction | None:
    """An exact rational from '448', '2048.5', '1e3', '1/2', '2^11' or '2**-3'; None if none."""
    m = _POW.match(text)
    if m:
        base, exp = int(m.group(1)), int(m.group(2))
        if abs(exp) > 4096 or base == 0 and exp < 0:
            return None
        return Fraction(base) ** exp
    try:
        return Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        return None


def parse_target(text: str | None, flag: str = "--target") -> Fraction | None:
    """T: positive, finite and exactly a binary32 value (the seed and TE compute 6T in FP32)."""
    if text is None:
        return None
    t = _exact_number(text)
    if t is None:
        raise FpspecError(f"{flag} must be a number (e.g. 448, 2048, 1/2, 2^11), got {text!r}")
    if t <= 0:
        raise FpspecError(f"{flag} {text} must be positive")
    if t > _FLT_MAX:
        raise FpspecError(f"{flag} {text} is beyond the binary32 range (largest finite {FLT_MAX:.9g})")
    if Fraction(float(np.float32(float(t)))) != t:
        raise FpspecError(f"{flag} {text} is not exactly a binary32 value (T must be one)")
    return t


def parse_number(text: str | None, flag: str) -> float | None:
    """A real-valued option (e.g. ``--amax``) as a float, or None when it was not given."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise FpspecError(f"{flag} must be a number, got {text!r}") from None


def parse_size(text: str | int | None, flag: str, lo: int, hi: int) -> int | None:
    """An integer size in [lo, hi]; '4096', '1e4' and '2^12' are accepted when exact."""
    if text is None:
        return None
    v = _exact_number(str(text))
    if v is None or v.denominator != 1:
        raise FpspecError(f"{flag} must be an integer, got {text!r}")
    n = int(v)
    if not lo <= n <= hi:
        raise FpspecError(f"{flag} must be between {lo} and {hi}, got {text}")
    return n


#: What ``--tile`` accepts, with the tile and block length each names (None: from --block).
TILES: dict[str, tuple[str, int | None]] = {
    "1xB": ("1xB", None), "BxB": ("BxB", None),
    "1x16": ("1xB", 16), "16x16": ("BxB", 16), "1x32": ("1xB", 32), "32x32": ("BxB", 32),
}


def parse_tile(text: str, block: int | None) -> tuple[str, int | None]:
    """``--tile`` and ``--block`` together: (tile, block); ``1x16`` is ``1xB`` with B = 16."""
    found = {k.lower(): v for k, v in TILES.items()}.get(text.strip().lower())
    if found is None:
        raise FpspecError(f"--tile must be one of {', '.join(TILES)}, got {text!r}")
    tile, b = found
    if b is not None and block is not None and b != block:
        raise FpspecError(f"--tile {text} means blocks of {b}, but --block is {block}")
    return tile, b if b is not None else block


def add_alias(p: argparse.ArgumentParser, old: str, dest: str, **kw: object) -> None:
    """Accept ``old`` as a hidden spelling of the option stored in ``dest``."""
    p.add_argument(old, dest=dest, help=argparse.SUPPRESS, **kw)  # type: ignore[arg-type]


def require(args: argparse.Namespace, dest: str, flag: str) -> str:
    value = getattr(args, dest)
    if value is None:
        raise FpspecError(f"{flag} is required")
    return value


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (progress is shown only when stderr is a terminal)")


def progress_stream(args: argparse.Namespace) -> TextIO | None:
    """stderr when it is a terminal and --quiet was not given, else None (FPS-CLI-6)."""
    if getattr(args, "quiet", False):
        return None
    err = sys.stderr
    try:
        return err if err.isatty() else None
    except (AttributeError, ValueError):
        return None


def add_payload_format(p: argparse.ArgumentParser) -> None:
    """``--payload-format FORMAT``: the element format of the scheme's payloads (checked by the
    scheme, so an unknown or unsupported one is one FpspecError line naming it)."""
    from ..schemes import BLOCK_SCHEMES

    per_scheme = "; ".join(f"{name}: {' or '.join(s.payload_formats)}" for name, s in BLOCK_SCHEMES.items())
    p.add_argument("--payload-format", metavar="FORMAT",
                   help=f"element (payload) format, the first the default ({per_scheme})")
