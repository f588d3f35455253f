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


def test_cpu_and_ray_cluster_model_entries_are_not_bounded_by_one_pods_gpus(tmp_path: Path) -> None:
    write_file(tmp_path, "values.yaml", """
    servingEngineSpec:
      modelSpec:
      - name: cpu
        repository: vllm/vllm-openai
        tag: v0.25.0
        modelURL: Qwen/Qwen3-8B
        requestGPU: 0
      - name: ray
        repository: vllm/vllm-openai
        tag: v0.25.0
        modelURL: Qwen/Qwen3-8B
        requestGPU: 1
        vllmConfig:
          pipelineParallelSize: 2
        raySpec:
          enabled: true
      - name: one-pod
        repository: vllm/vllm-openai
        tag: v0.25.0
        modelURL: Qwen/Qwen3-8B
        requestGPU: 1
        vllmConfig:
          tensorParallelSize: 2
    """)
    r = lint_paths(["values.yaml"], cwd=tmp_path, isolated=True, offline=True)
    # production-stack: requestGPU 0 runs the CPU backend; raySpec spreads the engine over head and workers
    assert [f.location.line for f in r.findings if f.code == "KV808"] == [23]


def test_helm_unittest_suites_are_chart_tests_not_deployments(tmp_path: Path) -> None:
    write_file(tmp_path, "chart/tests/engine_test.yaml", """
    suite: test the engine deployment
    templates:
      - deployment.yaml
    tests:
      - it: renders one engine
        set:
          servingEngineSpec:
            modelSpec:
              - name: test
                modelURL: facebook/opt-125m
                requestGPU: 1
                vllmConfig: {tensorParallelSize: 2}
    """)
    r = lint_paths(["chart/tests/engine_test.yaml"], cwd=tmp_path, isolated=True, offline=True)
    assert r.summary.launches == 0 and r.findings == [] and "helm-unittest" in (r.files[0].note or "")
