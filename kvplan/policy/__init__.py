"""User KV policies: YAML rules (selector -> setting, with a reason) and constraints.

A policy is an input of the one compile pipeline, `kvplan.compile(..., policy=...)`:

    >>> import kvplan
    >>> from kvplan.policy import policy_from_text
    >>> policy = policy_from_text('''
    ... version: 1
    ... rules:
    ...   - {code: KV901, name: fp8-kv, reason: halve KV memory, set: {kv_cache_dtype: fp8}}
    ...   - code: KV902
    ...     name: sliding-in-bf16
    ...     reason: sliding layers hold few tokens; quantizing them saves little
    ...     select: {kind: sliding_attention}
    ...     set: {kv_cache_dtype: model}
    ... ''')
    >>> plan = kvplan.compile("examples/gpt-oss-20b/config.json", policy=policy)
    >>> plan.flags["kv_cache_dtype"], plan.flags["kv_cache_dtype_skip_layers"]
    ('fp8', ['sliding_window'])
    >>> plan.layers[0].decided_by[0], plan.layers[1].decided_by[0]
    ('KV902', 'KV901')
"""
from __future__ import annotations

from kvplan.policy.apply import constraint_rules, plan_with_policy
from kvplan.policy.codes import POLICY_RULES
from kvplan.policy.load import as_policy, find_pyproject_policy, load_policy, policy_from_text
from kvplan.policy.model import POLICY_SCHEMA_VERSION, Constraint, Policy, PolicyRule, Selector, Setting

__all__ = ["POLICY_RULES", "POLICY_SCHEMA_VERSION", "Constraint", "Policy", "PolicyRule", "Selector", "Setting",
           "as_policy", "constraint_rules", "find_pyproject_policy", "load_policy", "plan_with_policy",
           "policy_from_text"]
