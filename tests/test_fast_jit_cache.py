"""The disk cache of compiled kernels knows every module a kernel draws on (fpspec.fast.jit).

Numba checks a cached function against its own file only; fpspec's locators check a
function of a module group against every module of the group, so that an edit of a shared
helper (say ``rne_f32_magnitude`` in rounding.py, inlined into the block kernels of
blocks.py) recompiles the kernels that inline it.
"""

from __future__ import annotations

import hashlib
import inspect

import pytest
from numba.core import caching

from fpspec.fast import blocks, jit, rounding, steps, transpose


def _locator(dispatcher):
    py_func = dispatcher.py_func
    for cls in caching.CacheImpl._locator_classes:
        loc = cls.from_function(py_func, inspect.getfile(py_func))
        if loc is not None:
            return loc
    raise AssertionError("no cache locator")


def _digests(paths):
    out = []
    for path in paths:
        with open(path, "rb") as f:
            out.append(hashlib.sha256(f.read()).digest())
    return tuple(out)


@pytest.mark.parametrize("kernel, group", [
    (blocks._exact_profile_blocks, jit.BLOCK_SOURCES),
    (rounding._encode_range_rne_f32, jit.BLOCK_SOURCES),
    (steps.accumulate_row_window, jit.GEMM_SOURCES),
])
def test_a_kernel_is_stamped_with_its_whole_group(kernel, group):
    loc = _locator(kernel)
    assert isinstance(loc, jit._GroupSourcesStamp)
    assert loc.get_source_stamp() == _digests(group)


def test_the_groups_name_the_modules_that_share_helpers():
    names = lambda group: {p.rsplit("/", 1)[-1] for p in group}  # noqa: E731
    assert names(jit.BLOCK_SOURCES) == {"codes.py", "bits.py", "rounding.py", "log2.py", "scan.py", "dequant.py",
                                        "rht.py", "blocks.py"}
    assert {"fp32.py", "chain.py", "steps.py", "kernels.py", "partials.py"} <= names(jit.GEMM_SOURCES)
    assert not set(jit.BLOCK_SOURCES) & set(jit.GEMM_SOURCES)


def test_a_module_outside_every_group_keeps_numbas_stamp():
    loc = _locator(transpose._transpose_tiles)
    assert not isinstance(loc, jit._GroupSourcesStamp)
    assert loc.get_source_stamp() == caching._SourceFileBackedLocatorMixin.get_source_stamp(loc)  # Numba's own


def test_the_stamp_changes_with_any_file_of_the_group(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("y = 2\n")
    group = (str(a), str(b))
    before = jit._sources_stamp(group)
    b.write_text("y = 3  # edited\n")
    after = jit._sources_stamp(group)
    assert before[0] == after[0] and before[1] != after[1]
