"""Sphinx extension for the fpspec spec: the ``requirement`` directive.

``.. requirement:: FPS-AREA-N`` followed by an indented normative statement
renders the statement with its id and an anchor ``req-FPS-AREA-N``, so that tests,
vector metadata and other pages can cite it.  ids are collected by
``tests/test_requirements.py`` straight from the .rst sources.
"""

from __future__ import annotations

import re

from docutils import nodes
from docutils.parsers.rst import Directive

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


def setup(app):
    app.add_directive("requirement", RequirementDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
