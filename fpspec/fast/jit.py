"""The Numba decorator of the fast GEMM path, and a disk cache that knows every module a
compiled function draws on.

Numba's on-disk cache (``cache=True``) checks only the file that defines a compiled
function; a kernel that calls a helper of another module would keep running the old
helper after an edit of that module.  Two groups of modules call each other's compiled
functions: the GEMM path (:mod:`fpspec.fast.fp32` -> :mod:`fpspec.fast.chain` ->
:mod:`fpspec.fast.steps` -> :mod:`fpspec.fast.kernels`, :mod:`fpspec.fast.operands`, ...;
:data:`GEMM_SOURCES`) and the encoder and block quantizer (:mod:`fpspec.fast.codes`,
:mod:`fpspec.fast.bits`, :mod:`fpspec.fast.rounding`, :mod:`fpspec.fast.log2`,
:mod:`fpspec.fast.scan`, :mod:`fpspec.fast.dequant`, :mod:`fpspec.fast.rht` ->
:mod:`fpspec.fast.blocks`; :data:`BLOCK_SOURCES`).  Every
cached function defined in a module of a group is cached against the contents of the
whole group: an edit of any of its modules recompiles the group.  Those modules import
this one before they define their kernels, so that the locators are in place.

The stamp is supplied through Numba's cache locators (the classes Numba tries in
``numba.core.caching.CacheImpl._locator_classes``, the same hook as its
``NUMBA_CACHE_LOCATOR_CLASSES`` setting); where a Numba version lacks that hook the
functions are cached as Numba does by default.
"""

from __future__ import annotations

import functools
import hashlib
import os

import numba

try:  # the hook Numba selects cache locators through (absent: Numba's default caching)
    from numba.core import caching as _caching
except ImportError:  # pragma: no cover - a Numba without the caching module
    _caching = None

__all__ = ["gemm_jit", "GEMM_SOURCES", "BLOCK_SOURCES", "SOURCE_GROUPS"]

_HERE = os.path.dirname(os.path.abspath(__file__))

#: The modules of the fast GEMM path whose compiled functions call each other.
GEMM_SOURCES: tuple[str, ...] = tuple(os.path.join(_HERE, name)
                                      for name in ("fp32.py", "chain.py", "steps.py", "kernels.py", "operands.py",
                                                   "spans.py", "partials.py"))
#: The modules of the encoder and the block quantizer whose compiled functions call each other.
BLOCK_SOURCES: tuple[str, ...] = tuple(os.path.join(_HERE, name)
                                       for name in ("codes.py", "bits.py", "rounding.py", "log2.py", "scan.py",
                                                    "dequant.py", "rht.py", "blocks.py"))
#: Every group of modules cached together.
SOURCE_GROUPS: tuple[tuple[str, ...], ...] = (GEMM_SOURCES, BLOCK_SOURCES)
_GROUP_OF = {path: group for group in SOURCE_GROUPS for path in group}


@functools.lru_cache(maxsize=None)
def _digest(path: str, mtime: float, size: int) -> bytes:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).digest()


def _sources_stamp(group: tuple[str, ...]) -> tuple[bytes, ...]:
    stamps = []
    for path in group:
        st = os.stat(path)
        stamps.append(_digest(path, st.st_mtime, st.st_size))
    return tuple(stamps)


class _GroupSourcesStamp:
    """Locator mixin: a function defined in a module of a group is fresh while every module of
    the group is."""

    _group: tuple[str, ...] = ()

    def get_source_stamp(self):  # noqa: D102 - Numba's locator interface
        return _sources_stamp(self._group)

    @classmethod
    def from_function(cls, py_func, py_file):  # noqa: D102
        group = _GROUP_OF.get(os.path.abspath(py_file))
        if group is None:
            return None
        self = super().from_function(py_func, py_file)
        if self is not None:
            self._group = group
        return self


def _install_locators() -> None:
    classes = getattr(getattr(_caching, "CacheImpl", None), "_locator_classes", None)
    if not isinstance(classes, list):  # pragma: no cover - a Numba without the hook
        return
    if any(issubclass(c, _GroupSourcesStamp) for c in classes):
        return
    ours = [type(f"Group{base.__name__}", (_GroupSourcesStamp, base), {})
            for base in classes if base.__name__ in ("UserProvidedCacheLocator", "InTreeCacheLocator",
                                                     "UserWideCacheLocator")]
    classes[:0] = ours


_install_locators()


def gemm_jit(fn=None, *, inline: bool = False):
    """``numba.njit(cache=True, nogil=True)`` for the GEMM path (``inline=True``: Numba
    inlines the function into its callers)."""
    opts = dict(cache=True, nogil=True)
    if inline:
        opts["inline"] = "always"

    def wrap(f):
        return numba.njit(**opts)(f)

    return wrap if fn is None else wrap(fn)
