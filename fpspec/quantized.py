"""The quantized-tensor container shared by block scaling, GEMM models and vectors (FPS-BLK-*).

A :class:`QuantizedTensor` is data only: codes, scale codes and the tensor-level
scale factors, plus the names of the scheme and profile that produced them.
Block quantization (:mod:`fpspec.quantization`) creates it; the GEMM models read it;
``fpspec quantize`` writes it as an .npz with the keys listed in :data:`NPZ_KEYS`.

Layout (row-major, the quantized view is (M, K), blocks run along K):

* ``codes``: uint8 (M, K), one payload code per element: E2M1 (low 4 bits used), or an
  FP8 code (``payload_format`` e4m3 / e5m2: MXFP8 payloads).
* ``scales``: uint8, one scale code per block, in row-major block order:
  shape (M, K // B) for ``1xB`` tiles, (M // B, K // B) for ``BxB`` tiles.
* ``columnwise``: True when the view is the transpose of the original tensor
  (the operand layout of the backward GEMMs); (M, K) then refers to X^T.
* ``source_shape``: the shape of the tensor given to quantize (a tensor (..., K)
  is flattened to (M, K); dequantize restores it).

A container read from a file is validated field by field against its scheme and
profile (:meth:`QuantizedTensor.validate`, FPS-CLI-3): tampered metadata is
refused with a message that names the file, never computed with.

A tensor that no quantizer produced (a hardware instruction's operands, given as payload
codes and scale bytes) is built with :meth:`QuantizedTensor.from_codes`: scheme and
profile :data:`CODES_SCHEME`, encode and decode scale 1, no tensor scale (alpha-free).

:meth:`QuantizedTensor.from_npz` also reads a *plain operand v1* file, the same operand as
plain arrays a C++ writer makes with cnpy (:mod:`fpspec.plain_operand`, FPS-OPD-1), and
:meth:`QuantizedTensor.to_plain_npz` writes one.  ``qt[rows]`` / :meth:`QuantizedTensor.rows`
take rows of the view, block scales and tensor scales kept (FPS-OPD-7).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, replace
from fractions import Fraction
from pathlib import Path

import numpy as np

from .choices import DEFAULT_SR_BITS
from .errors import FpspecError
from .formats import FP32, get_format
from .arraykind import describe_array, is_torch, same_device, to_numpy
from .io import load_npz, save_npz
from .plain_operand import FORMAT_ID, derived_scales_checked, is_plain, plain_arrays, read_plain
from .schemes import BLOCK_SCHEMES, CODES_SCHEME, BlockSpec, get_profile, resolve_spec

__all__ = ["QuantizedTensor", "NPZ_KEYS", "CODES_PAYLOAD_FORMATS", "row_indices"]

#: Keys of the .npz written by ``fpspec quantize`` (``dequant`` is optional on load).
NPZ_KEYS = ("codes", "scales", "encode_scale", "decode_scale", "amax", "dequant", "meta")
_SCALARS = ("encode_scale", "decode_scale", "amax")
#: Payload formats a quantizer writes, over every scheme (each scheme takes its own subset).
_PAYLOAD_FORMATS = tuple(dict.fromkeys(pf for s in BLOCK_SCHEMES.values() for pf in s.payload_formats))
_FLT_MAX = FP32.max_finite  # (a Fraction)
#: Payload formats a tensor built from codes may hold: E2M1 and the MXFP8 payloads.
CODES_PAYLOAD_FORMATS = ("e2m1", "e4m3", "e5m2")


@dataclass(frozen=True)
class QuantizedTensor:
    codes: np.ndarray
    scales: np.ndarray
    scale_format: str
    block: int
    tile: str  # "1xB" or "BxB"
    encode_scale: np.float32
    decode_scale: np.float32
    amax: np.float32
    scheme: str
    profile: str
    columnwise: bool = False
    payload_format: str = "e2m1"
    #: Scheme-specific settings that affect the numbers (target T, zero-scale rule, ...).
    params: dict = field(default_factory=dict)
    #: Shape of the tensor given to quantize (None: not recorded); a source of more than two
    #: dimensions was flattened to the (M, K) view and :func:`~fpspec.quantization.dequantize`
    #: restores it.
    source_shape: tuple[int, ...] | None = None
    #: The resolved spec the codes were made under (:class:`~fpspec.schemes.BlockSpec`): the one
    #: :func:`~fpspec.quantization.quantize` made, or None until :meth:`resolved_spec` resolves
    #: the names and params once (a file's tensor: on :meth:`validate`).  Not written to files.
    spec: BlockSpec | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not _is_uint8(self.codes) or self.codes.ndim != 2:
            raise FpspecError(f"codes must be a 2-D uint8 array, got {_describe(self.codes)}")
        if not _is_uint8(self.scales):
            raise FpspecError(f"scales must be uint8, got {_describe(self.scales)}")
        same_device("a QuantizedTensor's codes and scales", self.codes, self.scales)
        if self.tile not in ("1xB", "BxB"):
            raise FpspecError(f"tile must be '1xB' or 'BxB', got {self.tile!r}")
        if isinstance(self.block, bool) or not isinstance(self.block, (int, np.integer)) or self.block <= 0:
            raise FpspecError(f"block must be a positive integer, got {self.block!r}")
        if not isinstance(self.params, dict):
            raise FpspecError(f"params must be a mapping, got {type(self.params).__name__}")
        if self.source_shape is not None:
            shape = self.source_shape
            if not isinstance(shape, (list, tuple)) or not all(
                    isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape) \
                    or len(shape) < 2:
                raise FpspecError(f"source_shape must list at least two sizes, got {shape!r}")
            object.__setattr__(self, "source_shape", tuple(int(d) for d in shape))
        if not isinstance(self.payload_format, str) or self.payload_format not in CODES_PAYLOAD_FORMATS:
            raise FpspecError(f"payload format {self.payload_format!r} is not one fpspec writes or reads "
                              f"({', '.join(CODES_PAYLOAD_FORMATS)})")
        want = self.scale_grid_shape
        if tuple(self.scales.shape) != want:
            raise FpspecError(f"scales shape {tuple(self.scales.shape)} does not match codes {self.codes.shape} "
                              f"with {self.tile} tiles of {self.block}: expected {want}")
        get_format(self.scale_format)
        if self.spec is not None:
            self._check_spec_names()

    def _check_spec_names(self) -> None:
        """A given spec is the one the names say (FPS-BLK-15): a tensor never carries two answers."""
        spec = self.spec
        if not isinstance(spec, BlockSpec):
            raise FpspecError(f"spec must be a resolved BlockSpec or None, got {type(spec).__name__}")
        pairs = (("scheme", spec.profile.scheme), ("profile", spec.profile.name), ("block", spec.block),
                 ("tile", spec.tile), ("scale_format", spec.scale_format.name),
                 ("payload_format", spec.payload_format.name))
        for name, want in pairs:
            if getattr(self, name) != want:
                raise FpspecError(f"{name} {getattr(self, name)!r} is not the spec's {want!r}")
        target = self.params.get("target")
        if target is not None and (spec.target is None or target != str(spec.target)):
            raise FpspecError(f"params target {target!r} is not the spec's T = {spec.target}")

    def resolved_spec(self) -> BlockSpec:
        """The resolved spec of the tensor: the one it carries, else its names and params resolved
        once (as :func:`~fpspec.schemes.resolve_spec` checks them) and kept (FPS-BLK-15)."""
        if self.spec is None:
            object.__setattr__(self, "spec", self._resolve_names())
        return self.spec  # type: ignore[return-value]

    def _resolve_names(self) -> BlockSpec:
        if self.scheme == CODES_SCHEME:
            raise FpspecError("a tensor built from codes has no block scheme: its values are q s (FPS-GEMM-4)")
        for key in ("scheme", "profile", "scale_format"):
            if not isinstance(getattr(self, key), str):
                raise FpspecError(f"{key} must be a name, got {getattr(self, key)!r}")
        prof = get_profile(self.scheme, self.profile)
        p = self.params
        target = None
        if prof.target is not None:
            if p.get("target") is None:
                raise FpspecError(f"{self.scheme}/{self.profile} needs the target T, and params has none")
            try:
                target = Fraction(str(p["target"]))
            except (ValueError, ZeroDivisionError):
                raise FpspecError(f"target T must be a number, got {p['target']!r}") from None
            if not 0 < target <= _FLT_MAX:
                raise FpspecError(f"target T must be positive and at most FLT_MAX, got {p['target']}")
            if Fraction(float(np.float32(float(target)))) != target:
                raise FpspecError(f"target T {p['target']} is not exactly a binary32 value")
        return resolve_spec(self.scheme, self.profile, block=int(self.block), tile=self.tile, target=target,
                            scale_format=self.scale_format, zero_scale_rule=p.get("zero_scale_rule"),
                            rounding=p.get("rounding", "rne"), nbits=p.get("nbits", DEFAULT_SR_BITS),
                            sr_eval=p.get("sr_eval"), rht_output=p.get("rht_output"),
                            payload_format=self.payload_format)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.codes.shape)  # type: ignore[return-value]

    @property
    def device(self) -> str:
        """Where the codes live: ``numpy``, or a torch device (``cpu``, ``cuda:0``)."""
        return same_device("a QuantizedTensor's codes and scales", self.codes, self.scales)

    def to(self, device: str) -> "QuantizedTensor":
        """The same tensor with codes and scales as torch tensors on ``device`` (``"numpy"``: as numpy
        arrays); an explicit move, the one way a tensor changes device."""
        if device == "numpy":
            return replace(self, codes=to_numpy(self.codes), scales=to_numpy(self.scales))
        import torch

        return replace(self, codes=torch.as_tensor(self.codes).to(device),
                       scales=torch.as_tensor(self.scales).to(device))

    @property
    def scale_grid_shape(self) -> tuple[int, int]:
        m, k = tuple(self.codes.shape)
        b = self.block
        if k % b or (self.tile == "BxB" and m % b):
            raise FpspecError(f"shape {self.codes.shape} is not a multiple of the {self.tile} tile with B={b}")
        return (m // b if self.tile == "BxB" else m, k // b)

    def scale_code_per_element(self) -> np.ndarray:
        """The scale code that applies to each element, shape (M, K)."""
        s = self.scales
        if is_torch(s):
            if self.tile == "BxB":
                s = s.repeat_interleave(self.block, dim=0)
            return s.repeat_interleave(self.block, dim=1)
        if self.tile == "BxB":
            s = np.repeat(s, self.block, axis=0)
        return np.repeat(s, self.block, axis=1)

    # ------------------------------------------------------------- row slices
    def rows(self, index: object) -> "QuantizedTensor":
        """The rows ``index`` of the (M, K) view as a tensor of their own (FPS-OPD-7).

        ``index`` is a slice, a 1-D array or sequence of row numbers (0 <= i < M, in any
        order, repeats allowed) or a boolean mask of M flags; ``qt[index]`` is the same.  The
        slice keeps every row's codes and block scales, the tensor amax, the encode and decode
        scales, scheme, profile and params, so it dequantizes to those rows of the full tensor
        bit for bit and a GEMM of slices gives those elements of the full GEMM (for every model
        whose output element depends only on its row of A and its row of BT; the library
        presets ``cublas-h200-*`` need the full shape: :func:`fpspec.sampled.gemm_sample`).
        The source shape is dropped and ``params["view_shape"]`` counts the slice's rows that
        were rows of the unpadded view (the column view of a columnwise tensor: its rows are
        columns of X).

        A ``BxB``-tiled tensor holds one scale per B x B tile: its rows are taken by whole
        tiles (B consecutive rows from a multiple of B, in order; the tiles in any order),
        anything else is refused (:func:`fpspec.sampled.whole_tile_rows` widens a selection
        to its tiles).  A single row number is refused (write ``qt[i:i + 1]``): the result is
        always a 2-D tensor.
        """
        idx = row_indices(index, self.shape[0])
        if self.tile == "BxB":
            scales = self.scales[_index_like(_whole_tiles(idx, self.block), self.scales)]
        else:
            scales = self.scales[_index_like(idx, self.scales)]
        params = dict(self.params)
        view = params.get("view_shape")
        if isinstance(view, list) and len(view) == 2 and isinstance(view[0], int):
            params["view_shape"] = [int(np.count_nonzero(idx < view[0])), view[1]]
        return replace(self, codes=_contiguous(self.codes[_index_like(idx, self.codes)]),
                       scales=_contiguous(scales), params=params, source_shape=None)

    def __getitem__(self, index: object) -> "QuantizedTensor":
        """``qt[rows]``: :meth:`rows` (FPS-OPD-7); a (rows, columns) pair is refused."""
        if isinstance(index, tuple):
            raise FpspecError("a QuantizedTensor is sliced by rows only (qt[rows]): a column slice would cut "
                              "its scale blocks")
        return self.rows(index)

    #: Not iterable (``qt[i]`` takes rows, it does not make the tensor a sequence).
    __iter__ = None

    def meta(self) -> dict:
        """The file's JSON metadata: the names and params (the spec is resolved again on load)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)
             if f.name not in ("codes", "scales", "encode_scale", "decode_scale", "amax", "spec")}
        d["params"] = json.loads(json.dumps(d["params"]))  # a deep copy, as asdict made
        if d["source_shape"] is None:
            del d["source_shape"]
        else:
            d["source_shape"] = list(d["source_shape"])
        return d

    @classmethod
    def from_codes(cls, codes: np.ndarray, scales: np.ndarray, *, payload_format: str, scale_format: str,
                   block: int, tile: str = "1xB", columnwise: bool = False) -> "QuantizedTensor":
        """A tensor built from payload codes (uint8 (M, K): E2M1 one per byte, or FP8) and scale
        bytes (uint8, row-major block order), as a hardware instruction receives them: no tensor
        scale (encode and decode scale 1, alpha-free), amax not recorded (0), scheme and profile
        :data:`CODES_SCHEME`.  NaN scale codes are accepted (they are inputs, the GEMM gives NaN
        where they apply); everything else is validated (FPS-GEMM-4)."""
        qt = cls(codes=np.asarray(codes), scales=np.asarray(scales), scale_format=scale_format, block=block,
                 tile=tile, encode_scale=np.float32(1), decode_scale=np.float32(1), amax=np.float32(0),
                 scheme=CODES_SCHEME, profile=CODES_SCHEME, columnwise=columnwise, payload_format=payload_format)
        qt.validate()
        return qt

    def _validate_codes_tensor(self) -> None:
        """:meth:`validate` for a tensor built from codes (:meth:`from_codes`)."""
        if self.profile != CODES_SCHEME:
            raise FpspecError(f"a tensor of scheme {CODES_SCHEME!r} has profile {CODES_SCHEME!r}, got {self.profile!r}")
        if self.payload_format not in CODES_PAYLOAD_FORMATS:
            raise FpspecError(f"payload format {self.payload_format!r} is not one a tensor built from codes holds "
                              f"({', '.join(CODES_PAYLOAD_FORMATS)})")
        if not isinstance(self.scale_format, str):
            raise FpspecError(f"scale_format must be a name, got {self.scale_format!r}")
        for name in ("encode_scale", "decode_scale"):
            if np.ndim(getattr(self, name)) != 0 or float(getattr(self, name)) != 1.0:
                raise FpspecError(f"{name} of a tensor built from codes must be 1 (no tensor scale), "
                                  f"got {getattr(self, name)!r}")
        if np.ndim(self.amax) != 0 or float(self.amax) != 0.0:
            raise FpspecError(f"amax of a tensor built from codes is not recorded (0), got {self.amax!r}")
        if self.params:
            raise FpspecError(f"a tensor built from codes has no params, got {sorted(self.params)}")
        if not isinstance(self.columnwise, bool):
            raise FpspecError(f"columnwise must be true or false, got {self.columnwise!r}")
        pf = get_format(self.payload_format)
        _first_bad(self.codes, self.codes >= pf.num_codes, "payload code {code} out of range for " + pf.name)
        sf = get_format(self.scale_format)
        _first_bad(self.scales, self.scales >= sf.num_codes, "block scale code {code} out of range for " + sf.name)

    # ------------------------------------------------------------- validation
    def validate(self) -> None:
        """Check every field against its scheme and profile (what ``from_npz`` runs on a file).

        Refuses an unknown scheme, profile or payload format (or one the scheme does not
        write), a block, tile, scale format, rounding or target T the profile does not
        take (T missing included), an amax that is not a finite non-negative binary32
        value, NaN or negative tensor scales, payload codes that are not E2M1 codes or
        (E4M3, E5M2) are NaN or Inf codes, scale codes that are NaN or out of the scale
        format's range, and a source shape that does not match the view.  A tensor built from codes (scheme :data:`CODES_SCHEME`) is checked
        as :meth:`from_codes` promises.
        """
        if self.scheme == CODES_SCHEME:
            self._validate_codes_tensor()
            return
        sch = BLOCK_SCHEMES.get(self.scheme) if isinstance(self.scheme, str) else None
        writes = sch.payload_formats if sch is not None else _PAYLOAD_FORMATS
        if not isinstance(self.payload_format, str) or self.payload_format not in writes:
            raise FpspecError(f"payload format {self.payload_format!r} is not one fpspec writes"
                              + (f" for {self.scheme}" if sch is not None else "") + f" ({', '.join(writes)})")
        self.resolved_spec()
        if not isinstance(self.columnwise, bool):
            raise FpspecError(f"columnwise must be true or false, got {self.columnwise!r}")
        for key in ("zero_scale_rule", "rht", "padded"):
            if key in self.params and not isinstance(self.params[key], bool):
                raise FpspecError(f"params.{key} must be true or false, got {self.params[key]!r}")
        for name in _SCALARS:
            v = getattr(self, name)
            if np.ndim(v) != 0:
                raise FpspecError(f"{name} must be one number, got an array of shape {np.shape(v)}")
            f = float(v)
            if math.isnan(f) or f < 0 or (name == "amax" and not math.isfinite(f)):
                raise FpspecError(f"{name} must be {'finite and ' if name == 'amax' else ''}non-negative, got {f!r}")
        pf = get_format(self.payload_format)
        _first_bad(self.codes, self.codes >= pf.num_codes, "payload code {code} out of range for " + pf.name)
        special = np.array([c < pf.num_codes and pf.kind(c).value in ("nan", "inf") for c in range(256)])
        _first_bad(self.codes, _flags_of(special, self.codes), "payload code {code} is a NaN or Inf code of " + pf.name
                   + " (a saturating quantizer never writes one)")
        sf = get_format(self.scale_format)
        nan = np.array([c >= sf.num_codes or sf.kind(c).value == "nan" for c in range(256)])
        _first_bad(self.scales, _flags_of(nan, self.scales), "block scale code {code} is NaN or out of range for " + sf.name)
        view = self.params.get("view_shape")
        if view is not None:
            m, k = self.codes.shape
            if not isinstance(view, list) or len(view) != 2 or not all(isinstance(d, int) for d in view) \
                    or not (0 <= view[0] <= m and 0 <= view[1] <= k):
                raise FpspecError(f"view_shape {view} does not fit codes of shape {list(self.codes.shape)}")
        if self.source_shape is not None and view is not None:
            rows = math.prod(self.source_shape[:-1])
            want = [self.source_shape[-1], rows] if self.columnwise else [rows, self.source_shape[-1]]
            if list(view) != want:
                raise FpspecError(f"source_shape {list(self.source_shape)} does not give the view shape {view}")

    # ------------------------------------------------------------------ files
    def to_npz(self, path: str | Path, dequant: np.ndarray | None = None) -> None:
        """Write the .npz of ``fpspec quantize`` (uncompressed, no pickle, atomically)."""
        arrays = {
            "codes": to_numpy(self.codes), "scales": to_numpy(self.scales),
            "encode_scale": np.float32(self.encode_scale), "decode_scale": np.float32(self.decode_scale),
            "amax": np.float32(self.amax),
            "meta": np.array(json.dumps(self.meta(), sort_keys=True)),
        }
        if dequant is not None:
            arrays["dequant"] = np.asarray(dequant, dtype=np.float32)
        save_npz(path, arrays)

    def to_plain_npz(self, path: str | Path) -> None:
        """Write the tensor as a plain operand v1 file (FPS-OPD-6, docs/operands.rst): uncompressed,
        no pickle, atomically; :meth:`from_npz` reads it back to the same bits."""
        save_npz(path, plain_arrays(self))

    @classmethod
    def _from_plain(cls, arrays: dict) -> "QuantizedTensor":
        """The tensor of a plain operand v1 file's arrays (FPS-OPD-5): its entries checked
        (:func:`~fpspec.plain_operand.read_plain`), its layout checked here, then its encode and
        decode scales held to the ones its profile derives, and the whole validated."""
        plain = read_plain(arrays)
        if plain.kind == "codes":
            return cls.from_codes(**plain.fields)
        layout = cls(**plain.fields)  # (shapes and names checked)
        enc, dec = derived_scales_checked(arrays, plain)
        qt = replace(layout, encode_scale=enc, decode_scale=dec)
        qt.validate()
        return qt

    @classmethod
    def from_npz(cls, path: str | Path) -> "QuantizedTensor":
        """Read and validate an .npz of ``fpspec quantize`` or a plain operand v1 file (its ``format``
        entry tells them apart, FPS-OPD-1); every problem names the file (and the entry)."""
        z = load_npz(path)
        if is_plain(z):
            try:
                return cls._from_plain(z)
            except FpspecError as exc:
                raise FpspecError(f"{path}: {exc}") from None
        missing = [k for k in ("codes", "scales", *_SCALARS, "meta") if k not in z]
        if missing:
            raise FpspecError(f"{path}: neither an fpspec quantized tensor (missing {missing}) nor a plain "
                              f"operand file (no 'format' entry {FORMAT_ID!r}; docs/operands.rst)")
        if z["meta"].dtype.kind != "U" or z["meta"].ndim != 0:
            raise FpspecError(f"{path}: meta must be one JSON string, got {_describe(z['meta'])}")
        try:
            meta = json.loads(str(z["meta"]))
        except json.JSONDecodeError as exc:
            raise FpspecError(f"{path}: meta is not JSON ({exc})") from None
        known = {f.name for f in fields(cls)} - {"codes", "scales", *_SCALARS, "spec"}
        if not isinstance(meta, dict):
            raise FpspecError(f"{path}: meta must be a JSON object, got {type(meta).__name__}")
        unknown = sorted(set(meta) - known)
        if unknown:
            raise FpspecError(f"{path}: meta has unknown keys {unknown}")
        scalars = {}
        for k in _SCALARS:
            a = z[k]
            if a.ndim != 0 or a.dtype != np.float32:
                raise FpspecError(f"{path}: {k} must be one float32 number, got {_describe(a)}")
            scalars[k] = np.float32(a)
        try:
            qt = cls(codes=z["codes"], scales=z["scales"], **scalars, **meta)
            qt.validate()
        except TypeError as exc:
            raise FpspecError(f"{path}: bad meta ({exc})") from None
        except FpspecError as exc:
            raise FpspecError(f"{path}: {exc}") from None
        return qt


def row_indices(index: object, m: int) -> np.ndarray:
    """Row numbers (int64, 1-D) of a row selection of M rows: a slice, a boolean mask of M
    flags, or a 1-D sequence of row numbers 0 <= i < M (FPS-OPD-7)."""
    if isinstance(index, slice):
        return np.arange(m, dtype=np.int64)[index]
    if isinstance(index, (bool, int, np.integer, np.bool_)):
        raise FpspecError(f"row selection {index!r} is one row number; give a slice (i:i+1) or a list of rows")
    try:
        a = np.asarray(index)
    except (TypeError, ValueError) as exc:
        raise FpspecError(f"row selection must be a slice, a mask or a list of row numbers ({exc})") from None
    if a.dtype == np.bool_:
        if a.shape != (m,):
            raise FpspecError(f"a row mask has one flag per row ({m}), got shape {a.shape}")
        return np.flatnonzero(a).astype(np.int64)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "ui"):
        raise FpspecError(f"row selection must be a 1-D list of integer row numbers, got {a.dtype} of shape "
                          f"{a.shape}")
    a = a.astype(np.int64)
    bad = np.flatnonzero((a < 0) | (a >= m))
    if bad.size:
        raise FpspecError(f"row number {int(a[bad[0]])} (position {int(bad[0])} of the selection) is outside "
                          f"0..{m - 1}")
    return a


def _whole_tiles(idx: np.ndarray, block: int) -> np.ndarray:
    """The tile numbers of a selection of whole BxB tiles' rows; FpspecError naming the first row
    that breaks one (FPS-OPD-7)."""
    if idx.size % block:
        raise FpspecError(f"rows of a BxB-tiled tensor are taken by whole tiles of {block} rows: {idx.size} rows "
                          "selected (fpspec.sampled.whole_tile_rows widens a selection to its tiles)")
    groups = idx.reshape(-1, block)
    want = groups[:, :1] - groups[:, :1] % block + np.arange(block)
    wrong = np.flatnonzero((groups != want).reshape(-1))
    if wrong.size:
        p = int(wrong[0])
        raise FpspecError(f"rows of a BxB-tiled tensor are taken by whole tiles of {block} rows: row {int(idx[p])} "
                          f"at position {p} of the selection is not row {p % block} of a tile started in order "
                          "(fpspec.sampled.whole_tile_rows widens a selection to its tiles)")
    return groups[:, 0] // block


def _describe(a: object) -> str:
    if isinstance(a, np.ndarray):
        return f"{a.dtype} array of shape {a.shape}"
    return describe_array(a) if is_torch(a) else type(a).__name__


def _is_uint8(a: object) -> bool:
    """A uint8 numpy array or torch tensor."""
    if is_torch(a):
        return str(a.dtype) == "torch.uint8"  # type: ignore[attr-defined]
    return isinstance(a, np.ndarray) and a.dtype == np.uint8


def _index_like(idx: np.ndarray, a: object) -> object:
    """Row numbers as ``a`` is indexed: numpy as is, a torch tensor's on its device."""
    if is_torch(a):
        import torch

        return torch.as_tensor(idx, device=a.device)  # type: ignore[attr-defined]
    return idx


def _contiguous(a: object) -> object:
    return a.contiguous() if is_torch(a) else np.ascontiguousarray(a)  # type: ignore[attr-defined]


def _flags_of(table: np.ndarray, codes: object) -> object:
    """``table[codes]`` for a flag per code value, on the codes' own kind and device."""
    if is_torch(codes):
        import torch

        return torch.as_tensor(table, device=codes.device)[codes.long()]  # type: ignore[attr-defined]
    return table[codes]  # type: ignore[index]


def _first_bad(arr: object, bad: object, what: str) -> None:
    if bool(bad.any()):  # type: ignore[attr-defined]
        first = np.argwhere(to_numpy(bad))[0]  # (only when refusing: the mask's host copy names the index)
        idx = tuple(int(i) for i in first)
        raise FpspecError(what.format(code=f"0x{int(arr[idx]):02x}"), idx)  # type: ignore[index]
