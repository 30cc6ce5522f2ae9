"""In-process harness: iterate the sets, feed inputs, submit outputs, get the checker's report (FPS-CHK-8).

For Python and torch teams::

    from fpspec.vectors.harness import Harness
    h = Harness("vectors/v1", declaration="my_impl.yaml", select="encode-*")
    for s in h.sets():
        x = s.input_values("x")                     # float view of fp16/bf16/fp32 bits
        s.submit({name: my_encode(x, spec) for name, spec in s.outputs.items()})
    report = h.report()                             # same CheckReport as ``fpspec check``
    assert report.exit_code == 0, h.text()

Outputs are NumPy arrays of bit patterns, or NumPy float arrays (float16, float32,
ml_dtypes' bfloat16 and float8 types) whose element size is the output's: those are taken
as their bit patterns (a view, no value conversion), as torch tensors are.  Other array
types come in through a converter to bit patterns: ``Harness(..., to_bits=f)``, or one an
adapter registers with :func:`register_converter` when imported
(:mod:`fpspec.adapters.torch_vectors` registers torch tensors).  The harness itself
imports no adapter.  ``submit`` takes a set by name or as the :class:`HarnessSet` (or
:class:`~fpspec.vectors.pack.VectorSet`) that :meth:`Harness.sets` gave.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from ..errors import FpspecError
from ..io import native_byte_order
from .checker import CheckReport, check, format_text, select_names
from .declare import Declaration, load_declaration
from .ops import float_view
from .pack import Pack, VectorSet
from .results import write_results

__all__ = ["Harness", "HarnessSet", "register_converter", "numpy_to_bits"]

#: (accepts, to_bits) pairs registered by adapters, tried in order on a submitted output
#: that is not a NumPy array.
_CONVERTERS: list[tuple[Callable[[Any], bool], Callable[[Any], np.ndarray]]] = []


def register_converter(accepts: Callable[[Any], bool], to_bits: Callable[[Any], np.ndarray]) -> None:
    """Let :meth:`Harness.submit` take objects for which ``accepts(obj)`` is true, as ``to_bits(obj)``."""
    if (accepts, to_bits) not in _CONVERTERS:
        _CONVERTERS.append((accepts, to_bits))


def _is_float(dtype: np.dtype) -> bool:
    """NumPy's float types and ml_dtypes' (bfloat16, float8_*, float4_*: registered as kind 'V')."""
    return dtype.kind == "f" or (dtype.kind == "V" and dtype.names is None and dtype.itemsize in (1, 2))


def numpy_to_bits(a: np.ndarray, want: np.dtype | None, where: str) -> np.ndarray:
    """A submitted NumPy output as bit patterns: a float array whose element size is the output's
    is viewed as its bits (no value conversion), as :func:`fpspec.adapters.torch_vectors.torch_to_bits`
    does for tensors; an unsigned array is returned as it is (the checker compares dtype and shape)."""
    a = native_byte_order(a)  # a big-endian '>f4' or '>u4' is valid data: taken by value
    if want is None or not _is_float(a.dtype) or a.dtype == want:
        return a
    if a.dtype.itemsize != want.itemsize:
        raise FpspecError(f"{where}: a {a.dtype} array cannot hold the output's {want} bit patterns "
                          f"({a.dtype.itemsize} bytes per element, the output has {want.itemsize}); "
                          f"submit {want} bit patterns or floats of {want.itemsize} bytes")
    return np.ascontiguousarray(a).view(want)


class HarnessSet:
    """One set as the implementation sees it: meta, inputs, and the outputs it must produce."""

    def __init__(self, harness: "Harness", vs: VectorSet):
        self._h = harness
        self.vs = vs
        self.name = vs.name
        self.meta = vs.meta
        self.inputs = vs.inputs
        #: output name -> its meta entry, only those the declaration supports
        self.outputs: dict[str, dict[str, Any]] = {
            k: v for k, v in vs.meta["outputs"].items()
            if not harness.declaration.declared or harness.declaration.supports(vs.meta, k)[0]}

    @property
    def cases(self) -> int:
        return self.vs.cases

    def input_values(self, name: str) -> np.ndarray:
        """An fp16 / bf16 / fp32 input as floats (a view of its bits)."""
        return float_view(self.inputs[name], self.meta["inputs"][name]["format"])

    def submit(self, outputs: Mapping[str, Any]) -> None:
        """Hand in this set's outputs (NumPy arrays of bit patterns, or tensors through an adapter)."""
        self._h.submit(self, outputs)


class Harness:
    def __init__(self, pack: str | Path | Pack, declaration: Declaration | str | Path | None = None,
                 select: str | None = None, to_bits: Callable[[Any], np.ndarray] | None = None):
        self.pack = pack if isinstance(pack, Pack) else Pack(pack)
        self.declaration = declaration if isinstance(declaration, Declaration) else load_declaration(declaration)
        self.select = select
        #: turns a submitted output that is not a NumPy array into its bit patterns
        self.to_bits = to_bits
        self.results: dict[str, dict[str, np.ndarray]] = {}

    def names(self) -> list[str]:
        return select_names(self.pack.names(), self.select)

    def sets(self) -> Iterator[HarnessSet]:
        """Every selected set with at least one supported output."""
        for n in self.names():
            s = HarnessSet(self, self.pack.load(n))
            if s.outputs:
                yield s

    def submit(self, vector_set: "str | HarnessSet | VectorSet", outputs: Mapping[str, Any]) -> None:
        """Hand in one set's outputs; the set by name or as the object :meth:`sets` gave."""
        if isinstance(vector_set, (HarnessSet, VectorSet)):
            set_name, meta = vector_set.name, vector_set.meta
        else:
            set_name, meta = vector_set, None
        if not isinstance(set_name, str):
            kind = f"{type(vector_set).__module__}.{type(vector_set).__qualname__}"
            raise FpspecError(f"submit takes a set name or a set of Harness.sets(), got a {kind}")
        if set_name not in self.pack.entries:
            raise FpspecError(f"no set named {set_name!r} in {self.pack.root}")
        conv = {}
        for k, v in outputs.items():
            k = k[4:] if k.startswith("out_") else k
            if isinstance(v, (np.ndarray, np.generic)) and _is_float(np.asarray(v).dtype) and meta is None:
                meta = self.pack.load(set_name).meta  # the output dtypes, read only when floats come in
            spec = (meta or {}).get("outputs", {}).get(k)
            conv[f"out_{k}"] = self._bits(set_name, k, v, None if spec is None else np.dtype(spec["dtype"]))
        self.results.setdefault(set_name, {}).update(conv)

    def _bits(self, set_name: str, name: str, v: Any, want: np.dtype | None) -> np.ndarray:
        if isinstance(v, (np.ndarray, np.generic)):
            return numpy_to_bits(np.asarray(v), want, f"{set_name}/{name}")
        if self.to_bits is not None:
            return np.asarray(self.to_bits(v))
        for accepts, to_bits in _CONVERTERS:
            if accepts(v):
                return np.asarray(to_bits(v))
        if isinstance(v, (list, tuple, int)):
            return np.asarray(v)
        kind = f"{type(v).__module__}.{type(v).__qualname__}"
        raise FpspecError(f"{set_name}/{name}: a {kind} is not a NumPy array of bit patterns; import its "
                          "adapter (fpspec.adapters.torch_vectors for torch tensors) or pass "
                          "Harness(..., to_bits=...)")

    def report(self, max_report: int = 20) -> CheckReport:
        return check(self.pack, self.results, select=self.select, declaration=self.declaration,
                     max_report=max_report)

    def text(self, max_report: int = 20, verbose: bool = False) -> str:
        """The checker's text report (``verbose``: with the full table of sets and outputs)."""
        return format_text(self.report(max_report), max_report, verbose=verbose)

    def save(self, out: str | Path) -> None:
        """Write the submitted results as a results folder for ``fpspec check``."""
        for name, outs in self.results.items():
            vs = self.pack.load(name)
            write_results(out, self.pack, vs, {k[4:]: v for k, v in outs.items()})
