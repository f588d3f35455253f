"""Every file in examples/deploy lints to the findings a user would check by hand: file, line, column, code.

Backend findings (KV7xx) belong to the backend rule set, which evolves on its own; they are checked
only for being anchored in the right file, not listed here.
"""
from __future__ import annotations

import pytest

from kvplan.lint import lint_paths
from tests.conftest import ROOT

DEPLOY = ROOT / "examples" / "deploy"

# file -> {(line, column, code)}; codes KV7xx excluded (see module docstring).
EXPECTED: dict[str, set[tuple[int, int, str]]] = {
    "k8s-deployment-typo.yaml": {
        (27, 15, "KV001"),  # --kv-cache-type=fp8: did you mean --kv-cache-dtype?
        (30, 15, "KV002"),  # --calculate-kv-scales removed in 0.33
    },
    "kserve-inferenceservice.yaml": {
        (21, 40, "KV301"),  # skip token 'full_attention' matches nothing (points at the value)
    },
    "leaderworkerset.yaml": {
        (32, 17, "KV105"),  # explicit fp8 matches the checkpoint scheme (info)
    },
    "docker-compose.yaml": {
        (14, 7, "KV401"),   # fp8 without calibrated scales
        (16, 7, "KV808"),   # TP 2 on one reserved GPU
    },
    "vllm-config.yaml": {
        (2, 8, "KV603"),    # gemma defaults used (info)
        (3, 17, "KV803"),   # kv-cache-dtype: fp8_e5m3 -> did you mean fp8_e5m2
    },
    "serve-llama70b.sh": {
        (10, 3, "KV105"),   # --kv-cache-dtype bfloat16 overrides the FP8 checkpoint scheme
    },
    "helm-rendered.yaml": {
        (48, 15, "KV502"),  # 131072 tokens do not fit on an L4
    },
    "clean-deployment.yaml": set(),
}


def _found(name: str) -> set[tuple[int, int, str]]:
    report = lint_paths([str(DEPLOY / name)], cwd=ROOT)
    assert all(f.location.path == f"examples/deploy/{name}" for f in report.findings)
    return {(f.location.line, f.location.column, f.code) for f in report.findings if not f.code.startswith("KV7")}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_examples_deploy_findings_exact(name: str) -> None:
    assert _found(name) == EXPECTED[name]


def test_examples_deploy_every_file_is_covered() -> None:
    linted = {p.name for p in DEPLOY.iterdir() if p.suffix in (".yaml", ".sh")}
    assert linted == set(EXPECTED)


def test_examples_clean_deployment_has_zero_findings_and_a_launch() -> None:
    report = lint_paths([str(DEPLOY / "clean-deployment.yaml")], cwd=ROOT)
    assert report.findings == [] and report.summary.launches == 1
    launch = report.files[0].launches[0]
    assert launch.model == "nvidia/Llama-3.1-70B-Instruct-FP8"
    assert launch.config == "bundled:nvidia/Llama-3.1-70B-Instruct-FP8"
    assert launch.gpu == "h100-sxm" and launch.gpu_count == 4


def test_examples_messages_say_what_and_how_to_fix() -> None:
    report = lint_paths([str(DEPLOY)], cwd=ROOT)
    by = {(f.location.path.rsplit("/", 1)[-1], f.code): f for f in report.findings}
    typo = by[("k8s-deployment-typo.yaml", "KV001")]
    assert "did you mean --kv-cache-dtype" in typo.message
    assert typo.location.yaml_path == "spec.template.spec.containers[0].args[1]"
    bad = by[("vllm-config.yaml", "KV803")]
    assert "Did you mean 'fp8_e5m2'" in bad.message and "fp8_e4m3" in (bad.fix or "")
    assert by[("helm-rendered.yaml", "KV502")].severity.value == "error"
    assert "--kv-cache-dtype" not in {f.message for f in report.findings if f.code == "KV001"}


def test_examples_directory_walk_reports_skips_and_suppressions() -> None:
    report = lint_paths([str(DEPLOY)], cwd=ROOT)
    skipped = {f.path: f.note for f in report.files if f.status == "skipped"}
    assert set(skipped) == {"examples/deploy/README.md", "examples/deploy/kvplan.toml"}
    assert report.settings.config_file == "examples/deploy/kvplan.toml" and report.settings.gpu == "h100-sxm"
    via = {(s.location.path.rsplit("/", 1)[-1], s.code, s.via) for s in report.suppressed}
    assert via == {("kserve-inferenceservice.yaml", "KV401", "annotation"), ("helm-rendered.yaml", "KV401", "comment")}
    assert all(s.reason for s in report.suppressed)
    assert report.summary.linted == 8 and report.summary.launches == 8


def test_examples_gpu_and_model_come_from_the_manifest() -> None:
    report = lint_paths([str(DEPLOY)], cwd=ROOT)
    launches = {f.path.rsplit("/", 1)[-1]: f.launches[0] for f in report.files if f.launches}
    assert launches["kserve-inferenceservice.yaml"].gpu == "l4"             # gke-accelerator node selector
    assert launches["kserve-inferenceservice.yaml"].model == "Qwen/Qwen3-8B"  # storageUri hf://
    assert launches["leaderworkerset.yaml"].gpu == "b200" and launches["leaderworkerset.yaml"].gpu_count == 16
    assert launches["helm-rendered.yaml"].config == "../Meta-Llama-3.1-8B/config.json"  # kvplan.toml mapping
    assert launches["serve-llama70b.sh"].model == "nvidia/Llama-3.1-70B-Instruct-FP8"  # "$MODEL" resolved
    assert launches["docker-compose.yaml"].gpu == "h100-sxm"               # configured default
