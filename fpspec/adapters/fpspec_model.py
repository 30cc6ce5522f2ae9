"""fpspec's own GEMM models as a probe target (FPS-PRB-16): the self-test's GEMM under test."""

from __future__ import annotations

import numpy as np

from ..matmul import gemm, rowdot
from ..models import GemmModel
from ..named_models import get_model

__all__ = ["ModelTarget"]


class ModelTarget:
    """A :class:`~fpspec.models.GemmModel` (a preset name or a model) on code operands,
    evaluated by :func:`fpspec.matmul.gemm` (the Numba fast path, or the exact reference
    where the fast path leaves a model to it).  ``overrides`` change model parameters
    (e.g. ``accumulate_bits=13, split_k=256``).
    """

    def __init__(self, model: str | GemmModel, fmt: str, **overrides):
        self.preset = model if isinstance(model, str) else None
        self.model = get_model(model, **overrides)
        self.operand_format = fmt
        self.name = f"fpspec:{self.preset or 'model'}"

    def matmul(self, a: np.ndarray, bt: np.ndarray) -> np.ndarray:
        return gemm(a, bt, self.model, fmt=self.operand_format)

    def rowdot(self, a: np.ndarray, bt: np.ndarray) -> np.ndarray:
        """The probe's diagonal y[i] = A[i] . BT[i] (:func:`fpspec.matmul.rowdot`)."""
        return rowdot(a, bt, self.model, fmt=self.operand_format)

    def info(self) -> dict:
        return {"target": self.name, "model": self.model.to_dict(), "evaluator": "fpspec.matmul"}
