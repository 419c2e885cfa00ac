"""Every Python example in the README runs as shown (the SDK one against a local fake)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parent.parent
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_readme_example_runs(
    number: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)  # not the checkout: the examples work from an installed package
    namespace: dict[str, Any] = {}
    code = BLOCKS[number]
    injected = "client." in code and "client =" not in code
    if injected:
        from tests.helpers import load_fixture
        from tests.test_openai_sdk import _client, _sse

        namespace["client"] = _client(_sse(load_fixture("openai__parallel_tool_calls")))
    exec(compile(code, f"README.md block {number}", "exec"), namespace)
    printed = capsys.readouterr().out
    assert printed.strip()
    if injected:
        assert printed.strip() == "tool_calls ['GetWeatherArgs', 'get_stock_price']"


AGENT_BLOCKS = [number for number, code in enumerate(BLOCKS) if "agent_loop" in code]


def test_readme_agent_examples_pass_mypy_strict(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    assert AGENT_BLOCKS
    paths = []
    for number in AGENT_BLOCKS:
        path = tmp_path / f"readme_block_{number}.py"
        path.write_text(BLOCKS[number], encoding="utf-8")
        paths.append(str(path))
    out, err, status = api.run(["--strict", "--no-incremental", "--python-version", "3.11", *paths])
    assert status == 0, out + err
