"""Sphinx configuration of the fpspec numeric specification."""

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
]
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
nitpicky = False
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
html_theme = "alabaster"
html_static_path = []
html_theme_options = {"page_width": "1100px", "sidebar_width": "230px"}
