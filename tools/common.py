"""What the tools share that is tooling, not spec: loading a public reference from a path the user gives.

The references the ``tools.compare_*`` modules, ``tools.mmasim_vectors`` and ``tools.gpu.*`` run are
not part of fpspec and not installed: the user fetches them and names a file or a folder.  These two
functions load such code under a fixed module name without editing ``sys.path``, and register it in
``sys.modules`` (dataclasses and absolute imports inside the reference look their module up there).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["load_file", "import_package"]


def load_file(path: str | Path, name: str) -> ModuleType:
    """The Python file at ``path``, executed as the module ``name`` (registered in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(name, Path(path))
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: not a Python file that can be loaded")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def import_package(root: str | Path, name: str) -> ModuleType:
    """The package ``name`` found in the folder ``root`` (regular or namespace), registered in ``sys.modules``.

    Its submodules then import as usual (``import name.sub``), through the package's own ``__path__``.
    """
    spec = importlib.machinery.PathFinder.find_spec(name, [str(Path(root).resolve())])
    if spec is None:
        raise SystemExit(f"{root}: no package {name!r} in this folder")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    if spec.loader is not None:
        spec.loader.exec_module(mod)
    return mod
