"""Helm values (issue 42): the release of a launch whose image the chart names elsewhere."""
from __future__ import annotations

from pathlib import Path

from kvplan.lint import lint_paths
from tests.lint.helpers import write_file


def test_override_values_file_uses_the_charts_own_image(tmp_path: Path) -> None:
    write_file(tmp_path, "chart/Chart.yaml", "apiVersion: v2\nname: llm\nversion: 0.1.0\n")
    write_file(tmp_path, "chart/values.yaml", """
    image:
      repository: vllm/vllm-openai
      tag: v0.25.0
    """)
    write_file(tmp_path, "chart/values-qwen.yaml", """
    models:
      - name: qwen
        extraArgs: ["--model", "Qwen/Qwen3-8B", "--max-model-len", "4096"]
    """)
    r = lint_paths(["chart/values-qwen.yaml"], cwd=tmp_path, isolated=True, offline=True)
    (li,) = r.files[0].launches
    # the override names no image: the chart's values.yaml does, and its tag is the release linted against
    assert (li.model, li.image, li.engine) == ("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.25.0", "0.25.0")
    write_file(tmp_path, "loose/values-qwen.yaml", (tmp_path / "chart/values-qwen.yaml").read_text())
    r = lint_paths(["loose/values-qwen.yaml"], cwd=tmp_path, isolated=True, offline=True)
    assert r.files[0].launches[0].image is None  # no chart around it: nothing to borrow
