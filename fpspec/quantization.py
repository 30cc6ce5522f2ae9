"""Public block-quantization API: :func:`quantize` and :func:`dequantize` (FPS-BLK-*).

``quantize`` turns a float tensor into a :class:`fpspec.quantized.QuantizedTensor`
under a named scheme and profile (:mod:`fpspec.schemes`); ``dequantize`` turns
it back into float32 with the profile's own dequantization formula.  The
normative steps are in docs/scheme-ue5m3.rst, scheme-nvfp4.rst, scheme-mxfp4.rst
and scheme-mxfp8.rst; in brief, for a tensor X:

0. Refuse values the scheme cannot take (NaN, Inf, magnitudes beyond binary32)
   (FPS-BLK-1); take the view V = X, or X^T when ``columnwise``; pad with zeros
   to whole blocks when ``pad`` (else refuse); binary32 profiles narrow V to
   binary32 (RNE); apply the 16-point Hadamard transform along K when ``rht``
   (FPS-BLK-10), rounded to bfloat16 when ``rht_output`` says so (FPS-BLK-20).
1. Tensor amax g: the given ``amax`` (binary32, finite, >= 0) or max |V|
   rounded to binary32 (current scaling) (FPS-BLK-5).
2. Block amax, scale code, payload codes: the profile
   (:mod:`fpspec.exact.blocks` is the spec, :mod:`fpspec.fast.blocks` its twin).
"""

from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple

import numpy as np

from .arraykind import describe_array, is_torch, same_device, to_numpy
from .convert import TORCH_RANDOM_DTYPES, check_random_values
from .errors import FpspecError
from .fast.rounding import decode_table
from .formats import get_format
from .input_check import BINARY32_OVERFLOW
from .io import native_byte_order
from .quantized import QuantizedTensor
from .schemes import BLOCK_SCHEMES, CODES_SCHEME, BlockResult, BlockSpec, Dequant, RhtOutput, get_scheme, resolve_spec
from .twins import Twin, choose_twin

__all__ = ["quantize", "dequantize", "quantize_view", "prepare_view", "tensor_amax", "PreparedView"]

_RBITS_DTYPES = ("uint8", "uint16", "uint32")


class PreparedView(NamedTuple):
    """Step 0's result: the (M, K) view to quantize, its shape before padding, max |view|
    as binary32 when it is already known (it is unless the view was transformed), and
    max |view| of every 1xB block, flat, when the input scan measured them (a binary32
    rowwise view of whole blocks, not transformed; else None)."""

    view: "np.ndarray | Any"
    shape: tuple[int, int]
    amax: np.float32 | None
    block_amax: np.ndarray | None = None


def _is_binary32(v: object) -> bool:
    return str(getattr(v, "dtype", "")).replace("torch.", "") == "float32"


def prepare_view(x: np.ndarray, spec: BlockSpec, *, columnwise: bool = False, pad: bool = False,
                 rht: bool = False, impl: "str | Twin | None" = None) -> PreparedView:
    """Step 0: the view that is quantized (FPS-BLK-1, FPS-BLK-10, FPS-BLK-20), by the twin
    ``impl`` names (:func:`fpspec.twins.choose_twin`; None: the input's)."""
    twin = choose_twin(impl, x)
    # a rowwise, untransformed 1xB view is the input's own rows: a twin that takes block amaxes
    # from the input scan gets them here (one pass over the input fewer)
    same_rows = spec.tile == "1xB" and not columnwise and not rht and twin.block_amax_from_scan
    x, known_amax, block_amax = twin.scan_input(x, spec.block if same_rows else 0)
    if columnwise:
        v = twin.transpose(x)
    else:
        v = x.contiguous() if is_torch(x) else np.ascontiguousarray(x)
    if spec.arithmetic.binary32_input and not _is_binary32(v):
        v = twin.to_binary32(v)  # binary32 profiles read binary32 (RNE; max |v| rounds the same way)
    m, k = tuple(v.shape)
    b = spec.block
    pk = (-k) % b
    pm = (-m) % b if spec.tile == "BxB" else 0
    if pk or pm:
        if not pad:
            what = f"K = {k} is not a multiple of the block {b}" if pk else \
                f"M = {m} is not a multiple of the {b}x{b} tile"
            raise FpspecError(f"{what} (view shape {(m, k)}); pass pad=True (--pad) to zero-pad")
        v = twin.pad(v, pm, pk)
    if rht:
        if v.shape[1] % 16:
            raise FpspecError(f"the Hadamard transform needs K = {v.shape[1]} to be a multiple of 16")
        v = twin.rht16(v)
        if spec.rht_output is RhtOutput.BF16:
            v = twin.round_bf16(v)
        known: np.float32 | None = None
    else:
        known = known_amax
    if not _is_binary32(v) or pk:
        block_amax = None  # (the scan measures blocks of binary32 rows only: a guard, not a case)
    return PreparedView(v, (m, k), known, block_amax)


def tensor_amax(v: np.ndarray, impl: "str | Twin | None" = None) -> np.float32:
    """max |v| rounded to binary32 (a maximum has no order dependence) (FPS-BLK-5)."""
    return choose_twin(impl, v).tensor_amax(v)


def _given_amax(amax: object) -> np.float32:
    """A held tensor amax: finite, >= 0, used as its binary32 value; 0 means what a measured
    zero amax means for the profile (FPS-BLK-5)."""
    try:
        a = float(amax)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise FpspecError(f"amax must be a number, got {amax!r}") from None
    bad = not math.isfinite(a) or a < 0 or abs(a) >= BINARY32_OVERFLOW
    if not bad:
        a32 = np.float32(a)
        bad = a > 0 and a32 == 0
    if bad:
        raise FpspecError(f"a given amax must be finite and positive, or 0 (a held zero amax), and stay so "
                          f"in binary32, got {amax!r}")
    return a32


def _check_rbits(rbits: object, spec: BlockSpec, view: object) -> np.ndarray:
    shape = tuple(view.shape)  # type: ignore[attr-defined]
    if rbits is None:
        raise FpspecError(f"rounding {spec.rounding.value} needs random bits (rbits: uint8, uint16 or uint32 "
                          f"values below 2^{spec.nbits}, shape {shape}, the quantized view)")
    same_device("quantize: the input and rbits", view, rbits)
    rb = rbits if is_torch(rbits) else np.asarray(rbits)
    dtype = str(rb.dtype).replace("torch.", "")
    if tuple(rb.shape) != shape or dtype not in (TORCH_RANDOM_DTYPES if is_torch(rb) else _RBITS_DTYPES):
        raise FpspecError(f"rbits must be uint8, uint16 or uint32 of shape {shape} (the quantized view), "
                          f"got {dtype} {tuple(rb.shape)}")
    check_random_values(rb, spec.nbits)
    return rb


def quantize_view(v: np.ndarray, spec: BlockSpec, amax: np.float32, rbits: np.ndarray | None = None,
                  impl: "str | Twin | None" = None, want_dequant: bool = True,
                  block_amax: np.ndarray | None = None) -> BlockResult:
    """Steps 1-2 on a prepared view (used by quantize and by the GEMM models); ``block_amax``:
    the view's block amaxes as :func:`prepare_view` measured them (fast path only; the exact
    path measures its own)."""
    twin = choose_twin(impl, v)
    if spec.rounding.stochastic:
        rbits = _check_rbits(rbits, spec, v)
    return twin.quantize_view(v, spec, amax, rbits, want_dequant=want_dequant, block_amax=block_amax)


def _check_names(scheme: str, profile: object, block: object) -> None:
    """``profile`` is None (the scheme's default) or a non-empty name; ``block`` None or an
    integer (a float such as 16.0 is refused, not taken as 16); the scheme checks the values."""
    if profile is not None and (not isinstance(profile, str) or not profile.strip()):
        raise FpspecError(f"profile must be a profile name of {scheme!r} or None (the default), got {profile!r}")
    if block is not None and (isinstance(block, (bool, np.bool_)) or not isinstance(block, (int, np.integer))):
        sizes = " or ".join(map(str, get_scheme(scheme).blocks)) if scheme in BLOCK_SCHEMES else "a block length"
        raise FpspecError(f"block must be an integer ({sizes}) or None (the scheme's default), "
                          f"got {type(block).__name__} {block!r}")


#: The settings of :func:`quantize` that make its :class:`~fpspec.schemes.BlockSpec` (a given spec
#: carries them all).
_SPEC_SETTINGS = ("profile", "block", "tile", "target", "rounding", "nbits", "scale_format", "zero_scale_rule",
                  "sr_eval", "rht_output", "payload_format")


def _spec_of(scheme: "str | BlockSpec", settings: dict[str, object]) -> BlockSpec:
    """The call's resolved spec, made once (FPS-BLK-15): ``scheme`` itself when it is a resolved
    :class:`~fpspec.schemes.BlockSpec` (then no setting may be given beside it), else the scheme's
    profile resolved against the settings (None: the profile's or the scheme's default)."""
    if isinstance(scheme, BlockSpec):
        given = [k for k in _SPEC_SETTINGS if settings[k] is not None]
        if given:
            raise FpspecError(f"a resolved BlockSpec carries {', '.join(given)}: give them in the spec "
                              f"(spec.with_(...) or fpspec.schemes.resolve_spec), not beside it")
        return scheme
    if not isinstance(scheme, str):
        raise FpspecError(f"scheme must be a scheme name ({', '.join(BLOCK_SCHEMES)}) or a resolved BlockSpec, "
                          f"got {type(scheme).__name__} {scheme!r}")
    _check_names(scheme, settings["profile"], settings["block"])
    given = {k: v for k, v in settings.items() if k != "profile" and v is not None}  # (None: resolve_spec's default)
    if "block" in given:
        given["block"] = int(given["block"])  # type: ignore[call-overload]
    return resolve_spec(scheme, settings["profile"], **given)  # type: ignore[arg-type]


def quantize(x: np.ndarray, scheme: "str | BlockSpec" = "ue5m3", *, profile: str | None = None,
             block: int | None = None, tile: str | None = None, target: float | None = None,
             amax: float | None = None, rounding: str | None = None, rbits: np.ndarray | None = None,
             nbits: int | None = None, columnwise: bool = False, rht: bool = False, scale_format: str | None = None,
             zero_scale_rule: bool | None = None, sr_eval: str | None = None, rht_output: str | None = None,
             pad: bool = False, impl: "Literal['fast', 'exact', 'torch'] | None" = None,
             payload_format: str | None = None) -> QuantizedTensor:
    """Block-quantize a float tensor (FPS-BLK-1..28).

    Args:
        x: float16/bfloat16/float32/float64 array, shape (M, K) (leading dims are flattened to
            M; the container records ``source_shape`` and ``dequantize`` restores it).
            Exact and OCP MX profiles use each element's exact value; binary32 profiles
            (``seed-fp32``, ``seed-portable``, ``te-*``, ``torchao-0.18*``, ``microxcaling``)
            narrow it to binary32 (RNE), as their operation sequences do.  NaN, Inf and magnitudes
            whose binary32 rounding is infinite are refused.  An array in the other byte order
            (``>f4``, ``>f8``) is taken by value (brought to the native order here).
        scheme: ``ue5m3``, ``nvfp4``, ``mxfp4`` or ``mxfp8`` (:data:`fpspec.schemes.BLOCK_SCHEMES`),
            or a resolved :class:`~fpspec.schemes.BlockSpec` (``qt.spec`` of another tensor, or
            :func:`fpspec.schemes.resolve_spec`), which carries every setting from ``profile`` to
            ``payload_format`` below: none of them may be given beside it.
        profile: arithmetic profile name (default per scheme, see :mod:`fpspec.schemes`).
        block: block length B, an integer (default: the scheme's, 16; 32 for mxfp4 and mxfp8).
        tile: ``1xB`` (one scale per B consecutive elements along K; the default) or ``BxB``.
        target: T, the scale the tensor amax maps to (default 448).
        amax: a given (held) tensor amax, >= 0 (delayed scaling); None measures max |V|.
        rounding: payload rounding (``rne``, the default; ``sr`` = midpoint SR, ``rna``, ...).
        rbits: random values, one per element of the view (uint8/16/32, below 2^nbits).
        nbits: N, the width of the random values of stochastic rounding (1..32; default 8).
        columnwise: quantize X^T (the backward GEMMs' operand layout).
        rht: apply the 16-point random Hadamard transform along K first.
        scale_format: the block scale format (ue5m3 scheme: ``ue5m3`` or ``ue5m3fnu``).
        zero_scale_rule: replace a scale that rounds to 0 by 1.0 (default: the profile's).
        sr_eval: ``exact`` or ``fp32`` (seed-fp32 only: the seed's FP32 evaluation of its SR rule).
        rht_output: ``fp32`` or ``bf16``: the transformed view rounded to bfloat16 (default: the profile's).
        pad: zero-pad the view to whole blocks instead of refusing.
        impl: ``fast`` (Numba), ``exact`` (the Fraction spec) or ``torch`` (torch tensors on their
            device); bit-equal (:mod:`fpspec.twins`).  None (the default): ``torch`` for a torch
            tensor, ``fast`` otherwise.  A torch input gives a tensor whose codes and scales are
            torch tensors on the input's device.
        payload_format: the element format: ``e2m1`` (ue5m3, nvfp4, mxfp4), or ``e4m3``
            (default) or ``e5m2`` for mxfp8 (FPS-BLK-26).

    The returned tensor carries the resolved spec (``qt.spec``); :func:`dequantize` and the GEMM
    models read it instead of resolving names again.
    """
    twin = choose_twin(impl, x)
    spec = _spec_of(scheme, {"profile": profile, "block": block, "tile": tile, "target": target,
                             "rounding": rounding, "nbits": nbits, "scale_format": scale_format,
                             "zero_scale_rule": zero_scale_rule, "sr_eval": sr_eval, "rht_output": rht_output,
                             "payload_format": payload_format})
    if not is_torch(x):
        x, rbits = native_byte_order(x), native_byte_order(rbits)
    v, orig, known, block_amax = prepare_view(x, spec, columnwise=columnwise, pad=pad, rht=rht, impl=twin)
    if amax is not None:
        g = _given_amax(amax)
    else:
        g = known if known is not None else twin.tensor_amax(v)
    res = quantize_view(v, spec, g, rbits, twin, want_dequant=False, block_amax=block_amax)
    params = {
        "target": None if spec.target is None else str(spec.target),
        "zero_scale_rule": spec.zero_scale_rule,
        "rounding": spec.rounding.value,
        "nbits": spec.nbits,
        "sr_eval": spec.sr_eval.value,
        "rht": bool(rht),
        "rht_output": spec.rht_output.value if rht else None,
        "amax_source": "measured" if amax is None else "given",
        "view_shape": [int(orig[0]), int(orig[1])],
        "padded": bool(tuple(v.shape) != orig),
    }
    return QuantizedTensor(codes=res.codes, scales=res.scales, scale_format=spec.scale_format.name,
                           block=spec.block, tile=spec.tile, encode_scale=np.float32(res.encode_scale),
                           decode_scale=np.float32(res.decode_scale), amax=np.float32(g),
                           scheme=spec.profile.scheme, profile=spec.profile.name, columnwise=bool(columnwise),
                           payload_format=spec.payload_format.name, params=params,
                           source_shape=tuple(x.shape) if is_torch(x) else tuple(np.shape(x)), spec=spec)


_OVERFLOW_REASON = {
    Dequant.EXACT: "q s g / (6T) exceeds binary32",
    Dequant.SEED_KERNEL: "the seed kernel's fp32(fp32(q s) gd) exceeds binary32",
    Dequant.SEED_PORTABLE: "the seed portable reference's fp32(q fp32(s gd)) exceeds binary32",
    Dequant.TE: ("TransformerEngine's formula q * fp32(fp32(s * g) * fp32(1/(6T))) overflows in s * g "
                 "(g > FLT_MAX / s; TE's dequantize kernel gives +-inf, and NaN for q = 0)"),
    Dequant.TORCHAO: "torchao's q * fp32(gd * s) exceeds binary32",
    Dequant.MX: "q 2^(c - 127) exceeds binary32",
}
#: Why a tensor built from codes (:data:`~fpspec.quantized.CODES_SCHEME`) overflows: no tensor scale.
_CODES_OVERFLOW_REASON = "q s exceeds binary32"


def dequantize(qt: QuantizedTensor, *, overflow: Literal["error", "ieee"] = "error",
               impl: "Literal['fast', 'exact', 'torch'] | None" = None) -> np.ndarray:
    """float32 values of a quantized tensor, shape of ``qt.codes`` (FPS-BLK-14, FPS-BLK-21).

    A rowwise tensor quantized from a source of more than two dimensions comes back
    in its source shape (padding dropped); otherwise the shape is the quantized view's.

    The formula is the profile's (q the E2M1 value, s the scale value, g = amax):

    * ``exact`` profiles: q s g / (6T) rounded once to binary32 (q s when g = 0);
    * ``seed-fp32``: fp32(fp32(q * s) * decode_scale) (the seed kernel's order);
    * ``seed-portable``: fp32(q * fp32(s * decode_scale)) (the seed's portable reference);
    * ``te-fp32`` / ``te-kernel``: fp32(q * fp32(fp32(s * g) * fp32(1 / 6T)));
    * ``torchao-0.18``: fp32(q * fp32(decode_scale * s)), decode_scale = fp32(g / 6T);
    * ``mxfp4`` and ``mxfp8`` (every profile): q 2^(c - 127), exact (q the E2M1, E4M3
      or E5M2 value);
    * a tensor built from codes (scheme ``codes``: no tensor scale, FPS-GEMM-4): q s rounded
      once to binary32, the values a GEMM of it multiplies.

    A value that the formula takes past binary32 (+-inf, or NaN for TE's 0 * inf) is
    refused, naming the first such element; ``overflow="ieee"`` returns the formula's
    IEEE result instead, as the source's kernel does.

    ``impl``: ``fast`` (a table of every (scale code, payload code) pair, looked up per element)
    or ``exact`` (:mod:`fpspec.exact.dequant`: every element by the formula on exact values);
    bit-equal (:mod:`fpspec.twins`); ``torch`` (None: the default for a tensor whose codes are torch
    tensors) gives a torch float32 tensor on the codes' device.
    """
    if not isinstance(qt, QuantizedTensor):
        raise FpspecError(f"dequantize takes a QuantizedTensor (from fpspec.quantize, or "
                          f"QuantizedTensor.from_npz for a file), got {_described(qt)}")
    if overflow not in ("error", "ieee"):
        raise FpspecError(f"overflow must be 'error' or 'ieee', got {overflow!r}")
    values = _dequantize_view(qt, overflow, choose_twin(impl, qt.codes))
    src = qt.source_shape
    if src is not None and len(src) > 2 and not qt.columnwise:
        rows, k = math.prod(src[:-1]), src[-1]
        return values[:rows, :k].reshape(src)
    return values


def _described(obj: object) -> str:
    """What was given, in a few words: a type and a short value, or an array's dtype and shape."""
    if isinstance(obj, np.ndarray) or is_torch(obj):
        return describe_array(obj)
    text = repr(obj)
    return f"{type(obj).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _formula(qt: QuantizedTensor) -> tuple[Dequant, float | None, str]:
    """The dequantization formula of a tensor, its T and why the formula overflows: its profile's;
    for a tensor built from codes q s, the factor MX's formula takes (F = s, D = 1), without T."""
    if qt.scheme == CODES_SCHEME:
        return Dequant.MX, None, _CODES_OVERFLOW_REASON
    spec = qt.resolved_spec()  # (made once: by quantize, or on loading the tensor's file)
    dequant = spec.profile.dequant
    return dequant, None if spec.target is None else float(spec.target), _OVERFLOW_REASON[dequant]


def _dequantize_view(qt: QuantizedTensor, overflow: str, twin: Twin) -> np.ndarray:
    formula, target, overflow_reason = _formula(qt)
    amax = float(qt.amax)
    if not math.isfinite(amax) or amax < 0:
        raise FpspecError(f"quantized tensor has amax {amax!r}; it must be finite and >= 0")
    _check_payload_codes(qt)
    idx = _first_ruled_out_code(qt.scales, np.isfinite(decode_table(qt.scale_format)))
    if idx is not None:
        raise FpspecError(f"scale code {int(qt.scales[idx])} of block {list(idx)} is not a finite "
                          f"{qt.scale_format} value")
    out, bad = twin.dequantize_blocks(qt.codes, qt.scales, formula, qt.scale_format, qt.payload_format, amax, target,
                                      qt.decode_scale, qt.block, qt.tile)
    if bad >= 0 and overflow == "error":
        idx = tuple(int(i) for i in np.unravel_index(bad, tuple(qt.codes.shape)))
        raise FpspecError(f"the dequantized value of element {list(idx)} is {float(out[idx])!r}: "
                          f"{overflow_reason} (g = {float(qt.amax)!r}); "
                          "dequantize(..., overflow='ieee') returns the formula's IEEE values", idx)
    return out


def _first_ruled_out_code(codes: np.ndarray, allowed: np.ndarray) -> tuple[int, ...] | None:
    if is_torch(codes):
        import torch

        if codes.numel() == 0 or allowed.all():
            return None
        hit = ~torch.as_tensor(allowed, device=codes.device)[codes.long()]
        if not bool(hit.any()):
            return None
        return tuple(int(i) for i in np.argwhere(to_numpy(hit))[0])  # (refusing: the mask's host copy)
    return _first_ruled_out_numpy(codes, allowed)


def _first_ruled_out_numpy(codes: np.ndarray, allowed: np.ndarray) -> tuple[int, ...] | None:
    """Index of the first of ``codes`` (uint8) that ``allowed`` (a flag per code of the format:
    a power-of-two count) rules out, or None.  Vectorized reductions settle the usual case before any code
    is looked up: no ruled-out code lies within [min, max] of the codes; or, where the
    ruled-out codes are every magnitude from some m up under both signs (the NaN and Inf codes
    of E4M3 and E5M2), the largest magnitude present is below m."""
    bad = np.flatnonzero(~allowed)
    if codes.size == 0 or bad.size == 0:
        return None
    present = bool(((bad >= codes.min()) & (bad <= codes.max())).any())
    half = allowed.size // 2
    mags = np.arange(allowed.size) % half
    top = int(mags[~allowed].min())
    if present and (allowed == (mags < top)).all():
        present = int((codes & (half - 1)).max()) >= top
    if not present:
        return None
    hit = ~allowed[codes]
    return tuple(int(i) for i in np.argwhere(hit)[0]) if hit.any() else None


def _check_payload_codes(qt: QuantizedTensor) -> None:
    """Every payload code is a finite code of the tensor's payload format: 0..15 for E2M1; for
    E4M3 and E5M2 not a NaN or Inf code, which a saturating MX quantizer never writes (FPS-BLK-28)."""
    if qt.payload_format == "e2m1" or not isinstance(qt.payload_format, str):
        size = qt.codes.numel() if is_torch(qt.codes) else qt.codes.size
        if size and int(qt.codes.max()) > 15:
            idx = tuple(int(i) for i in np.argwhere(to_numpy(qt.codes > 15))[0])  # (refusing: a host copy)
            raise FpspecError(f"payload code {int(qt.codes[idx])} is not an E2M1 code (0..15)", idx)
        return
    fmt = get_format(qt.payload_format)
    idx = _first_ruled_out_code(qt.codes, np.isfinite(decode_table(fmt)))
    if idx is not None:
        code = int(qt.codes[idx])
        what = "a NaN" if fmt.kind(code).value == "nan" else "an Inf"
        raise FpspecError(f"payload code 0x{code:02x} is {what} code of {fmt.name}, not a finite value (an MX "
                          "quantizer saturates and never writes it)", idx)
