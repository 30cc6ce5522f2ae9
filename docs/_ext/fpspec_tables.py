"""Sphinx directives that generate the spec's tables from the code at build time (FPS-DOC-3).

Nothing in these tables is typed by hand: each directive imports the module
that defines the data and renders it, so a page cannot disagree with the code.

Directives (all usable on any page):

``.. fpspec-formats-table::``
    every predefined format with its layout, derived values and default policies.
``.. fpspec-codebook:: NAME``
    every code of a format of at most 8 bits (hex, bits, kind, exact value); a
    summary of code classes and landmark codes for wider formats.
``.. fpspec-bit-layout:: NAME``
    the sign / exponent / mantissa fields of a format, one cell per bit.
``.. fpspec-policies::``
    the rounding modes and policy enums with their meaning, and each format's defaults.
``.. fpspec-disagreements::``
    the table of :data:`fpspec.disagreements.DISAGREEMENTS`.
``.. fpspec-cli::``
    every command of :func:`fpspec.cli.build_parser` with usage and options.
``.. fpspec-presets::``
    the GEMM presets of :mod:`fpspec.models` with sources and a parameter matrix.
``.. fpspec-bounds:: [:targets: 448 2048]``
    the range bounds of :mod:`fpspec.bounds` for every scale format and T.

Each directive records the source files it read as dependencies, so an
incremental build re-renders the page when the code changes.
"""

from __future__ import annotations

import argparse
import importlib
import os
from fractions import Fraction
from typing import Iterable, Sequence

from docutils import nodes
from sphinx import addnodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList
from sphinx.util.nodes import nested_parse_with_titles

# --------------------------------------------------------------------- helpers


def power_form(v: Fraction) -> str:
    """An exact value as ``s * 2^e`` with s odd (``0`` for zero): 0.75 -> ``3*2^-2``."""
    if v == 0:
        return "0"
    sign = "-" if v < 0 else ""
    v = abs(v)
    n, d = v.numerator, v.denominator
    e = 0
    while d > 1:  # d is a power of two for every format value
        assert d % 2 == 0, v
        d //= 2
        e -= 1
    while n % 2 == 0:
        n //= 2
        e += 1
    if e == 0:
        return f"{sign}{n}"
    return f"{sign}{n}*2^{e}" if n != 1 else f"{sign}2^{e}"


def exact_decimal(v: Fraction, max_len: int = 24) -> str:
    """The exact decimal expansion of a dyadic rational, or ``~%.9g`` when longer than max_len."""
    if v == 0:
        return "0"
    sign = "-" if v < 0 else ""
    a = abs(v)
    # a = n / 2^k has exactly k decimal places: a = n * 5^k / 10^k
    k = a.denominator.bit_length() - 1
    scaled = a.numerator * 5 ** k
    digits = str(scaled).rjust(k + 1, "0")
    text = digits[: len(digits) - k] + ("." + digits[len(digits) - k:] if k else "")
    text = text.rstrip("0").rstrip(".") if "." in text else text
    if len(text) > max_len:
        return f"~{sign}{float(a):.9g}"
    return sign + text


def rst_escape(text: str) -> str:
    """Escape inline markup characters for plain table cells."""
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("`", "\\`").replace("|", "\\|")


def docstring_rst(text: str) -> str:
    """One line of docstring text (RST, with plain |x| and FPS-AREA-* notation made safe)."""
    from fpspec_spec import escape_plain_markup

    lines = [text]
    escape_plain_markup(lines)
    return lines[0]


def list_table(header: Sequence[str], rows: Iterable[Sequence[str]], *, widths: str | None = None,
               title: str = "", classes: str = "") -> list[str]:
    """An RST ``list-table`` (cells are RST; empty cells allowed)."""
    out = [f".. list-table:: {title}".rstrip(), "   :header-rows: 1"]
    if widths:
        out.append(f"   :widths: {widths}")
    if classes:
        out.append(f"   :class: {classes}")
    out.append("")
    for row in [list(header), *map(list, rows)]:
        for i, cell in enumerate(row):
            cell = cell if cell.strip() else "\\ "
            lines = cell.split("\n")
            out.append(("   * - " if i == 0 else "     - ") + lines[0])
            out.extend("       " + ln for ln in lines[1:])
    out.append("")
    return out


class Row(list):
    """A table row with HTML classes (e.g. a group separator)."""

    def __init__(self, cells: Iterable[str], classes: Sequence[str] = ()) -> None:
        super().__init__(cells)
        self.classes = list(classes)


class Table:
    """A table built straight as docutils nodes (a list-table in RST is slow for 256 rows).

    Cells are one line of inline RST (``literal``, **strong**, :req:`FPS-X-1`).
    """

    def __init__(self, header: Sequence[str], rows: Iterable[Sequence[str]], *,
                 widths: Sequence[int] | None = None, classes: str = "") -> None:
        self.header = list(header)
        self.rows = [r if isinstance(r, Row) else Row(r) for r in rows]
        self.widths = list(widths) if widths else [1] * len(self.header)
        self.classes = classes.split()

    def to_nodes(self, state, lineno: int) -> nodes.table:
        table = nodes.table(classes=["colwidths-given", *self.classes])
        group = nodes.tgroup(cols=len(self.header))
        table += group
        for w in self.widths:
            group += nodes.colspec(colwidth=w)
        thead, tbody = nodes.thead(), nodes.tbody()
        group += thead
        group += tbody
        for target, rows in ((thead, [self.header]), (tbody, self.rows)):
            for row in rows:
                tr = nodes.row(classes=list(getattr(row, "classes", [])))
                for cell in row:
                    entry = nodes.entry()
                    if cell.strip():
                        inline, messages = state.inline_text(cell, lineno)
                        para = nodes.paragraph("", "", *inline)
                        entry += para
                        entry.extend(messages)
                    tr += entry
                target += tr
        return table


def module_file(modname: str) -> str:
    return importlib.import_module(modname).__file__  # type: ignore[return-value]


class GeneratedDirective(Directive):
    """Base: subclasses return RST lines; this parses them (titles allowed) and notes dependencies."""

    #: modules whose source files the output depends on
    depends_on: tuple[str, ...] = ()

    def rst_lines(self) -> list:  # pragma: no cover - abstract
        """RST lines, with :class:`Table` items allowed between them (not after a title)."""
        raise NotImplementedError

    def run(self) -> list[nodes.Node]:
        env = self.state.document.settings.env
        try:
            items = self.rst_lines()
        except Exception as exc:  # a broken generator must fail the build, loudly
            raise self.error(f"{self.name}: generating the content failed: {type(exc).__name__}: {exc}")
        for mod in self.depends_on:
            try:
                env.note_dependency(os.path.abspath(module_file(mod)))
            except ModuleNotFoundError:
                pass
        env.note_dependency(os.path.abspath(__file__))
        source, line = self.state_machine.get_source_and_line(self.lineno)
        holder = nodes.section()
        holder.document = self.state.document
        chunk: list[str] = []

        def flush() -> None:
            if chunk:
                content = StringList(chunk, source=f"{source} (generated by {self.name})")
                nested_parse_with_titles(self.state, content, holder)
                chunk.clear()

        for item in items:
            if isinstance(item, Table):
                flush()
                holder += item.to_nodes(self.state, self.lineno)
            else:
                chunk.append(item)
        flush()
        return holder.children


# --------------------------------------------------------------------- formats


def _fmt_value(v: object) -> str:
    """A derived value: its exact decimal when short, else ``s*2^e``."""
    if v is None:
        return "-"
    if isinstance(v, Fraction):
        dec = exact_decimal(v, 12)
        if not dec.startswith("~"):
            return f"``{dec}``"
        return f"``{power_form(v)}`` (~{float(v):.4g})"
    return f"``{v}``"


class FormatsTableDirective(GeneratedDirective):
    """``.. fpspec-formats-table::`` every predefined format (fpspec.formats.FORMATS)."""

    depends_on = ("fpspec.formats", "fpspec.choices")

    def rst_lines(self) -> list[str]:
        from fpspec.choices import default_policies
        from fpspec.formats import FORMATS

        layout = ["name", "bits", "sign / exp / man", "bias", "specials", "NaN code", "Inf code",
                  "default overflow", "default NaN"]
        ranges = ["name", "max finite", "min normal", "min subnormal", "eps (1+eps is the next value after 1)"]
        rows_layout, rows_range = [], []
        for f in FORMATS.values():
            pol = default_policies(f)
            hexw = (f.bits + 3) // 4
            code = (lambda c: "-" if c is None else f"``0x{c:0{hexw}X}``")
            rows_layout.append([
                f"``{f.name}``", str(f.bits), f"{int(f.signed)} / {f.exp_bits} / {f.man_bits}", str(f.bias),
                f"``{f.specials.value}``" + ("" if f.subnormals else "; no subnormals, no zero"),
                code(f.nan_code), code(f.inf_code), f"``{pol.overflow.value}``", f"``{pol.nan.value}``",
            ])
            rows_range.append([f"``{f.name}``", _fmt_value(f.max_finite), _fmt_value(f.min_normal),
                               _fmt_value(f.min_subnormal), _fmt_value(f.eps)])
        lines: list = ["Layout, special codes and default policies (the policies are explained on "
                       ":doc:`rounding`):", "",
                       Table(layout, rows_layout, widths=(10, 6, 12, 6, 22, 10, 10, 12, 12), classes="fpspec-table"),
                       "", "Range, as exact values (``s*2^e`` where the decimal is long):", "",
                       Table(ranges, rows_range, widths=(12, 30, 18, 18, 22), classes="fpspec-table"), ""]
        lines += ["Descriptions and sources:", ""]
        lines += [f"* ``{f.name}``: {rst_escape(f.description)}" for f in FORMATS.values()]
        lines.append("")
        return lines


class CodebookDirective(GeneratedDirective):
    """``.. fpspec-codebook:: NAME``: every code of a format (a summary above 8 bits)."""

    required_arguments = 1
    depends_on = ("fpspec.formats",)
    option_spec = {"max-rows": directives.positive_int}

    def rst_lines(self) -> list[str]:
        from fpspec.formats import get_format

        fmt = get_format(self.arguments[0])
        if fmt.bits <= 8:
            return self._full(fmt)
        return self._summary(fmt)

    @staticmethod
    def _bits(fmt, code: int) -> str:
        s = format(code, f"0{fmt.bits}b")
        parts = []
        pos = 0
        for width in ((1,) if fmt.signed else ()) + (fmt.exp_bits, fmt.man_bits):
            if width:
                parts.append(s[pos:pos + width])
            pos += width
        return " ".join(parts)

    def _row(self, fmt, code: int) -> list[str]:
        from fpspec.formats import CodeKind

        hexw = (fmt.bits + 3) // 4
        kind = fmt.kind(code)
        v = fmt.decode_exact(code)
        if kind is CodeKind.NAN:
            dec, exact = "NaN", "NaN"
        elif kind is CodeKind.INF:
            dec = exact = "-Inf" if v < 0 else "+Inf"
        else:
            negzero = kind is CodeKind.ZERO and fmt.signed and code & fmt.sign_mask
            dec = "-0" if negzero else exact_decimal(v)
            exact = "-0" if negzero else power_form(v)
        return [f"``0x{code:0{hexw}X}``", f"``{self._bits(fmt, code)}``", kind.value,
                f"``{dec}``", f"``{exact}``"]

    def _full(self, fmt) -> list:
        if not fmt.signed:
            rows = [self._row(fmt, c) for c in range(fmt.num_codes)]
            lines: list = [f"All {fmt.num_codes} codes of ``{fmt.name}`` ({docstring_rst(fmt.description)}); "
                           "bits are grouped E M, exact values are written ``s*2^e``.", ""]
            lines.append(Table(["code", "bits", "kind", "value", "exact"], rows, widths=(10, 20, 14, 30, 26),
                               classes="fpspec-codebook"))
            return lines
        # signed: one row per magnitude, the + code and the - code (sign bit set) side by side
        rows = []
        for c in range(fmt.sign_mask):
            code_p, bits_p, kind, value, exact = self._row(fmt, c)
            code_n, _, kind_n, value_n, _ = self._row(fmt, c | fmt.sign_mask)
            both = kind if kind_n == kind else f"{kind} / {kind_n}"  # FNUZ: 0x80 is the NaN
            rows.append([code_p, code_n, bits_p.replace("``0 ", "``", 1), both, value, value_n, exact])
        lines = [f"All {fmt.num_codes} codes of ``{fmt.name}`` ({docstring_rst(fmt.description)}), "
                 f"one row per magnitude: the code with sign bit 0 and the code with sign bit 1 "
                 f"(``0x{fmt.sign_mask:X}`` added); bits are the E M fields below the sign, exact "
                 "values are written ``s*2^e`` for the positive code.", ""]
        lines.append(Table(["code +", "code -", "bits (E M)", "kind", "value +", "value -", "exact +"], rows,
                           widths=(8, 8, 16, 12, 22, 16, 18), classes="fpspec-codebook"))
        return lines

    def _summary(self, fmt) -> list[str]:
        from fpspec.formats import CodeKind

        counts = kind_counts(fmt)
        landmarks: list[tuple[str, int]] = [("+0", 0)]
        if fmt.min_subnormal is not None:
            landmarks.append(("min subnormal", 1))
            landmarks.append(("max subnormal", fmt.join(0, 0, fmt.man_max_field)))
        landmarks.append(("min normal", fmt.join(0, 1 if fmt.subnormals else 0, 0)))
        landmarks.append(("1", fmt.join(0, fmt.bias, 0)))
        landmarks.append(("1 + eps", fmt.join(0, fmt.bias, 1)))
        landmarks.append(("max finite", fmt.max_finite_code))
        if fmt.inf_code is not None:
            landmarks.append(("+Inf", fmt.inf_code))
        if fmt.nan_code is not None:
            landmarks.append(("canonical NaN", fmt.nan_code))
        if fmt.signed:
            landmarks.append(("-0", fmt.sign_mask))
            landmarks.append(("-max finite", fmt.sign_mask | fmt.max_finite_code))
        lines = [f"``{fmt.name}`` has {fmt.num_codes} codes; their classes "
                 "(counted from the exponent and mantissa fields):", ""]
        lines.append(Table(["kind", "codes"], [[k.value, str(counts[k])] for k in CodeKind if counts[k]],
                           classes="fpspec-table"))
        lines += ["", "Landmark codes:", ""]
        lines.append(Table(["landmark", "code", "bits", "kind", "value", "exact"],
                           [[name, *self._row(fmt, c)] for name, c in landmarks], classes="fpspec-codebook"))
        return lines


def kind_counts(fmt) -> dict:
    """Number of codes of each CodeKind, without enumerating 2^bits codes.

    The kind of a code depends only on its exponent field and on whether its
    mantissa field is 0, all ones, or neither, so one representative of each
    class with its multiplicity suffices.
    """
    from fpspec.formats import CodeKind

    m = fmt.man_bits
    if m == 0:
        classes = [(0, 1)]
    elif m == 1:
        classes = [(0, 1), (1, 1)]
    else:
        classes = [(0, 1), (fmt.man_max_field, 1), (1, (1 << m) - 2)]
    counts = {k: 0 for k in CodeKind}
    for e in range(fmt.exp_max_field + 1):
        for man, mult in classes:
            counts[fmt.kind(fmt.join(0, e, man))] += mult * (2 if fmt.signed else 1)
    if fmt.signed and fmt.kind(fmt.sign_mask) is not fmt.kind(0):  # FNUZ: the -0 code is the NaN
        counts[fmt.kind(0)] -= 1
        counts[fmt.kind(fmt.sign_mask)] += 1
    return counts


_FIELD_STYLE = {
    "S": ("sign", "#f4b6b6"),
    "E": ("exponent", "#b6d7f4"),
    "M": ("mantissa", "#c8eec0"),
}


class BitLayoutDirective(GeneratedDirective):
    """``.. fpspec-bit-layout:: NAME``: one cell per bit, coloured by field, with widths."""

    required_arguments = 1
    depends_on = ("fpspec.formats",)

    def run(self) -> list[nodes.Node]:
        from fpspec.formats import get_format

        try:
            fmt = get_format(self.arguments[0])
        except ValueError as exc:
            raise self.error(str(exc))
        env = self.state.document.settings.env
        env.note_dependency(os.path.abspath(module_file("fpspec.formats")))
        fields = ([("S", 1)] if fmt.signed else []) + [("E", fmt.exp_bits)] + ([("M", fmt.man_bits)] if fmt.man_bits else [])
        html = [f'<table class="fpspec-bits" style="border-collapse:collapse;margin:0.5em 0 1em 0;'
                f'font-family:monospace;font-size:{90 if fmt.bits <= 16 else 75}%">']
        # row 1: bit numbers
        html.append("<tr>")
        for i in range(fmt.bits - 1, -1, -1):
            html.append(f'<td style="text-align:center;color:#666;padding:0 4px">{i}</td>')
        html.append("</tr><tr>")
        for key, width in fields:
            _, colour = _FIELD_STYLE[key]
            for _ in range(width):
                html.append(f'<td style="background:{colour};border:1px solid #555;text-align:center;'
                            f'width:1.6em;padding:2px">{key}</td>')
        html.append("</tr><tr>")
        for key, width in fields:
            name, _ = _FIELD_STYLE[key]
            label = f"{name} ({width})" if width > 2 else f"{key} ({width})"
            html.append(f'<td colspan="{width}" style="text-align:center;font-size:85%;padding:1px">{label}</td>')
        html.append("</tr></table>")
        caption = (f"{fmt.name}: {fmt.bits} bits = " + " + ".join(f"{_FIELD_STYLE[k][0]} {w}" for k, w in fields)
                   + f"; bias {fmt.bias}")
        text = caption + "\n" + " ".join(k * w for k, w in fields)
        # a figure, so that the caption belongs to its diagram (<figure>/<figcaption> in HTML)
        figure = nodes.figure(classes=["fpspec-bit-layout"])
        figure["ids"].append(f"bits-{fmt.name}")
        figure += nodes.raw("", "\n".join(html), format="html")
        figure += addnodes.only("", nodes.literal_block(text, text), expr="not html")
        figure += nodes.caption(caption, caption)
        return [figure]


# --------------------------------------------------------------------- policies


def attr_docs(modname: str) -> dict[tuple[str, str], str]:
    """``#:`` comments of a module's attributes, as {(class, name): text}."""
    from sphinx.pycode import ModuleAnalyzer

    analyzer = ModuleAnalyzer.for_module(modname)
    return {k: " ".join(line.strip() for line in v if line.strip()) for k, v in analyzer.find_attr_docs().items()}


class PoliciesDirective(GeneratedDirective):
    """``.. fpspec-policies::`` rounding modes, policy enums and per-format defaults (fpspec.choices)."""

    depends_on = ("fpspec.choices", "fpspec.formats")

    def rst_lines(self) -> list[str]:
        from fpspec import choices
        from fpspec.formats import FORMATS

        docs = attr_docs("fpspec.choices")
        lines: list = []
        enums = [choices.RoundingMode, choices.OverflowPolicy, choices.NanPolicy, choices.NegativePolicy,
                 choices.ZeroPolicy]
        option = {"RoundingMode": "--rounding", "OverflowPolicy": "--overflow", "NanPolicy": "--nan",
                  "NegativePolicy": "--negative", "ZeroPolicy": "--zero"}
        for enum_cls in enums:
            doc = (enum_cls.__doc__ or "").strip().splitlines()[0]
            lines += [f".. rubric:: {enum_cls.__name__} (``{option[enum_cls.__name__]}``)", "",
                      docstring_rst(doc), ""]
            rows = [[f"``{m.value}``", docstring_rst(docs.get((enum_cls.__name__, m.name), ""))] for m in enum_cls]
            lines += [Table(["name", "meaning"], rows, widths=(18, 82), classes="fpspec-table"), ""]
        lines += [".. rubric:: Default policies per format", "",
                  f"Stochastic modes default to N = {choices.DEFAULT_SR_BITS} random bits per element.", ""]
        rows = []
        for f in FORMATS.values():
            p = choices.default_policies(f)
            rows.append([f"``{f.name}``", f"``{p.overflow.value}``", f"``{p.nan.value}``",
                         f"``{p.negative.value}``" if not f.signed else "n/a (signed)",
                         f"``{p.zero.value}``" if not f.has_zero else "n/a (has zero)",
                         rst_escape(choices.POLICY_RATIONALE.get(f.name, ""))])
        lines.append(Table(["format", "overflow", "NaN", "negative", "zero", "why"], rows,
                           widths=(10, 10, 8, 10, 10, 52), classes="fpspec-table"))
        return lines


# ---------------------------------------------------------------- disagreements


class DisagreementsDirective(GeneratedDirective):
    """``.. fpspec-disagreements::`` the table of fpspec.disagreements.DISAGREEMENTS."""

    depends_on = ("fpspec.disagreements",)

    def rst_lines(self) -> list[str]:
        from fpspec.disagreements import DISAGREEMENTS, resolve

        rows = []
        for d in DISAGREEMENTS:
            first = True
            for b in d.behaviours:
                for s in b.selects:
                    resolve(s)  # a name that does not exist fails the build
                if b.selects:
                    sel = ", ".join(f"``{s}``" for s in b.selects)
                else:
                    sel = "*not selectable*"
                if b.note:
                    sel += f" ({rst_escape(b.note)})"
                topic = ""
                if first:
                    topic = f"**{rst_escape(d.topic)}** (``{d.key}``)"
                rows.append(Row([topic, rst_escape(b.who), rst_escape(b.does), sel],
                                ["fpspec-group-start"] if first else []))
                first = False
            reqs = ", ".join(f":req:`{r}`" for r in d.requirements)
            default_sel = ", ".join(f"``{s}``" for s in d.default_selects)
            for s in d.default_selects:
                resolve(s)
            rows.append(["", "**fpspec default**", rst_escape(d.fpspec_default) + (f" ({reqs})" if reqs else ""),
                         default_sel])
        return [Table(["question", "who", "does what", "fpspec name that selects it"], rows,
                      widths=(20, 22, 33, 25), classes="fpspec-table fpspec-disagreements")]


# ------------------------------------------------------------------------- CLI


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, helps.get(name, ""), sub))
    return out


def _option_rows(parser: argparse.ArgumentParser) -> list[list[str]]:
    rows = []
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) or a.help == argparse.SUPPRESS:
            continue  # hidden options (old spellings kept as aliases) are not documented
        if a.option_strings:
            metavar = ""
            if a.nargs != 0:
                metavar = " " + (a.metavar or (("{" + ",".join(map(str, a.choices)) + "}") if a.choices
                                               else a.dest.upper()))
            name = ", ".join(f"``{o}{metavar}``" for o in a.option_strings)
        else:
            name = f"``{a.metavar or a.dest}``"
        notes = []
        raw_help = a.help if a.help and a.help != argparse.SUPPRESS else ""
        if not a.option_strings:
            notes.append("positional")
        if a.required and a.option_strings:
            notes.append("required")
        if a.choices and a.metavar and not all(str(c) in raw_help for c in a.choices):
            notes.append("one of " + ", ".join(f"``{c}``" for c in a.choices))
        if a.default not in (None, False, argparse.SUPPRESS) and a.nargs != 0 and "default" not in raw_help:
            notes.append(f"default ``{a.default}``")
        help_text = rst_escape(raw_help)
        rows.append([name, help_text + ("; " if help_text and notes else "") + "; ".join(notes)])
    return rows


def _usage(parser: argparse.ArgumentParser) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "78"
    try:
        return parser.format_usage().strip()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


class CliDirective(GeneratedDirective):
    """``.. fpspec-cli::`` every command of fpspec.cli.build_parser(), with usage and options."""

    depends_on = ("fpspec.cli",)
    option_spec = {"title-char": directives.unchanged}

    def rst_lines(self) -> list[str]:
        from fpspec.cli import COMMAND_MODULES, build_parser

        self.depends_on = ("fpspec.cli", *COMMAND_MODULES)
        parser = build_parser()
        chars = self.options.get("title-char", "-~^")
        lines = [".. code-block:: text", ""] + ["   " + ln for ln in _usage(parser).splitlines()] + [""]
        lines += list_table(["option", "meaning"], _option_rows(parser), widths="30 70", classes="fpspec-table")
        lines += _command_sections(parser, "fpspec", chars)
        return lines


def _command_sections(parser: argparse.ArgumentParser, prefix: str, chars: str) -> list[str]:
    """One section per subcommand, recursively (``fpspec vectors generate`` under ``fpspec vectors``)."""
    lines: list[str] = []
    for name, help_text, sub in _subparsers(parser):
        title = f"{prefix} {name}"
        lines += [title, chars[0] * len(title), ""]
        lines += [f"*{rst_escape(help_text)}*", ""] if help_text else []
        if sub.description:
            lines += [rst_escape(sub.description), ""]
        lines += [".. code-block:: text", ""] + ["   " + ln for ln in _usage(sub).splitlines()] + [""]
        rows = _option_rows(sub)
        if rows:
            lines += list_table(["argument", "meaning"], rows, widths="30 70", classes="fpspec-table")
        lines += _command_sections(sub, title, chars[1:] or chars[-1])
    return lines


# ----------------------------------------------------------- GEMM presets, bounds


def _param_value(v: object) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


class PresetsDirective(GeneratedDirective):
    """``.. fpspec-presets::`` the GEMM presets of fpspec.models: summary and source, then a
    parameter matrix (one row per GemmModel field, one column per preset)."""

    depends_on = ("fpspec.models",)

    def rst_lines(self) -> list:
        import dataclasses

        from fpspec.models import PARAMETER_ALIASES, PARAMETER_HELP, GemmModel
        from fpspec.presets import PRESETS

        aliases: dict[str, list[str]] = {}
        for short, full in PARAMETER_ALIASES.items():
            aliases.setdefault(full, []).append(short)
        lines: list = [Table(["preset", "what it models", "source"],
                             [[f"``{p.name}``", rst_escape(p.summary), rst_escape(p.source)]
                              for p in PRESETS.values()],
                             widths=(18, 50, 32), classes="fpspec-table"), "",
                       "Parameters of each preset (``fpspec gemm --model PRESET --set PARAM=VALUE`` "
                       "changes one; aliases in brackets):", ""]
        names = list(PRESETS)
        per_table = 5  # presets per parameter table, so that a table fits the page
        for start in range(0, len(names), per_table):
            chunk = names[start:start + per_table]
            rows = []
            for f in dataclasses.fields(GemmModel):
                label = f"``{f.name}``" + (f" ({', '.join(aliases[f.name])})" if f.name in aliases else "")
                rows.append([label, *[f"``{_param_value(getattr(PRESETS[n].model, f.name))}``" for n in chunk]])
            lines.append(Table(["parameter", *[f"``{n}``" for n in chunk]], rows,
                               widths=(22, *[15] * len(chunk)), classes="fpspec-table fpspec-presets"))
            lines.append("")
        lines += ["", "Meaning of each parameter:", ""]
        for f in dataclasses.fields(GemmModel):
            lines.append(f"* ``{f.name}``: {rst_escape(PARAMETER_HELP.get(f.name, ''))}")
        lines.append("")
        return lines


class BoundsDirective(GeneratedDirective):
    """``.. fpspec-bounds::`` the range bounds of fpspec.bounds for every scale format and each
    target T given in ``:targets:`` (default 448 2048)."""

    depends_on = ("fpspec.bounds", "fpspec.formats")
    option_spec = {"targets": directives.unchanged}

    def rst_lines(self) -> list:
        from fpspec.bounds import SCALE_FORMATS, range_bounds

        targets = [Fraction(t) for t in self.options.get("targets", "448 2048").split()]
        rows = []
        for sf in SCALE_FORMATS:
            for t in targets:
                b = range_bounds(sf, t)
                nz = ("none (no zero code)" if not b.min_nonzero_ratio else
                      f"{'> ' if b.min_nonzero_exclusive else '>= '}{_ratio(b.min_nonzero_ratio)}")
                dr = b.dynamic_range
                rows.append([f"``{sf}``", f"``{_num(t)}``", f"``{_num(b.max_scale)}``",
                             _ratio(b.headroom, x=True), nz, _ratio(b.min_normal_ratio),
                             "-" if dr is None else f"2^{_log2_str(dr)}"])
        return [Table(["scale format", "T", "max scale U", "headroom U/T (largest rho)",
                       "smallest rho with a nonzero scale", "smallest rho at full scale precision",
                       "span"], rows, widths=(12, 8, 12, 18, 20, 18, 10), classes="fpspec-table"), "",
                "rho is the block-to-tensor amax ratio a_B / g; every figure is exact "
                "(:mod:`fpspec.bounds`), decimals are rounded for reading.", ""]


def _num(v: Fraction) -> str:
    return exact_decimal(v, 14) if not exact_decimal(v, 14).startswith("~") else power_form(v)


def ratio_form(v: Fraction) -> str:
    """An exact positive rational with its powers of two pulled out: 2^127/448 -> ``2^121/7``."""
    n, d, e = v.numerator, v.denominator, 0
    while n % 2 == 0:
        n //= 2
        e += 1
    while d % 2 == 0:
        d //= 2
        e -= 1
    if e == 0:
        return f"{n}" if d == 1 else f"{n}/{d}"
    head = f"2^{e}" if n == 1 else f"{n}*2^{e}"
    return head if d == 1 else f"{head}/{d}"


def _ratio(v: Fraction, x: bool = False) -> str:
    """An exact ratio with a readable decimal: ``137.143 (960/7)``."""
    dec = exact_decimal(v, 12)
    if not dec.startswith("~") and v.denominator & (v.denominator - 1) == 0:
        exact = dec
    elif max(v.numerator, v.denominator) < 10**9:
        exact = f"{v.numerator}/{v.denominator}"
    else:
        exact = ratio_form(v)
    approx = f"{float(v):.6g}"
    core = f"``{exact}``" if exact == approx else f"{approx} (``{exact}``)"
    return core + (" times" if x else "")


def _log2_str(v: Fraction) -> str:
    import math

    return f"{math.log2(v.numerator) - math.log2(v.denominator):.1f}"


DIRECTIVES = {
    "fpspec-formats-table": FormatsTableDirective,
    "fpspec-codebook": CodebookDirective,
    "fpspec-bit-layout": BitLayoutDirective,
    "fpspec-policies": PoliciesDirective,
    "fpspec-disagreements": DisagreementsDirective,
    "fpspec-cli": CliDirective,
    "fpspec-presets": PresetsDirective,
    "fpspec-bounds": BoundsDirective,
}


def setup(app):
    from fpspec_hardware import DIRECTIVES as HARDWARE_DIRECTIVES  # the hardware-models page's tables

    for name, cls in {**DIRECTIVES, **HARDWARE_DIRECTIVES}.items():
        app.add_directive(name, cls)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
