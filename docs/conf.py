"""Sphinx configuration of the fpspec numeric specification.

Build (warnings are errors; also run by tests/test_docs.py)::

    python3 -m sphinx -W -b html docs docs/_build/html

Tables and plots are generated from the fpspec package at build time
(docs/_ext/fpspec_tables.py, docs/_ext/fpspec_plots.py; PNGs go to the
gitignored docs/_generated/), the H200 probe page from its reports
(docs/_ext/fpspec_probe.py), and every ``>>>`` example runs during the build
(docs/_ext/fpspec_examples.py).  Nothing is fetched from the network.

The package is imported as installed (``pip install -e .``) or from the repository root, which
``python3 -m sphinx`` run there puts on the path.  The one path line below is Sphinx's documented
way to load a project's own extensions (https://www.sphinx-doc.org/en/master/development/tutorials/
examples/helloworld.html): the extensions in docs/_ext are plain modules that Sphinx imports by name.
"""

import os
import sys

sys.path.append(os.path.abspath("_ext"))

import fpspec  # noqa: E402

project = "fpspec"
author = "the fpspec authors"
copyright = "2026, the fpspec authors"
version = fpspec.__version__
release = fpspec.__version__
spec_version = fpspec.SPEC_VERSION

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "fpspec_spec",
    "fpspec_tables",
    "fpspec_backing",
    "fpspec_plots",
    "fpspec_examples",
    "fpspec_conformance",
    "fpspec_probe",
]
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
nitpicky = False
exclude_patterns = ["_build", "_generated", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]
html_theme = "alabaster"
html_title = f"fpspec spec version {spec_version}"
html_short_title = f"fpspec v{spec_version}"
html_static_path = ["_static"]
html_css_files = ["fpspec.css"]
html_theme_options = {"page_width": "1240px", "sidebar_width": "230px",
                      "description": f"spec version {spec_version}, package {release}"}
# every page shows the spec version (docs/_templates/layout.html; FPS-DOC-9)
html_context = {"fpspec_spec_version": spec_version}
# pages that are informative as a whole and rendered whole by an extension, so not marked in their source
fpspec_informative_docs = ["probe-h200"]

# Examples run with this namespace prepared (docs/_ext/fpspec_examples.py and `-b doctest`).
doctest_global_setup = """
import numpy as np
import fpspec
"""
