"""The one place that decides how many threads the fast paths use.

Two kinds of parallel code share one setting:

* nogil Numba kernels run over chunks of an array (or rows of a GEMM) on a
  :class:`~concurrent.futures.ThreadPoolExecutor` (:func:`run_chunks`,
  :func:`run_rows`);
* ``parallel=True`` Numba kernels (``prange``) use Numba's own thread pool, whose
  size :func:`set_threads` sets with :func:`numba.set_num_threads`.

:func:`set_threads` (``fpspec bench --threads``) drives both; :func:`threads` reads it.
Thread counts never change a result: every kernel writes disjoint outputs and
reports the first refusal in element order.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

__all__ = ["threads", "set_threads", "run_chunks", "run_rows", "PARALLEL_MIN_ELEMENTS",
           "PARALLEL_MIN_WORK"]

#: Arrays shorter than this are processed on the calling thread.
PARALLEL_MIN_ELEMENTS = 1 << 18
#: Below this many products (M N K) a GEMM runs on the calling thread.
PARALLEL_MIN_WORK = 1 << 20

_THREADS: int | None = None  # None: every CPU this process may run on
_POOL: ThreadPoolExecutor | None = None
_POOL_SIZE = 0


def _available_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def threads() -> int:
    """Threads the fast paths use: the :func:`set_threads` value, else every CPU this
    process may run on."""
    return _THREADS if _THREADS is not None else _available_cpus()


def set_threads(n: int | None) -> int:
    """Use ``n`` threads in every fast path (None: every available CPU); returns the count
    now in force.  Sets the worker pool and Numba's ``prange`` threads together."""
    global _THREADS
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        from ..errors import FpspecError

        raise FpspecError(f"threads must be a positive integer or None, got {n!r}")
    _THREADS = n
    count = threads()
    import numba

    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    return count


def _forget_pool_after_fork() -> None:
    """A forked child has none of the parent's worker threads: start a fresh pool there."""
    global _POOL, _POOL_SIZE
    _POOL, _POOL_SIZE = None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _pool(n: int) -> ThreadPoolExecutor:
    global _POOL, _POOL_SIZE
    if _POOL is None or _POOL_SIZE != n:
        if _POOL is not None:
            _POOL.shutdown(wait=False)
        _POOL, _POOL_SIZE = ThreadPoolExecutor(max_workers=n, thread_name_prefix="fpspec"), n
    return _POOL


def run_chunks(kernel, n: int, args: Callable[[int, int], tuple], ok: int = 0) -> tuple[int, int]:
    """Run ``kernel(*args(lo, hi))`` over contiguous chunks covering 0..n (the kernels
    release the GIL); each returns ``(kind, index)`` of its first refusal, ``kind == ok``
    for none.  Returns the first refusal in element order, or ``(ok, -1)``."""
    nthreads = threads()
    if n < PARALLEL_MIN_ELEMENTS or nthreads == 1:
        return kernel(*args(0, n))
    nchunks = nthreads * 4  # a few chunks per thread evens out uneven CPU availability
    bounds = [n * c // nchunks for c in range(nchunks + 1)]
    results = list(_pool(nthreads).map(lambda c: kernel(*args(bounds[c], bounds[c + 1])), range(nchunks)))
    for kind, idx in results:  # chunks are in element order
        if kind != ok:
            return kind, idx
    return ok, -1


def run_rows(kernel, m: int, args: tuple, work: int) -> None:
    """Run the nogil row-range kernel ``kernel(*args, r0, r1)`` over rows 0..m-1 in
    interleaved chunks; ``work`` (the products it computes) below
    :data:`PARALLEL_MIN_WORK` runs on the calling thread (no pool start-up)."""
    nt = min(threads(), max(m, 1))
    if nt <= 1 or m < 2 or work < PARALLEL_MIN_WORK:
        kernel(*args, 0, m)
        return
    chunk = max(1, min(16, m // (4 * nt) or 1))
    ranges = [(r, min(r + chunk, m)) for r in range(0, m, chunk)]
    list(_pool(nt).map(lambda rr: kernel(*args, rr[0], rr[1]), ranges))
