"""Requirement ids: defined once, well formed, every one cited, every citation defined.

FPS-DOC-1 (ids are unique and well formed) and FPS-DOC-2 (every id is cited by a
test or by vector metadata; every id cited by a test or a package docstring exists).

The scanner lives in ``docs/_ext/fpspec_reqs.py`` (on the test path: pyproject's pytest
``pythonpath``) so that the generated requirement
index of the documentation (FPS-DOC-7) shows exactly what these tests check; its
rules (definitions, citations, ranges, npz metadata) are pinned by the last tests
below.  (This file spells no other id literally, so that it cites nothing by accident.)
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from fpspec_reqs import (
    DEFINITION,
    WELL_FORMED,
    citations_by_tests_and_vectors,
    citations_in_code_and_tests,
    cited_ids,
    citing_tests,
    definitions,
    id_key,
    npz_meta_text,
    vector_coverage,
)

ROOT = Path(__file__).resolve().parents[1]

_id_key = id_key
_npz_meta_text = npz_meta_text


# ----------------------------------------------------------------------- tests


def test_fps_doc_1_ids_are_well_formed_and_defined_once():
    """FPS-DOC-1: every defined id is FPS-AREA-N and is defined by exactly one directive."""
    defs = definitions()
    assert defs, "no requirement is defined under docs/: the collector is broken"
    malformed = sorted(rid for rid in defs if not WELL_FORMED.match(rid))
    twice = {rid: files for rid, files in defs.items() if len(files) > 1}
    assert not malformed, f"malformed requirement ids: {malformed}"
    assert not twice, "requirement ids defined more than once: " + "; ".join(
        f"{rid} in {', '.join(files)}" for rid, files in sorted(twice.items()))


def test_fps_doc_2_every_requirement_is_cited_by_a_test_or_vector_set():
    """FPS-DOC-2: an id that nothing cites is listed in the failure."""
    defs = definitions()
    cited = citations_by_tests_and_vectors()
    uncited = sorted((rid for rid in defs if rid not in cited), key=_id_key)
    assert not uncited, (
        f"{len(uncited)} requirement id(s) are cited by no test (tests/**/*.py) and no vector "
        f"metadata (vectors/**): " + ", ".join(f"{rid} ({defs[rid][0]})" for rid in uncited))


def test_fps_doc_2_every_cited_id_is_defined():
    """FPS-DOC-2: a typo in a cited id (tests, package docstrings) is caught."""
    defs = definitions()
    undefined = {rid: files for rid, files in citations_in_code_and_tests().items() if rid not in defs}
    assert not undefined, "cited but defined on no docs page: " + "; ".join(
        f"{rid} in {', '.join(sorted(files))}" for rid, files in sorted(undefined.items(), key=lambda kv: _id_key(kv[0])))


# ---------------------------------------------------- the collectors themselves


def test_citation_parser_expands_ranges_and_reads_test_names():
    """The citation grammar: ranges, underscores in names, no wildcards, no partial numbers."""
    p = "FPS"  # built up so that this file cites no id of its own by accident
    text = (f"{p}-RND-9..12 and {p}-FMT-* and test_{p.lower()}_blk_3_zero_scale "
            f"and X{p}-GEMM-1 and {p}-SCL-10x and {p}-VEC-2.")
    assert cited_ids(text) == {f"{p}-RND-{n}" for n in (9, 10, 11, 12)} | {f"{p}-BLK-3", f"{p}-VEC-2"}


def test_definition_parser_reads_directive_lines_only(tmp_path):
    """Only ``.. requirement::`` lines define ids, at any indentation; the text below does not."""
    p = "FPS"
    text = (f".. requirement:: {p}-ABC-1\n\n   cites {p}-ABC-2 in prose\n\n"
            f"   .. requirement:: {p}-ABC-3\n\n.. note:: {p}-ABC-4\n")
    assert [m.group(1) for m in DEFINITION.finditer(text)] == [f"{p}-ABC-1", f"{p}-ABC-3"]


def test_npz_metadata_is_read_without_pickles(tmp_path):
    """Vector sets cite ids in a JSON ``__meta__`` entry of an .npz (str or uint8 bytes)."""
    p = "FPS"
    meta = json.dumps({"requirements": [f"{p}-VEC-1", f"{p}-BLK-2..3"]})
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    np.savez(a, x=np.zeros(2), __meta__=np.array(meta))
    np.savez(b, meta=np.frombuffer(meta.encode(), dtype=np.uint8))
    for path in (a, b):
        assert cited_ids(_npz_meta_text(path)) == {f"{p}-VEC-1", f"{p}-BLK-2", f"{p}-BLK-3"}


def test_citing_tests_names_the_test_functions(tmp_path):
    """The index's "tests" column: each citing test function by name; a file whose module text
    cites an id is listed with no names; other functions and files are not."""
    p = "FPS"
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(
        f'"""Module docstring: {p}-ABC-1."""\n\n'
        f"def test_{p.lower()}_abc_2_by_name():\n    pass\n\n\n"
        f"def test_other():\n    \"\"\"{p}-ABC-3..4 in a docstring.\"\"\"\n\n\n"
        f"def helper():\n    return '{p}-ABC-9'\n")
    (tmp_path / "tests" / "test_b.py").write_text("def test_nothing():\n    pass\n")
    got = citing_tests(tmp_path)
    assert got[f"{p}-ABC-1"] == {"tests/test_a.py": []}
    assert got[f"{p}-ABC-2"] == {"tests/test_a.py": [f"test_{p.lower()}_abc_2_by_name"]}
    assert got[f"{p}-ABC-3"] == got[f"{p}-ABC-4"] == {"tests/test_a.py": ["test_other"]}
    assert got[f"{p}-ABC-9"] == {"tests/test_a.py": []}  # cited outside a test function
    assert set(got) == {f"{p}-ABC-{n}" for n in (1, 2, 3, 4, 9)}


def test_vector_coverage_reads_the_manifest(tmp_path):
    """The index's "vector sets" column: the sets whose manifest entry lists the id (ranges expanded)."""
    p = "FPS"
    pack = tmp_path / "vectors" / "v1"
    pack.mkdir(parents=True)
    (pack / "MANIFEST.json").write_text(json.dumps({"sets": [
        {"name": "b-set", "requirements": [f"{p}-VEC-1", f"{p}-BLK-2..3"]},
        {"name": "a-set", "requirements": [f"{p}-VEC-1"]}]}))
    got = vector_coverage(tmp_path)
    assert got == {f"{p}-VEC-1": ["a-set", "b-set"], f"{p}-BLK-2": ["b-set"], f"{p}-BLK-3": ["b-set"]}
    assert vector_coverage(tmp_path / "nowhere") == {}
