"""``fpspec vectors generate``: build a pack deterministically (FPS-VEC-5, FPS-VEC-10).

The same spec, generator and level give byte-identical files on every run and
machine: case lists are integer bit patterns from seeded PCG64 streams,
outputs come from fpspec's exact reference (small sets) or its fast path
(exhaustive sets; bit-equal by test), and files are written by
:func:`fpspec.vectors.pack.write_npz` with fixed zip metadata.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable, TextIO

import numpy as np

from ..errors import FpspecError
from . import coverage
from .ops import compute
from .pack import MANIFEST, VectorSet, manifest_entry, set_bytes, write_manifest

__all__ = ["generate", "build_set", "LEVELS"]

LEVELS = (1, 2)


def build_set(plan: coverage.SetPlan, impl: str | None = None) -> VectorSet:
    """Compute a plan's expected outputs and return the complete set."""
    outputs = compute(plan.meta, plan.inputs, impl or plan.impl)
    if plan.finish is not None:
        plan.finish(plan, outputs)
    for k, v in outputs.items():
        spec = plan.meta["outputs"][k]
        if v.dtype.name != spec["dtype"] or list(v.shape[1:]) != list(spec["shape"]):
            raise AssertionError(f"{plan.name}: output {k} is {v.dtype}{v.shape}, meta says {spec}")
    return VectorSet(plan.name, plan.meta, plan.inputs, outputs, plan.tags.astype(np.uint32), plan.key)


def _load_optional_models() -> None:
    """Block, bounds and GEMM models live in their own modules (they need fpspec.quantization / gemm)."""
    for mod in ("fpspec.vectors.blocks", "fpspec.vectors.gemm_sets"):
        try:
            __import__(mod)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith(mod):
                continue
            raise


def _clear_previous_pack(out: Path) -> None:
    """Remove the set files of a pack previously generated into ``out``; refuse to touch others."""
    import json

    listed: set[str] = set()
    mpath = out / MANIFEST
    if mpath.is_file():
        try:
            listed = {e["file"] for e in json.loads(mpath.read_text(encoding="utf-8"))["sets"]}
        except (ValueError, KeyError, TypeError):
            raise FpspecError(f"{mpath}: not a vector-pack manifest; choose an empty or pack folder") from None
    foreign = sorted(p.name for p in out.glob("*.npz") if p.name not in listed)
    if foreign:
        raise FpspecError(f"{out}: holds .npz files that belong to no pack ({', '.join(foreign[:5])}); "
                          "choose an empty folder or a previous pack's folder")
    for name in listed:
        p = out / name
        if "/" not in name and p.is_file():
            p.unlink()


def generate(out: str | Path, level: int = 1, models: list[str] | None = None,
             progress: TextIO | None = sys.stderr,
             on_set: Callable[[VectorSet], None] | None = None) -> dict:
    """Write a pack of the given level into ``out`` (created; existing .npz files are replaced)."""
    if level not in LEVELS:
        raise FpspecError(f"level must be one of {LEVELS}, got {level}")
    _load_optional_models()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _clear_previous_pack(out)
    t0 = time.monotonic()
    plans = coverage.plans(level, models)
    entries = []
    for i, plan in enumerate(plans, 1):
        vs = build_set(plan)
        data = set_bytes(vs)
        (out / f"{vs.name}.npz").write_bytes(data)
        entries.append(manifest_entry(vs, data))
        if on_set:
            on_set(vs)
        if progress is not None:
            print(f"[{i}/{len(plans)}] {vs.name}: {vs.cases} cases, {len(data) / 1e6:.2f} MB "
                  f"({time.monotonic() - t0:.1f} s)", file=progress, flush=True)
    used = {p.meta["coverage_model"] for p in plans}
    docs = {k: v for k, v in coverage.model_docs().items() if k in used}
    return write_manifest(out, level, entries, docs)
