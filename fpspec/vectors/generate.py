"""``fpspec vectors generate``: build a pack deterministically (FPS-VEC-5, FPS-VEC-10).

The same spec, generator and level give byte-identical files on every run and
machine: case lists are integer bit patterns from seeded PCG64 streams,
outputs come from fpspec's exact reference (small sets) or its fast path
(exhaustive sets; bit-equal by test), and files are written by
:func:`fpspec.vectors.pack.write_npz` with fixed zip metadata.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, TextIO

import numpy as np

from ..errors import FpspecError
from ..io import atomic_write, check_output_folder
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
    """Block, bounds and GEMM coverage models live in their own modules, which register them
    when imported (they need fpspec.quantization / fpspec.matmul, which the core sets do not)."""
    for mod in ("fpspec.vectors.blocks", "fpspec.vectors.gemm_sets", "fpspec.vectors.gemm_shapes",
                "fpspec.mutants.witness_sets"):
        __import__(mod)


def _previous_pack_files(out: Path) -> None:
    """Refuse to replace a folder that holds anything but a pack generated before."""
    if not out.exists():
        return
    listed: set[str] = set()
    mpath = out / MANIFEST
    if mpath.is_file():
        try:
            listed = {e["file"] for e in json.loads(mpath.read_text(encoding="utf-8"))["sets"]}
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            raise FpspecError(f"{mpath}: not a vector-pack manifest; choose an empty or pack folder") from None
    foreign = sorted(p.name for p in out.iterdir() if p.name != MANIFEST and p.name not in listed)
    if foreign:
        raise FpspecError(f"--out {out}: holds files that belong to no pack ({', '.join(foreign[:5])}); "
                          "choose an empty folder or a previous pack's folder")


def _swap_in(stage: Path, out: Path) -> None:
    """Put the finished pack at ``out``: one rename, or two when a previous pack is replaced."""
    if not out.exists():
        os.rename(stage, out)
        return
    old = out.parent / f".{out.name}.{secrets.token_hex(6)}.old"
    os.rename(out, old)
    try:
        os.rename(stage, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def generate(out: str | Path, level: int = 1, models: list[str] | None = None,
             progress: TextIO | None = sys.stderr,
             on_set: Callable[[VectorSet], None] | None = None) -> dict:
    """Write a pack of the given level into ``out`` (FPS-VEC-5).

    The pack is built in a temporary folder beside ``out`` and renamed into place
    once complete, so a killed or failed run leaves a previous pack at ``out``
    untouched (FPS-CLI-4).  ``out`` may exist only as an empty folder or a previous
    pack's folder; its parent folder must exist.
    """
    if level not in LEVELS:
        raise FpspecError(f"level must be one of {LEVELS}, got {level}")
    _load_optional_models()
    out = check_output_folder(out).absolute()
    _previous_pack_files(out)
    t0 = time.monotonic()
    plans = coverage.plans(level, models)
    stage = out.parent / f".{out.name}.{secrets.token_hex(6)}.partial"
    stage.mkdir()
    try:
        entries = []
        for i, plan in enumerate(plans, 1):
            vs = build_set(plan)
            data = set_bytes(vs)
            atomic_write(stage / f"{vs.name}.npz", lambda fh, data=data: fh.write(data))
            entries.append(manifest_entry(vs, data))
            if on_set:
                on_set(vs)
            if progress is not None:
                print(f"[{i}/{len(plans)}] {vs.name}: {vs.cases} cases, {len(data) / 1e6:.2f} MB "
                      f"({time.monotonic() - t0:.1f} s)", file=progress, flush=True)
        used = {p.meta["coverage_model"] for p in plans}
        docs = {k: v for k, v in coverage.model_docs().items() if k in used}
        manifest = write_manifest(stage, level, entries, docs)
        _swap_in(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return manifest
