"""Shell scripts (issue 42): the binary in a variable, a launch line held in a variable and run by eval,
`docker compose run SERVICE COMMAND`, and `: "${VAR:=default}"` defaults."""
from __future__ import annotations

from pathlib import Path

from tests.lint.helpers import lint_text


def _launches(report) -> list[tuple[int, int, str | None]]:
    return [(li.location.line, li.location.column, li.model) for f in report.files for li in f.launches]


def _found(report) -> set[tuple[int, int, str]]:
    return {(f.location.line, f.location.column, f.code) for f in report.findings if f.code not in ("KV009",)}


def test_binary_in_a_variable_is_a_launch_where_it_is_written(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "serve.sh", """
    #!/bin/bash
    VLLM=${VLLM_BIN:-/opt/venv/bin/vllm}
    "$VLLM" serve Qwen/Qwen3-8B --kv-cache-dtype fp9
    "${VLLM_BIN}" serve Qwen/Qwen3-8B --max-model-len 4096
    "$PYTHON" serve Qwen/Qwen3-8B
    """, offline=True)
    # the third line's binary is not vLLM's (a variable not named for it): not a launch
    assert _launches(r) == [(3, 2, "Qwen/Qwen3-8B"), (4, 2, "Qwen/Qwen3-8B")]
    assert _found(r) == {(3, 46, "KV803")}


def test_static_default_names_the_model(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "serve.sh", """
    #!/bin/sh
    : "${MODEL_ID:=Qwen/Qwen3-8B}"
    : ${KV_DTYPE:=fp9}
    : "${PORT:=8000}"
    exec vllm serve "$MODEL_ID" --kv-cache-dtype "$KV_DTYPE" --port "$PORT"
    """, offline=True)
    assert _launches(r) == [(5, 6, "Qwen/Qwen3-8B")]
    assert _found(r) == {(3, 15, "KV803")}  # at the default, where the value is written


def test_launch_line_held_in_a_variable_and_evaluated(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "serve.sh", """
    #!/bin/bash
    KV=fp9
    CMD="vllm serve Qwen/Qwen3-8B --kv-cache-dtype $KV"
    echo "$CMD"
    eval $CMD
    """, offline=True)
    assert _launches(r) == [(3, 6, "Qwen/Qwen3-8B")]
    assert _found(r) == {(2, 4, "KV803")}
    # an unknown part (a model from the caller) stays unknown and is said once, not an invented launch
    r = lint_text(tmp_path / "b", "serve.sh", """
    #!/bin/bash
    CMD="vllm serve $MODEL --max-model-len 4096"
    eval "$CMD"
    """, offline=True)
    assert _launches(r) == [(2, 6, "$MODEL")] and {f.code for f in r.findings} == {"KV804"}


def test_docker_compose_run_with_a_command_is_a_launch(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "bench.sh", """
    #!/bin/bash
    docker compose run --rm -e HF_TOKEN=x --name bench llm vllm serve Qwen/Qwen3-8B --kv-cache-dtype fp9
    docker-compose run -T llm python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B
    docker compose run --rm llm
    docker compose up -d
    """, offline=True)
    # a run with no command runs the service's own command: that launch is the compose file's
    assert _launches(r) == [(2, 56, "Qwen/Qwen3-8B"), (3, 27, "Qwen/Qwen3-8B")]
    assert _found(r) == {(2, 98, "KV803")}
