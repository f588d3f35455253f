"""Findings of the policy engine itself (KV990-KV999); user rules and constraints bring their own KV900-KV979."""
from __future__ import annotations

from kvplan.emit.codes import make_rule
from kvplan.rules.base import Rule

POLICY_RULES: dict[str, Rule] = {r.code: r for r in (
    make_rule(
        code="KV990", name="policy-setting-not-expressible", severity="warning", family="policy",
        summary="A policy setting asks for something vLLM 0.33 cannot express; the closest form is used.",
        why="vLLM 0.33 has one global --kv-cache-dtype and a skip list whose layers keep the model "
            "dtype. Two different quantized dtypes, or a 16-bit dtype other than the model's, cannot "
            "be given to different layers; the layer gets the global dtype when that has at least as "
            "many bits, else the model dtype.",
        fix="Make the policy's settings use one quantized dtype (plus 'model' for protected layers).",
        references=("https://github.com/vllm-project/vllm/pull/33695",)),
    make_rule(
        code="KV991", name="policy-rewrote-flags", severity="info", family="policy",
        summary="The policy's settings changed --kv-cache-dtype / --kv-cache-dtype-skip-layers.",
        why="Policy settings are realised as serving flags before planning; the plan is for the "
            "rewritten flags, which the launch line must carry to get this plan.",
        fix="Launch with the flags in the message (or `kvplan emit` them).",
        references=("docs/api.md#policy-files",)),
    make_rule(
        code="KV992", name="policy-constraint-unchecked", severity="warning", family="policy",
        summary="A capacity constraint cannot be checked: the plan has no KV memory budget.",
        why="Tokens of capacity and concurrency need the KV budget, which comes from --gpu (GPU "
            "memory, --gpu-memory-utilization, checkpoint weight size) or --kv-budget-gib.",
        fix="Pass --gpu (with a checkpoint folder) or --kv-budget-gib.",
        references=("docs/api.md#policy-files",)),
    make_rule(
        code="KV993", name="policy-rule-matches-nothing", severity="info", family="policy",
        summary="A policy rule or constraint selects no layer with a KV cache in this model.",
        why="A selector that matches nothing usually means a typo (a kind or model_type this model "
            "does not have, an index out of range) and the rule silently does nothing.",
        fix="Check the selector against `kvplan explain` for this model.",
        references=("docs/api.md#policy-files",)),
)}
