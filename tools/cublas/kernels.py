"""cuBLAS kernels as the torch profiler shows them: attribution of kernel events to the
calls that launched them (kineto trace JSON), kernel-name parsing (tile, K tile,
stages, cluster, flags), and the K-split rule of issue 14.

The trace format and the attribution of kernels to calls are
:mod:`fpspec.adapters.kernel_trace`'s (shared with the torch observer,
``fpspec.adapters.torch_gemm.observe``); the raw ``args`` are kept with every kernel so that
nothing depends on this parsing alone.

Kernel names (documented in vectors/provenance/h200-cublas/README.md; the fit
reports every name it met):

* ``nvjet_<types>_<TM>x<TN>_<KT>x<STAGES>_<CM>x<CN>_[2cta_]<v|h>_<bz|badd>_[coopA|coopB|splitK_]<layout>``
  (cuBLAS's Hopper kernels; e.g. ``nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT``):
  output tile TM x TN in cuBLAS's m x n (m = torch's N: torch passes its row-major
  C = A B as the column-major C^T = B^T A^T), K tile KT, pipeline stages, cluster CM x CN;
* ``sm90_xmma_gemm_..._tilesize<TM>x<TN>x<KT>_...`` and the sm80 / sm75 xmma kernels
  (``sm80_xmma_gemm_...tilesize64x64x32_stage4...``);
* ``ampere_*_<TM>x<TN>_..._stages_<KT>x<STAGES>_..`` / ``turing_*`` (cuBLAS's older
  kernels) and ``cutlass_80_*_<TM>x<TN>_<KT>x<STAGES>_*``;
* SIMT kernels (``gemmSN_*``, ``gemv*``, ``gemmk1_*``, ``*sgemm*``) and split-K
  reductions (``splitKreduce_kernel``, ``*reduce*``).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from fpspec.adapters.kernel_trace import KERNEL_CATS, LAUNCH_CATS, attribute_kernels  # noqa: F401
from fpspec.cublas.h200 import parse_kernel_name, slice_cap, slice_length

GEMM_CLASSES = ("nvjet", "sm90-xmma", "sm80", "sm75", "simt")


def trace_fields(trace: dict) -> dict[str, list[str]]:
    """For each event category of a trace, the union of its ``args`` keys (what the
    profiler exposes; the sweep records it once)."""
    keys: dict[str, set] = {}
    for e in trace.get("traceEvents", []):
        if isinstance(e, dict):
            keys.setdefault(str(e.get("cat", "")), set()).update((e.get("args") or {}).keys())
    return {c: sorted(k) for c, k in sorted(keys.items())}


# ================================================================== kernel names
@dataclass
class KernelInfo:
    """What a kernel name says (None where it says nothing)."""

    name: str
    kclass: str                      # nvjet, sm90-xmma, sm80, sm75, simt, reduce, other
    tile_m: int | None = None        # cuBLAS m (torch N) extent of the output tile
    tile_n: int | None = None        # cuBLAS n (torch M)
    kt: int | None = None            # K tile
    stages: int | None = None
    cluster: tuple[int, int] | None = None
    flags: list[str] = field(default_factory=list)
    layout: str | None = None
    pattern: str = "none"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cluster"] = list(self.cluster) if self.cluster else None
        return d


_TILESIZE = re.compile(r"tilesize(?P<tm>\d+)x(?P<tn>\d+)x(?P<kt>\d+)")
_STAGE = re.compile(r"stage(?:s)?(?P<st>\d+)(?![x\d])")
_OLD = re.compile(r"_(?P<tm>\d+)x(?P<tn>\d+)_.*?stages_(?P<kt>\d+)x(?P<st>\d+)")
_CUTLASS = re.compile(r"_(?P<tm>\d+)x(?P<tn>\d+)_(?P<kt>\d+)x(?P<st>\d+)_")
_TILE_ONLY = re.compile(r"_(?P<tm>\d+)x(?P<tn>\d+)_")
_LAYOUT = re.compile(r"^[TN]{2,3}$")


def _arch_class(name: str) -> str:
    low = name.lower()
    if low.startswith("nvjet"):
        return "nvjet"
    if "reduce" in low:
        return "reduce"
    if low.startswith("sm90") or "_sm90" in low or low.startswith("cutlass3x_sm90"):
        return "sm90-xmma"
    if low.startswith(("sm80", "sm86", "sm89", "ampere", "cutlass_80", "cutlass_tensorop")) or "_sm80" in low:
        return "sm80"
    if low.startswith(("sm75", "turing", "cutlass_75")) or "_sm75" in low:
        return "sm75"
    if any(s in low for s in ("gemmsn", "gemv", "gemmk1", "sgemm", "dot_kernel", "gemm_kernel")):
        return "simt"
    return "other"


def parse_kernel(name: str) -> KernelInfo:
    """Tile, K tile, stages, cluster and flags from a cuBLAS kernel name (see the module
    docstring for the patterns); a name that matches none gets only its class."""
    base = name.strip()
    if base.startswith("void "):
        base = base[5:]
    wrapped = re.match(r"^cutlass::Kernel2?<\s*(\w+)\s*>", base)   # cutlass::Kernel2<NAME>(NAME::Params)
    base = wrapped.group(1) if wrapped else base.split("(")[0].split("<")[0].strip()
    info = KernelInfo(name=name, kclass=_arch_class(base))
    nv = parse_kernel_name(base) if base else None      # the package's parser: nvjet names
    if nv is not None and nv.kclass == "nvjet":
        assert nv.tile is not None and nv.cluster is not None
        info.tile_m, info.tile_n = nv.tile
        info.kt, info.stages, info.cluster = nv.kt, nv.stages, nv.cluster
        toks = list(nv.flags)
        if len(toks) > 1 and _LAYOUT.match(toks[-1]):
            info.layout = toks.pop()
        info.flags = toks
        info.pattern = "nvjet"
        return info
    m = _TILESIZE.search(base)
    if m:
        info.tile_m, info.tile_n, info.kt = int(m["tm"]), int(m["tn"]), int(m["kt"])
        s = _STAGE.search(base)
        info.stages = int(s["st"]) if s else None
        info.flags = [t for t in ("segment_k", "splitk", "stream_k", "splitK") if t in base]
        info.pattern = "tilesize"
        return info
    for pat, label in ((_OLD, "stages"), (_CUTLASS, "cutlass")):
        m = pat.search(base)
        if m:
            info.tile_m, info.tile_n = int(m["tm"]), int(m["tn"])
            info.kt, info.stages = int(m["kt"]), int(m["st"])
            info.pattern = label
            return info
    m = _TILE_ONLY.search(base)
    if m and info.kclass in ("sm80", "sm75"):
        info.tile_m, info.tile_n = int(m["tm"]), int(m["tn"])
        info.pattern = "tile-only"
    return info


def gemm_kernel(kernels: list[dict]) -> dict | None:
    """The GEMM kernel of one call: the first whose class is a GEMM class, else the
    longest one."""
    if not kernels:
        return None
    for k in kernels:
        if parse_kernel(k["name"]).kclass in GEMM_CLASSES:
            return k
    return max(kernels, key=lambda k: float(k.get("dur_us") or 0))


def ctas(grid: Any) -> int | None:
    """Number of CTAs of a launch grid [x, y, z] (None when absent or malformed)."""
    try:
        x, y, z = (int(v) for v in grid)
    except (TypeError, ValueError):
        return None
    return x * y * z


def output_tiles(m: int, n: int, tile_m: int, tile_n: int, orientation: str = "cublas") -> int:
    """Output tiles T of an M x N torch GEMM for a TM x TN kernel tile; "cublas": TM runs
    along torch's N (cuBLAS's m), "torch": along torch's M."""
    if orientation == "cublas":
        return math.ceil(n / tile_m) * math.ceil(m / tile_n)
    return math.ceil(m / tile_m) * math.ceil(n / tile_n)


# ================================================================== the rule
def slice_for_p(k: int, kt: int, p: int | None) -> int | None:
    """S = ceil(K / (P kt)) kt, normalised: None when P <= 1 or when one slice holds all
    of K (no split): :func:`fpspec.cublas.h200.slice_length`."""
    return slice_length(k, kt, p)


def normalise_s(k: int, s: int | None) -> int | None:
    """A split of S products of a K-long reduction, None when it does not split."""
    return None if s is None or s >= k else int(s)


def rule_p(k: int, kt: int, t: int, r: int, b: int) -> int:
    """Issue 14's slice count: P = min(ceil(ceil(K/kt) / R) - 1, floor(B / T)), at least 1
    (R = the fewest K tiles a slice keeps, 20 on the H200; B = the kernel's CTA budget)."""
    return max(1, min(slice_cap(k, kt, r), b // max(t, 1)))


def rule_s(k: int, kt: int, t: int, r: int, b: int) -> int | None:
    """The rule's slice length S (None: no split)."""
    return slice_for_p(k, kt, rule_p(k, kt, t, r, b))


def balanced_slices(k: int, unit: int) -> list[int]:
    """Every distinct split of K into P balanced slices of whole ``unit``s
    (S = ceil(ceil(K/unit) / P) unit for P = 2, 3, ...), largest S first."""
    nk = math.ceil(k / unit)
    out: list[int] = []
    for p in range(2, nk + 1):
        s = math.ceil(nk / p) * unit
        if s < k and (not out or s != out[-1]):
            out.append(s)
    return out
