"""The columnwise view on torch tensors: the torch twin of :mod:`fpspec.fast.transpose`
(FPS-BLK-1, step 0: the view is X^T when ``columnwise``).  A transpose moves values and rounds
nothing."""

from __future__ import annotations

import torch

__all__ = ["transpose_torch"]


def transpose_torch(x: torch.Tensor) -> torch.Tensor:
    """X^T as a contiguous tensor on X's device."""
    return x.t().contiguous()
