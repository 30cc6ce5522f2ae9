"""Turn each vector set into a pytest test (FPS-CHK-8).

In a test module of the implementation under test::

    from fpspec.vectors.pytest_helper import vector_sets, assert_set

    @vector_sets("vectors/v1", declaration="my_impl.yaml", select="encode-*")
    def test_vectors(vector_set):
        outputs = {name: my_impl(vector_set, name) for name in vector_set.outputs}
        assert_set(vector_set, outputs)

Each set becomes one test with the set name as its id; a failure message is
the checker's report for that set (first mismatches decoded field by field).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..errors import FpspecError
from .checker import EXIT_PASS, check, empty_selections, format_text
from .declare import Declaration
from .harness import Harness, HarnessSet

__all__ = ["vector_sets", "assert_set"]


def vector_sets(pack: str | Path, declaration: Declaration | str | Path | None = None,
                select: str | None = None, argname: str = "vector_set"):
    """A ``pytest.mark.parametrize`` over the sets of a pack the declaration supports; none is an
    :class:`~fpspec.errors.FpspecError` naming the glob that matched nothing (FPS-CHK-8, FPS-CNF-3)."""
    import pytest

    h = Harness(pack, declaration, select)
    sets = list(h.sets())
    if not sets:  # a test over no set checks nothing: refused at collection, not skipped (FPS-CNF-3)
        why = "; ".join(empty_selections(h.pack, select, h.declaration))
        raise FpspecError(f"vector_sets: no set of {h.pack.root} has an output the declaration "
                          f"{h.declaration.name} supports" + (f" ({why})" if why else ""))
    return pytest.mark.parametrize(argname, sets, ids=[s.name for s in sets])


def assert_set(vector_set: HarnessSet, outputs: Mapping[str, Any], max_report: int = 10) -> None:
    """Check one set's outputs; raise AssertionError with the decoded report on any problem."""
    h = Harness(vector_set._h.pack, vector_set._h.declaration, select=vector_set.name,
                to_bits=vector_set._h.to_bits)
    h.submit(vector_set, outputs)
    report = check(h.pack, h.results, select=vector_set.name, declaration=h.declaration,
                   max_report=max_report)
    if report.exit_code != EXIT_PASS:
        raise AssertionError("\n" + format_text(report, max_report))
