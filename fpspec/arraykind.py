"""What kind of array a verb was given: a numpy array or a torch tensor (and on which device).

The doors use these to choose the twin from their inputs once (:func:`fpspec.twins.choose_twin`)
and to refuse mixed kinds and mixed devices by name; nothing here imports torch (a torch tensor is
recognised by its type's module), so ``import fpspec`` stays free of it.
"""

from __future__ import annotations

from typing import Any

from .errors import FpspecError

__all__ = ["is_torch", "torch_device", "same_device", "describe_array", "to_numpy"]


def is_torch(a: object) -> bool:
    """Whether ``a`` is a torch tensor (recognised without importing torch)."""
    t = type(a)
    return t.__module__.startswith("torch") and hasattr(a, "device") and hasattr(a, "dtype")


def torch_device(a: Any) -> str:
    """The device of a torch tensor, as torch writes it (``cpu``, ``cuda:0``)."""
    return str(a.device)


def same_device(what: str, *arrays: object) -> str:
    """The one device of the torch tensors among ``arrays`` (None entries skipped); FpspecError when
    they sit on different devices or when numpy arrays are mixed with torch tensors."""
    given = [a for a in arrays if a is not None]
    kinds = {is_torch(a) for a in given}
    if len(kinds) > 1:
        raise FpspecError(f"{what}: torch tensors and numpy arrays are mixed; give every array as a torch "
                          "tensor on one device (torch.from_numpy / tensor.to(device)) or every one as numpy")
    devices = sorted({torch_device(a) for a in given if is_torch(a)})
    if len(devices) > 1:
        raise FpspecError(f"{what}: tensors on different devices ({', '.join(devices)}); fpspec never moves "
                          "data between devices: move them to one device first")
    return devices[0] if devices else "numpy"


def describe_array(a: object) -> str:
    """A few words on what was given: dtype, shape and (torch) device."""
    if is_torch(a):
        return f"a torch {str(a.dtype).replace('torch.', '')} tensor of shape {tuple(a.shape)} on {a.device}"
    shape = getattr(a, "shape", None)
    dtype = getattr(a, "dtype", None)
    if shape is not None and dtype is not None:
        return f"a {dtype} array of shape {tuple(shape)}"
    return type(a).__name__


def to_numpy(a: Any) -> Any:
    """A torch tensor as a numpy array (its host copy: for writing files and for tests), anything else
    as given.  Never called on a compute path."""
    if is_torch(a):
        return a.detach().cpu().numpy()
    return a
