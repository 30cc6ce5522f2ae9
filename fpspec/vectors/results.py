"""Writing an implementation's results in the layout ``fpspec check`` reads (FPS-CHK-1).

``RESULTS/<set>.npz`` holds ``out_<name>`` arrays (same dtype and shape as the
pack's expected outputs) and, recommended, ``__pack__``: uint8 UTF-8 JSON
``{"pack_id": ..., "set": ..., "set_sha256": ...}`` naming the pack the results
were made against, so results from another pack version are refused (exit 3).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping, TextIO

import numpy as np

from ..errors import FpspecError
from ..io import atomic_write, check_output_folder
from .checker import select_names
from .ops import compute, split_impl
from .pack import MANIFEST, Pack, VectorSet, write_npz
from .schema import RESULT_PACK_ENTRY, encode_meta

__all__ = ["write_results", "pack_stamp", "run_reference", "results_folder"]


def pack_stamp(pack: Pack, vs: VectorSet) -> np.ndarray:
    return encode_meta({"pack_id": pack.pack_id, "set": vs.name, "set_sha256": vs.sha256})


def results_folder(out: str | Path, pack: Pack) -> Path:
    """Check (and create) a results folder: never the pack's own folder nor any other pack's
    (a results file there would break the pack); its parent folder must exist (FPS-CLI-4)."""
    out = check_output_folder(out, inputs=[pack.root])
    if (out / MANIFEST).exists():
        raise FpspecError(f"--out {out}: is a vector pack folder (it holds {MANIFEST}); "
                          "write results to a folder of their own")
    out.mkdir(exist_ok=True)
    return out


def write_results(out: str | Path, pack: Pack, vs: VectorSet, outputs: Mapping[str, np.ndarray]) -> Path:
    """Write one set's results file (output names without the ``out_`` prefix), atomically."""
    out = results_folder(out, pack)
    entries = [(RESULT_PACK_ENTRY, pack_stamp(pack, vs))]
    entries += [(f"out_{k}", np.asarray(outputs[k])) for k in sorted(outputs)]
    path = out / f"{vs.name}.npz"
    atomic_write(path, lambda fh: write_npz(fh, entries))
    return path


def run_reference(pack: Pack | str | Path, out: str | Path, select: str | None = None,
                  progress: TextIO | None = sys.stderr, impl: str = "fast") -> int:
    """fpspec as an implementation under test: compute every set's outputs from its inputs with
    the twin ``impl`` names (``fast``, ``exact``, ``torch`` or ``torch:DEVICE``:
    :func:`fpspec.vectors.ops.split_impl`) and write them as results.  Returns the number of sets
    written."""
    split_impl(impl)  # (a bad name is refused before anything is read)
    if not isinstance(pack, Pack):
        pack = Pack(pack)
    names = select_names(pack.names(), select)
    if not names:
        raise FpspecError(f"--select {select!r} matches no set of {pack.root}")
    for name in names:  # every selected set passes its integrity check before anything is written
        pack.load(name)
    results_folder(out, pack)
    for i, name in enumerate(names, 1):
        vs = pack.load(name)
        outputs = compute(vs.meta, vs.inputs, impl)
        write_results(out, pack, vs, outputs)
        if progress is not None:
            print(f"[{i}/{len(names)}] {name}", file=progress, flush=True)
    return len(names)
