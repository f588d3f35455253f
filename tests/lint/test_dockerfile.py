"""Dockerfiles -> the launch the image runs (issue 42): found by content whatever the file's name,
shell and exec forms, ENTRYPOINT + CMD, `FROM vllm/vllm-openai:TAG` + CMD, scripts the build writes,
and compose services built from them."""
from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.lint import lint_paths
from kvplan.lint.dockerfile import extract_dockerfile, is_dockerfile
from kvplan.releases import DEFAULT_ENGINE_VERSION
from tests.lint.helpers import lint_text, write_file


def _launches(report) -> list[tuple[str, int, str | None, str]]:
    return [(f.path, li.location.line, li.model, li.engine) for f in report.files for li in f.launches]


def _found(report) -> set[tuple[int, int, str]]:
    return {(f.location.line, f.location.column, f.code) for f in report.findings if f.code not in ("KV009", "KV804")}


def test_dockerfile_found_by_content_whatever_its_name(tmp_path: Path) -> None:
    text = """
    # syntax=docker/dockerfile:1
    FROM nvidia/cuda:12.4.1-devel-ubuntu22.04
    RUN pip install vllm
    ENTRYPOINT python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B \\
        --kv-cache-dtype fp9
    """
    for name in ("Dockerfile", "Dockerfile.h100", "vllm.Dockerfile", "serve.dockerfile", "Containerfile"):
        r = lint_text(tmp_path / name.replace(".", "_"), name, text, offline=True)
        assert r.files[0].kind == "dockerfile" and _launches(r) == [(name, 4, "Qwen/Qwen3-8B", DEFAULT_ENGINE_VERSION)]
        # shell form: the words keep their lines and columns across the continuation
        assert _found(r) == {(5, 22, "KV803")}


def test_dockerfile_exec_form_entrypoint_and_cmd_are_one_argv(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "Dockerfile", """
    FROM python:3.12-slim
    ENTRYPOINT ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    CMD ["--model", "Qwen/Qwen3-8B", "--kv-cache-dtype", "fp9"]
    """, offline=True)
    assert _launches(r) == [("Dockerfile", 2, "Qwen/Qwen3-8B", DEFAULT_ENGINE_VERSION)]
    assert _found(r) == {(3, 55, "KV803")}


def test_dockerfile_shell_form_entrypoint_ignores_cmd(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "Dockerfile", """
    FROM python:3.12-slim
    ENTRYPOINT vllm serve Qwen/Qwen3-8B
    CMD ["--kv-cache-dtype", "fp9"]
    """, offline=True)
    assert _launches(r) == [("Dockerfile", 2, "Qwen/Qwen3-8B", DEFAULT_ENGINE_VERSION)] and _found(r) == set()


def test_dockerfile_vllm_base_image_cmd_holds_engine_args_and_names_the_release(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "Dockerfile.vllm", """
    ARG VLLM_TAG=v0.25.0
    FROM vllm/vllm-openai:${VLLM_TAG}
    ENV HF_HOME=/models
    CMD ["--model", "Qwen/Qwen3-8B", "--tensor_parallel_size", "1", "--kv-cache-dtype", "fp9"]
    """, offline=True)
    assert _launches(r) == [("Dockerfile.vllm", 2, "Qwen/Qwen3-8B", "0.25.0")]
    assert r.files[0].launches[0].image == "vllm/vllm-openai:v0.25.0"
    assert _found(r) == {(4, 86, "KV803")}


def test_dockerfile_later_stage_inherits_and_entrypoint_drops_base_cmd(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "Dockerfile", """
    FROM vllm/vllm-openai:v0.25.0 AS base
    CMD ["--model", "Qwen/Qwen3-8B"]
    FROM base AS runtime
    RUN pip install flashinfer
    """, offline=True)
    assert _launches(r) == [("Dockerfile", 1, "Qwen/Qwen3-8B", "0.25.0")]
    r = lint_text(tmp_path / "b", "Dockerfile", """
    FROM vllm/vllm-openai:v0.25.0 AS base
    CMD ["--model", "Qwen/Qwen3-8B"]
    FROM base
    ENTRYPOINT ["/usr/local/bin/start-api"]
    """, offline=True)
    assert _launches(r) == []


def test_dockerfile_launch_scripts_written_by_the_build(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "Dockerfile", """
    FROM vllm/vllm-openai:v0.25.0
    RUN echo '#!/bin/bash\\nvllm serve Qwen/Qwen3-8B --kv-cache-dtype fp9' > /start.sh && chmod +x /start.sh
    COPY <<EOF /serve.sh
    #!/bin/sh
    exec vllm serve Qwen/Qwen3-8B \\
      --kv-cache-dtype fp9
    EOF
    ENTRYPOINT ["/start.sh"]
    """, offline=True)
    assert _launches(r) == [("Dockerfile", 2, "Qwen/Qwen3-8B", "0.25.0"), ("Dockerfile", 5, "Qwen/Qwen3-8B", "0.25.0")]
    assert _found(r) == {(2, 66, "KV803"), (6, 20, "KV803")}


def test_dockerfile_of_another_server_is_no_launch_and_text_is_no_dockerfile(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "Dockerfile", """
    FROM ubuntu:24.04
    RUN apt-get update && apt-get install -y curl
    CMD ["bash"]
    """, offline=True)
    assert r.files[0].status == "skipped" and _launches(r) == []
    assert not is_dockerfile("from here on we run vllm serve org/m\nFROM the top\n")
    assert not is_dockerfile("FROM alpine\n")  # one line: too little to tell
    assert is_dockerfile("ARG BASE=ubuntu\nFROM ${BASE}\nRUN true\n")


def test_compose_build_follows_the_dockerfile_and_counts_each_launch_once(tmp_path: Path) -> None:
    write_file(tmp_path, "server/Dockerfile.gpu", """
    FROM vllm/vllm-openai:v0.25.0
    CMD ["--model", "Qwen/Qwen3-8B"]
    """)
    write_file(tmp_path, "compose.yaml", """
    services:
      tuned:
        build:
          context: ./server
          dockerfile: Dockerfile.gpu
        command: ["--model", "Qwen/Qwen3-8B", "--kv-cache-dtype", "fp9"]
      plain:
        build:
          context: ./server
          dockerfile: Dockerfile.gpu
      inline:
        build:
          dockerfile_inline: |
            FROM python:3.12
            ENTRYPOINT ["vllm", "serve"]
        command: Qwen/Qwen3-8B --max-model-len 4096
    """)
    r = lint_paths(["."], cwd=tmp_path, isolated=True, offline=True)
    # `tuned` overrides CMD of an image whose entrypoint is the vLLM server (release from its FROM); `plain`
    # runs the Dockerfile's own CMD: that launch is the Dockerfile's, found there and not again here
    assert _launches(r) == [("compose.yaml", 3, "Qwen/Qwen3-8B", "0.25.0"), ("compose.yaml", 12, "Qwen/Qwen3-8B",
                                                                             DEFAULT_ENGINE_VERSION),
                            ("server/Dockerfile.gpu", 1, "Qwen/Qwen3-8B", "0.25.0")]
    assert {(f.location.path, f.location.line, f.code) for f in r.findings if f.code == "KV803"} == {
        ("compose.yaml", 6, "KV803")}


def test_dockerfile_sh_c_script_in_exec_form_keeps_lines_across_continuations(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "Dockerfile", """
    FROM python:3.12
    ARG MODEL_NAME=Qwen/Qwen3-8B
    ENV MODEL_NAME=${MODEL_NAME}
    CMD ["sh", "-c", "vllm serve ${MODEL_NAME} \\
        --max-model-len 4096 \\
        --kv-cache-dtype fp9"]
    """, offline=True)
    # the build argument's default is the model; the script's words are where they are written
    assert _launches(r) == [("Dockerfile", 4, "Qwen/Qwen3-8B", DEFAULT_ENGINE_VERSION)]
    assert _found(r) == {(6, 22, "KV803")}


def test_compose_service_running_an_image_another_service_builds(tmp_path: Path) -> None:
    write_file(tmp_path, "Dockerfile", """
    FROM vllm/vllm-openai:v0.25.0
    RUN pip install flashinfer-python
    """)
    write_file(tmp_path, "compose.yaml", """
    services:
      builder:
        image: local/vllm-fi:dev
        build: .
        command: ["--model", "Qwen/Qwen3-8B"]
      second:
        image: local/vllm-fi:dev
        command: ["--model", "Qwen/Qwen3-8B", "--kv-cache-dtype", "fp9"]
    """)
    r = lint_paths(["compose.yaml"], cwd=tmp_path, isolated=True, offline=True)
    # `second` runs the image `builder` builds: its entrypoint is the vLLM server, its release 0.25
    assert _launches(r) == [("compose.yaml", 4, "Qwen/Qwen3-8B", "0.25.0"), ("compose.yaml", 7, "Qwen/Qwen3-8B",
                                                                             "0.25.0")]
    assert {(f.location.line, f.code) for f in r.findings if f.code == "KV803"} == {(8, "KV803")}


_DOCKER_WORDS = st.sampled_from(["FROM vllm/vllm-openai:v0.25.0", "FROM base AS b", "CMD", "ENTRYPOINT", "RUN echo",
                                 "ENV A=1", "ARG X=", '["vllm", "serve"', "vllm serve m", "\\", "\n", '"', "'", "<<EOF",
                                 "EOF", " ", "--kv-cache-dtype fp8", "${X}", "#"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_DOCKER_WORDS, max_size=40).map("".join))
def test_dockerfile_reader_never_raises_on_any_text(text: str) -> None:
    ex = extract_dockerfile("FROM x\n" + text)
    assert all(s.launch.launcher.line >= 1 for s in ex.sites)
    is_dockerfile(text)
