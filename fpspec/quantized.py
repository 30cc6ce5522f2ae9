"""The quantized-tensor container shared by block scaling, GEMM models and vectors (FPS-BLK-*).

A :class:`QuantizedTensor` is data only: codes, scale codes and the tensor-level
scale factors, plus the names of the scheme and profile that produced them.
Block quantization (:mod:`fpspec.quantization`) creates it; the GEMM models read it;
``fpspec quantize`` writes it as an .npz with the keys listed in :data:`NPZ_KEYS`.

Layout (row-major, the quantized view is (M, K), blocks run along K):

* ``codes``: uint8 (M, K), one E2M1 code per element, low 4 bits used.
* ``scales``: uint8, one scale code per block, in row-major block order:
  shape (M, K // B) for ``1xB`` tiles, (M // B, K // B) for ``BxB`` tiles.
* ``columnwise``: True when the view is the transpose of the original tensor
  (the operand layout of the backward GEMMs); (M, K) then refers to X^T.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .errors import FpspecError
from .formats import get_format
from .io import load_npz

__all__ = ["QuantizedTensor", "NPZ_KEYS"]

#: Keys of the .npz written by ``fpspec quantize`` (``dequant`` is optional on load).
NPZ_KEYS = ("codes", "scales", "encode_scale", "decode_scale", "amax", "dequant", "meta")


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

    def __post_init__(self) -> None:
        if self.codes.dtype != np.uint8 or self.codes.ndim != 2:
            raise FpspecError(f"codes must be a 2-D uint8 array, got {self.codes.dtype} {self.codes.shape}")
        if self.scales.dtype != np.uint8:
            raise FpspecError(f"scales must be uint8, got {self.scales.dtype}")
        if self.tile not in ("1xB", "BxB"):
            raise FpspecError(f"tile must be '1xB' or 'BxB', got {self.tile!r}")
        m, k = self.codes.shape
        want = self.scale_grid_shape
        if self.scales.shape != want:
            raise FpspecError(f"scales shape {self.scales.shape} does not match codes {self.codes.shape} "
                              f"with {self.tile} tiles of {self.block}: expected {want}")
        get_format(self.scale_format)

    @property
    def shape(self) -> tuple[int, int]:
        return self.codes.shape  # type: ignore[return-value]

    @property
    def scale_grid_shape(self) -> tuple[int, int]:
        m, k = self.codes.shape
        b = self.block
        if k % b or (self.tile == "BxB" and m % b):
            raise FpspecError(f"shape {self.codes.shape} is not a multiple of the {self.tile} tile with B={b}")
        return (m // b if self.tile == "BxB" else m, k // b)

    def scale_code_per_element(self) -> np.ndarray:
        """The scale code that applies to each element, shape (M, K)."""
        s = self.scales
        if self.tile == "BxB":
            s = np.repeat(s, self.block, axis=0)
        return np.repeat(s, self.block, axis=1)

    def meta(self) -> dict:
        d = {k: v for k, v in asdict(self).items()
             if k not in ("codes", "scales", "encode_scale", "decode_scale", "amax")}
        return d

    # ------------------------------------------------------------------ files
    def to_npz(self, path: str | Path, dequant: np.ndarray | None = None) -> None:
        """Write the .npz of ``fpspec quantize`` (uncompressed, no pickle)."""
        arrays = {
            "codes": self.codes, "scales": self.scales,
            "encode_scale": np.float32(self.encode_scale), "decode_scale": np.float32(self.decode_scale),
            "amax": np.float32(self.amax),
            "meta": np.array(json.dumps(self.meta(), sort_keys=True)),
        }
        if dequant is not None:
            arrays["dequant"] = np.asarray(dequant, dtype=np.float32)
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)

    @classmethod
    def from_npz(cls, path: str | Path) -> "QuantizedTensor":
        z = load_npz(path)
        missing = [k for k in ("codes", "scales", "encode_scale", "decode_scale", "amax", "meta") if k not in z]
        if missing:
            raise FpspecError(f"{path}: not an fpspec quantized tensor, missing {missing}")
        try:
            meta = json.loads(str(z["meta"]))
        except json.JSONDecodeError as exc:
            raise FpspecError(f"{path}: meta is not JSON ({exc})") from None
        try:
            return cls(codes=z["codes"], scales=z["scales"], encode_scale=np.float32(z["encode_scale"]),
                       decode_scale=np.float32(z["decode_scale"]), amax=np.float32(z["amax"]), **meta)
        except TypeError as exc:
            raise FpspecError(f"{path}: bad meta ({exc})") from None
