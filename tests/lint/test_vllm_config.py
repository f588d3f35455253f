"""vLLM `--config` files (issue 42): one launch with the launch that passes them, linted alone otherwise."""
from __future__ import annotations

from pathlib import Path

from kvplan.lint import lint_paths
from tests.lint.helpers import lint_text as _lint
from tests.lint.helpers import write_file


def _run(tmp_path: Path):
    return lint_paths(["."], cwd=tmp_path, isolated=True, offline=True)


def test_config_file_is_part_of_the_launch_that_passes_it(tmp_path: Path) -> None:
    write_file(tmp_path, "serve/config.yaml", """
    kv-cache-dtype: fp9
    max-model-len: 4096
    """)
    write_file(tmp_path, "Dockerfile", """
    FROM vllm/vllm-openai:v0.25.0
    COPY serve/config.yaml /app/config.yaml
    ENTRYPOINT ["vllm", "serve", "Qwen/Qwen3-8B", "--config", "/app/config.yaml"]
    """)
    r = _run(tmp_path)
    launches = [(f.path, li.location.line, li.model, li.engine) for f in r.files for li in f.launches]
    assert launches == [("Dockerfile", 3, "Qwen/Qwen3-8B", "0.25.0")]  # one launch, not two
    cfg = next(f for f in r.files if f.path == "serve/config.yaml")
    assert cfg.status == "linted" and "Dockerfile:3" in (cfg.note or "")
    # the config's key is judged with the launch's model and release, and reported where it is written
    assert [(f.location.path, f.location.line, f.location.column, f.code) for f in r.findings
            if f.code == "KV803"] == [("serve/config.yaml", 1, 17, "KV803")]


def test_config_file_nothing_passes_is_linted_alone(tmp_path: Path) -> None:
    write_file(tmp_path, "config.yaml", """
    model: Qwen/Qwen3-8B
    kv_cache_dtype: fp9
    """)
    write_file(tmp_path, "serve.sh", """
    #!/bin/sh
    vllm serve Qwen/Qwen3-8B --config other.yaml
    """)
    r = _run(tmp_path)
    launches = sorted((f.path, li.model) for f in r.files for li in f.launches)
    assert launches == [("config.yaml", "Qwen/Qwen3-8B"), ("serve.sh", "Qwen/Qwen3-8B")]
    assert [(f.location.path, f.code) for f in r.findings if f.code == "KV803"] == [("config.yaml", "KV803")]


def _codes(report) -> set[tuple[int, int, str]]:
    return {(f.location.line, f.location.column, f.code) for f in report.findings if not f.code.startswith("KV7")}


def test_vllm_config_yaml_unknown_key_is_a_typo_finding(tmp_path: Path) -> None:
    text = """
    model: meta-llama/Meta-Llama-3.1-8B
    kv_cache_dtype: fp8
    kv-cache-skip-layers: [0, 1]
    max-model-len: 8192
    """
    r = _lint(tmp_path, "serve.yaml", text, gpu="h100")
    assert {(c, line, col) for line, col, c in _codes(r)} >= {("KV001", 3, 1), ("KV401", 2, 1)}
    assert "did you mean --kv-cache-dtype-skip-layers" in next(f.message for f in r.findings if f.code == "KV001")


def test_vllm_config_yaml_key_prefix_is_the_option_as_in_vllm(tmp_path: Path) -> None:
    # vLLM turns keys into --flags and argparse resolves unique prefixes: this is --kv-cache-dtype-skip-layers.
    text = """
    model: meta-llama/Meta-Llama-3.1-8B
    kv_cache_dtype: fp8
    kv-cache-dtype-skip-layer: [0, 1]
    """
    r = _lint(tmp_path, "serve.yaml", text, gpu="h100")
    assert not [f for f in r.findings if f.code in ("KV001", "KV006")]
