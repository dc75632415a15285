"""Sphinx configuration of the corrpriors documentation.

Build (warnings are errors)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The API pages are generated from each public module's ``__all__`` (``docs/api/``), the
command-line reference from the argparse parsers (``docs/_generated/``) and the gallery from
``examples/**/plot_*.py`` (sphinx-gallery runs every example and keeps its figures).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS))

import corrpriors  # noqa: E402  (the installed package, or src/ on PYTHONPATH)
from _apigen import write_api_pages, write_cli_help, write_method_names  # noqa: E402

# -- project -------------------------------------------------------------------------
project = "corrpriors"
author = "corrpriors developers"
copyright = "corrpriors developers"  # noqa: A001  (Sphinx's name)
release = corrpriors.__version__
version = ".".join(release.split(".")[:2])

# -- extensions ----------------------------------------------------------------------
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # serves MathJax from _static: formulas render without network
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
# sg_execution_times: sphinx-gallery's timing pages load jQuery, DataTables and Bootstrap from CDNs;
# they are not written (write_computation_times below), and stale copies are never built.
exclude_patterns = ["_build", "_generated", "**.ipynb_checkpoints", "sg_execution_times.rst",
                    "**/sg_execution_times.rst"]
root_doc = "index"
default_role = "py:obj"  # `name` links to the API
nitpicky = False

# autodoc / autosummary / numpydoc
autosummary_generate = True
autodoc_typehints = "none"  # the numpydoc sections state the types
numpydoc_show_class_members = False  # the class template lists members itself
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False

# -- sphinx-gallery ------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": ["../examples"],
    "gallery_dirs": ["auto_examples"],
    "filename_pattern": r"/plot_",            # run every plot_*.py
    "ignore_pattern": r"make_example_data\.py|__init__\.py",
    "subsection_order": ["../examples/models", "../examples/decision_making", "*"],
    "within_subsection_order": "FileNameSortKey",
    "doc_module": ("corrpriors",),
    "backreferences_dir": "_generated/backreferences",
    "reference_url": {"corrpriors": None},
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": False,           # report every broken example, then fail
    "only_warn_on_example_error": False,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "min_reported_time": 0,
    "write_computation_times": False,          # the timing pages load scripts from CDNs: the site stays offline
    "show_memory": False,
    "plot_gallery": "True",
}

# -- HTML ----------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"corrpriors {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_show_sourcelink = False

# Examples draw with matplotlib's non-interactive backend (sphinx-gallery collects the figures).
os.environ.setdefault("MPLBACKEND", "Agg")


def setup(app):
    write_api_pages(DOCS / "api")
    write_cli_help(DOCS / "_generated")
    write_method_names(DOCS / "_generated")
