"""Run the documentation's examples during every build (FPS-DOC-4).

After a page is read, every interactive example on it is executed in order,
in one namespace per page, with the standard :mod:`doctest` machinery:

* plain ``>>>`` blocks (docutils doctest blocks);
* ``.. doctest::`` blocks and ``.. testsetup::`` / ``.. testcode::`` +
  ``.. testoutput::`` pairs of :mod:`sphinx.ext.doctest`.

A failing example is reported as a warning at the example's line, so the
documented build command (warnings are errors) fails.  ``make doctest``
(``python3 -m sphinx -b doctest docs OUT``) runs the same examples through
sphinx.ext.doctest and gives the same verdict.
"""

from __future__ import annotations

import contextlib
import doctest
import io

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _is_example(node: nodes.Node) -> bool:
    if isinstance(node, nodes.doctest_block):
        return True
    return isinstance(node, (nodes.literal_block, nodes.comment)) and "testnodetype" in node


def _report(app, node, docname: str, what: str) -> None:
    logger.warning("documentation example failed on page %s:\n%s", docname, what,
                   location=node, type="fpspec", subtype="example")


def run_examples(app, doctree: nodes.document) -> None:
    docname = app.env.docname
    globs: dict = {"__name__": f"fpspec_docs_{docname.replace('/', '_')}"}
    setup_code = app.config.doctest_global_setup
    if setup_code:
        exec(compile(setup_code, "<doctest_global_setup>", "exec"), globs)
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
    pending_code: tuple[nodes.Node, str] | None = None
    count = 0
    for node in doctree.findall(_is_example):
        kind = "doctest" if isinstance(node, nodes.doctest_block) else node["testnodetype"]
        text = node.astext() if not isinstance(node, nodes.comment) else node.rawsource
        line = node.line or 0
        if kind == "doctest":
            count += 1
            test = parser.get_doctest(text, globs, f"{docname}:{line}", app.env.doc2path(docname), line)
            out = io.StringIO()
            result = runner.run(test, out=out.write, clear_globs=False)
            globs.update(test.globs)  # DocTest copies the namespace; later blocks see this one's names
            if result.failed:
                _report(app, node, docname, out.getvalue())
        elif kind in ("testsetup", "testcleanup"):
            _exec(app, node, docname, text, globs)
        elif kind == "testcode":
            count += 1
            pending_code = (node, _exec(app, node, docname, text, globs))
        elif kind == "testoutput" and pending_code is not None:
            code_node, got = pending_code
            want = text
            if not doctest.OutputChecker().check_output(want + "\n", got, OPTIONFLAGS):
                _report(app, code_node, docname, f"expected:\n{want}\ngot:\n{got}")
            pending_code = None
    app.env.fpspec_examples_run = getattr(app.env, "fpspec_examples_run", 0) + count


def _exec(app, node, docname: str, code: str, globs: dict) -> str:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"<{docname}:{node.line}>", "exec"), globs)
    except Exception as exc:  # noqa: BLE001 - every failure of an example is reported
        _report(app, node, docname, f"{type(exc).__name__}: {exc}")
    return out.getvalue()


def setup(app):
    if "doctest_global_setup" not in app.config.values:
        app.add_config_value("doctest_global_setup", "", "env")
    app.connect("doctree-read", run_examples)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
