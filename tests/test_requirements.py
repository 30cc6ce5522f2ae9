"""Requirement ids: defined once, well formed, every one cited, every citation defined.

FPS-DOC-1 (ids are unique and well formed) and FPS-DOC-2 (every id is cited by a
test or by vector metadata; every id cited by a test or a package docstring exists).

Definitions are the ``.. requirement:: FPS-AREA-N`` lines of ``docs/**/*.rst``.
Citations are read from the text of ``tests/**/*.py`` (docstrings, names such as
``test_fps_<area>_<n>_...``, comments), from ``vectors/**/*.json`` (MANIFEST.json
and friends) and from the ``__meta__`` / ``meta`` entry of ``vectors/**/*.npz``.
A citation ``FPS-AREA-N..M`` cites N to M; ``FPS-AREA-*`` cites nothing.
(This file spells no other id literally, so that it cites nothing by accident.)
"""

from __future__ import annotations

import json
import re
import zipfile
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: a definition line; the id itself is validated separately so a malformed one is reported
DEFINITION = re.compile(r"^[ \t]*\.\.[ \t]+requirement::[ \t]*(\S+)[ \t]*$", re.M)
WELL_FORMED = re.compile(r"^FPS-[A-Z]+-\d+$")
#: a citation: FPS-AREA-N, optionally a range ..M; test names use underscores (fps_area_n)
CITATION = re.compile(r"(?<![A-Za-z0-9])FPS[-_]([A-Za-z]+)[-_](\d+)(?:\.\.(\d+))?(?![0-9A-Za-z])", re.I)
SKIP_DIRS = {"_build", "_generated", "__pycache__", ".hypothesis", ".pytest_cache"}


def _files(base: Path, pattern: str) -> list[Path]:
    if not base.is_dir():
        return []
    return sorted(p for p in base.rglob(pattern) if not SKIP_DIRS.intersection(p.relative_to(base).parts))


def definitions() -> dict[str, list[str]]:
    """id -> the files (relative) that define it (more than one file or line is an error)."""
    out: dict[str, list[str]] = defaultdict(list)
    for path in _files(DOCS, "*.rst"):
        for m in DEFINITION.finditer(path.read_text(encoding="utf-8")):
            out[m.group(1)].append(str(path.relative_to(ROOT)))
    return dict(out)


def cited_ids(text: str) -> set[str]:
    """Every requirement id a text cites, ranges expanded, areas upper-cased."""
    ids = set()
    for m in CITATION.finditer(text):
        area, first, last = m.group(1).upper(), int(m.group(2)), m.group(3)
        for n in range(first, (int(last) if last else first) + 1):
            ids.add(f"FPS-{area}-{n}")
    return ids


def _npz_meta_text(path: Path) -> str:
    """The text of the metadata entries of an .npz (no pickles are loaded)."""
    texts = []
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n in ("__meta__.npy", "meta.npy")]
        if not names:
            return ""
        with np.load(path, allow_pickle=False) as z:
            for name in names:
                arr = z[name[:-4]]
                if arr.dtype.kind in "US":
                    texts.append(" ".join(str(v) for v in np.ravel(arr)))
                elif arr.dtype == np.uint8:
                    texts.append(arr.tobytes().decode("utf-8", "replace"))
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise AssertionError(f"{path}: cannot read vector metadata: {exc}") from None
    return "\n".join(texts)


def citations_by_tests_and_vectors() -> dict[str, set[str]]:
    """id -> files citing it, from tests and vector metadata."""
    out: dict[str, set[str]] = defaultdict(set)
    sources: list[tuple[Path, str]] = []
    for path in _files(ROOT / "tests", "*.py"):
        sources.append((path, path.read_text(encoding="utf-8")))
    for path in _files(ROOT / "vectors", "*.json"):
        sources.append((path, path.read_text(encoding="utf-8")))
    for path in _files(ROOT / "vectors", "*.npz"):
        sources.append((path, _npz_meta_text(path)))
    for path, text in sources:
        for rid in cited_ids(text):
            out[rid].add(str(path.relative_to(ROOT)))
    return out


def citations_in_code_and_tests() -> dict[str, set[str]]:
    """id -> files citing it, from the package (docstrings, comments) and the tests."""
    out: dict[str, set[str]] = defaultdict(set)
    for base in (ROOT / "fpspec", ROOT / "tests"):
        for path in _files(base, "*.py"):
            for rid in cited_ids(path.read_text(encoding="utf-8")):
                out[rid].add(str(path.relative_to(ROOT)))
    return out


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


def _id_key(rid: str) -> tuple[str, int]:
    area, _, n = rid[4:].rpartition("-")
    return area, int(n) if n.isdigit() else -1


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
