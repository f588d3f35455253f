"""Deployment shapes -> launches with exact positions (Kubernetes, KServe, LWS, compose, vLLM config, scripts)."""
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
    # KV809 points at the env value that gets substituted; KV813: the :latest image pins no release
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
    assert _codes(r) == {(13, 61, "KV803")}
    assert "Did you mean" in r.findings[0].message


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
    assert _codes(r) == {(8, 79, "KV001")}
    assert r.files[0].launches[0].model == "Qwen/Qwen3-8B"


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
