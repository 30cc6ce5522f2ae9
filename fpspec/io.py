"""Safe file I/O shared by the CLI, the vector pack and the checker (FPS-CLI-3).

Loading never executes code: every ``np.load`` goes through here with
``allow_pickle=False``, and errors name the file.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .errors import FpspecError

__all__ = ["load_npy", "save_npy", "load_npz"]


def load_npy(path: str | os.PathLike[str]) -> np.ndarray:
    """Load one .npy array without pickle; a clear error names the file otherwise."""
    try:
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise FpspecError(f"{path}: no such file") from None
    except ValueError as exc:
        raise FpspecError(f"{path}: not a loadable .npy array without pickle ({exc})") from None
    if isinstance(arr, np.lib.npyio.NpzFile):
        arr.close()
        raise FpspecError(f"{path}: is an .npz archive, expected a single .npy array")
    return arr


def load_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Load every array of an .npz archive without pickle into a dict."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise FpspecError(f"{path}: is a .npy array, expected an .npz archive")
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise FpspecError(f"{path}: no such file") from None
    except (ValueError, OSError) as exc:
        raise FpspecError(f"{path}: not a loadable .npz archive without pickle ({exc})") from None


def save_npy(path: str | os.PathLike[str], arr: np.ndarray) -> None:
    """Write one array; the parent folder must exist."""
    Path(path).parent.mkdir(parents=True, exist_ok=True) if str(Path(path).parent) else None
    np.save(path, arr, allow_pickle=False)
