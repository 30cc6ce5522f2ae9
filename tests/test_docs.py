"""The documentation builds with warnings as errors, and what it renders is the code's (FPS-DOC-3, FPS-DOC-4).

One full HTML build (``python3 -m sphinx -W -b html docs OUT``, the documented
command) into a temporary directory per test session; the tests then read the
rendered pages as a reader would and compare them with the package.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest

import fpspec
from fpspec.cli import build_parser
from fpspec.disagreements import DISAGREEMENTS
from fpspec.formats import FORMATS, CodeKind

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "docs" / "_ext"


def sphinx_build(src: Path, out: Path, builder: str = "html") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-E", "-b", builder, str(src), str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)


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


def test_build_succeeds_with_warnings_as_errors(site):
    """The documented command builds every page of the toctree."""
    for page in ("index", "overview", "formats", "rounding", "disagreements", "api", "cli", "changelog"):
        assert (site / f"{page}.html").is_file(), page


def test_fps_doc_3_codebooks_render_every_code_exactly(site):
    """FPS-DOC-3: the rendered codebook of every format of at most 8 bits lists each code with
    the value the format descriptor decodes (compared here through exact fractions).  Signed
    formats have one row per magnitude: the + code and the - code."""
    page = page_text(site, "formats")
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
                _check_cell(f, mag, kind, value_p, exact)
                _check_cell(f, mag | f.sign_mask, kind, value_n, None)
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
    rows = table_rows(page_text(site, "formats"), "fpspec-codebook")
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
    # fp32: 2 zeros, 2*(2^23-1) subnormals, 2*254*2^23 normals, 2 infinities, 2*(2^23-1) NaNs
    kinds = {tuple(r) for r in table_rows(page, "fpspec-table") if len(r) == 2}
    for kind, n in (("zero", 2), ("subnormal", 2 * (2**23 - 1)), ("normal", 2 * 254 * 2**23),
                    ("inf", 2), ("nan", 2 * (2**23 - 1))):
        assert (kind, str(n)) in kinds, kind


def test_fps_doc_3_bit_layouts_and_plots_are_present(site):
    """FPS-DOC-3: bit-layout diagrams and the generated plots are on the pages, as PNG files."""
    page = page_text(site, "formats")
    assert page.count('class="fpspec-bits"') == len(FORMATS)
    assert "ue5m3: 8 bits = exponent 5 + mantissa 3; bias 15" in page
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
    (src / "conf.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(EXT)!r})
        extensions = ["sphinx.ext.doctest", "fpspec_examples", "fpspec_spec"]
        """))
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
    sys.path.insert(0, str(EXT))
    from fpspec_spec import escape_plain_markup

    lines = ["round |x| (FPS-BLK-*) per docs/scheme-*.rst, ``|y|`` and *emphasis*", "", "::", "",
             "   |z| stays", "after |w|"]
    escape_plain_markup(lines)
    assert lines[0] == r"round \|x\| (FPS-BLK-\*) per docs/scheme-\*.rst, ``|y|`` and *emphasis*"
    assert lines[4] == "   |z| stays" and lines[5] == r"after \|w\|"


def test_fps_doc_3_gemm_preset_tables_match_the_models(site):
    """FPS-DOC-3: gemm.html shows every preset with every GemmModel parameter as fpspec.models has it."""
    import dataclasses

    from fpspec.models import PRESETS, GemmModel

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
