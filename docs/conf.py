"""Sphinx configuration for the rxtoolcalls manual."""

from __future__ import annotations

import inspect
import pkgutil
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer

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
_NOTEBOOKS = Path(__file__).parent / "notebooks"
if not _NOTEBOOKS.exists():  # an unpacked sdist carries the notebooks, not the link
    _NOTEBOOKS.symlink_to(Path("..") / "notebooks", target_is_directory=True)
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
    ("py:class", r"CallEvent|FieldEvent|AgentEvent|UIEvent"),
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


def _attribute_docs() -> dict[str, list[str]]:
    """The docstring under each module-level name of the package, by name."""
    found: dict[str, list[str]] = {}
    for module in pkgutil.walk_packages(rxtoolcalls.__path__, "rxtoolcalls."):
        for (scope, name), lines in ModuleAnalyzer.for_module(module.name).find_attr_docs().items():
            if not scope:
                found.setdefault(name, lines)
    return found


_DOCS = _attribute_docs()


def _data_docstring(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    # A public alias or constant is documented where the package re-exports it
    # (``rxtoolcalls.Ledger``); its docstring sits under its definition in a submodule, and
    # autodoc would otherwise show the docstring of the aliased class (MutableMapping's).
    if what == "data" and name.count(".") == 1 and name.startswith("rxtoolcalls."):
        lines[:] = _DOCS.get(name.split(".")[1], lines)


def _public_signature(
    app: Sphinx,
    what: str,
    name: str,
    obj: Any,
    options: Any,
    signature: str | None,
    return_annotation: str | None,
) -> tuple[str, str | None] | None:
    # A value class's private fields (ToolCallProgress's view of the text) are the library's
    # to fill: neither its signature nor its parameter list shows them.
    if what != "class" or not signature or "_" not in signature:
        return None
    parameters = inspect.signature(obj).parameters
    private = [key for key in parameters if key.startswith("_")]
    if not private:
        return None
    for key in private:
        app.env.current_document.autodoc_annotations.get(name, {}).pop(key, None)
    shown = [
        parameter.replace(annotation=inspect.Parameter.empty)
        for key, parameter in parameters.items()
        if not key.startswith("_")
    ]
    return str(inspect.Signature(shown)), return_annotation


def setup(app: Sphinx) -> None:
    """Fill in the docstrings of re-exported aliases and constants; hide private fields."""
    app.connect("autodoc-process-docstring", _data_docstring)
    # After autodoc has recorded the annotations (priority 500), so that they can be dropped.
    app.connect("autodoc-process-signature", _public_signature, priority=600)
