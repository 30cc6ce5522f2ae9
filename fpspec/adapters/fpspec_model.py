"""fpspec's own GEMM models as a probe target (FPS-PRB-16): the self-test's GEMM under test."""

from __future__ import annotations

import numpy as np

from ..exact.accumulate import dot_exact, operand_from_codes, product_terms, to_float32
from ..models import GemmModel, get_model
from ..probe.simulate import simulate_gemm, simulate_rowdot, supports

__all__ = ["ModelTarget"]


class ModelTarget:
    """A :class:`~fpspec.models.GemmModel` (a preset name or a model) on code operands.

    Uses the probe's vectorised evaluator where it is exact for the model, else
    :func:`fpspec.matmul.gemm` (its Numba path, or the exact reference).  ``overrides``
    change model parameters (e.g. ``accumulate_bits=13, split_k=256``).
    """

    def __init__(self, model: str | GemmModel, fmt: str, **overrides):
        self.preset = model if isinstance(model, str) else None
        self.model = get_model(model, **overrides)
        self.operand_format = fmt
        self.name = f"fpspec:{self.preset or 'model'}"
        self.fast = supports(self.model) is None

    def matmul(self, a: np.ndarray, bt: np.ndarray) -> np.ndarray:
        if self.fast:
            return simulate_gemm(a, bt, self.operand_format, self.model)
        from ..matmul import gemm  # fpspec's own GEMM (Numba fast path where it applies, else exact)

        return gemm(a, bt, self.model, fmt=self.operand_format)

    def rowdot(self, a: np.ndarray, bt: np.ndarray) -> np.ndarray:
        if self.fast:
            return simulate_rowdot(a, bt, self.operand_format, self.model)
        # one exact dot product per row (fpspec.matmul's fast path has a per-call set-up
        # cost that dominates single rows)
        opa = operand_from_codes(a, self.operand_format, self.model)
        opb = operand_from_codes(bt, self.operand_format, self.model)
        return np.array([to_float32(dot_exact(product_terms(opa, i, opb, i, self.model), self.model))
                         for i in range(a.shape[0])], dtype=np.float32)

    def info(self) -> dict:
        return {"target": self.name, "model": self.model.to_dict(),
                "evaluator": "fpspec.probe.simulate" if self.fast else "fpspec.matmul"}
