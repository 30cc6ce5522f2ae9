"""Sphinx extension for the fpspec spec: requirements, their index, links and informative marks.

``.. requirement:: FPS-AREA-N`` followed by an indented normative statement
renders the statement with its id and an anchor ``req-FPS-AREA-N``, so that tests,
vector metadata and other pages can cite it.  ids are collected by
``docs/_ext/fpspec_reqs.py`` straight from the .rst sources (``tests/test_requirements.py``
uses the same scanner).  Each requirement gets a title (its leading bold phrase, its
first sentence, or the ``:title:`` option) and an index entry, so the id is found by
the search box (FPS-DOC-7).

The anchor is also a cross-reference label: ``:req:`FPS-RND-0``` (or
``:ref:`req-fps-rnd-0```) links to the statement from any page, and a link to an
id that no page defines is a build warning (so, with ``-W``, an error).  Every
other ``FPS-AREA-N`` written in plain text (not in a literal) becomes the same
link, so a typo in a cited id fails the build too.

``.. fpspec-requirement-index::`` renders every requirement with its title, page,
the tests that cite it and the conformance vector sets that cover it.

``.. informative::`` marks the enclosing section (no content) or a block (with
content) as informative: it states no requirement, and a ``requirement`` inside it
is a build error (FPS-DOC-8).
"""

from __future__ import annotations

import re
from collections import defaultdict

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from sphinx import addnodes
from sphinx.addnodes import pending_xref
from sphinx.transforms import SphinxTransform

REQ_ID = re.compile(r"^FPS-[A-Z]+-\d+$")
#: an id written in prose, optionally a range FPS-AREA-N..M (the link goes to N)
REQ_MENTION = re.compile(r"(?<![A-Za-z0-9_-])(FPS-[A-Z]+-\d+)((?:\.\.\d+)?)(?![0-9A-Za-z_])")
INFORMATIVE = "fpspec-informative"
TITLE_LEN = 90


def _title_of(container: nodes.Element, explicit: str | None) -> str:
    """A requirement's title: the option, else its leading bold phrase, else its first sentence."""
    if explicit:
        return explicit.strip()
    para = next((c for c in container.children if isinstance(c, nodes.paragraph)), None)
    if para is None:
        return ""
    kids = [c for c in para.children if not (isinstance(c, nodes.strong) and "fpspec-req-id" in c["classes"])]
    if kids and isinstance(kids[0], nodes.strong):
        return kids[0].astext().strip().rstrip(".:").strip()
    text = " ".join("".join(k.astext() for k in kids).split())
    m = re.search(r"^(.+?[.;:])(\s|$)", text)
    first = m.group(1).rstrip(".;:") if m else text
    if len(first) > TITLE_LEN:
        first = first[:TITLE_LEN].rsplit(" ", 1)[0] + " ..."
    return first


def _in_informative(node: nodes.Node | None) -> bool:
    while node is not None:
        if isinstance(node, nodes.Element) and INFORMATIVE in node.get("classes", []):
            return True
        node = node.parent
    return False


class RequirementDirective(Directive):
    required_arguments = 1
    has_content = True
    option_spec = {"title": directives.unchanged}

    def run(self):
        rid = self.arguments[0]
        if not REQ_ID.match(rid):
            raise self.error(f"bad requirement id {rid!r}: expected FPS-AREA-N")
        if _in_informative(self.state.parent):
            raise self.error(f"requirement {rid} is inside an informative section or block: "
                             "informative text states no requirement (FPS-DOC-8)")
        container = nodes.container(classes=["fpspec-requirement"])
        anchor = f"req-{rid}"
        container["ids"].append(anchor)
        env = self.state.document.settings.env
        std = env.get_domain("std")
        label = anchor.lower()
        if label in std.labels and std.labels[label][0] != env.docname:
            other = env.doc2path(std.labels[label][0])
            raise self.error(f"requirement {rid} is defined twice (also in {other})")
        std.note_hyperlink_target(label, env.docname, anchor, rid)
        para = nodes.paragraph()
        para += nodes.strong(text=f"{rid} ", classes=["fpspec-req-id"])
        container += para
        self.state.nested_parse(self.content, self.content_offset, container)
        # put the id in front of the first paragraph of the statement
        if len(container.children) > 1 and isinstance(container.children[1], nodes.paragraph):
            first = container.children[1]
            first.insert(0, nodes.strong(text=f"{rid}: ", classes=["fpspec-req-id"]))
            container.remove(para)
        title = _title_of(container, self.options.get("title"))
        store = _store(env)
        store[rid] = {"docname": env.docname, "anchor": anchor, "title": title, "lineno": self.lineno}
        index = addnodes.index(entries=[("single", rid, anchor, "main", None)])
        return [index, container]


def _store(env) -> dict:
    if not hasattr(env, "fpspec_requirements"):
        env.fpspec_requirements = {}
    return env.fpspec_requirements


def req_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``:req:`FPS-RND-0``` links to that requirement; an unknown id is a build warning."""
    rid = text.strip()
    if not REQ_ID.match(rid):
        msg = inliner.reporter.error(f"bad requirement id {rid!r}: expected FPS-AREA-N", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    return [req_xref(rid, rid, rawtext)], []


def req_xref(rid: str, text: str, rawtext: str = "") -> pending_xref:
    """A link to requirement rid showing text (resolved, or warned about, by the std domain)."""
    node = pending_xref(rawtext or text, refdomain="std", reftype="ref", reftarget=f"req-{rid}".lower(),
                        refexplicit=True, refwarn=True)
    node += nodes.literal(text, text, classes=["xref", "fpspec-req"])
    return node


#: text inside these is never turned into a link
_NO_LINK = (nodes.literal, nodes.literal_block, nodes.reference, nodes.raw, nodes.comment, nodes.target,
            nodes.title, nodes.subtitle, nodes.rubric, nodes.FixedTextElement, nodes.option_string,
            pending_xref, addnodes.desc_signature, addnodes.index, addnodes.toctree)


class LinkRequirementMentions(SphinxTransform):
    """Every ``FPS-AREA-N`` (or ``FPS-AREA-N..M``) in plain text becomes a link to the requirement."""

    default_priority = 900

    def apply(self, **kwargs) -> None:
        for text in list(self.document.findall(nodes.Text)):
            if not REQ_MENTION.search(text):
                continue
            parent = text.parent
            if parent is None or _skip(parent):
                continue
            out: list[nodes.Node] = []
            pos = 0
            s = str(text)
            for m in REQ_MENTION.finditer(s):
                if m.start() > pos:
                    out.append(nodes.Text(s[pos:m.start()]))
                out.append(req_xref(m.group(1), m.group(0)))
                pos = m.end()
            if pos < len(s):
                out.append(nodes.Text(s[pos:]))
            parent.replace(text, out)


def _skip(node: nodes.Node) -> bool:
    while node is not None:
        if isinstance(node, _NO_LINK):
            return True
        if isinstance(node, nodes.strong) and "fpspec-req-id" in node.get("classes", []):
            return True
        node = node.parent
    return False


# ------------------------------------------------------------- informative marks


class InformativeDirective(Directive):
    """``.. informative::`` alone marks its section; with content, marks that block."""

    has_content = True
    optional_arguments = 0

    def run(self):
        label = nodes.paragraph(classes=["fpspec-informative-label"])
        label += nodes.strong(text="Informative.")
        if self.content:
            box = nodes.container(classes=[INFORMATIVE, "fpspec-informative-block"])
            label += nodes.Text(" This block states no requirement.")
            box += label
            self.state.nested_parse(self.content, self.content_offset, box)
            return [box]
        section = self.state.parent
        if not isinstance(section, nodes.section):
            raise self.error("informative without content marks its section: put it directly under a title")
        if any(isinstance(c, nodes.Element) and "fpspec-requirement" in c.get("classes", [])
               for c in section.findall(nodes.container)):
            raise self.error("informative section already holds a requirement (FPS-DOC-8)")
        section["classes"].append(INFORMATIVE)
        whole_page = isinstance(section.parent, nodes.document)
        label += nodes.Text(f" This {'page' if whole_page else 'section'} states no requirement.")
        return [label]


_LITERAL = re.compile(r"(``.*?``)")
#: a glob-like star (``FPS-BLK-*``, ``scheme-*.rst``, ``docs/*.rst``), not an emphasis
_REQ_WILDCARD = re.compile(r"([-/_])\*(?=[\w.)\],;:/]|$)")
_BARS = re.compile(r"(?<![\\|])\|([^\s|`](?:[^|`]*[^\s|`])?)\|(?!_)")


def escape_plain_markup(lines: list[str]) -> None:
    """Make plain-text docstring notation safe for reStructuredText, in place.

    Docstrings write ``FPS-RND-*`` for "all RND requirements" and ``|x|`` for a
    magnitude; in RST the first opens an emphasis and the second is a
    substitution reference.  Outside inline literals and literal blocks both are
    escaped, so autodoc renders them as written.
    """
    literal_indent: int | None = None
    for i, line in enumerate(lines):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None:
            if stripped and indent <= literal_indent:
                literal_indent = None
            else:
                continue
        parts = _LITERAL.split(line)
        for j in range(0, len(parts), 2):  # even parts are outside ``...``
            parts[j] = _BARS.sub(r"\\|\1\\|", _REQ_WILDCARD.sub(r"\1\\*", parts[j]))
        lines[i] = "".join(parts)
        if stripped.endswith("::"):
            literal_indent = indent


def _process_docstring(app, what, name, obj, options, lines):
    escape_plain_markup(lines)


def _is_enum_member(dotted: str) -> bool:
    """Whether ``pkg.module.Class.MEMBER`` names a member of an Enum class."""
    import enum
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return isinstance(obj, enum.Enum)
    return False


def _undo_napoleon_enum_type(app, what, name, obj, options, lines):
    """Napoleon reads ``#: No Inf, no NaN: every code is finite`` on an enum member, and
    ``#: FPS-FMT-6: the seed ...`` on any attribute, as "type: description"; neither is a
    type, so the text is put back."""
    if what not in ("attribute", "data"):
        return
    for i, line in enumerate(lines):
        if line.startswith(":type: "):
            head = line[len(":type: "):].strip()
            if not (REQ_ID.match(head) or _is_enum_member(name)):
                return
            del lines[i]
            first = next((j for j, ln in enumerate(lines) if ln.strip()), None)
            if first is not None:
                lines[first] = f"{head}: {lines[first]}"
            while lines and not lines[-1].strip():
                lines.pop()
            return


def _mark_informative_docs(app, doctree) -> None:
    """Pages listed in ``fpspec_informative_docs`` (conf.py) are informative as a whole: a page
    generated by a tool (device reports) is marked here rather than in its source."""
    env = app.builder.env
    if env.docname not in app.config.fpspec_informative_docs:
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None:
        return
    for c in section.findall(nodes.container):
        if "fpspec-requirement" in c.get("classes", []):
            raise ValueError(f"{env.docname}: listed in fpspec_informative_docs but defines "
                             f"{c['ids'][0]} (FPS-DOC-8)")
    section["classes"].append(INFORMATIVE)
    label = nodes.paragraph(classes=["fpspec-informative-label"])
    label += nodes.strong(text="Informative.")
    label += nodes.Text(" This page states no requirement.")
    title = next((i for i, c in enumerate(section.children) if isinstance(c, nodes.title)), -1)
    section.insert(title + 1, label)


# ------------------------------------------------------------ requirement index


class requirement_index(nodes.General, nodes.Element):
    """Placeholder replaced by the index table once every page has been read."""


class RequirementIndexDirective(Directive):
    """``.. fpspec-requirement-index::`` every requirement, its page, citing tests and covering sets."""

    def run(self):
        env = self.state.document.settings.env
        env.fpspec_index_docs = getattr(env, "fpspec_index_docs", set()) | {env.docname}
        import fpspec_reqs

        env.note_dependency(fpspec_reqs.__file__)
        return [requirement_index("")]


def _compress_sets(names: list[str]) -> str:
    """Set names grouped by their first two name components: ``quantize-ue5m3-* (11)``."""
    groups: dict[str, list[str]] = defaultdict(list)
    for n in names:
        parts = n.split("-")
        groups["-".join(parts[:2]) if len(parts) > 2 else n].append(n)
    out = []
    for prefix, members in groups.items():
        out.append(members[0] if len(members) == 1 else f"{prefix}-* ({len(members)})")
    return ", ".join(out)


def _tests_text(by_file: dict[str, list[str]], per_file: int = 2) -> list[str]:
    lines = []
    for path, names in sorted(by_file.items()):
        short = path.split("/", 1)[-1]
        if not names:
            lines.append(short)
            continue
        shown = ", ".join(names[:per_file]) + (f" (+{len(names) - per_file})" if len(names) > per_file else "")
        lines.append(f"{short}: {shown}")
    return lines


def index_rows(env) -> list[dict]:
    """One row per defined requirement, in id order (also read by tests/test_docs.py via the page)."""
    import fpspec_reqs

    store = _store(env)
    tests = fpspec_reqs.citing_tests()
    sets = fpspec_reqs.vector_coverage()
    rows = []
    for rid in sorted(store, key=fpspec_reqs.id_key):
        info = store[rid]
        rows.append({"id": rid, **info, "tests": tests.get(rid, {}), "sets": sets.get(rid, [])})
    return rows


def _resolve_index(app, doctree, fromdocname) -> None:
    nodes_found = list(doctree.findall(requirement_index))
    if not nodes_found:
        return
    env = app.builder.env
    rows = index_rows(env)
    for placeholder in nodes_found:
        table = nodes.table(classes=["fpspec-table", "fpspec-req-index"])
        group = nodes.tgroup(cols=5)
        table += group
        for w in (11, 27, 12, 32, 18):
            group += nodes.colspec(colwidth=w)
        head, body = nodes.thead(), nodes.tbody()
        group += head
        group += body
        hrow = nodes.row()
        for h in ("id", "title", "page", "tests that cite it", "vector sets (vectors/v1)"):
            hrow += nodes.entry("", nodes.paragraph(text=h))
        head += hrow
        for r in rows:
            row = nodes.row(ids=[f"index-{r['id']}"])
            uri = app.builder.get_relative_uri(fromdocname, r["docname"]) + "#" + r["anchor"]
            ref = nodes.reference("", "", internal=True, refuri=uri)
            ref += nodes.literal(r["id"], r["id"])
            row += nodes.entry("", nodes.paragraph("", "", ref))
            row += nodes.entry("", nodes.paragraph(text=r["title"]))
            pref = nodes.reference("", r["docname"], internal=True,
                                   refuri=app.builder.get_relative_uri(fromdocname, r["docname"]))
            if r["docname"] in env.titles:
                pref["reftitle"] = env.titles[r["docname"]].astext()
            row += nodes.entry("", nodes.paragraph("", "", pref))
            tcell = nodes.entry()
            for line in _tests_text(r["tests"]) or ["none"]:
                tcell += nodes.paragraph(text=line)
            row += tcell
            row += nodes.entry("", nodes.paragraph(text=_compress_sets(r["sets"]) if r["sets"] else "none"))
            body += row
        placeholder.replace_self(table)


def _finish_page(app, doctree, fromdocname) -> None:
    """Every table scrolls inside its own box (a page never gets wider than the screen), and
    every link to a requirement carries the class ``fpspec-req-link`` (kept on one line)."""
    for table in list(doctree.findall(nodes.table)):
        parent = table.parent
        if isinstance(parent, nodes.container) and "fpspec-scroll" in parent.get("classes", []):
            continue
        box = nodes.container(classes=["fpspec-scroll"])
        table.replace_self(box)
        box += table
    for ref in doctree.findall(nodes.reference):
        if "#req-FPS-" in ref.get("refuri", "") or ref.get("refid", "").startswith("req-FPS-"):
            ref["classes"].append("fpspec-req-link")


def _purge(app, env, docname) -> None:
    store = _store(env)
    for rid in [r for r, info in store.items() if info["docname"] == docname]:
        del store[rid]
    if hasattr(env, "fpspec_index_docs"):
        env.fpspec_index_docs.discard(docname)


def _merge(app, env, docnames, other) -> None:
    _store(env).update(getattr(other, "fpspec_requirements", {}))
    env.fpspec_index_docs = getattr(env, "fpspec_index_docs", set()) | getattr(other, "fpspec_index_docs", set())


def _outdated(app, env, added, changed, removed) -> list[str]:
    """The index page is re-rendered whenever any page is (its rows come from all of them)."""
    if added or changed or removed:
        return sorted(getattr(env, "fpspec_index_docs", set()) - set(removed))
    return []


def setup(app):
    app.add_directive("requirement", RequirementDirective)
    app.add_directive("informative", InformativeDirective)
    app.add_directive("fpspec-requirement-index", RequirementIndexDirective)
    app.add_node(requirement_index)
    app.setup_extension("sphinx.ext.autodoc")  # provides the event below
    app.connect("autodoc-process-docstring", _process_docstring, priority=400)
    app.connect("autodoc-process-docstring", _undo_napoleon_enum_type, priority=600)
    app.add_role("req", req_role)
    app.add_transform(LinkRequirementMentions)
    app.add_config_value("fpspec_informative_docs", [], "env")
    app.connect("doctree-read", _mark_informative_docs)
    app.connect("doctree-resolved", _resolve_index)
    app.connect("doctree-resolved", _finish_page, priority=900)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-get-outdated", _outdated)
    return {"version": "2", "parallel_read_safe": True, "parallel_write_safe": True}
