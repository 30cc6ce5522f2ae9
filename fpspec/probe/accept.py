"""Random acceptance test: the GEMM against the fitted model, bit for bit (FPS-PRB-15).

Operands are wide-exponent-range codes from a counter-based hash (splitmix64 of
seed, row and k), so any machine regenerates exactly the same rows: the GEMM can
run on one machine (a GPU) and the model on another, with only the sampled outputs
travelling.  Comparisons are of FP32 bit patterns; 100 % is the only pass.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import FpspecError
from ..matmul import gemm
from ..models import GemmModel
from .fit import FittedModel

__all__ = ["operand_codes", "DEFAULT_SHAPES", "SMALL_SHAPES", "shapes_for_outputs", "collect_samples", "check_samples",
           "AcceptanceResult", "shapes_from_text", "check_gemm_size", "MAX_K", "MAX_MN", "MAX_OPERAND"]

#: Size bounds of one probe or acceptance GEMM (FPS-PRB-15): K at most 2^17, M and N at
#: most 2^16, each operand at most 2^26 codes (128 MiB of FP16 codes) and the output at
#: most 2^26 values.  They hold every shape of :data:`DEFAULT_SHAPES` with room to spare
#: and keep a mistyped size from allocating tens of GB.
MAX_K = 1 << 17
MAX_MN = 1 << 16
MAX_OPERAND = 1 << 26


def check_gemm_size(m: int, n: int, k: int, what: str = "GEMM") -> None:
    """Refuse an (M, N, K) beyond the bounds above, saying which bound."""
    if not (0 < m <= MAX_MN and 0 < n <= MAX_MN):
        raise FpspecError(f"{what} {m}x{n}x{k}: M and N must be between 1 and {MAX_MN}")
    if not 0 < k <= MAX_K:
        raise FpspecError(f"{what} {m}x{n}x{k}: K must be between 1 and {MAX_K}")
    if max(m, n) * k > MAX_OPERAND:
        raise FpspecError(f"{what} {m}x{n}x{k}: an operand of {max(m, n) * k} codes exceeds {MAX_OPERAND} "
                          f"(max(M, N) * K)")
    if m * n > MAX_OPERAND:
        raise FpspecError(f"{what} {m}x{n}x{k}: {m * n} outputs exceed {MAX_OPERAND} (M * N)")

#: (M, N, K, sampled rows, sampled columns): K from 256 to 16384, M and N from 64 to
#: 4096, 114,688 outputs compared in all (FPS-PRB-15).
DEFAULT_SHAPES: tuple[tuple[int, int, int, int, int], ...] = (
    (64, 64, 256, 64, 64),
    (64, 64, 1024, 64, 64),
    (64, 64, 4096, 64, 64),
    (64, 64, 16384, 64, 64),
    (256, 256, 2048, 128, 128),
    (1024, 1024, 1024, 128, 128),
    (4096, 4096, 256, 128, 128),
    (2048, 2048, 8192, 128, 128),
    (128, 4096, 16384, 64, 128),
    (4096, 128, 4096, 128, 64),
    (512, 512, 16384, 128, 128),
)

#: A quick set for self-tests (CPU models).
SMALL_SHAPES: tuple[tuple[int, int, int, int, int], ...] = ((16, 16, 256, 16, 16), (8, 24, 512, 8, 24))


def shapes_from_text(text: str) -> tuple[tuple[int, int, int, int, int], ...]:
    """'MxNxK[:RxC],...' -> shape tuples (R, C default min(M, 128), min(N, 128))."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        dims, _, samp = part.partition(":")
        try:
            m, n, k = (int(x) for x in dims.lower().split("x"))
            r, c = (int(x) for x in samp.lower().split("x")) if samp else (min(m, 128), min(n, 128))
        except ValueError:
            raise FpspecError(f"bad shape {part!r}: expected MxNxK or MxNxK:RxC") from None
        if not (0 < r <= m and 0 < c <= n and k > 0):
            raise FpspecError(f"bad shape {part!r}: need 0 < R <= M, 0 < C <= N, K > 0")
        check_gemm_size(m, n, k, "acceptance shape")
        out.append((m, n, k, r, c))
    return tuple(out)


def shapes_for_outputs(n: int) -> tuple[tuple[int, int, int, int, int], ...]:
    """Acceptance shapes with at least ``n`` sampled outputs: the DEFAULT_SHAPES in order
    (K from 256 to 16384 once four are taken), more outputs sampled per shape when all
    of them are not enough (FPS-PRB-15)."""
    if n <= 0:
        raise FpspecError(f"--accept-outputs must be positive, got {n}")
    out, total = [], 0
    for s in DEFAULT_SHAPES:
        out.append(s)
        total += s[3] * s[4]
        if total >= n:
            return tuple(out)
    scale = 1.0
    while True:
        scale *= 1.25
        grown = [(m, nn, k, min(m, int(r * scale)), min(nn, int(c * scale))) for m, nn, k, r, c in out]
        got = sum(r * c for *_, r, c in grown)
        if got >= n:
            return tuple(grown)
        if all(r == m and c == nn for m, nn, _, r, c in grown):
            raise FpspecError(f"{n} outputs exceed what the default shapes hold; give --accept-shapes")


def _splitmix(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def operand_codes(fmt: str, seed: int, rows: np.ndarray, K: int) -> np.ndarray:
    """Wide-exponent-range operand codes for the given rows (FPS-PRB-15).

    * e4m3: every finite code (zeros and subnormals included), uniformly;
    * e5m2, fp16: every finite code, uniformly;
    * bf16: sign, exponent 2^-24 .. 2^24 and mantissa uniform; one code in 64 is zero.

    Row r, column k depends only on (fmt, seed, r, k).
    """
    rows = np.asarray(rows, dtype=np.uint64)
    k = np.arange(K, dtype=np.uint64)
    idx = (np.uint64(seed & 0xFFFF) << np.uint64(44)) | (rows[:, None] << np.uint64(20)) | k[None, :]
    h = _splitmix(idx)
    if fmt == "e4m3":
        c = (h % np.uint64(254)).astype(np.uint16)
        return np.where(c < 127, c, c + 1).astype(np.uint8)
    if fmt == "e5m2":
        c = (h % np.uint64(248)).astype(np.uint16)
        return ((c // 124) << 7 | (c % 124)).astype(np.uint8)
    if fmt == "fp16":
        c = (h % np.uint64(2 * 0x7C00)).astype(np.uint32)
        return ((c // 0x7C00) << 15 | (c % 0x7C00)).astype(np.uint16)
    if fmt == "bf16":
        sign = (h >> np.uint64(63)).astype(np.uint32)
        exp = (127 - 24 + (h >> np.uint64(8)) % np.uint64(49)).astype(np.uint32)
        man = (h & np.uint64(0x7F)).astype(np.uint32)
        zero = ((h >> np.uint64(40)) & np.uint64(63)) == 0
        code = (sign << 15) | (exp << 7) | man
        return np.where(zero, 0, code).astype(np.uint16)
    raise FpspecError(f"acceptance operands: unsupported format {fmt!r}")


def _pick(n: int, count: int, rng: np.random.Generator) -> np.ndarray:
    if count >= n:
        return np.arange(n)
    return np.sort(rng.choice(n, size=count, replace=False))


def collect_samples(target: Any, fmt: str, shapes=DEFAULT_SHAPES, seed: int = 2026,
                    log=None) -> list[dict]:
    """Run the GEMM at every shape; keep the sampled outputs (FP32 bits) and indices."""
    out = []
    for si, (m, n, k, r, c) in enumerate(shapes):
        a = operand_codes(fmt, seed + 2 * si, np.arange(m), k)
        bt = operand_codes(fmt, seed + 2 * si + 1, np.arange(n), k)
        rng = np.random.default_rng(seed + si)
        rows, cols = _pick(m, r, rng), _pick(n, c, rng)
        t0 = time.perf_counter()
        if hasattr(target, "rowdot"):
            # a model: only the sampled outputs (shape cannot change what it computes)
            y = np.asarray(target.matmul(a[rows], bt[cols]))
            via, want = "matmul (sampled rows and columns)", (len(rows), len(cols))
        else:
            y = np.asarray(target.matmul(a, bt))
            via, want = "matmul", (m, n)
        dt = time.perf_counter() - t0
        if log is not None:
            log.add("acceptance", m, n, k, dt, via)
        if y.shape != want or y.dtype != np.float32:
            raise FpspecError(f"target returned {y.dtype} {y.shape}, expected float32 {want}")
        if via == "matmul":
            y = y[np.ix_(rows, cols)]
        out.append({"shape": [m, n, k], "seed_a": seed + 2 * si, "seed_b": seed + 2 * si + 1,
                    "rows": rows.tolist(), "cols": cols.tolist(),
                    "bits": y.view(np.uint32).copy(), "seconds": round(dt, 4)})
    return out


@dataclass
class AcceptanceResult:
    """Per-shape and total match counts of an acceptance test (FPS-PRB-15)."""

    per_shape: list[dict] = field(default_factory=list)

    @property
    def compared(self) -> int:
        return sum(s["compared"] for s in self.per_shape)

    @property
    def matched(self) -> int:
        return sum(s["matched"] for s in self.per_shape)

    @property
    def match_rate(self) -> float:
        return self.matched / self.compared if self.compared else 0.0

    @property
    def passed(self) -> bool:
        return self.compared > 0 and self.matched == self.compared

    def to_dict(self) -> dict:
        return {"compared": self.compared, "matched": self.matched, "match_rate": self.match_rate,
                "passed": self.passed, "per_shape": self.per_shape}


def model_outputs(a: np.ndarray, bt: np.ndarray, fmt: str, model: GemmModel) -> np.ndarray:
    """The model's FP32 outputs, from fpspec's own GEMM (:func:`fpspec.matmul.gemm`: the
    Numba fast path, bit-equal to the exact spec, FPS-GEMM-10)."""
    return gemm(a, bt, model, fmt=fmt)


def check_samples(samples: list[dict], fmt: str, model, max_report: int = 5,
                  per_shape_models: dict | None = None) -> AcceptanceResult:
    """Recompute every sampled output with the model and compare FP32 bits.

    ``model`` is a GemmModel or a FittedModel; ``per_shape_models`` maps
    "MxNxK" to the FittedModel probed at that shape (a library that switches
    kernels with shape is accepted shape by shape).
    """
    res = AcceptanceResult()
    for s in samples:
        fm = model if isinstance(model, FittedModel) else FittedModel(model)
        key = "x".join(str(v) for v in s["shape"])
        if per_shape_models and key in per_shape_models:
            fm = per_shape_models[key]
        m, n, k = s["shape"]
        rows, cols = np.asarray(s["rows"]), np.asarray(s["cols"])
        a = operand_codes(fmt, s["seed_a"], rows, k)
        bt = operand_codes(fmt, s["seed_b"], cols, k)
        want = model_outputs(a, bt, fmt, fm.model).view(np.uint32)
        got = np.asarray(s["bits"], dtype=np.uint32).reshape(len(rows), len(cols))
        bad = np.argwhere(got != want)
        entry = {"shape": [m, n, k], "compared": int(got.size), "matched": int(got.size - len(bad)),
                 "model": _model_label(fm)}
        if len(bad):
            entry["first_mismatches"] = [
                {"row": int(rows[i]), "col": int(cols[j]), "gemm": f"{int(got[i, j]):08x}",
                 "model": f"{int(want[i, j]):08x}",
                 "gemm_value": float(got[i:i + 1, j].view(np.float32)[0]),
                 "model_value": float(want[i:i + 1, j].view(np.float32)[0])}
                for i, j in bad[:max_report]]
        res.per_shape.append(entry)
    return res


def _model_label(fm) -> str:
    """A short label of a fitted model for per-shape tables."""
    m = fm.model
    parts = [f"G={m.group_size}", f"F={m.window_bits}", f"acc={m.accumulate_bits}",
             f"round={m.accumulate_rounding}"]
    if m.promotion_interval:
        parts.append(f"promote={m.promotion_interval}/{m.promotion_rounding}")
    if m.split_k:
        parts.append(f"split_k={m.split_k}")
    return " ".join(parts)
