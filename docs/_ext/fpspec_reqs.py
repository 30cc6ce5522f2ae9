"""Where requirement ids are defined and who cites them: one scanner for the docs and the tests.

``tests/test_requirements.py`` (FPS-DOC-1, FPS-DOC-2) and the generated requirement
index of the documentation (``docs/_ext/fpspec_spec.py``, FPS-DOC-7) both read the
repository through this module, so the index shows exactly what the tests check.

Definitions are the ``.. requirement:: FPS-AREA-N`` lines of ``docs/**/*.rst``.
Citations are read from the text of ``tests/**/*.py`` (docstrings, names such as
``test_fps_<area>_<n>_...``, comments), from ``vectors/**/*.json`` (MANIFEST.json
and friends) and from the ``__meta__`` / ``meta`` entry of ``vectors/**/*.npz``.
A citation ``FPS-AREA-N..M`` cites N to M; ``FPS-AREA-*`` cites nothing.

Nothing here imports Sphinx or the fpspec package: it reads files only (and NumPy
for the metadata of ``.npz`` files, never with pickles).
"""

from __future__ import annotations

import ast
import json
import re
import zipfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: a definition line; the id itself is validated separately so a malformed one is reported
DEFINITION = re.compile(r"^[ \t]*\.\.[ \t]+requirement::[ \t]*(\S+)[ \t]*$", re.M)
WELL_FORMED = re.compile(r"^FPS-[A-Z]+-\d+$")
#: a citation: FPS-AREA-N, optionally a range ..M; test names use underscores (fps_area_n)
CITATION = re.compile(r"(?<![A-Za-z0-9])FPS[-_]([A-Za-z]+)[-_](\d+)(?:\.\.(\d+))?(?![0-9A-Za-z])", re.I)
SKIP_DIRS = {"_build", "_generated", "__pycache__", ".hypothesis", ".pytest_cache"}
#: the committed conformance pack whose sets the index lists
PACK = Path("vectors") / "v1"


def files(base: Path, pattern: str) -> list[Path]:
    """Files under base matching pattern, sorted, build and cache folders skipped."""
    if not base.is_dir():
        return []
    return sorted(p for p in base.rglob(pattern) if not SKIP_DIRS.intersection(p.relative_to(base).parts))


def id_key(rid: str) -> tuple[str, int]:
    """Sort key: area, then number (FPS-BLK-2 before FPS-BLK-10)."""
    area, _, n = rid[4:].rpartition("-")
    return area, int(n) if n.isdigit() else -1


def definitions(root: Path = ROOT) -> dict[str, list[str]]:
    """id -> the files (relative to root) that define it (more than one is an error)."""
    out: dict[str, list[str]] = defaultdict(list)
    for path in files(root / "docs", "*.rst"):
        for m in DEFINITION.finditer(path.read_text(encoding="utf-8")):
            out[m.group(1)].append(str(path.relative_to(root)))
    return dict(out)


def cited_ids(text: str) -> set[str]:
    """Every requirement id a text cites, ranges expanded, areas upper-cased."""
    ids = set()
    for m in CITATION.finditer(text):
        area, first, last = m.group(1).upper(), int(m.group(2)), m.group(3)
        for n in range(first, (int(last) if last else first) + 1):
            ids.add(f"FPS-{area}-{n}")
    return ids


def npz_meta_text(path: Path) -> str:
    """The text of the metadata entries of an .npz (no pickles are loaded)."""
    import numpy as np

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
        raise ValueError(f"{path}: cannot read vector metadata: {exc}") from None
    return "\n".join(texts)


def citations_by_tests_and_vectors(root: Path = ROOT) -> dict[str, set[str]]:
    """id -> files citing it, from tests and vector metadata (what FPS-DOC-2 counts)."""
    out: dict[str, set[str]] = defaultdict(set)
    sources: list[tuple[Path, str]] = []
    for path in files(root / "tests", "*.py"):
        sources.append((path, path.read_text(encoding="utf-8")))
    for path in files(root / "vectors", "*.json"):
        sources.append((path, path.read_text(encoding="utf-8")))
    for path in files(root / "vectors", "*.npz"):
        sources.append((path, npz_meta_text(path)))
    for path, text in sources:
        for rid in cited_ids(text):
            out[rid].add(str(path.relative_to(root)))
    return out


def citations_in_code_and_tests(root: Path = ROOT) -> dict[str, set[str]]:
    """id -> files citing it, from the package (docstrings, comments) and the tests."""
    out: dict[str, set[str]] = defaultdict(set)
    for base in (root / "fpspec", root / "tests"):
        for path in files(base, "*.py"):
            for rid in cited_ids(path.read_text(encoding="utf-8")):
                out[rid].add(str(path.relative_to(root)))
    return out


def citing_tests(root: Path = ROOT) -> dict[str, dict[str, list[str]]]:
    """id -> {test file (relative): [names of the test functions that cite it]}.

    A test function cites an id when its name, docstring or body does; a file whose
    module text outside its test functions cites an id is listed with no names.
    """
    out: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for path in files(root / "tests", "*.py"):
        text = path.read_text(encoding="utf-8")
        rel = str(path.relative_to(root))
        try:
            tree = ast.parse(text)
        except SyntaxError:
            tree = None
        inside: dict[str, list[str]] = defaultdict(list)
        spans = []
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                seg = ast.get_source_segment(text, node) or node.name
                spans.append(seg)
                for rid in cited_ids(seg):
                    inside[rid].append(node.name)
        rest = text
        for seg in spans:
            rest = rest.replace(seg, "")
        for rid in cited_ids(rest) | set(inside):
            out[rid][rel] = sorted(set(inside.get(rid, [])))
    return out


def vector_coverage(root: Path = ROOT, pack: Path = PACK) -> dict[str, list[str]]:
    """id -> names of the sets of the committed pack whose metadata lists it (``requirements``)."""
    out: dict[str, list[str]] = defaultdict(list)
    manifest = root / pack / "MANIFEST.json"
    if not manifest.is_file():
        return {}
    for entry in json.loads(manifest.read_text(encoding="utf-8")).get("sets", []):
        for rid in cited_ids(" ".join(entry.get("requirements", []))):
            out[rid].append(entry["name"])
    return {k: sorted(v) for k, v in out.items()}
