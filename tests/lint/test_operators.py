"""Inference-operator resources (issue 42): the launch each controller builds, read where the operator
documents it: KubeAI Model and models-chart catalog, production-stack VLLMRuntime, llm-d ModelService values;
and one container, one launch in chart values."""
from __future__ import annotations

from pathlib import Path

from tests.lint.helpers import lint_text


def _launches(report) -> list[tuple[int, str | None, int | None, str | None]]:
    return [(li.location.line, li.model, li.gpu_count, li.image) for f in report.files for li in f.launches]


def _found(report) -> set[tuple[int, int, str]]:
    return {(f.location.line, f.location.column, f.code) for f in report.findings if f.code not in ("KV009", "KV804")}


def test_kubeai_model_url_args_and_resource_profile(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "model.yaml", """
    apiVersion: kubeai.org/v1
    kind: Model
    metadata:
      name: qwen3-8b-l4
    spec:
      features: [TextGeneration]
      url: hf://Qwen/Qwen3-8B
      engine: VLLM
      args:
        - --max-model-len=8192
        - --kv-cache-dtype=fp9
      resourceProfile: nvidia-gpu-l4:2
    ---
    apiVersion: kubeai.org/v1
    kind: Model
    metadata:
      name: gemma
    spec:
      url: ollama://gemma2:2b
      engine: OLlama
    """, offline=True)
    # the ollama model is another engine: no launch; the url's hf:// is not part of the model id
    assert _launches(r) == [(7, "Qwen/Qwen3-8B", 2, None)]
    assert r.files[0].launches[0].gpu == "l4"
    assert _found(r) == {(11, 24, "KV803")}


def test_kubeai_catalog_entry_is_a_launch_without_engine_flags(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "values.yaml", """
    catalog:
      qwen3-8b-cpu:
        enabled: false
        features: [TextGeneration]
        url: hf://Qwen/Qwen3-8B
        engine: VLLM
        resourceProfile: cpu:2
      private-model:
        url: pvc://models/qwen
        engine: VLLM
        args: ["--max-model-len=4096"]
      whisper:
        url: hf://Systran/faster-whisper-medium
        engine: FasterWhisper
    """, offline=True)
    assert _launches(r) == [(2, "Qwen/Qwen3-8B", None, None), (8, "/model", None, None)]
    # a PVC model: the controller serves /model, whose config kvplan cannot see: one KV804 names it
    assert [f.model for f in r.findings if f.code == "KV804"] == ["/model"]


def test_vllm_runtime_flags_from_the_controller(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "rt.yaml", """
    apiVersion: production-stack.vllm.ai/v1alpha1
    kind: VLLMRuntime
    metadata:
      name: rt
    spec:
      model:
        modelURL: "Qwen/Qwen3-8B"
        maxModelLen: 4096
        dtype: "bfloat16"
      vllmConfig:
        enableChunkedPrefill: false
        tensorParallelSize: 2
        gpuMemoryUtilization: "0.8"
        extraArgs: ["--kv-cache-dtype", "fp9"]
      deploymentConfig:
        resources:
          gpu: "1"
        image:
          registry: "docker.io"
          name: "vllm/vllm-openai:v0.25.0"
    """, offline=True)
    assert _launches(r) == [(7, "Qwen/Qwen3-8B", 1, "docker.io/vllm/vllm-openai:v0.25.0")]
    li = r.files[0].launches[0]
    assert li.engine == "0.25.0"
    # tensor parallel 2 on the one GPU the deployment asks for, and the invalid dtype at its item
    assert _found(r) == {(12, 5, "KV808"), (14, 38, "KV803")}


def test_llmd_modelservice_values_decode_and_prefill(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "values-pd.yaml", """
    modelArtifacts:
      name: Qwen/Qwen3-8B
      uri: hf://"{{ .Values.modelArtifacts.name }}"
    decode:
      create: true
      parallelism:
        tensor: 2
      containers:
      - name: vllm
        image: ghcr.io/llm-d/llm-d-cuda:v0.3.0
        modelCommand: vllmServe
        args: ["--kv-cache-dtype", "fp9"]
        resources:
          limits:
            nvidia.com/gpu: "2"
    prefill:
      create: false
      containers:
      - name: vllm
        modelCommand: vllmServe
    """, offline=True)
    assert _launches(r) == [(11, "Qwen/Qwen3-8B", 2, "ghcr.io/llm-d/llm-d-cuda:v0.3.0")]
    assert _found(r) == {(12, 33, "KV803")}


def test_values_command_and_args_of_one_container_are_one_launch(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "values.yaml", """
    servingRuntime:
      image: vllm/vllm-openai:v0.25.0
      command: [python, -m, vllm.entrypoints.openai.api_server]
      args: [--port=8080, --model=Qwen/Qwen3-8B, --kv-cache-dtype=fp9]
    """, offline=True)
    assert _launches(r) == [(3, "Qwen/Qwen3-8B", None, "vllm/vllm-openai:v0.25.0")]
    assert _found(r) == {(4, 63, "KV803")}


def test_one_kv804_per_unresolved_model_listing_its_launches(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "bench.sh", """
    #!/bin/bash
    vllm serve example-org/unknown-model --port 8000 &
    vllm serve example-org/unknown-model --port 8001 &
    vllm serve example-org/other-model --port 8002 &
    vllm serve "$MODEL" --port 8003
    """, offline=True)
    kv804 = [f for f in r.findings if f.code == "KV804"]
    assert [(f.location.line, f.model) for f in kv804] == [(2, "example-org/unknown-model"),
                                                            (4, "example-org/other-model"), (5, None)]
    assert kv804[0].message.endswith("launched 2 times: bench.sh:2, bench.sh:3.")
    assert "launched" not in kv804[1].message and len(r.files[0].launches) == 4


def test_values_engine_args_elsewhere_join_the_one_container_launch(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "values.yaml", """
    servingRuntime:
      image: vllm/vllm-openai:v0.25.0
      command: [python, -m, vllm.entrypoints.openai.api_server]
      args: [--port=8080, --model=Qwen/Qwen3-8B]
    model:
      args: [--max-model-len=4096, --kv-cache-dtype=fp9]
    """, offline=True)
    # command + args + model.args: one launch (not one full and one "names no model")
    assert _launches(r) == [(3, "Qwen/Qwen3-8B", None, "vllm/vllm-openai:v0.25.0")]
    assert _found(r) == {(6, 49, "KV803")}


def test_kserve_llm_inference_service_decode_and_prefill_pools(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "llmisvc.yaml", """
    apiVersion: serving.kserve.io/v1alpha2
    kind: LLMInferenceService
    metadata:
      name: qwen
    spec:
      model:
        uri: hf://Qwen/Qwen3-8B
        name: qwen3
      parallelism:
        tensor: 2
      template:
        containers:
          - name: main
            env:
              - name: VLLM_ADDITIONAL_ARGS
                value: "--kv-cache-dtype fp9"
            resources:
              limits:
                nvidia.com/gpu: "1"
      prefill:
        template:
          containers:
            - name: main
              args: ["--max-model-len", "4096"]
              resources:
                limits:
                  nvidia.com/gpu: "1"
    """, offline=True)
    # the model KServe downloads to /mnt/models is the uri's id; each pool is a launch
    assert _launches(r) == [(7, "Qwen/Qwen3-8B", 1, None), (20, "Qwen/Qwen3-8B", 1, None)]
    # tensor parallel 2 on the decode pool's one GPU, and the dtype from VLLM_ADDITIONAL_ARGS at its value
    assert _found(r) == {(10, 13, "KV808"), (16, 38, "KV803")}


def test_merged_kv804_lists_ten_places_and_counts_the_rest(tmp_path: Path) -> None:
    lines = "\n".join(f"vllm serve example-org/unknown-model --port {8000 + i} &" for i in range(12))
    r = lint_text(tmp_path, "many.sh", "#!/bin/bash\n" + lines + "\n", offline=True)
    (kv804,) = [f for f in r.findings if f.code == "KV804"]
    assert "launched 12 times: many.sh:2, many.sh:3" in kv804.message and kv804.message.endswith(
        "many.sh:11 and 2 more.")
