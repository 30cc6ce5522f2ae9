"""The documentation builds with warnings as errors, and what it renders is the code's (FPS-DOC-3, FPS-DOC-4).

One full HTML build (``python3 -m sphinx -W -b html docs OUT``, the documented
command) into a temporary directory per test session; the tests then read the
rendered pages as a reader would and compare them with the package.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import fpspec
from fpspec.cli import build_parser
from fpspec.disagreements import DISAGREEMENTS
from fpspec.formats import FORMATS, CodeKind

#: The whole module is in the slow lane (python3 -m pytest -m "not slow" leaves it out).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "docs" / "_ext"


def sphinx_build(src: Path, out: Path, builder: str = "html") -> subprocess.CompletedProcess:
    """``python3 -m sphinx -W`` from the repository root, as the README builds the docs.  docs/conf.py
    finds its extensions itself; a test's mini project (any other source folder) finds them through
    PYTHONPATH."""
    env = None if src == ROOT / "docs" else dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(EXT), os.environ.get("PYTHONPATH")])))
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-E", "-b", builder, str(src), str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html")
    proc = sphinx_build(ROOT / "docs", out)
    assert proc.returncode == 0, f"docs build failed (rc {proc.returncode}):\n{proc.stderr[-6000:]}"
    return out


def page_text(site: Path, name: str) -> str:
    return (site / f"{name}.html").read_text(encoding="utf-8")


def table_rows(page: str, table_class: str) -> list[list[str]]:
    """Body rows of every table with the class, as lists of cell texts (tags stripped)."""
    rows = []
    for table in re.findall(rf'<table class="[^"]*\b{table_class}\b[^"]*">(.*?)</table>', page, re.S):
        body = re.search(r"<tbody>(.*?)</tbody>", table, re.S)
        for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body.group(1) if body else "", re.S):
            cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
            rows.append([html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells])
    return rows


PAGES = ("index", "overview", "formats", "rounding", "disagreements", "api", "cli", "changelog",
         "conformance", "implementers", "requirements", "glossary", "appendix-codebooks", "annex-authors")


def test_build_succeeds_with_warnings_as_errors(site):
    """The documented command builds every page of the toctree."""
    for page in PAGES:
        assert (site / f"{page}.html").is_file(), page


def test_fps_doc_3_codebooks_render_every_code_exactly(site):
    """FPS-DOC-3: the rendered codebook of every format of at most 8 bits (on the codebook
    appendix) lists each code with the value the format descriptor decodes (compared here
    through exact fractions).  Signed formats have one row per magnitude: the + code and the
    - code."""
    page = page_text(site, "appendix-codebooks")
    rows = table_rows(page, "fpspec-codebook")
    small = [f for f in FORMATS.values() if f.bits <= 8]
    it = iter(rows)  # the full codebooks appear in FORMATS order, one table each, code 0 first
    seen = 0
    for f in small:
        if f.signed:
            for mag in range(f.sign_mask):
                code_p, code_n, bits, kind, value_p, value_n, exact = next(it)
                assert int(code_p, 16) == mag and int(code_n, 16) == mag | f.sign_mask, f.name
                assert bits.replace(" ", "") == format(mag, f"0{f.bits - 1}b"), (f.name, mag, bits)
                kind_p, _, kind_n = kind.partition(" / ")  # "zero / nan": FNUZ's 0x80 (FPS-FMT-8)
                _check_cell(f, mag, kind_p, value_p, exact)
                _check_cell(f, mag | f.sign_mask, kind_n or kind_p, value_n, None)
                seen += 2
        else:
            for code in range(f.num_codes):
                hexcode, bits, kind, value, exact = next(it)
                assert int(hexcode, 16) == code, (f.name, hexcode)
                assert bits.replace(" ", "") == format(code, f"0{f.bits}b"), (f.name, code, bits)
                _check_cell(f, code, kind, value, exact)
                seen += 1
    assert seen == sum(f.num_codes for f in small)


def _check_cell(f, code: int, kind: str, value: str, exact: str | None) -> None:
    assert kind == f.kind(code).value, (f.name, code)
    v = f.decode_exact(code)
    if f.kind(code) is CodeKind.NAN:
        assert value == "NaN"
    elif f.kind(code) is CodeKind.INF:
        assert value == ("-Inf" if v < 0 else "+Inf")
    elif value == "-0":
        assert f.signed and code == f.sign_mask
    elif value.startswith("~"):
        assert float(value[1:]) == pytest.approx(float(v), rel=1e-8)
    else:
        assert Fraction(value) == v, (f.name, code, value)
    if exact is not None and f.kind(code) not in (CodeKind.NAN, CodeKind.INF):
        assert _power_form_value(exact) == v, (f.name, code, exact)


def _power_form_value(text: str) -> Fraction:
    """Parse the ``s*2^e`` column."""
    m = re.fullmatch(r"(-?)(?:(\d+)\*)?(?:2\^(-?\d+))?(\d+)?", text)
    assert m, text
    sign, mult, exp, plain = m.groups()
    if plain is not None and mult is None and exp is None:
        v = Fraction(int(plain))
    else:
        v = Fraction(int(mult) if mult else 1) * Fraction(2) ** int(exp)
    return -v if sign else v


def test_fps_doc_3_ue5m3_landmarks_on_the_rendered_page(site):
    """FPS-DOC-3: the reader sees 0xF7 = 61440 and 0x01 = 2^-17 for ue5m3, 0xFE = 114688 for ue5m3fnu."""
    rows = table_rows(page_text(site, "appendix-codebooks"), "fpspec-codebook")
    assert ["0xF7", "11110 111", "normal", "61440", "15*2^12"] in rows
    assert ["0x7E", "0xFE", "1111 110", "normal", "448", "-448", "7*2^6"] in rows  # e4m3 max finite
    assert ["0x01", "00000 001", "subnormal", "0.00000762939453125", "2^-17"] in rows
    assert ["0xFE", "11111 110", "normal", "114688", "7*2^14"] in rows
    assert ["0xF8", "11111 000", "nan", "NaN", "NaN"] in rows


def test_fps_doc_3_formats_table_and_wide_format_summaries(site):
    """FPS-DOC-3: the formats table has one row per format; fp32's summary counts its codes."""
    page = page_text(site, "formats")
    names = [r[0] for r in table_rows(page, "fpspec-table") if r and r[0] in FORMATS]
    for name in FORMATS:
        assert name in names
    # fp32 (codebook appendix): 2 zeros, 2*(2^23-1) subnormals, 2*254*2^23 normals, 2 infinities,
    # 2*(2^23-1) NaNs
    kinds = {tuple(r) for r in table_rows(page_text(site, "appendix-codebooks"), "fpspec-table") if len(r) == 2}
    for kind, n in (("zero", 2), ("subnormal", 2 * (2**23 - 1)), ("normal", 2 * 254 * 2**23),
                    ("inf", 2), ("nan", 2 * (2**23 - 1))):
        assert (kind, str(n)) in kinds, kind


def test_fps_doc_3_bit_layouts_and_plots_are_present(site):
    """FPS-DOC-3: bit-layout diagrams and the generated plots are on the pages, as PNG files;
    each diagram's caption is the <figcaption> of the figure that holds the diagram."""
    page = page_text(site, "formats")
    assert page.count('class="fpspec-bits"') == len(FORMATS)
    assert "ue5m3: 8 bits = exponent 5 + mantissa 3; bias 15" in page
    for f in FORMATS.values():
        fig = re.search(rf'<figure[^>]*id="bits-{f.name}"[^>]*>(.*?)</figure>', page, re.S)
        assert fig, f.name
        assert 'class="fpspec-bits"' in fig.group(1), f.name
        cap = re.search(r"<figcaption>(.*?)</figcaption>", fig.group(1), re.S)
        assert cap and f"{f.name}: {f.bits} bits = " in cap.group(1) and f"bias {f.bias}" in cap.group(1), f.name
    assert "fpspec-codebook" not in page, "the full codebooks belong on the appendix page"
    for name, where in (("codebooks", "formats"), ("sr-bias", "rounding")):
        assert f"_images/{name}.png" in page_text(site, where), name
        png = site / "_images" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fps_doc_3_cli_reference_lists_every_command_and_option(site):
    """FPS-DOC-3: cli.html has a section per command and subcommand of build_parser() with every
    option."""
    page = html.unescape(re.sub(r"<[^>]+>", "", page_text(site, "cli")))
    commands = list(_commands(build_parser(), "fpspec"))
    assert commands, "the parser has no commands"
    for title, p in commands:
        assert f"{title}¶" in page or f"{title}\n" in page, title
        for action in p._actions:
            for opt in action.option_strings:
                assert opt in page, (title, opt)


def _commands(parser, prefix):
    """(title, parser) of every command and subcommand, depth first."""
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _commands(sub, f"{prefix} {name}")


def test_fps_doc_5_disagreement_table_shows_every_behaviour(site):
    """FPS-DOC-5: every disagreement and every selector appears in the rendered table."""
    rows = table_rows(page_text(site, "disagreements"), "fpspec-disagreements")
    text = "\n".join(" | ".join(r) for r in rows)
    for d in DISAGREEMENTS:
        assert d.key in text, d.key
        for b in d.behaviours:
            for s in b.selects:
                assert str(s) in text, (d.key, str(s))


def test_fps_doc_6_changelog_has_the_current_spec_version(site):
    """FPS-DOC-6: the changelog has a 'Spec version N' section for SPEC_VERSION and for every
    vector-pack directory vectors/vN."""
    page = page_text(site, "changelog")
    versions = {fpspec.SPEC_VERSION}
    vec = ROOT / "vectors"
    if vec.is_dir():
        versions |= {p.name[1:] for p in vec.iterdir() if p.is_dir() and re.fullmatch(r"v\d+", p.name)}
    for v in sorted(versions):
        assert re.search(rf"<h2>Spec version {v}<a", page), f"no changelog entry for spec version {v}"


# ---------------------------------------------------------- examples run (FPS-DOC-4)


def _mini_project(tmp_path: Path, body: str, extra_pages: dict[str, str] | None = None) -> Path:
    src = tmp_path / "src"
    src.mkdir(parents=True)
    (src / "conf.py").write_text('extensions = ["sphinx.ext.doctest", "fpspec_examples", "fpspec_spec"]\n')
    pages = extra_pages or {}
    toc = "\n.. toctree::\n\n" + "".join(f"   {name}\n" for name in pages) if pages else ""
    (src / "index.rst").write_text("Examples\n========\n\n" + textwrap.dedent(body) + toc)
    for name, text in pages.items():
        (src / f"{name}.rst").write_text(f"{name}\n{'=' * len(name)}\n\n" + textwrap.dedent(text))
    return src


def test_fps_doc_4_a_wrong_example_fails_the_build(tmp_path):
    """FPS-DOC-4: an example whose printed output is wrong fails the -W build, naming the page."""
    src = _mini_project(tmp_path, """
        >>> x = 20
        >>> x + 1
        22
        """)
    proc = sphinx_build(src, tmp_path / "out")
    assert proc.returncode != 0
    assert "documentation example failed on page index" in proc.stderr
    assert "Expected:\n    22\nGot:\n    21" in proc.stderr


def test_fps_doc_4_examples_share_a_page_namespace_and_testcode_is_checked(tmp_path):
    """FPS-DOC-4: names carry from one block to the next; testcode/testoutput pairs are compared."""
    ok = """
        >>> x = 20

        Some prose.

        >>> x + 1
        21

        .. testcode::

           print(x * 2)

        .. testoutput::

           40
        """
    assert sphinx_build(_mini_project(tmp_path / "a", ok), tmp_path / "a" / "out").returncode == 0
    bad = ok.replace("           40", "           41")
    proc = sphinx_build(_mini_project(tmp_path / "b", bad), tmp_path / "b" / "out")
    assert proc.returncode != 0 and "expected:\n41" in proc.stderr


def test_fps_doc_4_an_example_that_raises_fails_the_build(tmp_path):
    """FPS-DOC-4: an unexpected exception in an example is a failure too."""
    src = _mini_project(tmp_path, """
        >>> 1 / 0
        1
        """)
    proc = sphinx_build(src, tmp_path / "out")
    assert proc.returncode != 0 and "ZeroDivisionError" in proc.stderr


# ------------------------------------------------------- requirement ids at build time


def test_fps_doc_1_a_requirement_defined_on_two_pages_fails_the_build(tmp_path):
    """FPS-DOC-1: the build refuses an id defined twice, naming the other page."""
    rid = "FPS-" + "TST-1"
    stmt = f"""
        .. requirement:: {rid}

           A statement.
        """
    proc = sphinx_build(_mini_project(tmp_path, stmt, {"other": stmt}), tmp_path / "out")
    assert proc.returncode != 0 and f"requirement {rid} is defined twice" in proc.stderr


def test_fps_doc_1_req_role_links_and_refuses_unknown_ids(tmp_path):
    """FPS-DOC-1: :req: links to a defined requirement's anchor; a link to an undefined id fails."""
    rid, missing = "FPS-" + "TST-1", "FPS-" + "TST-2"
    body = f"""
        .. requirement:: {rid}

           A statement.

        See :req:`{rid}`.
        """
    out = tmp_path / "a" / "out"
    assert sphinx_build(_mini_project(tmp_path / "a", body), out).returncode == 0
    page = (out / "index.html").read_text()
    assert f'id="req-{rid}"' in page and f'href="#req-{rid}"' in page
    proc = sphinx_build(_mini_project(tmp_path / "b", body + f"\nAnd :req:`{missing}`.\n"), tmp_path / "b" / "out")
    assert proc.returncode != 0 and f"req-{missing.lower()}" in proc.stderr


def test_docstring_notation_is_escaped_for_autodoc():
    """Plain-text docstring notation (|x|, FPS-AREA-*, docs/*.rst) renders as written; inline
    literals and literal blocks are left alone."""
    from fpspec_spec import escape_plain_markup

    lines = ["round |x| (FPS-BLK-*) per docs/scheme-*.rst, ``|y|`` and *emphasis*", "", "::", "",
             "   |z| stays", "after |w|"]
    escape_plain_markup(lines)
    assert lines[0] == r"round \|x\| (FPS-BLK-\*) per docs/scheme-\*.rst, ``|y|`` and *emphasis*"
    assert lines[4] == "   |z| stays" and lines[5] == r"after \|w\|"


def test_fps_doc_3_gemm_preset_tables_match_the_models(site):
    """FPS-DOC-3: gemm.html shows every preset with every GemmModel parameter as fpspec.models has it."""
    import dataclasses

    from fpspec.models import GemmModel
    from fpspec.presets import PRESETS

    page = page_text(site, "gemm")
    tables = re.findall(r'<table class="[^"]*\bfpspec-presets\b[^"]*">(.*?)</table>', page, re.S)
    seen = set()
    for table in tables:
        head = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
                for c in re.findall(r"<th[^>]*>(.*?)</th>", table, re.S)]
        names = head[1:]
        for row in table_rows(f'<table class="fpspec-presets">{table}</table>', "fpspec-presets"):
            param = row[0].split(" ")[0]
            for name, cell in zip(names, row[1:]):
                v = getattr(PRESETS[name].model, param)
                want = "none" if v is None else ("yes" if v is True else "no" if v is False else str(v))
                assert cell == want, (name, param, cell, want)
                seen.add((name, param))
    assert seen == {(n, f.name) for n in PRESETS for f in dataclasses.fields(GemmModel)}
    assert "_images/gemm-error.png" in page


def test_fps_doc_3_bounds_table_matches_fpspec_bounds(site):
    """FPS-DOC-3: bounds.html shows 137.143 (960/7) and 30 times headroom for ue5m3 at T = 448 and
    2048, 256 and 56 for ue5m3fnu, and every row's headroom equals range_bounds."""
    from fpspec.bounds import range_bounds

    page = page_text(site, "bounds")
    rows = [r for r in table_rows(page, "fpspec-table") if len(r) == 7]
    got = {(r[0], r[1]): r[3] for r in rows}
    assert got[("ue5m3", "448")] == "137.143 (960/7) times"
    assert got[("ue5m3", "2048")] == "30 times"
    assert got[("ue5m3fnu", "448")] == "256 times" and got[("ue5m3fnu", "2048")] == "56 times"
    for (sf, t), text in got.items():
        assert float(text.split(" ")[0]) == pytest.approx(float(range_bounds(sf, int(t)).headroom), rel=1e-5)
    assert "_images/amax-window.png" in page


def test_enum_member_docs_are_not_read_as_types(site):
    """A ``#: No Inf, no NaN: ...`` comment on an enum member renders as written, not as a
    napoleon "Type: No Inf, no NaN" field."""
    page = html.unescape(re.sub(r"<[^>]+>", "", page_text(site, "api")))
    assert "No Inf, no NaN: every code is finite (E2M1)." in page
    assert "Type:\nNo Inf, no NaN" not in page


# ------------------------------------------------- organisation of the spec (issue 13)


def _body(page: str) -> str:
    return page[page.find('<div class="body"'):]


def test_fps_doc_9_every_page_names_the_spec_version(site):
    """FPS-DOC-9: every HTML page of the build shows 'spec version N' (N = fpspec.SPEC_VERSION)
    in its banner, with the package version."""
    pages = sorted(site.glob("*.html"))
    assert len(pages) >= len(PAGES)
    for path in pages:
        text = path.read_text(encoding="utf-8")
        banner = re.search(r'<div class="fpspec-banner"[^>]*>(.*?)</div>', text, re.S)
        assert banner, path.name
        words = html.unescape(re.sub(r"<[^>]+>", "", banner.group(1)))
        assert f"spec version {fpspec.SPEC_VERSION}" in words and fpspec.__version__ in words, path.name


def test_fps_doc_7_requirement_index_lists_every_id_with_page_tests_and_sets(site):
    """FPS-DOC-7: requirements.html has one row per defined id, in id order, linking to the
    defining page, naming the test files that cite it and the vectors/v1 sets that list it."""
    import fpspec_reqs

    defs = fpspec_reqs.definitions()
    tests = fpspec_reqs.citing_tests()
    sets = fpspec_reqs.vector_coverage()
    page = page_text(site, "requirements")
    rows = re.findall(r'<tr[^>]*id="index-(FPS-[A-Z]+-\d+)"[^>]*>(.*?)</tr>', page, re.S)
    assert [r for r, _ in rows] == sorted(defs, key=fpspec_reqs.id_key)
    for rid, row in rows:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        text = [html.unescape(re.sub(r"<[^>]+>", " ", c)) for c in cells]
        doc = Path(defs[rid][0]).stem
        assert f'href="{doc}.html#req-{rid}"' in cells[0], rid
        assert doc in text[2], rid
        for path, names in tests.get(rid, {}).items():
            assert Path(path).name in text[3], (rid, path)
            if names:
                assert names[0] in text[3], (rid, names[0])
        if sets.get(rid):
            counted = sum(int(n) for n in re.findall(r"\((\d+)\)", text[4])) + len(
                [s for s in text[4].split(", ") if s.strip() and "(" not in s])
            assert counted == len(sets[rid]), (rid, text[4])
        else:
            assert text[4].strip() == "none", rid
    # a hand-checked row: the zero-scale rule, defined on the ue5m3 page, cited by its tests
    row = dict(rows)["FPS-BLK-4"]
    assert "Zero-scale-to-one rule" in row and "scheme-ue5m3" in row and "test_blocks_ue5m3.py" in row


def test_fps_doc_7_every_id_in_the_text_is_a_link(site):
    """FPS-DOC-7: outside literals, headings and the id labels of requirement blocks, no page
    shows an FPS-AREA-N that is not a link to its requirement."""
    import fpspec_reqs

    defs = fpspec_reqs.definitions()
    for path in sorted(site.glob("*.html")):
        body = _body(path.read_text(encoding="utf-8"))
        for rid in set(re.findall(r'href="[^"]*#req-(FPS-[A-Z]+-\d+)"', body)):
            assert rid in defs, (path.name, rid)
        body = re.sub(r"<a [^>]*>.*?</a>", "", body, flags=re.S)
        body = re.sub(r"<(pre|code|h[1-6]|title)\b.*?</\1>", "", body, flags=re.S)
        body = re.sub(r'<strong class="fpspec-req-id">.*?</strong>', "", body, flags=re.S)
        left = re.findall(r"FPS-[A-Z]+-\d+", re.sub(r"<[^>]+>", " ", body))
        assert not left, (path.name, left[:5])
    # the scheme page links its prose mention of the zero-scale rule
    assert 'href="#req-FPS-BLK-4"' in page_text(site, "scheme-ue5m3")


def test_fps_doc_7_a_mistyped_id_in_prose_fails_the_build(tmp_path):
    """FPS-DOC-7: a plain FPS-AREA-N in the text that no page defines is a build error."""
    rid, missing = "FPS-" + "TST-1", "FPS-" + "TST-9"
    body = f"""
        .. requirement:: {rid}

           A statement.

        Prose citing {rid} links; ``{missing}`` in a literal is left alone.
        """
    out = tmp_path / "a" / "out"
    assert sphinx_build(_mini_project(tmp_path / "a", body), out).returncode == 0
    page = (out / "index.html").read_text()
    assert f'href="#req-{rid}"' in page
    proc = sphinx_build(_mini_project(tmp_path / "b", body + f"\nAnd {missing}.\n"), tmp_path / "b" / "out")
    assert proc.returncode != 0 and f"req-{missing.lower()}" in proc.stderr


def test_fps_doc_7_ids_and_landmarks_are_in_the_search_index(site):
    """FPS-DOC-7: the search box finds every requirement id and the landmark values: each is an
    index entry of searchindex.js (the search page matches the whole query against these)."""
    import json

    import fpspec_reqs

    text = (site / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index("(") + 1:text.rindex(")")])
    entries = index["indexentries"]
    for rid in fpspec_reqs.definitions():
        assert rid.lower() in entries, rid
        docs = {index["docnames"][e[0]] for e in entries[rid.lower()]}
        assert docs == {Path(fpspec_reqs.definitions()[rid][0]).stem}, rid
    for value in ("61440", "114688", "448"):
        assert value in entries and any(index["docnames"][e[0]] == "formats" for e in entries[value]), value


def test_fps_doc_8_informative_sections_hold_no_requirement(site):
    """FPS-DOC-8: the derivation, performance, device-data and author sections are marked
    informative, and no page has a requirement inside an informative section or block."""
    marked = {
        "scheme-ue5m3": ("The fast path", "Worked example: a block whose scale underflows"),
        "gemm": ("Why the fast path is exact", "Performance", "Generated tables"),
        "rounding": ("Why the fast path is exact",),
        "checker": ("What real implementations gave",),
        "probe-h200": ("Probe reports: NVIDIA H200",),
        "annex-authors": ("Annex: notes for authors of this document",),
        "appendix-codebooks": ("Appendix A: codebooks",),
    }
    for name, titles in marked.items():
        page = page_text(site, name)
        for title in titles:
            m = re.search(r'<section[^>]*class="[^"]*fpspec-informative[^"]*"[^>]*>\s*<h\d>'
                          + re.escape(html.escape(title, quote=False)), page)
            assert m, (name, title)
    for path in sorted(site.glob("*.html")):
        page = path.read_text(encoding="utf-8")
        for m in re.finditer(r'<(section|div)[^>]*class="[^"]*fpspec-informative[^"]*"', page):
            depth, pos, tag = 1, m.end(), m.group(1)
            while depth:  # the end of this element
                nxt = re.search(rf"<{tag}\b|</{tag}>", page[pos:])
                depth += 1 if nxt.group(0).startswith(f"<{tag}") else -1
                pos += nxt.end()
            assert not re.search(r'class="[^"]*\bfpspec-requirement\b', page[m.end():pos]), path.name


def test_fps_doc_8_a_requirement_in_an_informative_section_fails_the_build(tmp_path):
    """FPS-DOC-8: the build refuses a requirement under an informative mark, section or block."""
    rid = "FPS-" + "TST-1"
    section = f"""
        Notes
        -----

        .. informative::

        .. requirement:: {rid}

           A statement.
        """
    block = f"""
        .. informative::

           .. requirement:: {rid}

              A statement.
        """
    for i, body in enumerate((section, block)):
        proc = sphinx_build(_mini_project(tmp_path / str(i), body), tmp_path / str(i) / "out")
        assert proc.returncode != 0 and "informative" in proc.stderr and rid in proc.stderr, body


def test_fps_cnf_1_vocabulary_and_precedence_are_stated_once(site):
    """FPS-CNF-1, FPS-CNF-2: the conformance page defines must/should/may and says that the text
    wins over the exact code, a disagreement being a defect; the API reference documents the
    exact reference modules it ranks."""
    page = html.unescape(re.sub(r"<[^>]+>", "", page_text(site, "conformance")))
    for word in ("must", "should", "may"):
        assert re.search(rf"\b{word}\b", page), word
    assert "the text wins" in page and "defect" in page
    api = page_text(site, "api")
    for mod in ("fpspec.exact.rounding", "fpspec.exact.binary32", "fpspec.exact.blocks",
                "fpspec.exact.accumulate"):
        assert f'id="module-{mod}"' in api, mod
    assert 'id="fpspec.exact.blocks.quantize_view_exact"' in api
    assert 'id="fpspec.exact.accumulate.gemm_exact"' in api


def test_fps_cnf_5_exit_statuses_are_the_checkers(site):
    """FPS-CNF-5: the conformance page explains exactly the checker's exit statuses 0..4."""
    from fpspec.vectors import checker

    page = page_text(site, "conformance")
    req = re.search(r'id="req-FPS-CNF-5"(.*?)</dl>', page, re.S)
    terms = [html.unescape(re.sub(r"<[^>]+>", "", t)).strip() for t in re.findall(r"<dt>(.*?)</dt>", req.group(1), re.S)]
    assert terms == [str(c) for c in (checker.EXIT_PASS, checker.EXIT_MISMATCH, checker.EXIT_USAGE,
                                      checker.EXIT_INTEGRITY, checker.EXIT_INCOMPLETE)] == ["0", "1", "2", "3", "4"]


def test_fps_cnf_3_coverage_table_lists_every_set_of_the_pack_once(site):
    """FPS-CNF-3: X(D) is computable from the pack: the coverage table names each set of
    vectors/v1 exactly once, in the row of its operation."""
    import json

    manifest = json.loads((ROOT / "vectors" / "v1" / "MANIFEST.json").read_text())
    rows = table_rows(page_text(site, "conformance"), "fpspec-coverage")
    seen = {}
    for op, _what, sets, outs, _cases in rows:
        names = [s.strip() for s in sets.split(",")]
        for n in names:
            assert n not in seen, n
            seen[n] = op
        assert int(outs) == sum(len(e["outputs"]) for e in manifest["sets"] if e["name"] in names)
    assert seen == {e["name"]: e["operation"] for e in manifest["sets"]}


def _implementer_box(site, scheme: str, profile: str) -> str:
    page = page_text(site, "implementers")
    m = re.search(rf'<div class="[^"]*fpspec-implementer-check[^"]*" id="check-{scheme}-{re.escape(profile)}">'
                  r"(.*?)(?:<p>3\. |<div class=\"[^\"]*fpspec-implementer-check|<section)", page, re.S)
    assert m, (scheme, profile)
    return m.group(1)


def test_fps_cnf_3_every_profile_has_an_implementers_path(site):
    """FPS-CNF-3: implementers.html has, for every profile of fpspec.schemes.PROFILES, a numbered
    operation sequence and the generated declaration / sets / command box."""
    from fpspec.schemes import PROFILES

    page = page_text(site, "implementers")
    for scheme, profile in PROFILES:
        box = _implementer_box(site, scheme, profile)
        assert f"profiles: [{scheme}/{profile}]" in html.unescape(re.sub(r"<[^>]+>", "", box)), (scheme, profile)
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert text.count("as the source does") > 20 and text.count("fpspec's choice") > 10


def test_fps_cnf_3_the_rendered_declaration_selects_the_hand_listed_sets_and_the_check_passes(site):
    """FPS-CNF-3, FPS-CNF-5: the declaration printed for ue5m3/seed-fp32 selects exactly the four
    RNE seed-fp32 sets (hand-listed from the pack); checking the pack's own expected outputs under
    it exits 0, a missing output exits 4, a changed bit exits 1.  seed-triton has no set."""
    import yaml

    from fpspec.vectors.checker import check
    from fpspec.vectors.declare import Declaration
    from fpspec.vectors.pack import Pack

    box = html.unescape(re.sub(r"<[^>]+>", "", _implementer_box(site, "ue5m3", "seed-fp32")))
    decl_text = box[box.index("name: "):box.index("2. The sets")]
    decl = Declaration.from_mapping(yaml.safe_load(decl_text))
    want = ["quantize-ue5m3-seed-fp32-16x16", "quantize-ue5m3-seed-fp32-1x16",
            "quantize-ue5m3-seed-fp32-1x16-colwise", "quantize-ue5m3-seed-fp32-1x16-t2048",
            "quantize-ue5m3-seed-fp32-1x16-witness"]
    listed = re.findall(r"^(quantize-[a-z0-9.-]+): out_", box, re.M)
    assert listed == want
    assert "quantize-ue5m3-seed-fp32-1x16-sr-midpoint" in box  # named as what SR adds
    pack = Pack(ROOT / "vectors" / "v1")
    results = {}
    for name in want:
        vs = pack.load(name)
        results[name] = {f"out_{o}": vs.outputs[o].copy() for o in vs.outputs}
    assert check(pack, results, declaration=decl).exit_code == 0
    partial = {k: dict(v) for k, v in results.items()}
    del partial[want[1]]["out_scales"]
    assert check(pack, partial, declaration=decl).exit_code == 4
    wrong = {k: dict(v) for k, v in results.items()}
    wrong[want[0]]["out_codes"] = wrong[want[0]]["out_codes"] ^ np.uint8(1)
    assert check(pack, wrong, declaration=decl).exit_code == 1
    empty = html.unescape(re.sub(r"<[^>]+>", "", _implementer_box(site, "ue5m3", "seed-triton")))
    assert "has no set for ue5m3/seed-triton" in empty and "fpspec check" not in empty


def test_fps_cnf_6_a_byte_added_at_the_top_of_the_discarded_bits_is_sr_add():
    """FPS-CNF-6: the stated condition under which a cvt.rs kernel is checkable: adding the
    random byte to the top 8 of the FP32 bits below the E2M1 quantum and truncating (a model
    written here on the binary32 bits) gives fpspec's sr-add with N = 8, satfinite included."""
    from fpspec.convert import decode, encode

    rng = np.random.default_rng(13)
    mags = np.concatenate([rng.uniform(0, 7, 3000), [0.25, 0.5, 0.75, 1.0, 1.25, 2.5, 3.5, 5.0, 5.999, 6.0, 6.5]])
    x = (mags * rng.choice([-1.0, 1.0], mags.size)).astype(np.float32)
    r = rng.integers(0, 256, x.size, dtype=np.uint8)

    def model(v: float, byte: int) -> float:
        a = abs(Fraction(float(v)))
        q = Fraction(1, 2) if a < 2 else (Fraction(1) if a < 4 else Fraction(2))  # E2M1 quantum
        scaled = a / q * 2**22                       # the 22 bits below the quantum, then more
        d = int(scaled)                              # bits below 2^-22 of the quantum: truncated
        up = (d % 2**22) + (byte << 14) >= 2**22     # the byte at the top of the discarded bits
        res = min((d // 2**22 + up) * q, Fraction(6))  # satfinite
        return float(-res if v < 0 else res)

    got = decode(encode(x, "e2m1", "sr-add", rbits=r, nbits=8), "e2m1")
    want = np.array([model(v, int(b)) for v, b in zip(x, r)])
    assert np.array_equal(np.abs(got), np.abs(want)) and np.array_equal(got[want != 0], want[want != 0])


def test_sr_figure_caption_states_what_the_plotted_data_shows(site):
    """The sr-bias caption: all three rules are unbiased at multiples of 2^-N; sr-midpoint's bias
    peaks at +2^-(N+1) at the midpoints; sr-add is biased toward zero, sr-unbiased away (the data
    of the figure, recomputed here through the figure's own function)."""
    from fpspec_plots import sr_bias_curve

    for n in (2, 4, 8):
        grid = [Fraction(k, 2**n) for k in range(2**n)]
        mids = [Fraction(2 * k + 1, 2**(n + 1)) for k in range(2**n)]
        between = [Fraction(j, 512) for j in range(512) if Fraction(j, 512) * 2**n % 1]
        for mode in ("sr-midpoint", "sr-add", "sr-unbiased"):
            assert set(sr_bias_curve(mode, n, grid)) == {0}, (mode, n)
        assert set(sr_bias_curve("sr-midpoint", n, mids)) == {Fraction(1, 2**(n + 1))}
        assert all(abs(b) <= Fraction(1, 2**(n + 1)) for b in sr_bias_curve("sr-midpoint", n, between))
        assert all(-Fraction(1, 2**n) < b < 0 for b in sr_bias_curve("sr-add", n, between))
        assert all(0 < b < Fraction(1, 2**n) for b in sr_bias_curve("sr-unbiased", n, between))
    caption = html.unescape(re.sub(r"<[^>]+>", "", re.search(
        r"<figcaption>(.*?)</figcaption>", page_text(site, "rounding").split("sr-bias.png", 1)[1], re.S).group(1)))
    caption = " ".join(caption.split())
    assert "All three are unbiased where delta is a multiple of 2^-N" in caption
    assert "most (+2^-(N+1)) at the midpoints of the 2^-N steps" in caption
    assert "unbiased only at the midpoints" not in caption


def test_nan_conventions_section_matches_the_code(site):
    """The formats page explains the two NaN patterns with the values the code writes: the
    canonical NaN code an encoder writes (FP32: 0x7FFFFFFF) and the FP32 NaN result of a decode
    (0x7FC00000 with the code's sign)."""
    from fpspec.convert import encode
    from fpspec.vectors.ops import FP32_QNAN

    page = html.unescape(re.sub(r"<[^>]+>", "", page_text(site, "formats")))
    sec = page[page.index("Which NaN is written where"):page.index("Generated tables", page.index("Which NaN"))]
    fp32_nan = int(encode(np.array([np.nan]), "fp32")[0])
    assert fp32_nan == FORMATS["fp32"].nan_code == 0x7FFFFFFF and FP32_QNAN == 0x7FC00000
    assert f"0x{fp32_nan:08X}" in sec and f"0x{FP32_QNAN:08X}" in sec
    assert "nan_payloads" in sec


def test_glossary_defines_the_terms_and_pages_link_to_it(site):
    """The glossary page defines the terms a kernel engineer meets, and main pages link to them."""
    page = page_text(site, "glossary")
    terms = {html.unescape(re.sub(r"<[^>]+>", "", t)).replace("¶", "").strip()
             for t in re.findall(r"<dt[^>]*>(.*?)</dt>", page, re.S)}
    for term in ("view", "scheme", "profile", "preset", "encoded domain", "target T", "stale ratio",
                 "slice plan", "block", "tile", "payload", "scale code", "tensor scale", "alpha", "group",
                 "window", "promotion", "snap", "declaration", "vector set", "level", "canonical NaN code"):
        assert term in terms, term
    assert 'href="glossary.html#term-format"' in page_text(site, "formats")
    assert 'href="glossary.html#term-view"' in page_text(site, "implementers")


def test_public_sources_only_in_the_disagreements_table_and_4over6_defined(site):
    """The disagreements table cites public sources, not the project's internal brief; the NVFP4
    page defines the TE options it excludes instead of naming them undefined."""
    page = html.unescape(re.sub(r"<[^>]+>", "", page_text(site, "disagreements")))
    assert "brief" not in page.lower()
    assert "MrHuff/ue5m3-fp4" in page
    nv = html.unescape(re.sub(r"<[^>]+>", "", page_text(site, "scheme-nvfp4")))
    assert "without 4over6 and row scaling" not in nv
    for option in ("nvfp4_use_4over6", "row_scaled_nvfp4", "pow_2_scales"):
        assert nv.count(option) >= 2, option


def test_fps_cnf_4_level_2_has_the_same_sets_with_more_cases():
    """FPS-CNF-4: the level-2 pack has the sets of level 1 (same names, operations, outputs and
    named choices) with more seeded random cases; level 1's case counts are the committed pack's.
    Checked on the plans (inputs only) of two coverage models, to stay fast."""
    import json

    from fpspec.vectors import coverage, generate

    generate._load_optional_models()
    manifest = {e["name"]: e for e in json.loads((ROOT / "vectors" / "v1" / "MANIFEST.json").read_text())["sets"]}
    models = ["sr-threshold", "gemm-order-independent"]
    one = {p.name: p for p in coverage.plans(1, models)}
    two = {p.name: p for p in coverage.plans(2, models)}
    assert one and set(one) == set(two)
    for name, p1 in one.items():
        p2 = two[name]
        assert len(p1.tags) == manifest[name]["cases"], name
        assert len(p2.tags) > len(p1.tags), name
        for key in ("operation", "coverage_model", "requirements"):
            assert p1.meta[key] == p2.meta[key], (name, key)
        assert {k: v.get("depends_on") for k, v in p1.meta["outputs"].items()} == \
               {k: v.get("depends_on") for k, v in p2.meta["outputs"].items()}, name


def test_backing_table_lists_every_preset_with_its_evidence(site):
    """Issue 13: one generated table says, preset by preset, what each GEMM model is backed
    by (measured, hardware-validated model, paper, fpspec's choice)."""
    from fpspec.presets import PRESETS

    from fpspec_backing import KIND_TEXT

    html_text = (site / "gemm.html").read_text(encoding="utf-8")
    table = html_text[html_text.index('id="gemm-backing"'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, flags=re.S)[1:]
    assert len(rows) == len(PRESETS)
    for row in rows:
        name = re.search(r"<span class=\"pre\">([^<]+)</span>", row).group(1)
        text = html.unescape(row).replace("\u2019", "'")  # Sphinx renders ' as a typographic quote
        assert KIND_TEXT[PRESETS[name].backing.kind] in text, name
