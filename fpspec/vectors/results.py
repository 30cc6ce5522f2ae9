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

from .ops import compute
from .pack import Pack, VectorSet, write_npz
from .schema import RESULT_PACK_ENTRY, encode_meta

__all__ = ["write_results", "pack_stamp", "run_reference"]


def pack_stamp(pack: Pack, vs: VectorSet) -> np.ndarray:
    return encode_meta({"pack_id": pack.pack_id, "set": vs.name, "set_sha256": vs.sha256})


def write_results(out: str | Path, pack: Pack, vs: VectorSet, outputs: Mapping[str, np.ndarray]) -> Path:
    """Write one set's results file (output names without the ``out_`` prefix)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    entries = [(RESULT_PACK_ENTRY, pack_stamp(pack, vs))]
    entries += [(f"out_{k}", np.asarray(outputs[k])) for k in sorted(outputs)]
    path = out / f"{vs.name}.npz"
    write_npz(path, entries)
    return path


def run_reference(pack: Pack | str | Path, out: str | Path, select: str | None = None,
                  progress: TextIO | None = sys.stderr) -> int:
    """fpspec's fast path as an implementation under test: compute every set's outputs from its
    inputs and write them as results.  Returns the number of sets written."""
    from .checker import select_names
    from .generate import _load_optional_models

    _load_optional_models()
    if not isinstance(pack, Pack):
        pack = Pack(pack)
    names = select_names(pack.names(), select)
    for i, name in enumerate(names, 1):
        vs = pack.load(name)
        outputs = compute(vs.meta, vs.inputs, "fast")
        write_results(out, pack, vs, outputs)
        if progress is not None:
            print(f"[{i}/{len(names)}] {name}", file=progress, flush=True)
    return len(names)
