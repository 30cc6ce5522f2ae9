"""Sampled checking of a big GEMM: some rows and columns of C, computed as the full GEMM would (FPS-OPD-8, FPS-OPD-9).

A kernel computed ``C = A @ BT^T`` at full size (M x N x K); computing fpspec's model of every
output may take long, but each output element ``C[i, j]`` depends only on row i of A, row j
of BT and the tensor-level scales, so fpspec can compute just a sample of rows and columns:
:func:`gemm_sample` slices the operands (:meth:`fpspec.quantized.QuantizedTensor.rows`),
calls the public :func:`fpspec.gemm` on the slices and returns ``C[rows][:, cols]``, bit for
bit what the full GEMM gives there.  The one model that depends on more than that is a library
preset (``cublas-h200-*``): cuBLAS picks its kernel and K split from the full shape (M, N, K)
(FPS-CUB-6), so the slices are computed under the full shape's plan (``gemm(..., shape=)``).

:func:`check_gemm_sample` compares a kernel's output with the sample bit for bit and
reports the mismatches (``fpspec gemm-sample``, :mod:`fpspec.cli.sample`);
:func:`parse_selection` reads the row and column selections of that command.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import FpspecError
from .io import native_byte_order
from .matmul import gemm
from .cublas.library import LIBRARY_PRESETS
from .models import GemmModel
from .quantized import QuantizedTensor, row_indices

__all__ = ["gemm_sample", "check_gemm_sample", "SampleCheck", "Mismatch", "parse_selection", "whole_tile_rows",
           "gemm_shape", "bits_dtype"]


def gemm_shape(a: Any, bt: Any) -> tuple[int, int, int]:
    """(M, N, K) of ``A @ BT^T`` for two quantized tensors or two 2-D code arrays."""
    shapes = [x.shape if isinstance(x, QuantizedTensor) else np.shape(x) for x in (a, bt)]
    for name, s in zip(("A", "BT"), shapes):
        if len(s) != 2:
            raise FpspecError(f"{name} must be 2-D (rows x K), got shape {tuple(s)}")
    if shapes[0][1] != shapes[1][1]:
        raise FpspecError(f"A has K = {shapes[0][1]} and BT has K = {shapes[1][1]}: they must be equal")
    return int(shapes[0][0]), int(shapes[1][0]), int(shapes[0][1])


def bits_dtype(dtype: np.dtype | type) -> type:
    """The unsigned type of a GEMM output's bit patterns: uint16 for an FP16 output, uint32 for FP32."""
    return np.uint16 if dtype == np.float16 else np.uint32


def whole_tile_rows(rows: np.ndarray, block: int) -> np.ndarray:
    """Every row of the B x B tiles that hold ``rows``, ascending (what a BxB-tiled tensor
    can be sliced by, FPS-OPD-7)."""
    tiles = np.unique(np.asarray(rows, dtype=np.int64) // block)
    return (tiles[:, None] * block + np.arange(block)).reshape(-1)


def _take(x: Any, rows: np.ndarray) -> tuple[Any, np.ndarray]:
    """Operand ``x`` cut to (at least) the sorted distinct ``rows``, and where each of them is in
    the cut: a BxB-tiled tensor is cut to whole tiles."""
    if isinstance(x, QuantizedTensor):
        if x.tile == "BxB":
            taken = whole_tile_rows(rows, x.block)
            return x.rows(taken), np.searchsorted(taken, rows)
        return x.rows(rows), np.arange(rows.size)
    return np.ascontiguousarray(np.asarray(x)[rows]), np.arange(rows.size)


def _is_library(model: "str | GemmModel") -> bool:
    return isinstance(model, str) and model in LIBRARY_PRESETS


def gemm_sample(a: Any, bt: Any, model: "str | GemmModel", *, rows: Any = None, cols: Any = None,
                fmt: str | None = None, impl: str = "fast", **overrides: Any) -> np.ndarray:
    """``C[rows][:, cols]`` of ``fpspec.gemm(a, bt, model, ...)``, computed from those rows of A and
    of BT only, bit for bit equal to the full GEMM's outputs there (FPS-OPD-8).

    Args:
        a, bt: the full operands (M x K and N x K), as :func:`fpspec.gemm` takes them: two
            QuantizedTensors or two code arrays (with ``fmt``).
        model: a preset name or a GemmModel.  A library preset (``cublas-h200-*``) is resolved
            at the full shape (M, N, K), whose kernel and K split the kernel under test ran.
        rows, cols: the rows of C (rows of A) and columns of C (rows of BT) to compute: a
            slice, a 1-D list of numbers (any order, repeats allowed), a boolean mask, or
            None for all.
        fmt, impl, overrides: as for :func:`fpspec.gemm`.

    Returns:
        (len(rows), len(cols)) float32 (float16 for an FP16 output), in the order asked.

    The operands are checked as :func:`fpspec.gemm` checks them, on the rows taken.
    """
    m, n, k = gemm_shape(a, bt)
    r = np.arange(m, dtype=np.int64) if rows is None else row_indices(rows, m)
    c = np.arange(n, dtype=np.int64) if cols is None else row_indices(cols, n)
    ur, r_at = np.unique(r, return_inverse=True)
    uc, c_at = np.unique(c, return_inverse=True)
    sa, pa = _take(a, ur)
    sb, pb = _take(bt, uc)
    extra = {"shape": (m, n, k)} if _is_library(model) else {}
    y = gemm(sa, sb, model, fmt=fmt, impl=impl, **extra, **overrides)
    return y[np.ix_(pa[r_at.reshape(-1)], pb[c_at.reshape(-1)])]


# ---------------------------------------------------------------- checking
@dataclass(frozen=True)
class Mismatch:
    """One output where the kernel and fpspec differ: C[row, col], both bit patterns."""

    row: int
    col: int
    expected: int
    got: int


@dataclass(frozen=True)
class SampleCheck:
    """The outcome of :func:`check_gemm_sample` (FPS-OPD-9)."""

    shape: tuple[int, int, int]
    rows: np.ndarray
    cols: np.ndarray
    #: fpspec's outputs at (rows x cols), float32 (float16 for an FP16 output).
    expected: np.ndarray
    #: Bit patterns of the kernel's outputs there (uint32; uint16 for an FP16 output).
    got_bits: np.ndarray

    @property
    def expected_bits(self) -> np.ndarray:
        return self.expected.view(bits_dtype(self.expected.dtype))

    @property
    def compared(self) -> int:
        return int(self.expected.size)

    @property
    def mismatch_count(self) -> int:
        return int(np.count_nonzero(self.expected_bits != self.got_bits))

    @property
    def passed(self) -> bool:
        return self.mismatch_count == 0

    def mismatches(self, limit: int | None = None) -> list[Mismatch]:
        """The first ``limit`` mismatches (all with None), in row-major order of the sample."""
        where = np.argwhere(self.expected_bits != self.got_bits)
        where = where if limit is None else where[:limit]
        return [Mismatch(int(self.rows[i]), int(self.cols[j]), int(self.expected_bits[i, j]),
                         int(self.got_bits[i, j])) for i, j in where]


def _output_bits(c: Any, want: np.dtype, what: str) -> np.ndarray:
    """Bit patterns of a kernel's outputs: float32 / float16 values or their uint32 / uint16 bits."""
    arr = native_byte_order(np.asarray(c))  # a big-endian '>f4' holds values too
    bits = bits_dtype(want)
    if arr.dtype == want:
        return arr.view(bits)
    if arr.dtype == bits:
        return arr
    raise FpspecError(f"{what}: the model's outputs are {np.dtype(want).name}; give them as {np.dtype(want).name} "
                      f"values or {np.dtype(bits).name} bit patterns, got {arr.dtype}")


def check_gemm_sample(c: Any, a: Any, bt: Any, model: "str | GemmModel", *, rows: Any = None, cols: Any = None,
                      sampled: bool = False, fmt: str | None = None, impl: str = "fast",
                      **overrides: Any) -> SampleCheck:
    """Compare a kernel's GEMM output with fpspec's at sampled rows and columns, bit for bit (FPS-OPD-9).

    ``c`` is the kernel's full output (M, N), or with ``sampled=True`` only its outputs at
    (rows x cols), in the order asked; float32 (float16 for an FP16 output) or the bit
    patterns (uint32 / uint16).  The other arguments are those of :func:`gemm_sample`.
    """
    m, n, k = gemm_shape(a, bt)
    r = np.arange(m, dtype=np.int64) if rows is None else row_indices(rows, m)
    cc = np.arange(n, dtype=np.int64) if cols is None else row_indices(cols, n)
    expected = gemm_sample(a, bt, model, rows=r, cols=cc, fmt=fmt, impl=impl, **overrides)
    want_shape = (r.size, cc.size) if sampled else (m, n)
    if np.shape(c) != want_shape:
        what = f"the outputs at the {r.size} x {cc.size} sampled positions" if sampled else f"the full {m} x {n} C"
        raise FpspecError(f"the kernel's output has shape {tuple(np.shape(c))}; expected {what} {want_shape}")
    bits = _output_bits(c, expected.dtype, "the kernel's output")
    got = bits if sampled else bits[np.ix_(r, cc)]
    return SampleCheck(shape=(m, n, k), rows=r, cols=cc, expected=expected, got_bits=np.ascontiguousarray(got))


# ---------------------------------------------------------------- selections
def parse_selection(text: str | None, n: int, *, seed: int = 0, what: str = "--rows") -> np.ndarray:
    """Row (or column) numbers from a selection text (FPS-OPD-9): comma-separated items, each a
    number ``i``, a range ``a:b`` (a <= i < b; ``a:`` and ``:b`` too), ``random:N`` (N distinct
    numbers drawn uniformly from 0..n-1 with NumPy's ``default_rng(seed)``, ascending), or ``all``;
    None is all.  Duplicates are kept in the order given."""
    if text is None:
        return np.arange(n, dtype=np.int64)
    return np.concatenate([_selection_item(item.strip(), n, seed, what) for item in str(text).split(",")])


def _selection_item(item: str, n: int, seed: int, what: str) -> np.ndarray:
    def number(t: str, default: int) -> int:
        if t == "":
            return default
        try:
            return int(t)
        except ValueError:
            raise FpspecError(f"{what} item {item!r}: {t!r} is not a whole number") from None

    if item == "":
        raise FpspecError(f"{what} item {item!r}: an empty item (two commas, or one at an end)")
    if item == "all":
        return np.arange(n, dtype=np.int64)
    if item.startswith("random:"):
        count = number(item[len("random:"):], -1)
        if not 0 < count <= n:
            raise FpspecError(f"{what} item {item!r}: draws 1 to {n} distinct numbers, got {count}")
        return np.sort(np.random.default_rng(seed).choice(n, size=count, replace=False)).astype(np.int64)
    if ":" in item:
        lo_text, hi_text = item.split(":", 1)
        lo, hi = number(lo_text, 0), number(hi_text, n)
        if not 0 <= lo < hi <= n:
            raise FpspecError(f"{what} item {item!r}: a range a:b needs 0 <= a < b <= {n}")
        return np.arange(lo, hi, dtype=np.int64)
    i = number(item, -1)
    if not 0 <= i < n:
        raise FpspecError(f"{what} item {item!r}: outside 0..{n - 1}")
    return np.array([i], dtype=np.int64)
