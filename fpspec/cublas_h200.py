"""cuBLAS on an NVIDIA H200: which kernel a torch GEMM runs and how it cuts K (docs/cublas-h200.rst).

The ``km-h100-*`` presets model one tensor-core chain; cuBLAS's Hopper kernels (names
starting ``nvjet``) may cut K into P slices of S products, each its own chain, whose
results are added in FP32 (FPS-GEMM-14).  This module says which S a call uses:

* :func:`plan_from_kernel` reads it from the kernel that ran (its name and launch grid,
  what the torch profiler shows; FPS-CUB-2, FPS-CUB-3);
* :func:`predict` says it offline from the shape alone: a call of the committed runs
  is looked up in :mod:`fpspec.cublas_h200_table` (generated from
  ``vectors/provenance/h200-cublas/sweep.jsonl`` and ``heldout.jsonl``), a shape where K
  is too short or the output too large to split follows from the rule, and any other
  shape is estimated from the nearest measured shapes (FPS-CUB-4, FPS-CUB-5).

Both return a :class:`KernelChoice`; its ``confidence`` says where S came from.
Pure Python: no NumPy, no torch.  The kernels other than ``nvjet`` (cutlass sm75 / sm80
``mma.sync`` and ``wmma`` kernels, SIMT ``gemmSN`` / ``dot_kernel`` / ``gemvx``) are
classified (FPS-CUB-1); :func:`kernel_parameters` models the cutlass ones (FPS-CUB-7), not the
SIMT ones.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, NamedTuple, Sequence

import numpy as np

from .errors import FpspecError

__all__ = [
    "TARGETS",
    "Target",
    "KernelName",
    "KernelChoice",
    "CONFIDENCE_TEXT",
    "Observation",
    "Predictor",
    "MIN_SLICE_TILES",
    "CTA_LIMIT",
    "PERSISTENT_CTAS",
    "CUTLASS_SLICE_UNIT",
    "CUTLASS_WHOLE_UNIT",
    "cutlass_slice_unit",
    "cutlass_slices",
    "CUTLASS_CTA_BUDGETS",
    "CUTLASS_MIN_SLICE",
    "cutlass_split",
    "NEAREST_AREA_FLOOR",
    "NEAREST_K_WEIGHT",
    "NEAREST_ASPECT_WEIGHT",
    "NEAREST_VOTES",
    "NEAREST_CUTLASS_K_WEIGHT",
    "parse_kernel_name",
    "short_kernel_name",
    "pick_gemm_kernel",
    "kernel_class",
    "padded_tiles",
    "slice_cap",
    "slice_length",
    "plan_from_kernel",
    "persistent_candidates",
    "settled",
    "choice_for_kernel",
    "call_shape",
    "resolve_choice",
    "kernel_parameters",
    "predict",
    "default_predictor",
    "observations_from_table",
]

Confidence = Literal["rule", "table", "nearest", "kernel", "outputs", "candidates", "unknown"]

#: What each :class:`KernelChoice` confidence tells its user (``describe``): the offline
#: answers ``table`` and ``rule`` are what the H200 ran, ``nearest`` is a guess whose
#: held-out rates docs/cublas-h200.rst reports, and the observer (``fpspec probe
#: --observe``) reads the call's own kernel.
CONFIDENCE_TEXT: dict[str, str] = {
    "table": "measured: this shape ran on the H200 in the committed sweep",
    "rule": "by rule: no kernel splits K at this shape",
    "nearest": "a guess from the nearest measured shape {source} (offline held-out rates in "
               "docs/cublas-h200.rst; fpspec probe --observe reads the call's own kernel on the GPU)",
    "kernel": "read from the launched kernel",
    "outputs": "persistent launch, P settled by the call's outputs",
    "candidates": "persistent launch: P is one of {candidates}, to be settled by the call's outputs",
    "unknown": "not known",
}
KernelClass = Literal["nvjet", "sm80", "sm75", "simt", "reduce", "other"]


@dataclass(frozen=True)
class Target:
    """One torch call of the sweep: the operand format, the fpspec preset that models
    the ``nvjet`` instruction chain, the K tile of the ``nvjet`` kernels, and the shape
    constraints torch puts on the call (``torch._scaled_mm`` needs N and K multiples of 16)."""

    name: str
    fmt: str
    preset: str
    kt: int
    call: str
    n_multiple: int = 1
    k_multiple: int = 1


#: The four targets of the sweep (tools/h200_cublas_common.py has the same calls).
TARGETS: dict[str, Target] = {
    "torch-bf16": Target("torch-bf16", "bf16", "km-h100-bf16", 64,
                         "torch.mm(A, BT.t(), out_dtype=torch.float32)"),
    "torch-fp16": Target("torch-fp16", "fp16", "km-h100-bf16", 64,
                         "torch.mm(A, BT.t(), out_dtype=torch.float32)"),
    "torch-scaled-mm": Target("torch-scaled-mm", "e4m3", "km-h100-fp8-promote128", 128,
                              "torch._scaled_mm(A, BT.t(), scale_a=1, scale_b=1, out_dtype=torch.float32, "
                              "use_fast_accum=False)", 16, 16),
    "torch-scaled-mm-fast": Target("torch-scaled-mm-fast", "e4m3", "km-h100-fp8", 128,
                                   "torch._scaled_mm(A, BT.t(), scale_a=1, scale_b=1, out_dtype=torch.float32, "
                                   "use_fast_accum=True)", 16, 16),
}

#: R of issue 14: a slice keeps more than R K tiles, so at most ceil(ceil(K/kt)/R) - 1
#: slices (FPS-CUB-4; no swept call splits more).
MIN_SLICE_TILES = 20
#: The largest CTA count of any split launch in the sweep (the H200's 132 SMs): a shape
#: whose output needs more than CTA_LIMIT / 2 tiles of every swept tile cannot split.
CTA_LIMIT = 132
#: The grid of a persistent ``nvjet`` launch on the H200, by CTAs per cluster (CM CN):
#: the most clusters of that size the 132 SMs hold at once.  Measured: (2, 66, 1) for
#: clusters of 2 (202 persistent calls of the sweep and the first two held-out runs),
#: (4, 30, 1) for clusters of 4 (the split launch at 1 x 3344 x 14864, FP8,
#: heldout2.jsonl; 8 split launches of heldout3.jsonl), (1, 132, 1) for single CTAs
#: (3 split launches of heldout3.jsonl, BF16 / FP16 at 7488 x 1 x 6120 and
#: 1 x 6680 x 15752: added after that run's first evaluation).  A split launch whose
#: P T CTAs exceed it runs on this grid, and its grid no longer says P (FPS-CUB-10).
PERSISTENT_CTAS: dict[int, int] = {1: 132, 2: 132, 4: 120}
#: Cutlass split-K kernels (grid z = slices) cut K into slices of whole 128-bit loads:
#: 8 BF16 / FP16 elements (FPS-CUB-3; every cutlass call the fit explains has these slices,
#: and issue 14 measured 152 = ceil(5000 / 33 / 8) 8 at 100 x 100 x 5000).
CUTLASS_SLICE_UNIT = 8
#: Nearest-shape estimate (FPS-CUB-5): sizes below this count as this size in the
#: output area (the smallest nvjet tile edge is 8, but cuBLAS picks tiles as if M and N
#: were at least 64; chosen by leave-one-shape-out on the sweep, docs/cublas-h200.rst).
NEAREST_AREA_FLOOR = 64
#: weight of |log2 K - log2 K'| against |log2 area - log2 area'| in the shape distance
NEAREST_K_WEIGHT = 1.0
#: Weight of |log2 (cm / cn) - log2 (cm' / cn')| (the output's aspect, cuBLAS's m and n,
#: unfloored) in the shape distance: it separates shapes of one area, such as an output and
#: its transpose, that the area alone leaves to the order of ties.  Chosen by leave-one-shape-
#: out on the table (S right on nvjet calls, four targets: 88.8 / 88.6 / 93.5 / 93.5 % at 0;
#: 90.4 / 90.3 / 97.0 / 97.0 at 1/16; 90.2 / 90.0 / 97.2 / 97.3 at 1/8; 89.9 / 89.8 / 97.0
#: / 97.1 at 1/4; 88.1 / 88.0 / 96.9 / 96.8 at 1; docs/cublas-h200.rst).
NEAREST_ASPECT_WEIGHT = 0.125
#: Weight of |log2 K - log2 K'| against those of M and N when a cutlass or SIMT shape takes
#: the nearest measured call's kernel (FPS-CUB-4; leave-one-shape-out on the sweep: 2 beats
#: 0.5, 1 and 4 on the cutlass calls' outputs; on sweep + heldout 1 and 2 tie, docs/cublas-h200.rst).
NEAREST_CUTLASS_K_WEIGHT = 2.0
#: the estimate is the weighted vote of this many informative neighbours
NEAREST_VOTES = 5
#: The split rule of the cutlass ``mma.sync`` kernels (``s1688``, ``s16816``) with large tiles
#: (FPS-CUB-4): grid z = min(floor(B / T), ceil(K / CUTLASS_MIN_SLICE)), T the output tiles
#: in cuBLAS's orientation (:func:`cutlass_split`), B the CTAs the split may launch: two
#: per SM of the 132 for 128 x 128 tiles, one for 128 x 256 and 256 x 128.  Chosen on the
#: table's calls of those kernels alone (docs/cublas-h200.rst, "The cutlass split rule");
#: given the kernel it gives the recorded z to 327 of 451 calls of the 128 x 128 kernels
#: and 186 of 207 of the others.  The other cutlass kernels (``s1688`` 64 x 64, ``wmma``)
#: follow no such rule (90 of 381 and at most 61 of 169 calls) and keep the nearest
#: call's z (docs/cublas-h200.rst).
CUTLASS_CTA_BUDGETS: dict[tuple[int, int], int] = {(128, 128): 264, (128, 256): 132, (256, 128): 132}
CUTLASS_MIN_SLICE = 72


# ================================================================== kernel names
@dataclass(frozen=True)
class KernelName:
    """What a cuBLAS kernel name says (FPS-CUB-1).

    ``tile`` is (TM, TN) with TM along cuBLAS's m, which is torch's N (torch hands its
    row-major C = A B to cuBLAS as C^T); ``kt`` the K tile of an ``nvjet`` kernel,
    ``instr_k`` the K of one ``mma`` / ``wmma`` instruction of a cutlass kernel;
    ``cluster`` (CM, CN) the thread-block cluster of an ``nvjet`` kernel."""

    name: str
    kclass: KernelClass
    tile: tuple[int, int] | None = None
    kt: int | None = None
    stages: int | None = None
    cluster: tuple[int, int] | None = None
    split_k: bool = False
    instr_k: int | None = None
    flags: tuple[str, ...] = ()


_NVJET = re.compile(r"^nvjet_(?:sm\d+_)?(?P<types>[a-z0-9]+)_(?P<tm>\d+)x(?P<tn>\d+)_(?P<kt>\d+)x(?P<st>\d+)"
                    r"_(?P<cm>\d+)x(?P<cn>\d+)_(?P<rest>.*)$")
_CUTLASS = re.compile(r"^cutlass_(?P<arch>\d+)_(?:wmma_)?tensorop_(?:[a-z0-9]+_)*?s(?P<instr>\d+)gemm_[a-z0-9]+_"
                      r"(?P<tm>\d+)x(?P<tn>\d+)(?:_(?P<kt>\d+)x(?P<st>\d+))?_(?P<layout>[tn]{2})_align(?P<al>\d+)")
#: K of one instruction, by the shape in a cutlass name (mma.sync m16n8k8, m16n8k16; wmma 16x16x16)
_INSTR_K = {"1688": 8, "16816": 16, "161616": 16, "884": 4}
_SIMT = ("gemmsn", "gemv", "gemmk1", "dot_kernel", "sgemm")


def _top_level_split(text: str) -> list[str]:
    """Comma-separated items of a template argument list, at bracket depth 0."""
    items, depth, cur = [], 0, []
    for ch in text:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            items.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if cur:
        items.append("".join(cur).strip())
    return items


def short_kernel_name(name: str) -> str:
    """The part of a profiler kernel name that identifies the kernel: no return type
    (``void``, ``std::enable_if<...>::type``), no parameter list; ``cutlass::Kernel2<X>`` is ``X``; other templates keep only their
    plain (unnested) arguments, e.g. ``dot_kernel<float, 128, 0>``."""
    s = name.strip()
    depth, cut = 0, -1
    for i, ch in enumerate(s):                  # drop a return type: the text before the
        if ch in "<(":                          # last space at bracket depth 0 ahead of
            if ch == "(" and depth == 0:        # the parameter list (``void ``,
                break                           # ``std::enable_if<...>::type ``)
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == " " and depth == 0:
            cut = i
    s = s[cut + 1:].strip()
    m = re.match(r"^cutlass::Kernel2?<\s*(\w+)\s*>", s)
    if m:
        return m.group(1)
    lt = s.find("<")
    par = s.find("(")
    if lt < 0 or (0 <= par < lt):
        return s[:par].strip() if par >= 0 else s
    depth, end = 0, len(s)
    for i in range(lt, len(s)):
        if s[i] == "<":
            depth += 1
        elif s[i] == ">":
            depth -= 1
            if depth == 0:
                end = i
                break
    args = [a for a in _top_level_split(s[lt + 1:end]) if "<" not in a and "(" not in a]
    return f"{s[:lt].strip()}<{', '.join(args)}>"


def parse_kernel_name(name: str) -> KernelName:
    """Class, tile, K tile, stages, cluster and flags of a cuBLAS kernel name (full
    profiler name or :func:`short_kernel_name`), FPS-CUB-1.  A name that matches no
    pattern gets only its class ("other" if none)."""
    if not isinstance(name, str) or not name.strip():
        raise FpspecError(f"kernel name must be a non-empty string, got {name!r}")
    return _parse_kernel_name(name)


@lru_cache(maxsize=4096)
def _parse_kernel_name(name: str) -> KernelName:
    short = short_kernel_name(name)
    low = short.lower()
    m = _NVJET.match(short)
    if m:
        flags = tuple(m["rest"].split("_"))
        return KernelName(short, "nvjet", (int(m["tm"]), int(m["tn"])), int(m["kt"]), int(m["st"]),
                          (int(m["cm"]), int(m["cn"])), "splitK" in flags, None, (m["types"],) + flags)
    if "reduce" in low:
        return KernelName(short, "reduce")
    m = _CUTLASS.match(short)
    if m:
        arch = int(m["arch"])
        kclass: KernelClass = "sm75" if arch < 80 else "sm80"
        return KernelName(short, kclass, (int(m["tm"]), int(m["tn"])), int(m["kt"]) if m["kt"] else None,
                          int(m["st"]) if m["st"] else None, None, False, _INSTR_K.get(m["instr"]),
                          (f"s{m['instr']}", f"align{m['al']}") + (("wmma",) if "_wmma_" in short else ()))
    if low.startswith(("cutlass_75", "sm75", "turing")):
        return KernelName(short, "sm75")
    if low.startswith(("cutlass_80", "sm80", "ampere")):
        return KernelName(short, "sm80")
    if any(s in low for s in _SIMT):
        return KernelName(short, "simt")
    return KernelName(short, "other")


def pick_gemm_kernel(kernels: Sequence[tuple[str, Sequence[int]]]) -> tuple[str, list[int]] | None:
    """The GEMM kernel of one call's launches ``[(name, grid), ...]``: the first whose
    class is not ``reduce`` (cuBLAS's split-K reductions run after the GEMM, or before
    it when they zero the workspace), else None."""
    for name, grid in kernels:
        if parse_kernel_name(name).kclass != "reduce":
            return name, list(grid)
    return None


# ================================================================== shapes and slices
def _check_target(target: str) -> Target:
    if target not in TARGETS:
        raise FpspecError(f"unknown cuBLAS target {target!r}; expected one of {', '.join(TARGETS)}")
    return TARGETS[target]


def _check_shape(tg: Target, *sizes: object) -> tuple[int, int, int]:
    out = []
    for label, v in zip("MNK", sizes):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise FpspecError(f"{tg.name}: {label} must be a positive integer, got {v!r}")
        out.append(int(v))
    m, n, k = out
    if n % tg.n_multiple or k % tg.k_multiple:
        raise FpspecError(f"{tg.name}: N and K must be multiples of {tg.n_multiple} (torch._scaled_mm), "
                          f"got N = {n}, K = {k}")
    return m, n, k


def _cublas_mn(m: int, n: int) -> tuple[int, int]:
    """(cuBLAS m, cuBLAS n) of a torch M x N output: (N, M), except that an M x 1 output
    runs as cuBLAS m = M (torch swaps the operands of a one-column product; the sweep's
    M x 1 calls launch the same kernel and grid as 1 x M), FPS-CUB-2."""
    return (m, 1) if n == 1 and m > 1 else (n, m)


def padded_tiles(m: int, n: int, tile: tuple[int, int], cluster: tuple[int, int] = (1, 1)) -> int:
    """Output tiles T of an M x N torch GEMM under an ``nvjet`` tile (TM, TN) and
    cluster (CM, CN): ceil(ceil(cm / TM) / CM) CM * ceil(ceil(cn / TN) / CN) CN with
    (cm, cn) cuBLAS's m, n (FPS-CUB-2).  A split launch runs P T CTAs."""
    cm, cn = _cublas_mn(m, n)
    a, b = -(-cm // tile[0]), -(-cn // tile[1])
    return -(-a // cluster[0]) * cluster[0] * (-(-b // cluster[1]) * cluster[1])


def slice_cap(k: int, kt: int, r: int = MIN_SLICE_TILES) -> int:
    """The most slices K may be cut into: ceil(ceil(K / kt) / R) - 1 (FPS-CUB-4)."""
    return -(-(-(-k // kt)) // r) - 1


def slice_length(k: int, unit: int, p: int | None) -> int | None:
    """S = ceil(K / (P unit)) unit, the slice length of P balanced slices of whole units;
    None when P <= 1 or one slice holds all of K (one chain), FPS-CUB-3."""
    if p is None or p <= 1:
        return None
    s = -(-k // (p * unit)) * unit
    return None if s >= k else s


def kernel_class(target: str, m: int, n: int, k: int) -> KernelClass:
    """The kernel class cuBLAS runs at a shape, by the alignment rule of FPS-CUB-1:
    FP8 always ``nvjet``; BF16 / FP16: ``simt`` (``dot_kernel``) for 1 x 1 outputs,
    ``nvjet`` when cuBLAS's m (torch N, or M for an M x 1 output) and K are multiples
    of 8, else ``simt`` (``gemvx``) for a vector output (M or N = 1), ``sm75`` when m or
    K is odd and ``sm80`` otherwise.  (The runs' only other case, 7 x 7 BF16 with
    K <= 4096 on the SIMT ``gemmSN`` kernel, is a table entry.)"""
    tg = _check_target(target)
    m, n, k = _check_shape(tg, m, n, k)
    if tg.fmt == "e4m3":
        return "nvjet"
    if m == 1 and n == 1:
        return "simt"
    cm, _ = _cublas_mn(m, n)
    if cm % 8 == 0 and k % 8 == 0:
        return "nvjet"
    if m == 1 or n == 1:
        return "simt"
    if cm % 2 or k % 2:
        return "sm75"
    return "sm80"


# ================================================================== results
@dataclass(frozen=True)
class KernelChoice:
    """How cuBLAS runs one GEMM, and what of it fpspec knows.

    ``s`` is the slice length (FPS-GEMM-14 ``split_k``; None: one chain) and ``p`` the
    number of slices; both mean something only when ``confidence != "unknown"``.
    ``confidence``: ``"kernel"`` read from the launched kernel (:func:`plan_from_kernel`),
    ``"table"`` the shape was swept, ``"rule"`` no kernel can split this shape,
    ``"nearest"`` estimated from the nearest swept shapes (``source``), ``"candidates"``
    the launch was persistent and P is one of ``candidates`` (FPS-CUB-10; p and s None),
    ``"outputs"`` one of those candidates settled by the call's outputs
    (:func:`settled`), ``"unknown"`` not known.  ``kernel``, ``tile``, ``cluster``, ``kt`` describe the launched kernel
    (for ``"nearest"``: the kernel of ``source``, a guess); ``tiles`` is T under that
    tile and ``ctas`` the launch's CTAs.  For cutlass kernels (``sm75``, ``sm80``) p is
    the grid's z extent and s the first of its slices (:func:`cutlass_slices`): the
    arithmetic inside those kernels is not the ``nvjet`` preset's (``modelled`` is False;
    :func:`kernel_parameters` models them).
    """

    target: str
    shape: tuple[int, int, int]
    kclass: KernelClass
    confidence: Confidence
    p: int | None = None
    s: int | None = None
    kernel: str | None = None
    tile: tuple[int, int] | None = None
    cluster: tuple[int, int] | None = None
    kt: int | None = None
    instr_k: int | None = None
    tiles: int | None = None
    ctas: int | None = None
    source: tuple[int, int, int] | None = None
    candidates: tuple[int, ...] = ()
    note: str = ""

    @property
    def preset(self) -> str:
        """The fpspec preset of the target's ``nvjet`` instruction chain."""
        return TARGETS[self.target].preset

    @property
    def modelled(self) -> bool:
        """True when the preset with ``split_k = s`` is the model of this call (an
        ``nvjet`` kernel whose S is known)."""
        return self.kclass == "nvjet" and self.confidence not in ("unknown", "candidates")

    def describe(self) -> str:
        """One line for people: the kernel, how K is cut, and where that comes from
        (:data:`CONFIDENCE_TEXT`)."""
        what = self.kernel or f"kernel class {self.kclass}"
        if self.confidence in ("unknown", "candidates"):
            cut = "K split not known"
        elif self.p is None or self.p <= 1 or self.s is None:
            cut = "one chain over K"
        else:
            cut = f"{self.p} slices of K (the first {self.s} long)"
        why = CONFIDENCE_TEXT[self.confidence].format(
            source="x".join(map(str, self.source)) if self.source else "-",
            candidates=", ".join(map(str, self.candidates)) or "-")
        return f"{what}; {cut}; {why}" + (f" ({self.note})" if self.note else "")

    def to_json(self) -> dict[str, object]:
        """The choice as JSON-ready data (``fpspec models --shape --json``)."""
        d = dataclasses.asdict(self)
        d["modelled"] = self.modelled
        d["describe"] = self.describe()
        return d


def _grid_ctas(grid: object) -> tuple[int, int, int]:
    if isinstance(grid, (str, bytes)):
        raise FpspecError(f"launch grid must be three positive integers [x, y, z], got {grid!r}")
    try:
        x, y, z = (int(v) for v in grid)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise FpspecError(f"launch grid must be three positive integers [x, y, z], got {grid!r}") from None
    if min(x, y, z) < 1 or any(isinstance(v, bool) for v in grid):  # type: ignore[union-attr]
        raise FpspecError(f"launch grid must be three positive integers [x, y, z], got {grid!r}")
    return x, y, z


def plan_from_kernel(target: str, m: int, n: int, k: int, kernel_name: str,
                     grid: Sequence[int]) -> KernelChoice:
    """The slice plan of one call from the kernel that ran and its launch grid (FPS-CUB-3).

    ``nvjet`` kernels: without ``splitK`` in the name, one chain (the grid of a
    persistent kernel says nothing about K); with it, P = CTAs / T (T =
    :func:`padded_tiles`) and S = :func:`slice_length` (K, kt, P), confidence
    ``"kernel"`` - or, when CTAs is not a whole multiple of T, ``"candidates"`` for a
    persistent launch (:func:`persistent_candidates`, FPS-CUB-10) and ``"unknown"`` (with
    a note) otherwise.  Cutlass kernels (BF16 / FP16): P = the grid's z, S the first of
    :func:`cutlass_slices` (units of :func:`cutlass_slice_unit`); SIMT and unknown kernels: ``"unknown"``.
    """
    tg = _check_target(target)
    m, n, k = _check_shape(tg, m, n, k)
    info = parse_kernel_name(kernel_name)
    x, y, z = _grid_ctas(grid)
    ctas = x * y * z
    base = dict(target=target, shape=(m, n, k), kclass=info.kclass, kernel=info.name, tile=info.tile,
                cluster=info.cluster, kt=info.kt, instr_k=info.instr_k, ctas=ctas)
    if info.kclass == "nvjet":
        assert info.tile is not None and info.cluster is not None and info.kt is not None
        t = padded_tiles(m, n, info.tile, info.cluster)
        if not info.split_k:
            return KernelChoice(**base, confidence="kernel", p=1, s=None, tiles=t)
        if ctas % t:
            cands = persistent_candidates(k, info.kt, t, ctas, info.cluster)
            if cands:
                return KernelChoice(**base, confidence="candidates", tiles=t, candidates=cands,
                                    note=f"persistent split launch ({ctas} CTAs for {t} tiles): P is one of "
                                         f"{', '.join(map(str, cands))}")
            return KernelChoice(**base, confidence="unknown", tiles=t,
                                note=f"{ctas} CTAs are not a whole number of slices of {t} tiles")
        p = ctas // t
        return KernelChoice(**base, confidence="kernel", p=p, s=slice_length(k, info.kt, p), tiles=t)
    if info.kclass in ("sm75", "sm80") and info.tile is not None and tg.fmt in ("bf16", "fp16"):
        plan = cutlass_slices(k, z, cutlass_slice_unit(k))
        return KernelChoice(**base, confidence="kernel", p=z, s=plan[0] if plan else None,
                            note="cutlass kernel: slices = grid z; the arithmetic is not the nvjet preset's")
    return KernelChoice(**base, confidence="unknown", note=f"{info.kclass} kernel: its reduction over K is not modelled")


def persistent_candidates(k: int, kt: int, tiles: int, ctas: int, cluster: tuple[int, int]) -> tuple[int, ...]:
    """The slice counts a persistent split launch may run (FPS-CUB-10): when the grid is
    :data:`PERSISTENT_CTAS` for the kernel's cluster size, every P of 2 .. :func:`slice_cap`
    (K, kt) whose P T CTAs would not fit in it; else none (the grid is not a persistent one)."""
    if PERSISTENT_CTAS.get(cluster[0] * cluster[1]) != ctas:
        return ()
    return tuple(p for p in range(2, slice_cap(k, kt) + 1) if p * tiles > ctas)


def settled(choice: KernelChoice, p: int) -> KernelChoice:
    """``choice`` (confidence ``"candidates"``) with P = p, one of its candidates, and S =
    :func:`slice_length` (K, kt, p): confidence ``"outputs"`` (FPS-CUB-10; what
    :func:`fpspec.adapters.settle.settle_choice` returns once the call's outputs single p out)."""
    if choice.confidence != "candidates" or p not in choice.candidates:
        raise FpspecError(f"{choice.target} at {'x'.join(map(str, choice.shape))}: P={p} is not a candidate of "
                          f"this call (candidates: {', '.join(map(str, choice.candidates)) or 'none'})")
    assert choice.kt is not None
    return dataclasses.replace(choice, confidence="outputs", p=p, s=slice_length(choice.shape[2], choice.kt, p),
                               note=f"persistent split launch: P = {p} of {', '.join(map(str, choice.candidates))}, "
                                    "settled by the call's outputs")


# ================================================================== offline prediction
@dataclass(frozen=True)
class Observation:
    """One swept call: the shape, the GEMM kernel (short name) and its launch grid; ``p``
    the slice count of a persistent split launch, settled by the call's recorded outputs
    when the table was generated (FPS-CUB-10; None for any other launch)."""

    m: int
    n: int
    k: int
    kernel: str
    grid: tuple[int, int, int]
    p: int | None = None


def _observed_plan(target: str, o: Observation) -> KernelChoice:
    """The plan of one swept call: :func:`plan_from_kernel`, with a persistent launch's
    recorded P (:func:`settled`)."""
    plan = plan_from_kernel(target, o.m, o.n, o.k, o.kernel, o.grid)
    if plan.confidence == "candidates" and o.p is not None:
        return settled(plan, o.p)
    return plan


class Predictor:
    """The offline shape rule of one set of observations (FPS-CUB-4, FPS-CUB-5).

    ``observations`` maps a target to its swept calls; :func:`default_predictor` uses the
    committed table.  Building one without some shapes gives the leave-one-shape-out
    estimate that ``tools/h200_cublas_rule.py`` measures."""

    def __init__(self, observations: dict[str, Sequence[Observation]]):
        plans: dict[str, dict[tuple[int, int, int], KernelChoice]] = {}
        for target, rows in observations.items():
            _check_target(target)
            plans[target] = {(o.m, o.n, o.k): _observed_plan(target, o) for o in rows}
        self._set(plans)

    def _set(self, plans: dict[str, dict[tuple[int, int, int], KernelChoice]]) -> None:
        self._plans = plans
        self._tiles = {t: _swept_tiles(pl) for t, pl in plans.items()}
        self._points: dict[tuple[str, int], _Points] = {}  # by (target, NEAREST_AREA_FLOOR)

    def shapes(self, target: str) -> list[tuple[int, int, int]]:
        """The swept shapes of a target."""
        return sorted(self._plans.get(target, {}))

    def plan(self, target: str, shape: tuple[int, int, int]) -> KernelChoice | None:
        """The swept call's plan (:func:`plan_from_kernel`), None for a shape not swept."""
        return self._plans.get(target, {}).get(tuple(shape))  # type: ignore[arg-type]

    def without(self, target: str, shape: tuple[int, int, int]) -> "Predictor":
        """The same predictor with one shape of one target left out (the other targets' parts
        shared, this target's nearest-shape points filtered rather than rebuilt)."""
        shape = tuple(shape)  # type: ignore[assignment]
        new = type(self).__new__(type(self))
        new._plans = dict(self._plans)
        new._plans[target] = {s: p for s, p in self._plans.get(target, {}).items() if s != shape}
        new._tiles = dict(self._tiles)
        new._tiles[target] = _swept_tiles(new._plans[target])
        self._nvjet_points(target)  # built here once, filtered for each shape left out
        new._points = {key: pts.without(shape) if key[0] == target else pts for key, pts in self._points.items()}
        return new

    # -------------------------------------------------------------- the parts
    def _nvjet_points(self, target: str) -> "_Points":
        """The swept nvjet calls whose S is known and whose K can split (cap >= 2; a shorter K
        says nothing about the budget), as arrays (:class:`_Points`), built once per area floor
        (``tools/h200_cublas_rule.py scan`` varies it)."""
        key = (target, NEAREST_AREA_FLOOR)
        if key not in self._points:
            kt = TARGETS[target].kt
            rows = [(s, pl) for s, pl in sorted(self._plans.get(target, {}).items())
                    if pl.kclass == "nvjet" and pl.confidence != "unknown" and slice_cap(s[2], kt) > 1]
            self._points[key] = _Points(
                np.array([_log_area(s[0], s[1]) for s, _ in rows], dtype=np.float64),
                np.array([_log_aspect(s[0], s[1]) for s, _ in rows], dtype=np.float64),
                np.array([math.log2(s[2]) for s, _ in rows], dtype=np.float64),
                np.array([s for s, _ in rows], dtype=np.int64).reshape(-1, 3),
                tuple(pl for _, pl in rows), tuple(slice_cap(s[2], kt) for s, _ in rows))
        return self._points[key]

    def _nearest_p(self, target: str, m: int, n: int, k: int) -> tuple[int, KernelChoice | None]:
        """The weighted vote of the nearest informative swept shapes for P (FPS-CUB-5)."""
        kt = TARGETS[target].kt
        cap = slice_cap(k, kt)
        la, lr, lk = _log_area(m, n), _log_aspect(m, n), math.log2(k)
        pts = self._nvjet_points(target)
        # distances as the IEEE double expression d = |pa - la| + w |pk - lk| + wr |pr - lr|, in
        # order of (d, shape): the same order a sort of the Python floats and shape tuples gives
        dist = (np.abs(pts.area - la) + NEAREST_K_WEIGHT * np.abs(pts.logk - lk)
                + NEAREST_ASPECT_WEIGHT * np.abs(pts.aspect - lr))
        order = np.lexsort((pts.shape[:, 2], pts.shape[:, 1], pts.shape[:, 0], dist))
        votes: dict[int, float] = {}
        first: KernelChoice | None = None
        used = 0
        for i in order.tolist():
            d, pa, pl, pcap = float(dist[i]), float(pts.area[i]), pts.plans[i], pts.caps[i]
            p = pl.p or 1
            if p < pcap:                        # the budget bound P: scale it to this output
                vote = 1 if p == 1 else max(1, min(cap, int(p * 2.0 ** (pa - la) + 0.5)))
            elif p * 2.0 ** (pa - la) >= cap:   # K bound P there; the budget allows at least cap here
                vote = cap
            else:
                continue
            votes[vote] = votes.get(vote, 0.0) + 1.0 / (d + 0.05)
            first = first or pl
            used += 1
            if used >= NEAREST_VOTES:
                break
        if not votes:
            return 1, None
        best = max(votes.items(), key=lambda kv: (kv[1], -kv[0]))[0]
        return best, first

    def _nearest_any(self, target: str, m: int, n: int, k: int, kclass: str) -> KernelChoice | None:
        """The swept call of the same kernel class nearest in (log2 M, log2 N, log2 K), K
        weighted by :data:`NEAREST_CUTLASS_K_WEIGHT`."""
        best = None
        for s, pl in self._plans.get(target, {}).items():
            if pl.kclass != kclass and not (kclass == "sm75" and pl.kclass == "simt"):
                continue
            weights = (1.0, 1.0, NEAREST_CUTLASS_K_WEIGHT)
            d = sum(w * abs(math.log2(a) - math.log2(b)) for w, a, b in zip(weights, s, (m, n, k)))
            if best is None or (d, s) < best[0]:
                best = ((d, s), pl)
        return best[1] if best else None

    # -------------------------------------------------------------- predict
    def predict(self, target: str, m: int, n: int, k: int) -> KernelChoice:
        """See :func:`predict`."""
        tg = _check_target(target)
        m, n, k = _check_shape(tg, m, n, k)
        shape = (m, n, k)
        seen = self._plans.get(target, {}).get(shape)
        if seen is not None:
            return _replace(seen, confidence="table" if seen.confidence != "unknown" else "unknown", source=shape)
        kclass = kernel_class(target, m, n, k)
        if kclass != "nvjet":
            near = self._nearest_any(target, m, n, k, kclass)
            if near is None or near.kclass not in ("sm75", "sm80") or near.confidence == "unknown":
                return KernelChoice(target, shape, near.kclass if near else kclass, "unknown",
                                    kernel=near.kernel if near else None, tile=near.tile if near else None,
                                    source=near.shape if near else None,
                                    note=f"a {kclass} kernel is not modelled" if near is None or near.kclass == kclass
                                    else f"the nearest swept kernel is {near.kclass}: not modelled")
            # the nearest measured cutlass call's kernel; z by the split rule of the large-tile
            # mma.sync kernels, else that call's grid z as it is (FPS-CUB-4; not scaled by K:
            # leave-one-shape-out on sweep + heldout, docs/cublas-h200.rst), at most one slice
            # per 8 products
            if _split_rule_kernel(near):
                p, how = cutlass_split(m, n, k, near.tile), "grid z by the split rule of large cutlass tiles"
            else:
                p = 1 if not near.s or not near.p else max(1, min(near.p, -(-k // CUTLASS_SLICE_UNIT)))
                how = "grid z of the nearest measured call"
            plan = cutlass_slices(k, p, cutlass_slice_unit(k))
            # (the nearest call's launch size says nothing of this shape's: ctas unknown)
            return _replace(near, shape=shape, confidence="nearest", p=p, s=plan[0] if plan else None, ctas=None,
                            source=near.shape, note=f"cutlass kernel of the nearest measured call, {how}")
        cap = slice_cap(k, tg.kt)
        if cap <= 1:
            return KernelChoice(target, shape, "nvjet", "rule", p=1, s=None, kt=tg.kt,
                                note=f"K = {k} is at most {2 * MIN_SLICE_TILES} K tiles: no split")
        tiles = self._tiles.get(target) or []
        t_min = min((padded_tiles(m, n, t) for t in tiles), default=1)
        if t_min > CTA_LIMIT // 2:
            return KernelChoice(target, shape, "nvjet", "rule", p=1, s=None, kt=tg.kt,
                                note=f"more than {CTA_LIMIT // 2} output tiles under every swept tile: no split")
        p, near = self._nearest_p(target, m, n, k)
        p = min(p, CTA_LIMIT // t_min)
        if near is None:
            return KernelChoice(target, shape, "nvjet", "unknown", kt=tg.kt, note="no swept nvjet shape to go by")
        return KernelChoice(target, shape, "nvjet", "nearest", p=p, s=slice_length(k, tg.kt, p), kernel=near.kernel,
                            tile=near.tile, cluster=near.cluster, kt=tg.kt, source=near.shape,
                            tiles=padded_tiles(m, n, near.tile, near.cluster) if near.tile and near.cluster else None)


def _split_rule_kernel(choice: KernelChoice) -> bool:
    """Whether ``choice`` runs a cutlass ``mma.sync`` kernel (``s1688``, ``s16816``) whose tile
    has a CTA budget in :data:`CUTLASS_CTA_BUDGETS` (the kernels :func:`cutlass_split`
    predicts the split of)."""
    return (choice.kernel is not None and choice.tile in CUTLASS_CTA_BUDGETS
            and kernel_family(choice.kernel) in ("cutlass-s1688", "cutlass-s16816"))


def cutlass_split(m: int, n: int, k: int, tile: tuple[int, int]) -> int:
    """Grid z of a large-tile cutlass ``mma.sync`` kernel at M x N x K (FPS-CUB-4): min(floor(B /
    T), ceil(K / 72)), at least 1, with T = ceil(cm / TM) ceil(cn / TN) for the kernel's tile
    (TM, TN) in cuBLAS's m, n (FPS-CUB-2: :func:`padded_tiles` without clusters) and B its
    :data:`CUTLASS_CTA_BUDGETS` entry."""
    t = padded_tiles(m, n, tile)
    return max(1, min(CUTLASS_CTA_BUDGETS[tile] // t, -(-k // CUTLASS_MIN_SLICE)))


class _Points(NamedTuple):
    """A target's nearest-shape points (:meth:`Predictor._nvjet_points`): log2 area, log2
    aspect and log2 K per swept call, its shape (rows of M, N, K), plan and slice cap."""

    area: np.ndarray
    aspect: np.ndarray
    logk: np.ndarray
    shape: np.ndarray
    plans: tuple[KernelChoice, ...]
    caps: tuple[int, ...]

    def without(self, shape: tuple[int, int, int]) -> "_Points":
        keep = ~np.all(self.shape == np.array(shape, dtype=np.int64), axis=1)
        idx = np.flatnonzero(keep).tolist()
        return _Points(self.area[keep], self.aspect[keep], self.logk[keep], self.shape[keep],
                       tuple(self.plans[i] for i in idx), tuple(self.caps[i] for i in idx))


def _swept_tiles(plans: dict[tuple[int, int, int], KernelChoice]) -> list[tuple[int, int]]:
    """The nvjet tiles a target's swept calls ran, sorted."""
    return sorted({p.tile for p in plans.values() if p.kclass == "nvjet" and p.tile})


def _log_area(m: int, n: int) -> float:
    cm, cn = _cublas_mn(m, n)
    return math.log2(max(cm, NEAREST_AREA_FLOOR)) + math.log2(max(cn, NEAREST_AREA_FLOOR))


def _log_aspect(m: int, n: int) -> float:
    cm, cn = _cublas_mn(m, n)
    return math.log2(cm) - math.log2(cn)


def _replace(c: KernelChoice, **kw: object) -> KernelChoice:
    return dataclasses.replace(c, **kw)  # type: ignore[arg-type]


def observations_from_table() -> dict[str, list[Observation]]:
    """The committed sweep's calls (:mod:`fpspec.cublas_h200_table`) as observations."""
    from . import cublas_h200_table as tab

    out: dict[str, list[Observation]] = {}
    for target, text in tab.CALLS.items():
        rows = out.setdefault(target, [])
        m = n = 0
        for item in text.split():
            if ":" not in item:
                m, n = (int(v) for v in item.split("x"))
                continue
            kk, kid, grid, *p = item.split(":")
            k = int(kk)
            g = tuple(int(v) for v in grid.split(","))
            g = g + (1,) * (3 - len(g))
            rows.append(Observation(m, n, k, tab.KERNELS[int(kid)], (g[0], g[1], g[2]), int(p[0]) if p else None))
    return out


@lru_cache(maxsize=1)
def default_predictor() -> Predictor:
    """The predictor of the committed sweep (built once)."""
    return Predictor(observations_from_table())


def predict(target: str, m: int, n: int, k: int) -> KernelChoice:
    """The kernel class and K slices cuBLAS on the H200 uses for a torch GEMM of shape
    (M, N, K) = A (M x K) times BT (N x K)^T, offline (FPS-CUB-4, FPS-CUB-5).

    In order: a swept shape answers from the table (``"table"``); a non-``nvjet`` shape
    gets its class (:func:`kernel_class`) and the nearest swept kernel of that class,
    S ``"unknown"``; K of at most 2R K tiles, or an output too large for two slices,
    cannot split (``"rule"``); otherwise P is the vote of the nearest swept shapes
    (``"nearest"``), S = :func:`slice_length` (K, kt, P).
    """
    return default_predictor().predict(target, m, n, k)


# ================================================================== models (FPS-CUB-6..8)
#: The library presets (fpspec.models) and the torch call of each: ``resolve`` turns one
#: into the concrete model cuBLAS runs at a shape (FPS-CUB-6).
LIBRARY_PRESETS: dict[str, str] = {
    "cublas-h200-bf16": "torch-bf16",
    "cublas-h200-fp16": "torch-fp16",
    "cublas-h200-fp8": "torch-scaled-mm",
    "cublas-h200-fp8-fast": "torch-scaled-mm-fast",
}

#: Group size of the H200's ``mma.sync`` m16n8k8 instruction (cutlass ``s1688gemm``
#: kernels): one fused group per instruction, the ``nvjet`` chain otherwise (FPS-CUB-7;
#: issue 14 and the sweep's fit: every BF16 ``s1688`` call matches G = 8).
S1688_GROUP = 8
#: The K tile of an ``s1688gemm`` kernel, whose name gives none (FPS-CUB-7): residue-first
#: slices of this tile reproduce the sweep's calls (docs/cublas-h200.rst).
S1688_K_TILE = 32


def _target_of(name: str) -> Target:
    """A target by its name or by its library preset's name."""
    return _check_target(LIBRARY_PRESETS.get(name, name))


def kernel_parameters(choice: KernelChoice) -> tuple[str, dict[str, Any]]:
    """The model of one call whose kernel is known, as data (FPS-CUB-7): the preset of the
    target's ``nvjet`` chain and the :class:`~fpspec.models.GemmModel` parameters to set on
    it (:func:`fpspec.models.kernel_model` builds the model; ``require_full_groups`` is
    always off there: a partial last K tile is zero-filled, a shorter group):

    * ``nvjet``: the target's preset (``km-h100-bf16``, ``km-h100-fp8-promote128``,
      ``km-h100-fp8``) with ``split_k = S`` (FPS-CUB-3), partial K tile last;
    * cutlass ``mma.sync`` / ``wmma`` kernels (``sm80``, ``sm75``; BF16 and FP16): the
      same fused chain (G = 16, F = 25, RZ; G = :data:`S1688_GROUP` for ``s1688gemm``)
      in P = grid z slices (:func:`cutlass_slices`), each slice in K tiles of
      the kernel's K tile (:data:`S1688_K_TILE` for ``s1688gemm``) with the partial
      tile first (``slice_residue="first"``), slice results added in order (FP32 RNE);
    * anything else (SIMT ``gemmSN`` / ``dot_kernel``, a kernel of unknown S):
      FpspecError: not modelled.
    """
    tg = _check_target(choice.target)
    k = choice.shape[2]
    where = f"{tg.name} at {'x'.join(map(str, choice.shape))}"
    if choice.confidence == "unknown":
        raise FpspecError(f"{where}: the {choice.kclass} kernel {choice.kernel or '(unknown)'} is not modelled "
                          f"by fpspec ({choice.note or 'its reduction over K is unknown'})")
    if choice.confidence == "candidates":
        raise FpspecError(f"{where}: {choice.note}; the grid does not say which. Settle it with the call's "
                          "outputs: fpspec.adapters.settle.settle_choice (the observer does, FPS-CUB-10)")
    if choice.kclass == "nvjet":
        return tg.preset, {"split_k": choice.s}
    if choice.kclass in ("sm75", "sm80") and tg.fmt in ("bf16", "fp16"):
        s1688 = choice.instr_k == 8
        kt = choice.kt or (S1688_K_TILE if s1688 else None)
        if kt is None:
            raise FpspecError(f"{where}: the cutlass kernel {choice.kernel} names no K tile; not modelled")
        params: dict[str, Any] = {"group_size": S1688_GROUP} if s1688 else {}
        params.update(slice_plan=cutlass_slices(k, choice.p or 1, cutlass_slice_unit(k)), k_tile=kt,
                      slice_residue="first")
        return tg.preset, params
    raise FpspecError(f"{where}: the {choice.kclass} kernel {choice.kernel or '(unknown)'} is not modelled by "
                      "fpspec (no tensor-core chain reproduces it)")


#: The slice unit of a cutlass split when K is a multiple of it (FPS-CUB-7): its slices are
#: then ceil(K / (64 P)) 64 long, else ceil(K / (8 P)) 8 (:data:`CUTLASS_SLICE_UNIT`).
#: Fitted on the s1688 calls of sweep.jsonl and heldout.jsonl: 64 reproduces the z = 6
#: calls at 4096 x 33 x {4096, 8192, 16384} (S = 704, 1408, 2752; units of 8 give 688,
#: 1368, 2736 and miss), 8 every call whose K is not a multiple of 64 (8192 x 17 x 4000:
#: S = 1000, not 1024; 2047 x 63 x 14000: 880, not 896; 1023 x 1025 x 3500: 504, not 512).
#: train1.jsonl (1200 shapes measured after the rule, none of them fitted on) showed the
#: same for ``wmma`` kernels (FP16 56 x 23 x 832, z = 7; 16 x 193 x 7488, z = 24; 896 x 21
#: x 2944, z = 8: 64 reproduces all sampled outputs, 8 one to three of 16), so the unit is
#: one rule for every cutlass kernel; unit64.jsonl.gz, drawn to test it after, confirms it
#: on all 245 calls where the two differ (132 ``s16816``, 113 ``wmma``).
CUTLASS_WHOLE_UNIT = 64


def cutlass_slice_unit(k: int) -> int:
    """The unit of a cutlass kernel's K slices at K (FPS-CUB-7): :data:`CUTLASS_WHOLE_UNIT`
    when it divides K, else :data:`CUTLASS_SLICE_UNIT` (8)."""
    return CUTLASS_WHOLE_UNIT if k % CUTLASS_WHOLE_UNIT == 0 else CUTLASS_SLICE_UNIT


def cutlass_slices(k: int, p: int, unit: int = CUTLASS_SLICE_UNIT) -> tuple[int, ...] | None:
    """The slice lengths of a cutlass split into grid z = p slices (FPS-CUB-7): S =
    ceil(K / (p u)) u with u = ``unit`` (:func:`cutlass_slice_unit`), the last slice
    shorter; None for one slice.  When u would not give exactly p slices, u = 8 does
    (the grid's z slices of whole 128-bit loads, FPS-CUB-3)."""
    if p <= 1:
        return None
    s = -(-k // (p * unit)) * unit
    if -(-k // s) != p:
        s = -(-k // (p * CUTLASS_SLICE_UNIT)) * CUTLASS_SLICE_UNIT
    if s >= k:
        return None
    return tuple(min(s, k - s0) for s0 in range(0, k, s))


def choice_for_kernel(name: str, shape: Sequence[int], kernel_name: str, grid: Sequence[int]) -> KernelChoice:
    """:func:`plan_from_kernel` for a library preset (``cublas-h200-bf16``, ...) or a target
    (``torch-bf16``, ...) at (M, N, K): what :func:`fpspec.models.model_for_kernel` models."""
    tg = _target_of(name)
    m, n, k = _shape3(shape)
    return plan_from_kernel(tg.name, m, n, k, kernel_name, grid)


def _shape3(shape: Sequence[int]) -> tuple[int, int, int]:
    try:
        m, n, k = shape  # type: ignore[misc]
    except (TypeError, ValueError):
        raise FpspecError(f"shape must be (M, N, K), got {shape!r}") from None
    return m, n, k


def call_shape(name: str, shape: Sequence[int]) -> tuple[int, int, int]:
    """The shape the library runs a GEMM of ``shape`` at, for a library preset or target:
    ``torch._scaled_mm`` pads N and K to multiples of 16 (the zero products change
    nothing); the others run the shape as it is."""
    tg = _target_of(name)
    m, n, k = _shape3(shape)
    return m, -(-n // tg.n_multiple) * tg.n_multiple, -(-k // tg.k_multiple) * tg.k_multiple


def resolve_choice(name: str, shape: Sequence[int]) -> KernelChoice:
    """The offline :func:`predict` for a library preset or target at (M, N, K)."""
    tg = _target_of(name)
    m, n, k = _shape3(shape)
    return predict(tg.name, m, n, k)


def kernel_family(kernel_name: str) -> str:
    """The family a kernel's arithmetic is modelled by (FPS-CUB-7): ``nvjet``,
    ``cutlass-s16816`` (mma.sync m16n8k16), ``cutlass-wmma`` (wmma 16x16x16),
    ``cutlass-s1688`` (mma.sync m16n8k8), ``simt`` (not modelled) or ``other``."""
    info = parse_kernel_name(kernel_name)
    if info.kclass in ("sm75", "sm80"):
        if "wmma" in info.flags:
            return "cutlass-wmma"
        if info.instr_k == 8:
            return "cutlass-s1688"
        if info.instr_k == 16:
            return "cutlass-s16816"
        return "other"
    return info.kclass if info.kclass in ("nvjet", "simt") else "other"
