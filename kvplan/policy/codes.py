"""Findings of the policy engine itself (KV990-KV993), declared in the one catalogue
(`kvplan.rules.deploy_rules`, scope `policy`); a policy file's own rules and constraints bring
their own codes from KV900-KV979."""
from __future__ import annotations

from kvplan.rules.base import Rule, rules_in

POLICY_RULES: dict[str, Rule] = {r.code: r for r in rules_in("policy")}
