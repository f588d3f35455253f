"""docker compose services -> launches with exact positions."""
from __future__ import annotations

from pathlib import Path

from tests.lint.helpers import lint_text as _lint


def test_compose_list_command_and_unknown_model(tmp_path: Path) -> None:
    text = """
    services:
      llm:
        image: vllm/vllm-openai:v0.33.0
        command: ["my-org/private-model", "--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "first"]
    """
    r = _lint(tmp_path, "compose.yml", text)
    got = {(f.code, f.location.line, f.location.column) for f in r.findings}
    assert ("KV804", 4, 16) in got and ("KV301", 4, 99) in got
    kv804 = next(f for f in r.findings if f.code == "KV804")
    # one line: the model and how to map it; the skipped rules are in the JSON (and text -v)
    assert "skipped" in kv804.message and "KV401" not in kv804.message
    assert "KV401" in kv804.skipped_rules and "KV502" in kv804.skipped_rules and "tool.kvplan.lint.models" in kv804.fix
