"""Sphinx configuration for the rxtoolcalls manual."""

from __future__ import annotations

import rxtoolcalls

project = "rxtoolcalls"
author = "the rxtoolcalls authors"
copyright = "2026, the rxtoolcalls authors"
release = rxtoolcalls.__version__
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
]

# `docs/notebooks` links to the top-level notebooks (they open in Jupyter from a checkout, and
# their relative paths hold from either place); the manual executes them at build time so that
# every picture is current.
nb_execution_mode = "force"
nb_execution_timeout = 120
nb_execution_raise_on_error = True
nb_execution_show_tb = True

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Every reference must resolve, except to names outside this package (the build is offline, with
# no inventories) and to private helpers that signatures mention.
nitpicky = True
nitpick_ignore_regex = [
    ("py:class", r"(reactivex|collections|asyncio|os|typing|types|pathlib|concurrent)\..*"),
    ("py:class", r"Observable|Call|T|CallItem|rxtoolcalls\.sources\.T"),
    ("py:class", r"rxtoolcalls\.(.*\.)?_.*"),
]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
autoclass_content = "class"

# The build runs offline in CI: links to the standard library resolve only when the inventory is
# reachable, and a missing one must not fail the build.

exclude_patterns = ["_build", "notebooks/.ipynb_checkpoints", "jupyter_execute"]
html_theme = "furo"
html_title = f"rxtoolcalls {release}"
