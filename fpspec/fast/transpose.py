"""A cache-blocked transpose for the fast paths (columnwise views).

Moving values is exact whatever the order, so this is a speed matter only: NumPy's
``np.ascontiguousarray(x.T)`` walks one of the two arrays a whole row at a time and
took 149 ms for a 4096 x 4096 binary32 array on the 2-core development machine,
against 16 ms for this copy in 64 x 64 tiles on its two threads (docs/gemm.rst,
"Quantize with the scan's block amaxes").
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["transpose_fast", "TRANSPOSE_TILE"]

#: Tile edge: a 64 x 64 tile of binary64 values (32 KiB) and its image fit in L2 together.
TRANSPOSE_TILE = 64


@numba.njit(cache=True, parallel=True)
def _transpose_tiles(x, out, tile):
    """out[j, i] = x[i, j], tile by tile (tiles in parallel, disjoint outputs)."""
    m, k = x.shape
    tiles_k = (k + tile - 1) // tile
    for t in numba.prange(((m + tile - 1) // tile) * tiles_k):
        i0 = (t // tiles_k) * tile
        j0 = (t % tiles_k) * tile
        for j in range(j0, min(k, j0 + tile)):
            for i in range(i0, min(m, i0 + tile)):
                out[j, i] = x[i, j]


def transpose_fast(x: np.ndarray) -> np.ndarray:
    """``np.ascontiguousarray(x.T)`` of a 2-D binary32 or binary64 array, the same values;
    small arrays and other dtypes go through NumPy."""
    if x.ndim != 2 or x.dtype not in (np.float32, np.float64) or x.size < TRANSPOSE_TILE * TRANSPOSE_TILE:
        return np.ascontiguousarray(x.T)
    src = np.ascontiguousarray(x)
    out = np.empty((x.shape[1], x.shape[0]), dtype=x.dtype)
    _transpose_tiles(src, out, TRANSPOSE_TILE)
    return out
