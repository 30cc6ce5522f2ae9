"""Sphinx configuration of the fpspec numeric specification.

Build (warnings are errors; also run by tests/test_docs.py)::

    python3 -m sphinx -W -b html docs docs/_build/html

Tables and plots are generated from the fpspec package at build time
(docs/_ext/fpspec_tables.py, docs/_ext/fpspec_plots.py; PNGs go to the
gitignored docs/_generated/), and every ``>>>`` example runs during the build
(docs/_ext/fpspec_examples.py).  Nothing is fetched from the network.
"""

import os
import sys

sys.path.insert(0, os.path.abspath("_ext"))
sys.path.insert(0, os.path.abspath(".."))

import fpspec  # noqa: E402

project = "fpspec"
author = "the fpspec authors"
copyright = "2026, the fpspec authors"
version = fpspec.__version__
release = f"{fpspec.__version__} (spec v{fpspec.SPEC_VERSION})"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "fpspec_spec",
    "fpspec_tables",
    "fpspec_plots",
    "fpspec_examples",
]
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
nitpicky = False
exclude_patterns = ["_build", "_generated", "Thumbs.db", ".DS_Store"]
html_theme = "alabaster"
html_static_path = ["_static"]
html_css_files = ["fpspec.css"]
html_theme_options = {"page_width": "1240px", "sidebar_width": "230px"}

# Examples run with this namespace prepared (docs/_ext/fpspec_examples.py and `-b doctest`).
doctest_global_setup = """
import numpy as np
import fpspec
"""
