"""Shared pieces of the cuBLAS shape sweep (tools/cublas/sweep.py) and its fit
(tools/cublas/fit.py): the shape grid, the operand codes and the runs' files.  The targets
(the torch calls, their presets and K tiles) are fpspec.cublas.h200.TARGETS.

Operand codes come from a counter-based integer hash of (seed, row, k), written once
with Python operators only (``^ & >> << * % //``) so that the same function body runs
on NumPy int64 arrays (the CPU, for any sampled row) and on torch int64 tensors (the
GPU, for the whole matrix).  Every intermediate is a non-negative integer below 2^49:
a 32 x 32-bit multiplication modulo 2^32 is done as two 32 x 16-bit products, so
nothing overflows int64 and nothing depends on wrap-around.  tests/test_cublas_tools.py
checks the NumPy and torch (CPU) results for equality and the hash against plain
Python integers.

The hash is murmur3's 32-bit finaliser (``fmix32``), chained: the seed, then the row,
then k.  Later home: ``fpspec/probe/accept.py`` beside ``operand_codes`` (whose
splitmix64 needs uint64 wrap-around, which torch on CUDA does not offer).
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

SCHEMA = "fpspec-h200-cublas-sweep/1"
OPERANDS = "fpspec-cublas-hash/1"

#: The repository root (the runs' paths in reports and in the recorded calls are relative to it).
ROOT = Path(__file__).resolve().parents[2]

#: code width in bytes per format
CODE_BYTES = {"bf16": 2, "fp16": 2, "e4m3": 1}


# ------------------------------------------------------------------ the grid
MN_SIZES = (1, 7, 16, 31, 33, 64, 65, 100, 128, 129, 256, 384, 512, 1000, 1024, 2048, 4096, 8192)
K_SIZES = (16, 64, 100, 256, 1000, 1024, 2048, 4096, 5000, 8192, 16384, 32768)
RECT_MN = ((8192, 64), (64, 8192), (8192, 7), (7, 8192), (4096, 128), (128, 4096), (2048, 256),
           (256, 2048), (1024, 128), (128, 1024), (8192, 1024), (1024, 8192), (512, 128), (128, 512),
           (256, 128), (128, 256), (384, 128), (640, 640), (768, 768), (1536, 1536), (100, 1000),
           (1000, 100), (33, 4096), (4096, 33))
RECT_K = (1024, 4096, 8192, 16384, 32768)
GEMV_N = (64, 1000, 4096, 8192)
GEMV_K = (256, 4096, 16384, 32768)
#: K around the slice-count thresholds of the rule (multiples of 20 K tiles of 64 and
#: one tile more), and a few K that are not multiples of 64
SCAN_K = (1280, 1300, 1344, 1408, 2560, 2600, 2624, 3840, 3904, 5120, 5184, 6400, 6464, 7680,
          10240, 10304, 12288, 15360, 15424, 20480, 24576, 32000)
SCAN_MN = ((64, 64), (128, 128), (256, 256))
#: output-tile count scan at long K (the CTA budget B shows as T grows)
TSCAN_MN = ((128, 256), (256, 384), (384, 384), (384, 512), (512, 640), (512, 1024), (1024, 1280),
            (1280, 1280), (1024, 2048), (2048, 2048))
TSCAN_K = (8192, 16384, 32768)


def default_grid() -> list[tuple[int, int, int]]:
    """The sweep's shapes (M, N, K), deduplicated, in no particular order."""
    shapes: set[tuple[int, int, int]] = set()
    shapes.update((s, s, k) for s in MN_SIZES for k in K_SIZES)
    shapes.update((m, n, k) for m, n in RECT_MN for k in RECT_K)
    for n in GEMV_N:
        for k in GEMV_K:
            shapes.add((1, n, k))
            shapes.add((n, 1, k))
    shapes.update((m, n, k) for m, n in SCAN_MN for k in SCAN_K)
    shapes.update((m, n, k) for m, n in TSCAN_MN for k in TSCAN_K)
    return sorted(shapes)


def small_grid() -> list[tuple[int, int, int]]:
    """A few shapes for --local runs and tests (K up to 4096, sampled outputs only)."""
    return [(64, 64, 256), (64, 64, 1000), (64, 64, 1344), (64, 64, 4096), (128, 256, 2560),
            (512, 512, 2048), (33, 65, 512), (33, 65, 1000), (7, 9, 256), (1, 64, 2048), (1024, 1024, 1536),
            (100, 100, 1000), (1024, 1280, 4096), (1280, 1280, 4096), (1024, 1536, 4096), (1536, 1536, 4096)]


def parse_shapes_text(text: str, where: str = "shapes") -> list[tuple[int, int, int]]:
    """Shapes from text: one per line (or comma-separated on one line is not allowed:
    commas separate M, N, K), as ``MxNxK``, ``M,N,K`` or ``M N K``; ``#`` starts a
    comment."""
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.lower().replace("x", " ").replace(",", " ").split()
        try:
            m, n, k = (int(p) for p in parts)
        except ValueError:
            raise SystemExit(f"{where}:{no}: expected M N K (or MxNxK), got {line!r}") from None
        if min(m, n, k) < 1:
            raise SystemExit(f"{where}:{no}: M, N, K must be positive, got {line!r}")
        out.append((m, n, k))
    return out


# ------------------------------------------------------------------ sampled outputs
def sample_index(n: int, count: int, seed: int) -> np.ndarray:
    """``count`` distinct indices of 0..n-1, sorted: 0..3 and n-1 first (the edges, and
    every row style), the rest from a generator seeded with ``seed``."""
    count = min(count, n)
    fixed = sorted({min(i, n - 1) for i in range(4)} | {n - 1})[:count]
    rest = np.setdiff1d(np.arange(n), fixed)
    rng = np.random.default_rng(seed)
    extra = rng.choice(rest, size=count - len(fixed), replace=False) if count > len(fixed) else []
    return np.sort(np.concatenate([np.asarray(fixed, dtype=np.int64), np.asarray(extra, dtype=np.int64)]))


def sample_counts(m: int, n: int, max_outputs: int = 64, max_rows: int = 8) -> tuple[int, int]:
    """Sampled rows x columns: up to ``max_rows`` rows, columns to fill ``max_outputs``."""
    r = min(m, max_rows)
    return r, min(n, max(1, max_outputs // r))


# ------------------------------------------------------------------ the hash
MASK32 = 0xFFFFFFFF
FMIX_C1 = 0x85EBCA6B
FMIX_C2 = 0xC2B2AE35
SEED_SALT = 0x9E3779B9
SECOND_SALT = 0x6A09E667
SEGMENT_SALT = 0xBB67AE85


def mul32(x, c: int):
    """(x * c) mod 2^32 for 0 <= x < 2^32 and a constant c < 2^32, as two products below 2^48."""
    lo, hi = c & 0xFFFF, c >> 16
    return (x * lo + (((x * hi) & 0xFFFF) << 16)) & MASK32


def fmix32(x):
    """murmur3's 32-bit finaliser on values 0 <= x < 2^32 (Python int, NumPy or torch int64)."""
    x = x ^ (x >> 16)
    x = mul32(x, FMIX_C1)
    x = x ^ (x >> 13)
    x = mul32(x, FMIX_C2)
    return x ^ (x >> 16)


def _codes_from_hash(fmt: str, h1, h2, hseg, style, as_int):
    """Codes from 32-bit hashes; ``style`` (0..3 per row, broadcast) picks one of:

    * 0, 3 - wide: the acceptance operands of fpspec.probe.accept: e4m3 and fp16 every
      finite code uniformly; bf16 exponents 2^-24..2^24, mantissa uniform, one code in
      64 zero;
    * 1 - narrow: exponents 2^-3..2^3, sign and mantissa uniform (sums with heavy
      cancellation, every product inside the alignment window);
    * 2 - blocky: one random exponent per segment of 128 k (``hseg``, over the format's
      range), each element within one binade of it: partial sums of different K
      blocks differ by many binades, so the FP32 additions that combine promoted
      partials and slices round, and their order shows in the output.
    """
    sign = h1 >> 31
    if fmt == "e4m3":
        c = h1 % 254
        wide = c + as_int(c >= 127)                      # skip 0x7F (NaN); 0xFF is never reached
        nar = (sign << 7) | ((4 + (h1 >> 8) % 7) << 3) | (h1 & 7)
        e = 1 + hseg % 13 + (h1 >> 8) % 3                # exponent field 1..15
        man = (h1 & 7) - as_int(e == 15) * as_int((h1 & 7) == 7)   # 0x7F / 0xFF are NaN
        blk = (sign << 7) | (e << 3) | man
    elif fmt == "fp16":
        c = h1 % (2 * 0x7C00)
        wide = ((c // 0x7C00) << 15) | (c % 0x7C00)
        nar = (sign << 15) | ((12 + (h1 >> 10) % 7) << 10) | (h1 & 0x3FF)
        blk = (sign << 15) | ((2 + hseg % 26 + (h1 >> 10) % 3) << 10) | (h1 & 0x3FF)
    elif fmt == "bf16":
        nonzero = as_int((h2 & 63) != 0)
        wide = ((sign << 15) | ((103 + (h1 >> 8) % 49) << 7) | (h1 & 0x7F)) * nonzero
        nar = (sign << 15) | ((124 + (h1 >> 8) % 7) << 7) | (h1 & 0x7F)
        blk = (sign << 15) | ((103 + hseg % 47 + (h1 >> 8) % 3) << 7) | (h1 & 0x7F)
    else:
        raise ValueError(f"unsupported operand format {fmt!r}")
    one = as_int(style == 1)
    two = as_int(style == 2)
    return wide + (nar - wide) * one + (blk - wide) * two


#: operand style of a row: 0 wide, 1 narrow, 2 blocky, 3 wide (see _codes_from_hash)
STYLES = ("wide", "narrow", "blocky", "wide")
SEGMENT_SHIFT = 7   # blocky segments of 128 k


def row_hashes(seed: int, rows):
    """Per-row hash (rows: int64 array or tensor)."""
    hs = fmix32((seed & MASK32) ^ SEED_SALT)
    return fmix32((rows & MASK32) ^ hs)


def _codes(fmt: str, seed: int, r, k, as_int):
    hr = row_hashes(seed, r)[:, None]
    h1 = fmix32(hr ^ k[None, :])
    h2 = fmix32(h1 ^ SECOND_SALT)
    hseg = fmix32(fmix32(hr ^ SEGMENT_SALT) ^ (k[None, :] >> SEGMENT_SHIFT))
    return _codes_from_hash(fmt, h1, h2, hseg, (r & 3)[:, None], as_int)


def codes_numpy(fmt: str, seed: int, rows: Iterable[int], k: int) -> np.ndarray:
    """Operand codes of the given rows, columns 0..k-1 (int64, (len(rows), k))."""
    r = np.asarray(list(rows) if not isinstance(rows, np.ndarray) else rows, dtype=np.int64)
    return _codes(fmt, seed, r, np.arange(k, dtype=np.int64), lambda b: b.astype(np.int64))


def codes_torch(torch: Any, fmt: str, seed: int, r0: int, r1: int, k: int, device: Any) -> Any:
    """Operand codes of rows r0..r1-1, columns 0..k-1 (torch int64 on ``device``)."""
    r = torch.arange(r0, r1, dtype=torch.int64, device=device)
    return _codes(fmt, seed, r, torch.arange(k, dtype=torch.int64, device=device), lambda b: b.to(torch.int64))


def code_checksum(codes: np.ndarray) -> np.ndarray:
    """Per row: sum over k of code[k] * (k + 1) (int64; the sweep records it for every
    sampled row and column so the fit can prove it regenerated the GPU's operands)."""
    c = np.asarray(codes, dtype=np.int64)
    return (c * np.arange(1, c.shape[1] + 1, dtype=np.int64)[None, :]).sum(axis=1)


# ------------------------------------------------------------------ records
def bits_hex(bits: np.ndarray) -> list[str]:
    return [f"{int(b):08x}" for b in np.asarray(bits, dtype=np.uint32).reshape(-1)]


def bits_from_hex(items: list[str]) -> np.ndarray:
    return np.array([int(s, 16) for s in items], dtype=np.uint32)


def run_text(path: str | Path) -> str:
    """The text of a sweep-format run: a ``.jsonl`` file, or a ``.jsonl.gz`` one (the larger
    committed runs are stored compressed; a run is the same run either way)."""
    p = Path(path)
    data = p.read_bytes()
    return (gzip.decompress(data) if p.name.endswith(".gz") else data).decode()


def run_name(path: str | Path) -> str:
    """A run's file name without a ``.gz``: the name reports give it."""
    name = Path(path).name
    return name[:-3] if name.endswith(".gz") else name


def read_records(paths: Iterable[str | Path]) -> Iterator[dict]:
    """Every JSON line of the given files (a directory: its *.jsonl and *.jsonl.gz,
    :func:`run_text`); a torn last line (a run killed mid-write) is skipped."""
    for p in paths:
        p = Path(p)
        files = sorted([*p.glob("*.jsonl"), *p.glob("*.jsonl.gz")]) if p.is_dir() else [p]
        for f in files:
            for line in run_text(f).splitlines():
                line = line.strip()
                if not line:
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue


def n_tiles(k: int, kt: int) -> int:
    return math.ceil(k / kt)


def first_call(fmt: str, m: int, operand_a, call) -> tuple[Any, int, str | None]:
    """A of ``m`` rows (``operand_a(rows)``) and one unprofiled ``call(a)``, so that errors surface
    before any profiling; torch._scaled_mm may want M in multiples of 16 for e4m3 operands too: then
    A again with M rounded up, called once more.  Returns A, its M and why M changed (None: it
    did not)."""
    a = operand_a(m)
    try:
        call(a)
        return a, m, None
    except Exception as exc:
        if fmt != "e4m3" or m % 16 == 0:
            raise
        m = -(-m // 16) * 16
        a = operand_a(m)
        call(a)
        return a, m, f"M rounded up to {m} after: {exc!r}"[:300]
