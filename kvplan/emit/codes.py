"""Finding codes the emitters raise (KV980-KV989), declared with the same shape as built-in rules.

They are `Rule` objects so that `kvplan rule KV980` can print them once registered, but they are
NOT put in the planner's registry: the planner would otherwise run them as check rules on every
plan. Emitters build findings from them with :func:`finding`.

KV9xx is the deployment family: KV900-KV979 are user policy rules, KV980-KV989 emitters,
KV990-KV999 the policy engine (`kvplan.policy.codes`).
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from kvplan.model.plan import Finding
from kvplan.model.vocab import Severity
from kvplan.rules.base import Rule

_CODE = re.compile(r"^KV9\d\d$")
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def make_rule(*, code: str, name: str, severity: str, summary: str, why: str, fix: str,
              family: str, references: Iterable[str] = ()) -> Rule:
    """A documented KV9xx rule object, validated like `kvplan.rules.base.declare` (not registered)."""
    if not _CODE.match(code):
        raise ValueError(f"rule code {code!r} must look like KV9nn")
    if not _NAME.match(name):
        raise ValueError(f"rule name {name!r} must be kebab-case")
    for label, text in (("summary", summary), ("why", why), ("fix", fix)):
        if not text or not text.strip():
            raise ValueError(f"rule {code} needs a {label}")
    if len(summary) > 120 or "\n" in summary:
        raise ValueError(f"rule {code} summary must be one short line")
    return Rule(code=code, name=name, severity=Severity(severity), summary=summary, why=why, fix=fix,
                family=family, kind="check", scope="plan", references=tuple(references))


SKIP_PR = "https://github.com/vllm-project/vllm/pull/33695"
SGLANG_PER_LAYER_PR = "https://github.com/sgl-project/sglang/pull/17530"
TRTLLM_PER_LAYER_PR = "https://github.com/NVIDIA/TensorRT-LLM/pull/13695"

EMIT_RULES: dict[str, Rule] = {r.code: r for r in (
    make_rule(
        code="KV980", name="emit-mixed-quantized-dtypes", severity="warning", family="emit",
        summary="The plan puts different quantized KV dtypes on different layers; the engine has one.",
        why="vLLM 0.33 expresses one global --kv-cache-dtype plus a skip list whose layers keep the "
            "model dtype; it has no per-layer choice between two quantized dtypes. The emitter keeps "
            "the most common dtype and, for each other layer, the closest form that loses no "
            "precision (the global dtype when it has at least as many bits, else the model dtype).",
        fix="Use one quantized dtype for all quantized layers, or accept the listed layers as emitted.",
        references=(SKIP_PR, "vllm/model_executor/layers/attention/attention.py::Attention.__init__")),
    make_rule(
        code="KV981", name="emit-layer-not-expressible", severity="warning", family="emit",
        summary="Some layers cannot be given their planned KV dtype in the target engine's syntax.",
        why="A 16-bit dtype other than the model dtype, or a quantized dtype on a layer the global "
            "setting cannot reach (e.g. 'auto' resolution from the checkpoint leaves it unquantized), "
            "has no spelling in one global dtype plus a skip list.",
        fix="Change the listed layers in the plan, or accept them as emitted.",
        references=(SKIP_PR,)),
    make_rule(
        code="KV982", name="emit-no-skip-layers", severity="warning", family="emit",
        summary="The target engine has no skip-layer / per-layer KV dtype option in its released versions.",
        why="SGLang's --kv-cache-per-layer-dtype (PR #15420/#17530, closed) and TensorRT-LLM's "
            "per-layer KvCacheConfig.dtype (PR #13695, open) are not in a release, so one dtype "
            "covers every layer and the layers the plan keeps in 16 bits are quantized.",
        fix="Pass --per-layer to emit the unreleased per-layer syntax for a build that has it, or "
            "serve with vLLM.",
        references=(SGLANG_PER_LAYER_PR, TRTLLM_PER_LAYER_PR)),
    make_rule(
        code="KV983", name="emit-per-layer-syntax-unreleased", severity="info", family="emit",
        summary="Per-layer KV dtypes emitted with syntax from an engine pull request, not a release.",
        why="The per-layer syntax ('0-1:bf16,62-63:bf16') comes from SGLang PR #17530 (closed) and "
            "TensorRT-LLM PR #13695 (open); a stock release rejects it.",
        fix="Run an engine build that includes the pull request, or drop --per-layer.",
        references=(SGLANG_PER_LAYER_PR, TRTLLM_PER_LAYER_PR)),
    make_rule(
        code="KV984", name="emit-dtype-approximated", severity="warning", family="emit",
        summary="A planned KV dtype has no equivalent in the target engine; the nearest one is emitted.",
        why="Engines name and lay out quantized KV caches differently (vLLM per-token-head INT8/FP8, "
            "TurboQuant and fp8_e5m2 have no TensorRT-LLM KvCacheConfig.dtype; SGLang's FP4 KV is "
            "an MX-style block-16 E2M1 format, not vLLM's NVFP4 layout).",
        fix="Pick a dtype the target engine supports natively (see the message).",
        references=("python/sglang/srt/server_args.py::ServerArgs.kv_cache_dtype",
                    "tensorrt_llm/llmapi/llm_args.py::KvCacheConfig.dtype")),
    make_rule(
        code="KV985", name="emit-flag-not-carried", severity="info", family="emit",
        summary="A plan flag has no equivalent flag in the target engine and was left out.",
        why="Attention-backend names, --attention-config and batching limits are engine-specific; "
            "carrying them over literally would fail or mean something else.",
        fix="Set the target engine's own option by hand if you need it.",
        references=("docs/api.md#emit-engine-flags-from-a-plan",)),
    make_rule(
        code="KV986", name="emit-plan-has-errors", severity="warning", family="emit",
        summary="The plan carries error findings: the emitted launch will fail as the plan predicts.",
        why="The emitter realises the plan faithfully, including what vLLM would reject at startup.",
        fix="Fix the plan's error findings (kvplan explain) before deploying.",
        references=("docs/api.md#emit-engine-flags-from-a-plan",)),
    make_rule(
        code="KV987", name="emit-16bit-over-checkpoint", severity="warning", family="emit",
        summary="The plan keeps KV in 16 bits but the checkpoint asks for quantized KV the engine applies.",
        why="TensorRT-LLM's KvCacheConfig.dtype accepts only auto, fp8 and nvfp4 (trtllm-serve "
            "--kv_cache_dtype, PR #11487); 'auto' follows the checkpoint's kv_cache_quant_algo, "
            "so there is no flag that forces a 16-bit cache over it.",
        fix="Remove kv_cache_quant_algo from hf_quant_config.json to serve a 16-bit KV cache.",
        references=("https://github.com/NVIDIA/TensorRT-LLM/pull/11487",)),
)}


def finding(code: str, message: str, layers: Iterable[int] = (), *, fix: str | None = None,
            severity: Severity | str | None = None) -> Finding:
    """A Finding for one of the KV98x codes (rule defaults for severity and fix)."""
    r = EMIT_RULES[code]
    return Finding(code=r.code, name=r.name, severity=Severity(severity) if severity else r.severity,
                   message=message, fix=fix or r.fix, layers=sorted(set(layers)))


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """The planner's order: errors first, then code, first layer, message."""
    return sorted(findings, key=lambda f: (-f.severity.rank, f.code, f.layers[:1], f.message))
