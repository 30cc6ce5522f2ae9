"""The Numba decorator of the fast GEMM path, with a disk cache that knows all its modules.

Numba's on-disk cache (``cache=True``) checks only the file that defines a compiled
function; a kernel that calls a helper of another module would keep running the old
helper after an edit of that module.  The GEMM path is written across modules
(:mod:`fpspec.fast.fp32` -> :mod:`fpspec.fast.chain` -> :mod:`fpspec.fast.kernels`,
:mod:`fpspec.fast.operands`),
so every function compiled with :func:`gemm_jit` is cached against the contents of
all of :data:`GEMM_SOURCES`: an edit of any of them recompiles the whole path.

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

__all__ = ["gemm_jit", "GEMM_SOURCES"]

_HERE = os.path.dirname(os.path.abspath(__file__))

#: The modules of the fast GEMM path whose compiled functions call each other.
GEMM_SOURCES: tuple[str, ...] = tuple(os.path.join(_HERE, name)
                                      for name in ("fp32.py", "chain.py", "kernels.py", "operands.py", "spans.py",
                                                   "partials.py"))


@functools.lru_cache(maxsize=None)
def _digest(path: str, mtime: float, size: int) -> bytes:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).digest()


def _sources_stamp() -> tuple[bytes, ...]:
    stamps = []
    for path in GEMM_SOURCES:
        st = os.stat(path)
        stamps.append(_digest(path, st.st_mtime, st.st_size))
    return tuple(stamps)


class _GemmSourcesStamp:
    """Locator mixin: a function of the GEMM path is fresh while all GEMM_SOURCES are."""

    def get_source_stamp(self):  # noqa: D102 - Numba's locator interface
        return _sources_stamp()

    @classmethod
    def from_function(cls, py_func, py_file):  # noqa: D102
        if os.path.abspath(py_file) not in GEMM_SOURCES:
            return None
        return super().from_function(py_func, py_file)


def _install_locators() -> None:
    classes = getattr(getattr(_caching, "CacheImpl", None), "_locator_classes", None)
    if not isinstance(classes, list):  # pragma: no cover - a Numba without the hook
        return
    if any(issubclass(c, _GemmSourcesStamp) for c in classes):
        return
    ours = [type(f"Gemm{base.__name__}", (_GemmSourcesStamp, base), {})
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
