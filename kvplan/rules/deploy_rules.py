"""Deployment-family codes kvplan's own tools raise: the emitters (KV980-KV987) and the policy engine (KV990-KV993).

Declared in the one catalogue (scopes `emit` and `policy`) so `kvplan rule KV980` answers whatever was
imported; the emitters (`kvplan.emit.codes.finding`) and the policy engine build the findings where they
work, so these rules have no body. KV900-KV979 are reserved for a policy file's own rules and
constraints (`kvplan.rules.base.RESERVED`).
"""
from __future__ import annotations

from kvplan.rules.base import define

SKIP_PR = "https://github.com/vllm-project/vllm/pull/33695"
SGLANG_PER_LAYER_PR = "https://github.com/sgl-project/sglang/pull/17530"
TRTLLM_PER_LAYER_PR = "https://github.com/NVIDIA/TensorRT-LLM/pull/13695"


# ---------------------------------------------------------------- emitters (KV98x)
define(
    code="KV980", scope="emit", name="emit-mixed-quantized-dtypes", severity="warning", family="emit",
    summary="The plan puts different quantized KV dtypes on different layers; the engine has one.",
    why="vLLM 0.33 expresses one global --kv-cache-dtype plus a skip list whose layers keep the "
        "model dtype; it has no per-layer choice between two quantized dtypes. The emitter keeps "
        "the most common dtype and, for each other layer, the closest form that loses no "
        "precision (the global dtype when it has at least as many bits, else the model dtype).",
    fix="Use one quantized dtype for all quantized layers, or accept the listed layers as emitted.",
    references=(SKIP_PR, "vllm/model_executor/layers/attention/attention.py::Attention.__init__"))

define(
    code="KV981", scope="emit", name="emit-layer-not-expressible", severity="warning", family="emit",
    summary="Some layers cannot be given their planned KV dtype in the target engine's syntax.",
    why="A 16-bit dtype other than the model dtype, or a quantized dtype on a layer the global "
        "setting cannot reach (e.g. 'auto' resolution from the checkpoint leaves it unquantized), "
        "has no spelling in one global dtype plus a skip list.",
    fix="Change the listed layers in the plan, or accept them as emitted.",
    references=(SKIP_PR,))

define(
    code="KV982", scope="emit", name="emit-no-skip-layers", severity="warning", family="emit",
    summary="The target engine has no skip-layer / per-layer KV dtype option in its released versions.",
    why="SGLang's --kv-cache-per-layer-dtype (PR #15420/#17530, closed) and TensorRT-LLM's "
        "per-layer KvCacheConfig.dtype (PR #13695, open) are not in a release, so one dtype "
        "covers every layer and the layers the plan keeps in 16 bits are quantized.",
    fix="Pass --per-layer to emit the unreleased per-layer syntax for a build that has it, or "
        "serve with vLLM.",
    references=(SGLANG_PER_LAYER_PR, TRTLLM_PER_LAYER_PR))

define(
    code="KV983", scope="emit", name="emit-per-layer-syntax-unreleased", severity="info", family="emit",
    summary="Per-layer KV dtypes emitted with syntax from an engine pull request, not a release.",
    why="The per-layer syntax ('0-1:bf16,62-63:bf16') comes from SGLang PR #17530 (closed) and "
        "TensorRT-LLM PR #13695 (open); a stock release rejects it.",
    fix="Run an engine build that includes the pull request, or drop --per-layer.",
    references=(SGLANG_PER_LAYER_PR, TRTLLM_PER_LAYER_PR))

define(
    code="KV984", scope="emit", name="emit-dtype-approximated", severity="warning", family="emit",
    summary="A planned KV dtype has no equivalent in the target engine; the nearest one is emitted.",
    why="Engines name and lay out quantized KV caches differently (vLLM per-token-head INT8/FP8, "
        "TurboQuant and fp8_e5m2 have no TensorRT-LLM KvCacheConfig.dtype; SGLang's FP4 KV is "
        "an MX-style block-16 E2M1 format, not vLLM's NVFP4 layout).",
    fix="Pick a dtype the target engine supports natively (see the message).",
    references=("python/sglang/srt/server_args.py::ServerArgs.kv_cache_dtype",
                "tensorrt_llm/llmapi/llm_args.py::KvCacheConfig.dtype"))

define(
    code="KV985", scope="emit", name="emit-flag-not-carried", severity="info", family="emit",
    summary="A plan flag has no equivalent flag in the target engine and was left out.",
    why="Attention-backend names, --attention-config and batching limits are engine-specific; "
        "carrying them over literally would fail or mean something else.",
    fix="Set the target engine's own option by hand if you need it.",
    references=("docs/api.md#emit-engine-flags-from-a-plan",))

define(
    code="KV986", scope="emit", name="emit-plan-has-errors", severity="warning", family="emit",
    summary="The plan carries error findings: the emitted launch will fail as the plan predicts.",
    why="The emitter realises the plan faithfully, including what vLLM would reject at startup.",
    fix="Fix the plan's error findings (kvplan explain) before deploying.",
    references=("docs/api.md#emit-engine-flags-from-a-plan",))

define(
    code="KV987", scope="emit", name="emit-16bit-over-checkpoint", severity="warning", family="emit",
    summary="The plan keeps KV in 16 bits but the checkpoint asks for quantized KV the engine applies.",
    why="TensorRT-LLM's KvCacheConfig.dtype accepts only auto, fp8 and nvfp4 (trtllm-serve "
        "--kv_cache_dtype, PR #11487); 'auto' follows the checkpoint's kv_cache_quant_algo, "
        "so there is no flag that forces a 16-bit cache over it.",
    fix="Remove kv_cache_quant_algo from hf_quant_config.json to serve a 16-bit KV cache.",
    references=("https://github.com/NVIDIA/TensorRT-LLM/pull/11487",))

# ---------------------------------------------------------------- policy engine (KV99x)
define(
    code="KV990", scope="policy", name="policy-setting-not-expressible", severity="warning", family="policy",
    summary="A policy setting asks for something vLLM 0.33 cannot express; the closest form is used.",
    why="vLLM 0.33 has one global --kv-cache-dtype and a skip list whose layers keep the model "
        "dtype. Two different quantized dtypes, or a 16-bit dtype other than the model's, cannot "
        "be given to different layers; the layer gets the global dtype when that has at least as "
        "many bits, else the model dtype.",
    fix="Make the policy's settings use one quantized dtype (plus 'model' for protected layers).",
    references=("https://github.com/vllm-project/vllm/pull/33695",))

define(
    code="KV991", scope="policy", name="policy-rewrote-flags", severity="info", family="policy",
    summary="The policy's settings changed --kv-cache-dtype / --kv-cache-dtype-skip-layers.",
    why="Policy settings are realised as serving flags before planning; the plan is for the "
        "rewritten flags, which the launch line must carry to get this plan.",
    fix="Launch with the flags in the message (or `kvplan emit` them).",
    references=("docs/api.md#policy-files",))

define(
    code="KV992", scope="policy", name="policy-constraint-unchecked", severity="warning", family="policy",
    summary="A capacity constraint cannot be checked: the plan has no KV memory budget.",
    why="Tokens of capacity and concurrency need the KV budget, which comes from --gpu (GPU "
        "memory, --gpu-memory-utilization, checkpoint weight size) or --kv-budget-gib.",
    fix="Pass --gpu (with a checkpoint folder) or --kv-budget-gib.",
    references=("docs/api.md#policy-files",))

define(
    code="KV993", scope="policy", name="policy-rule-matches-nothing", severity="info", family="policy",
    summary="A policy rule or constraint selects no layer with a KV cache in this model.",
    why="A selector that matches nothing usually means a typo (a kind or model_type this model "
        "does not have, an index out of range) and the rule silently does nothing.",
    fix="Check the selector against `kvplan explain` for this model.",
    references=("docs/api.md#policy-files",))
