"""Shell scripts and launch lines in text files; issue 42: the binary in a variable, a launch line held in a
variable and run by eval, `docker compose run SERVICE COMMAND`, and `: "${VAR:=default}"` defaults."""
from __future__ import annotations

from pathlib import Path

from tests.lint.helpers import lint_text
from tests.lint.helpers import lint_text as _lint


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


def test_held_launch_line_over_several_lines_keeps_its_positions(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "serve.sh", """
    #!/bin/bash
    CMD="
        vllm serve Qwen/Qwen3-8B \\
            --max-model-len 4096 \\
            --kv-cache-dtype fp9
        "
    bash -c "${CMD}" &
    """, offline=True)
    # the words of the variable's value are where they are written, line continuations and all
    assert _launches(r) == [(3, 5, "Qwen/Qwen3-8B")]
    assert _found(r) == {(5, 26, "KV803")}


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


def _codes(report) -> set[tuple[int, int, str]]:
    return {(f.location.line, f.location.column, f.code) for f in report.findings if not f.code.startswith("KV7")}


def test_plain_text_launch_lines_and_python_module(tmp_path: Path) -> None:
    text = """
    Reproduce with:

        python -m vllm.entrypoints.openai.api_server --model openai/gpt-oss-20b --kv-cache-dtype fp8 \\
            --kv-cache-dtype-skip-layers 30
    """
    r = _lint(tmp_path, "NOTES.txt", text)
    assert (4, 38, "KV302") in _codes(r)  # index 30 beyond gpt-oss-20b's 24 layers, pointing at "30"


def test_local_model_path_next_to_the_manifest(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(
        '{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 256,'
        ' "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 4096,'
        ' "torch_dtype": "bfloat16"}')
    r = _lint(tmp_path, "run.sh", "#!/bin/sh\nvllm serve ./ckpt --kv-cache-dtype-skip-layers 5 --kv-cache-dtype fp8\n")
    assert (2, 48, "KV302") in _codes(r)
    assert r.files[0].launches[0].config == "./ckpt"


def test_script_flags_read_as_vllm_reads_them_and_runtime_words_are_not_strays(tmp_path: Path) -> None:
    text = """
    #!/bin/sh
    vllm serve meta-llama/Meta-Llama-3.1-8B --kv-cache-dtype fp8 --max-model 4096 $EXTRA_ARGS
    vllm serve meta-llama/Meta-Llama-3.1-8B --kv-cache fp8 "$@"
    vllm serve meta-llama/Meta-Llama-3.1-8B extra --chat-template t.jinja --code-revision main
    vllm serve meta-llama/Meta-Llama-3.1-8B $KV_FLAG fp8
    vllm serve meta-llama/Meta-Llama-3.1-8B --port=$PORT --gpu-memory-utilization=${GMU:-0.9} --uvicorn-log-level loud
    """
    r = _lint(tmp_path, "serve.sh", text)
    got = {(f.location.line, f.location.column, f.code) for f in r.findings
           if f.code in ("KV001", "KV006", "KV007", "KV803")}
    assert got == {(3, 41, "KV006"), (4, 41, "KV001"), (6, 91, "KV007")}
    kv001 = next(f for f in r.findings if f.code == "KV001")
    assert kv001.message.startswith("unexpected argument 'extra'") and kv001.severity == "error"
