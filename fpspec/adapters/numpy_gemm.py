"""numpy float32 matmul of decoded operands as a probe target (FPS-PRB-16).

Every product of two e4m3 / e5m2 / bf16 / fp16 values is exact in FP32, so what
the probe sees is BLAS's summation order and FP32 rounding (often several
interleaved partial sums, one per SIMD lane, combined at the end).
"""

from __future__ import annotations

import numpy as np

from ..probe.operands import value_table

__all__ = ["NumpyTarget"]


class NumpyTarget:
    def __init__(self, fmt: str):
        self.operand_format = fmt
        self.name = "numpy"
        self._table = value_table(fmt).astype(np.float32)

    def matmul(self, a: np.ndarray, bt: np.ndarray) -> np.ndarray:
        av = self._table[np.asarray(a).astype(np.intp)]
        bv = self._table[np.asarray(bt).astype(np.intp)]
        return np.ascontiguousarray(av @ bv.T, dtype=np.float32)

    def info(self) -> dict:
        cfg = {}
        try:
            import numpy.__config__ as npc  # BLAS name, when numpy records it
            cfg = {k: v.get("name") for k, v in npc.CONFIG.get("Build Dependencies", {}).items()
                   if isinstance(v, dict)}
        except Exception:  # pragma: no cover - informational only
            pass
        return {"target": "numpy", "numpy": np.__version__, "blas": cfg}
