"""Every Python example in the README and the manual runs as shown (SDK ones against a local fake).

The manual's API reference names every public name, and each page is reachable from the index.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

import rxtoolcalls

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)]
# A python block, and the text block right after it (what it prints), when there is one.
EXAMPLE = re.compile(r"```python\n(.*?)```(?:\n\n```text\n(.*?)```)?", re.S)
BLOCKS = [
    (page, number, code, shown)
    for page in PAGES
    for number, (code, shown) in enumerate(EXAMPLE.findall(page.read_text(encoding="utf-8")))
]


def _name(page: Path, number: int) -> str:
    return f"{page.relative_to(ROOT)} block {number}"


def test_the_readme_and_the_manual_have_examples() -> None:
    readme = [code for page, _, code, _ in BLOCKS if page.name == "README.md"]
    assert len(readme) >= 3
    shown = {page.relative_to(ROOT).as_posix() for page, _, _, _ in BLOCKS}
    guides = ["getting-started", "concepts", "sources", "agent", "progress", "recipes"]
    wires = [f"wires/{path.stem}" for path in (ROOT / "rxtoolcalls" / "wires").glob("[!_]*.py")]
    for page in guides + wires:
        assert f"docs/{page}.md" in shown, f"docs/{page}.md has no runnable example"


IDS = [_name(page, number) for page, number, _, _ in BLOCKS]


@pytest.mark.json_parser
@pytest.mark.parametrize(("page", "number", "code", "shown"), BLOCKS, ids=IDS)
def test_example_runs(
    page: Path,
    number: int,
    code: str,
    shown: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)  # not the checkout: the examples work from an installed package
    namespace: dict[str, Any] = {"__name__": "__docs_example__"}
    injected = "client." in code and not re.search(r"client =|as client\b", code)
    if injected:
        from tests.helpers import load_fixture
        from tests.test_openai_sdk import _client, _sse

        namespace["client"] = _client(_sse(load_fixture("openai__parallel_tool_calls")))
    exec(compile(code, _name(page, number), "exec"), namespace)
    printed = capsys.readouterr().out
    assert printed.strip()
    if injected:
        assert printed.strip() == "tool_calls ['GetWeatherArgs', 'get_stock_price']"
    if shown:
        assert printed == shown, "the output shown after the example is not what it prints"


AGENT_BLOCKS = [(page, number, code) for page, number, code, _ in BLOCKS if "agent_loop" in code]


def test_agent_examples_pass_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy.api", reason="needs mypy (the dev extra)")
    assert AGENT_BLOCKS
    paths = []
    for page, number, code in AGENT_BLOCKS:
        path = tmp_path / f"{page.stem.replace('-', '_')}_block_{number}.py"
        path.write_text(code, encoding="utf-8")
        paths.append(str(path))
    # In a process of its own: mypy run in the test process keeps about half a million objects
    # alive, which every later test's cycle collection would walk.
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-version"]
    done = subprocess.run(
        [*command, "3.11", *paths],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_api_reference_names_every_public_name() -> None:
    reference = (DOCS / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\.\. auto\w+:: ([\w.]+)$", reference, re.M))
    public = {f"rxtoolcalls.{name}" for name in rxtoolcalls.__all__} - {"rxtoolcalls.__version__"}
    for module in ("sources", "transcript", "serve", "viz"):
        names = importlib.import_module(f"rxtoolcalls.{module}").__all__
        public |= {f"rxtoolcalls.{module}.{n}" for n in names if n not in rxtoolcalls.__all__}
    assert public == documented


def test_every_page_is_in_a_table_of_contents() -> None:
    listed = set()
    for index in DOCS.rglob("index.md"):
        folder = index.parent.relative_to(DOCS).as_posix()
        for entry in re.findall(r"^([\w/-]+)$", index.read_text(encoding="utf-8"), re.M):
            listed.add(entry if folder == "." else f"{folder}/{entry}")
    pages = {page.relative_to(DOCS).with_suffix("").as_posix() for page in PAGES[1:]} - {"index"}
    notebooks = {f"notebooks/{path.stem}" for path in (ROOT / "notebooks").glob("*.ipynb")}
    assert pages | notebooks <= listed


def test_the_readme_is_short_and_every_extra_is_listed_with_what_it_brings() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count("\n") <= 250
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    install = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    table = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    for extra, requirements in project["project"]["optional-dependencies"].items():
        assert f"`{extra}`" in install, f"the README's install section lacks {extra!r}"
        # The manual's table says what each extra brings: every package of it, by name.
        row = re.search(rf"^\| `{extra}` \|([^\n]*)$", table, re.M)
        assert row is not None, f"Getting started has no row for the {extra!r} extra"
        for requirement in requirements:
            name = re.match(r"[A-Za-z0-9_.-]+", requirement)
            assert name is not None
            assert f"`{name.group(0)}" in row.group(1), f"{extra}: {name.group(0)} is not named"
