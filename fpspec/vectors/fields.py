"""Codes decoded field by field, for reports: ``0x3 e2m1 s=0 e=01 m=1 = 1.5`` (FPS-CHK-3).

Shared by the checker's mismatch lines and the explanation of a failing block
(:mod:`fpspec.vectors.explain`).
"""

from __future__ import annotations

import math
from fractions import Fraction

from ..formats import FORMATS, FloatFormat

__all__ = ["field_text", "code_distance"]


def _known_format(fmt_name: str | None) -> FloatFormat | None:
    """The format of that name, or None for no name or one fpspec does not know."""
    return FORMATS.get(fmt_name) if fmt_name else None


def field_text(code: int, fmt_name: str | None) -> str:
    """'s=0 e=0111 m=101 = 0.8125' for a code of a known format, else the hex alone."""
    f = _known_format(fmt_name)
    if f is None:
        return f"0x{code:x}"
    if not 0 <= code < f.num_codes:
        return f"0x{code:x} (out of range for {f.name})"
    s, e, m = f.split(code)
    v = f.decode_exact(code)
    if isinstance(v, Fraction):
        neg0 = v == 0 and f.signed and s
        val = "-0" if neg0 else (str(v) if v.denominator == 1 else f"{float(v):.9g} ({v})"
                                 if v.denominator < 1 << 20 else f"{float(v):.9g}")
    else:
        val = "NaN" if math.isnan(v) else ("-Inf" if v < 0 else "Inf")
    sign = f"s={s} " if f.signed else ""
    man = f" m={m:0{f.man_bits}b}" if f.man_bits else ""
    width = (f.bits + 3) // 4
    return f"0x{code:0{width}x} {f.name} {sign}e={e:0{f.exp_bits}b}{man} = {val}"


def _ordinal(code: int, f) -> int | None:
    if f.kind(code).value == "nan":
        return None
    if f.signed and code & f.sign_mask:
        return -(code & f.magnitude_mask)
    return code


def code_distance(expected: int, got: int, fmt_name: str | None) -> int | None:
    """Signed number of codes between expected and got in value order (None for NaN / unknown)."""
    f = _known_format(fmt_name)
    if f is None or not (0 <= got < f.num_codes and 0 <= expected < f.num_codes):
        return None
    a, b = _ordinal(expected, f), _ordinal(got, f)
    return None if a is None or b is None else b - a
