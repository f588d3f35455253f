"""Kubernetes objects -> launches with exact positions (Pods, Deployments, LeaderWorkerSet, KServe)."""
from __future__ import annotations

from pathlib import Path

from tests.lint.helpers import lint_text as _lint


def _codes(report) -> set[tuple[int, int, str]]:
    return {(f.location.line, f.location.column, f.code) for f in report.findings if not f.code.startswith("KV7")}


POD = """
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.33.0
      args: {args}
"""


def test_k8s_flag_and_value_in_one_list_item_is_kv809(tmp_path: Path) -> None:
    r = _lint(tmp_path, "pod.yaml", POD.format(args='["meta-llama/Meta-Llama-3.1-8B", "--kv-cache-dtype fp8"]'))
    assert _codes(r) == {(9, 47, "KV809")}
    assert "--kv-cache-dtype=fp8" in r.findings[0].fix


def test_k8s_env_substitution_is_one_argument_not_split(tmp_path: Path) -> None:
    text = """
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: d}
    spec:
      template:
        spec:
          containers:
            - name: vllm
              image: vllm/vllm-openai:latest
              args: ["meta-llama/Meta-Llama-3.1-8B", "$(KV_ARGS)"]
              env:
                - name: KV_ARGS
                  value: "--kv-cache-dtype fp8"
    """
    r = _lint(tmp_path, "d.yaml", text)
    # KV809 points at the env value that gets substituted; KV813: the :latest image pins no release (it is linted
    # as the newest release, whose backend rows are verified: no KV009)
    assert {c for c in _codes(r)} == {(13, 23, "KV809"), (9, 18, "KV813")}


def test_k8s_extra_args_env_var_is_appended(tmp_path: Path) -> None:
    text = """
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: d}
    spec:
      template:
        spec:
          containers:
            - name: vllm
              image: registry.local/vllm-openai:0.33
              args: ["Qwen/Qwen3-8B"]
              env:
                - name: VLLM_EXTRA_ARGS
                  value: "--max-model-len 8192 --kv-cache-dtype fp9"
    """
    r = _lint(tmp_path, "d.yaml", text)
    # an image that is not vLLM's own is linted as the default release (backend rows verified: no KV009)
    assert _codes(r) == {(13, 61, "KV803")}
    assert "Did you mean" in next(f.message for f in r.findings if f.code == "KV803")


def test_k8s_unresolved_secret_value_is_reported_not_guessed(tmp_path: Path) -> None:
    text = """
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          args: ["Qwen/Qwen3-8B", "--kv-cache-dtype", "$(KV_DTYPE)"]
          env:
            - name: KV_DTYPE
              valueFrom: {configMapKeyRef: {name: c, key: dtype}}
    """
    assert _codes(_lint(tmp_path, "p.yaml", text)) == {(8, 52, "KV811")}


def test_k8s_non_vllm_containers_are_ignored_and_file_is_skipped(tmp_path: Path) -> None:
    pod = POD.replace("vllm/vllm-openai:v0.33.0", "nginx:1.27").format(args='["-g", "daemon off;"]')
    r = _lint(tmp_path, "nginx.yaml", pod)
    assert r.findings == [] and r.files[0].status == "skipped" and r.files[0].kind == "kubernetes"


def test_lws_parallelism_counts_the_group(tmp_path: Path) -> None:
    text = """
    apiVersion: leaderworkerset.x-k8s.io/v1
    kind: LeaderWorkerSet
    metadata: {name: l}
    spec:
      leaderWorkerTemplate:
        size: 2
        leaderTemplate:
          spec:
            containers:
              - name: leader
                image: vllm/vllm-openai:v0.33.0
                command: ["sh", "-c", "vllm serve Qwen/Qwen3-8B --tensor-parallel-size 8 --pipeline-parallel-size 4"]
                resources: {limits: {nvidia.com/gpu: "8"}}
    """
    r = _lint(tmp_path, "lws.yaml", text)
    assert (12, 61, "KV808") in _codes(r)
    assert "2 pods x 8 = 16" in next(f.message for f in r.findings if f.code == "KV808")


def test_kserve_flags_are_not_unknown_and_model_id_is_the_model(tmp_path: Path) -> None:
    text = """
    apiVersion: serving.kserve.io/v1beta1
    kind: InferenceService
    metadata: {name: q}
    spec:
      predictor:
        model:
          modelFormat: {name: huggingface}
          args: ["--model_name=q", "--model_id=Qwen/Qwen3-8B", "--backend=vllm", "--kv-cache-dtpye=fp8"]
    """
    r = _lint(tmp_path, "isvc.yaml", text, gpu="h100")
    assert _codes(r) == {(8, 79, "KV001")}  # the default release: backend rows verified, no KV009
    assert r.files[0].launches[0].model == "Qwen/Qwen3-8B"
