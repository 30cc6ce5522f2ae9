"""The implementations of the numeric rules, and the one place a call chooses among them.

Every numeric rule of fpspec exists as twins with the same numbered steps: the executable
spec on integers and ``Fraction`` (:mod:`fpspec.exact`) and the Numba path
(:mod:`fpspec.fast`), bit-equal by test (docs/architecture.rst).  A public verb
(``encode``, ``decode``, ``quantize``, ``dequantize``, ``gemm``) takes ``impl`` by name,
chooses the twin once with :func:`choose_twin`, and passes the :class:`Twin` down; no layer
below a verb looks at ``impl`` again.

A :class:`Twin` is the table of the steps a verb hands to an implementation: plain
functions on resolved, typed arguments (a :class:`~fpspec.formats.FloatFormat`, a
:class:`~fpspec.choices.RoundingMode`, a :class:`~fpspec.schemes.BlockSpec`, a
:class:`~fpspec.models.GemmModel`), never names to parse.  Each twin's module is imported
when the twin is first chosen (``import fpspec`` starts no Numba).

A new backend plugs in here: it provides the same steps on its own arrays and registers a
builder under its name in :data:`TWIN_BUILDERS`.  The torch twin (:mod:`fpspec.torch`) is one:
its steps take and give torch tensors on any device.  ``impl=None`` (every verb's default)
chooses by the input: the torch twin for a torch tensor, the fast twin for anything else; a twin
given arrays of the other kind is refused by name (fpspec never copies a device tensor to the
host, or a host array to a device, behind the caller's back).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

from .arraykind import describe_array, is_torch
from .errors import FpspecError

__all__ = ["Twin", "choose_twin", "TWIN_NAMES", "TWIN_BUILDERS", "RESERVED_TWINS", "TORCH_TWINS"]


@dataclass(frozen=True)
class Twin:
    """One implementation of every numeric rule, as the steps the verbs call.

    Step 0's array work (FPS-BLK-1): ``scan_input(x, block)`` -> (the (M, K) view of a checked
    input, fp32(max |x|), its 1xB block amaxes or None), refusing NaN, Inf and values beyond
    binary32 by index; ``to_binary32(v)`` (RNE) and ``pad(v, rows, cols)`` (zeros appended).

    Conversion (FPS-RND-*): ``encode(x, fmt, mode, rbits, nbits, policies)`` -> codes,
    ``decode(codes, fmt)`` -> float64 values.

    Block quantization (FPS-BLK-*), the steps of :func:`fpspec.quantization.quantize`:
    ``transpose(x)`` (the columnwise view), ``rht16(v)`` and ``round_bf16(v)`` (step 0's
    transform), ``tensor_amax(v)`` (step 1), ``quantize_view(v, spec, amax, rbits,
    want_dequant, block_amax)`` (step 2); ``block_amax_from_scan``: whether step 2 takes the
    block amaxes that the input scan measured (a rowwise untransformed view), one pass fewer.
    Dequantization (FPS-BLK-14): ``dequantize_blocks(codes, scales, formula, scale_format,
    payload_format, amax, target, decode_scale, block, tile)`` -> (float32 values, flat index of
    the first non-finite value or -1).

    GEMM (FPS-GEMM-*): ``gemm(a, bt, model, fmt, alpha)`` and ``rowdot(...)`` on validated
    operands (:func:`fpspec.matmul.gemm` checks them); ``gemm_declines(a, bt, model)``: why this
    twin leaves a GEMM to the exact spec (None: it is its own; :func:`fpspec.matmul.gemm_path`
    asks once); ``gemm_kernel(a, bt, model, fmt)``: how it computes one, as data (what
    ``fpspec gemm --explain`` prints).
    """

    name: str
    scan_input: Callable[..., Any]
    to_binary32: Callable[[Any], Any]
    pad: Callable[[Any, int, int], Any]
    encode: Callable[..., Any]
    decode: Callable[..., Any]
    transpose: Callable[[Any], Any]
    rht16: Callable[[Any], Any]
    round_bf16: Callable[[Any], Any]
    tensor_amax: Callable[[Any], Any]
    quantize_view: Callable[..., Any]
    block_amax_from_scan: bool
    dequantize_blocks: Callable[..., Any]
    gemm: Callable[..., Any]
    rowdot: Callable[..., Any]
    gemm_declines: Callable[..., "str | None"]
    gemm_kernel: Callable[..., dict]


def _numpy_steps(scan_input: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    """Step 0's array work on numpy arrays (the exact and the fast twin differ in the scan only)."""
    import numpy as np

    return {"scan_input": scan_input, "to_binary32": lambda v: v.astype(np.float32),
            "pad": lambda v, rows, cols: np.pad(v, ((0, rows), (0, cols)))}


def _exact() -> Twin:
    import numpy as np

    from .exact.accumulate import gemm_exact, rowdot_exact
    from .exact.blocks import quantize_view_exact, rht16_exact, round_bf16_exact, scan_input_exact
    from .exact.dequant import dequantize_blocks_exact
    from .exact.rounding import decode_exact_codes, encode_exact

    def transpose(x):
        return np.ascontiguousarray(x.T)

    def tensor_amax(v):
        return np.float32(max((abs(float(e)) for e in np.asarray(v).reshape(-1)), default=0.0))

    def quantize_view(v, spec, amax, rbits, want_dequant=True, block_amax=None):
        return quantize_view_exact(v, spec, float(amax), rbits)  # (the exact view is dequantized always)

    def gemm(a, bt, model, fmt=None, alpha=None):
        return gemm_exact(a, bt, model, fmt=fmt)  # (the spec computes its own alpha)

    def rowdot(a, bt, model, fmt=None, alpha=None):
        return rowdot_exact(a, bt, model, fmt=fmt)

    def gemm_declines(a, bt, model):
        return None  # (the spec computes every GEMM the door admits)

    def gemm_kernel(a, bt, model, fmt=None):
        return {"kernel": "fpspec.exact.accumulate.gemm_exact (steps 1-8 on exact values)"}

    return Twin(name="exact", **_numpy_steps(scan_input_exact), encode=encode_exact, decode=decode_exact_codes, transpose=transpose, rht16=rht16_exact,
                round_bf16=round_bf16_exact, tensor_amax=tensor_amax, quantize_view=quantize_view,
                block_amax_from_scan=False, dequantize_blocks=dequantize_blocks_exact, gemm=gemm, rowdot=rowdot,
                gemm_declines=gemm_declines, gemm_kernel=gemm_kernel)


def _fast() -> Twin:
    import numpy as np

    from .fast.accumulate import exact_only_reason, fast_kernel, gemm_fast, rowdot_fast
    from .fast.blocks import quantize_view_fast
    from .fast.dequant import dequant_value_table, dequantize_blocks as dequantize_by_table
    from .fast.rht import rht16_fast, round_bf16_fast
    from .fast.scan import scan_input, scan_values
    from .fast.rounding import decode_fast, encode_fast
    from .fast.transpose import transpose_fast

    def tensor_amax(v):
        if v.size == 0:
            return np.float32(0)
        return np.float32(scan_values(np.ascontiguousarray(v).reshape(-1)).amax)

    def quantize_view(v, spec, amax, rbits, want_dequant=True, block_amax=None):
        return quantize_view_fast(v, spec, float(amax), rbits, want_dequant=want_dequant, block_amax=block_amax)

    def dequantize_blocks(codes, scales, formula, scale_format, payload_format, amax, target, decode_scale,
                          block, tile):
        table = dequant_value_table(formula, scale_format, payload_format, amax, target, decode_scale)
        return dequantize_by_table(codes, scales, table, block, tile)

    def gemm_kernel(a, bt, model, fmt=None):
        partials, kernel = fast_kernel(a, bt, model, fmt)
        return {"blas_partials": partials, "kernel": kernel}

    return Twin(name="fast", **_numpy_steps(scan_input), encode=encode_fast, decode=decode_fast, transpose=transpose_fast, rht16=rht16_fast,
                round_bf16=round_bf16_fast, tensor_amax=tensor_amax, quantize_view=quantize_view,
                block_amax_from_scan=True, dequantize_blocks=dequantize_blocks, gemm=gemm_fast, rowdot=rowdot_fast,
                gemm_declines=exact_only_reason, gemm_kernel=gemm_kernel)


def _torch() -> Twin:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise FpspecError("impl 'torch' needs PyTorch, which is not installed (pip install torch)") from None
    from .torch.twin import build

    return build(Twin)


#: Twin name -> the function that builds it (its modules imported then).
TWIN_BUILDERS: dict[str, Callable[[], Twin]] = {"fast": _fast, "exact": _exact, "torch": _torch}
#: The twins whose arrays are torch tensors (the others take numpy arrays).
TORCH_TWINS: frozenset[str] = frozenset({"torch"})
#: Names kept for twins this version does not have, with what to say when one is asked for.
RESERVED_TWINS: dict[str, str] = {}
#: The names ``impl`` takes, the default first.
TWIN_NAMES: tuple[str, ...] = tuple(TWIN_BUILDERS)


@functools.cache
def _built(name: str) -> Twin:
    return TWIN_BUILDERS[name]()


def choose_twin(impl: "str | Twin | None", given: object = None) -> Twin:
    """The twin ``impl`` names (a :class:`Twin` is taken as chosen); the one decision of a verb.

    ``impl=None`` chooses by ``given``, the verb's input: the torch twin for a torch tensor, the
    fast twin otherwise.  A named twin given an input of the other kind (a torch tensor to
    ``fast`` or ``exact``, a numpy array to ``torch``) is refused: no verb copies data between
    host and device on its own.

    Raises:
        FpspecError: ``impl`` is not a twin's name (a reserved name says why it is not there), or
            the input is of the other kind.
    """
    if isinstance(impl, Twin):
        return impl
    if impl is None:
        impl = "torch" if is_torch(given) else "fast"
    if isinstance(impl, str) and impl in TWIN_BUILDERS:
        if given is not None and is_torch(given) != (impl in TORCH_TWINS):
            if impl in TORCH_TWINS:
                raise FpspecError(f"impl {impl!r} computes on torch tensors, got {describe_array(given)}: give "
                                  "torch.from_numpy(x) (on the device you want), or impl='fast' for numpy")
            raise FpspecError(f"impl {impl!r} computes on numpy arrays on the host, got {describe_array(given)}: "
                              "use impl='torch' (or leave impl out) for torch tensors; fpspec never copies a "
                              "tensor to the host on its own")
        return _built(impl)
    names = " or ".join(repr(n) for n in TWIN_NAMES)
    if isinstance(impl, str) and impl in RESERVED_TWINS:
        raise FpspecError(f"impl {impl!r}: {RESERVED_TWINS[impl]}; use {names}")
    raise FpspecError(f"impl must be {names}, got {impl!r}")
