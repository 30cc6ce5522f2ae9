"""Sphinx extension for the fpspec spec: the ``requirement`` directive and the ``req`` role.

``.. requirement:: FPS-AREA-N`` followed by an indented normative statement
renders the statement with its id and an anchor ``req-FPS-AREA-N``, so that tests,
vector metadata and other pages can cite it.  ids are collected by
``tests/test_requirements.py`` straight from the .rst sources.

The anchor is also a cross-reference label: ``:req:`FPS-RND-0``` (or
``:ref:`req-fps-rnd-0```) links to the statement from any page, and a link to an
id that no page defines is a build warning (so, with ``-W``, an error).
"""

from __future__ import annotations

import re

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.addnodes import pending_xref

REQ_ID = re.compile(r"^FPS-[A-Z]+-\d+$")


class RequirementDirective(Directive):
    required_arguments = 1
    has_content = True

    def run(self):
        rid = self.arguments[0]
        if not REQ_ID.match(rid):
            raise self.error(f"bad requirement id {rid!r}: expected FPS-AREA-N")
        container = nodes.container(classes=["fpspec-requirement"])
        container["ids"].append(f"req-{rid}")
        env = self.state.document.settings.env
        std = env.get_domain("std")
        label = f"req-{rid}".lower()
        if label in std.labels and std.labels[label][0] != env.docname:
            other = env.doc2path(std.labels[label][0])
            raise self.error(f"requirement {rid} is defined twice (also in {other})")
        std.note_hyperlink_target(label, env.docname, f"req-{rid}", rid)
        para = nodes.paragraph()
        para += nodes.strong(text=f"{rid} ")
        container += para
        self.state.nested_parse(self.content, self.content_offset, container)
        # put the id in front of the first paragraph of the statement
        if len(container.children) > 1 and isinstance(container.children[1], nodes.paragraph):
            first = container.children[1]
            first.insert(0, nodes.strong(text=f"{rid}: "))
            container.remove(para)
        return [container]


def req_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``:req:`FPS-RND-0``` links to that requirement; an unknown id is a build warning."""
    rid = text.strip()
    if not REQ_ID.match(rid):
        msg = inliner.reporter.error(f"bad requirement id {rid!r}: expected FPS-AREA-N", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    node = pending_xref(rawtext, refdomain="std", reftype="ref", reftarget=f"req-{rid}".lower(),
                        refexplicit=True, refwarn=True)
    node += nodes.literal(rid, rid, classes=["xref", "fpspec-req"])
    return [node], []


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
    """Napoleon reads ``#: No Inf, no NaN: every code is finite`` on an enum member as
    "type: description"; an enum member has no such type, so the text is put back."""
    if what != "attribute" or not _is_enum_member(name):
        return
    for i, line in enumerate(lines):
        if line.startswith(":type: "):
            head = line[len(":type: "):].strip()
            del lines[i]
            first = next((j for j, ln in enumerate(lines) if ln.strip()), None)
            if first is not None:
                lines[first] = f"{head}: {lines[first]}"
            while lines and not lines[-1].strip():
                lines.pop()
            return


def setup(app):
    app.add_directive("requirement", RequirementDirective)
    app.setup_extension("sphinx.ext.autodoc")  # provides the event below
    app.connect("autodoc-process-docstring", _process_docstring, priority=400)
    app.connect("autodoc-process-docstring", _undo_napoleon_enum_type, priority=600)
    app.add_role("req", req_role)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
