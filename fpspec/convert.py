"""Public conversion API: encode floats to codes, decode codes to floats (FPS-RND-*, FPS-FMT-*).

``impl="fast"`` runs the Numba path, ``impl="exact"`` the executable spec in
:mod:`fpspec.exact.rounding`, ``impl="torch"`` the torch twin (torch tensors on their device);
the three are bit-equal by test.  ``impl=None`` (the default) chooses by the input: ``torch``
for a torch tensor, ``fast`` otherwise.  Each verb resolves
its arguments once (a :class:`~fpspec.formats.FloatFormat`, a
:class:`~fpspec.choices.RoundingMode`, the :class:`~fpspec.choices.Policies` in force) and
chooses the twin once (:func:`fpspec.twins.choose_twin`).  Every
argument is checked before any element is read; a bad one raises
:class:`~fpspec.errors.FpspecError` naming it (FPS-RND-16).  Arrays in the other
byte order (``>f4``, ``>u2``) are taken by value: they are brought to the native
order here, at the door, so no kernel sees one.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from .arraykind import is_torch, same_device, to_numpy
from .choices import DEFAULT_SR_BITS, MAX_SR_BITS, Policies, RoundingMode, check_nbits, default_policies
from .choices import validate_mode, validate_policies
from .errors import FpspecError
from .formats import FloatFormat, get_format
from .io import native_byte_order
from .twins import choose_twin

__all__ = ["encode", "decode", "resolve_policies", "resolve_format", "check_random_values", "TORCH_RANDOM_DTYPES"]

#: The dtypes random values of stochastic rounding may have.
_RANDOM_DTYPES = ("uint8", "uint16", "uint32")
#: ... and of a torch tensor of them (torch computes little on uint16/uint32: int32 and int64 hold the
#: same values, which must not be negative).
TORCH_RANDOM_DTYPES = ("uint8", "uint16", "uint32", "int16", "int32", "int64")


def resolve_format(fmt: object) -> FloatFormat:
    """A :class:`FloatFormat` from a name or a format; FpspecError for anything else."""
    if isinstance(fmt, FloatFormat):
        return fmt
    if not isinstance(fmt, str):
        raise FpspecError(f"a format is a name such as 'e2m1' or a FloatFormat, got {fmt!r} "
                          f"of type {type(fmt).__name__}")
    try:
        return get_format(fmt)
    except (KeyError, ValueError) as exc:
        raise FpspecError(str(exc).strip("'\"")) from None


def check_random_values(rbits: np.ndarray, nbits: int) -> None:
    """Every random value of stochastic rounding is below 2^nbits, whatever its dtype: a uint16
    or uint32 array is taken for nbits = 8 when its values fit, and refused, naming the first
    value that does not and its index, when one does not (FPS-RND-16)."""
    if is_torch(rbits):
        if str(rbits.dtype).replace("torch.", "") not in TORCH_RANDOM_DTYPES or rbits.numel() == 0:
            return  # (refused by the caller's own check, by name)
        import torch

        wide = rbits.to(torch.int64)  # (torch compares no uint16/uint32 tensors)
        bad = (wide < 0) | (wide >= (1 << nbits)) if nbits < 63 else wide < 0
        if not bool(bad.any()):
            return
        idx = tuple(int(i) for i in np.argwhere(to_numpy(bad))[0])  # (refusing: the mask's host copy)
        raise FpspecError(f"random value {int(wide[idx])} is not in 0..2^{nbits} - 1 (nbits = {nbits})", idx)
    if nbits >= 32 or rbits.size == 0 or rbits.dtype.name not in _RANDOM_DTYPES or int(rbits.max()) < (1 << nbits):
        return  # (a dtype other than uint8/16/32 is refused by the caller's own check, by name)
    idx = tuple(int(i) for i in np.argwhere(rbits >= (1 << nbits))[0])
    raise FpspecError(f"random value {int(rbits[idx])} is not below 2^{nbits} (nbits = {nbits})", idx)


def resolve_policies(fmt: FloatFormat | str, *, overflow: str | None = None, nan: str | None = None,
                     negative: str | None = None, zero: str | None = None) -> Policies:
    """The format's default policies with the given ones replaced (names as in :mod:`fpspec.choices`);
    a policy the format cannot honour is refused here (FPS-RND-16)."""
    fmt = resolve_format(fmt)
    pol = default_policies(fmt).with_(overflow=overflow, nan=nan, negative=negative, zero=zero)
    validate_policies(fmt, pol)
    return pol


def encode(x: np.ndarray, fmt: FloatFormat | str, rounding: RoundingMode | str = "rne", *,
           rbits: np.ndarray | None = None, nbits: int = DEFAULT_SR_BITS,
           overflow: str | None = None, nan: str | None = None, negative: str | None = None,
           zero: str | None = None, impl: "Literal['fast', 'exact', 'torch'] | None" = None) -> np.ndarray:
    """Round every element of a float array once, from its exact value, to a code of ``fmt``.

    Returns codes in ``fmt.storage_dtype`` (uint8 / uint16 / uint32), the shape of ``x``.
    Stochastic modes take ``rbits`` (uint8/16/32, same shape, values < 2^nbits, whatever the
    dtype: a larger value is refused, naming it and its index), with ``1 <= nbits <= 32``.
    ``impl``: ``fast``, ``exact`` or ``torch``; None (the default) is ``torch`` for a torch tensor
    (codes then a torch tensor on its device) and ``fast`` otherwise.
    """
    fmt = resolve_format(fmt)
    mode = RoundingMode.parse(rounding)
    twin = choose_twin(impl, x)
    if mode.stochastic:
        nbits = check_nbits(nbits, MAX_SR_BITS)
    validate_mode(fmt, mode)
    pol = resolve_policies(fmt, overflow=overflow, nan=nan, negative=negative, zero=zero)
    if is_torch(x):
        same_device("encode: x and rbits", x, rbits)
    else:
        x, rbits = native_byte_order(x), native_byte_order(rbits)
    if mode.stochastic and (isinstance(rbits, np.ndarray) or is_torch(rbits)) and \
            tuple(rbits.shape) == tuple(np.shape(x) if not is_torch(x) else x.shape):
        check_random_values(rbits, nbits)
    return twin.encode(x, fmt, mode, rbits=rbits, nbits=nbits, policies=pol)


def decode(codes: np.ndarray, fmt: FloatFormat | str, *,
           impl: "Literal['fast', 'exact', 'torch'] | None" = None) -> np.ndarray:
    """Decode codes to float64 values (exact; NaN and Inf codes give NaN and Inf, with their sign).

    ``impl="fast"`` looks each code up in a table; ``impl="exact"`` decodes every code
    with :meth:`FloatFormat.decode_exact` (FPS-FMT-3) and converts the exact value, which
    every format here holds in float64.  Both refuse codes out of range, naming the first.
    """
    fmt = resolve_format(fmt)
    twin = choose_twin(impl, codes)
    return twin.decode(codes if is_torch(codes) else native_byte_order(codes), fmt)
