"""Findings the emitters raise (KV980-KV987): the rules are declared in the one catalogue
(`kvplan.rules.deploy_rules`, scope `emit`); emitters build findings from them with :func:`finding`.

KV9xx is the deployment family: KV900-KV979 are a policy file's own rules, KV98x the emitters,
KV99x the policy engine (`kvplan.policy.codes`).
"""
from __future__ import annotations

from collections.abc import Iterable

from kvplan.model.plan import Finding
from kvplan.model.vocab import Severity
from kvplan.rules.base import Rule, rules_in

EMIT_RULES: dict[str, Rule] = {r.code: r for r in rules_in("emit")}


def finding(code: str, message: str, layers: Iterable[int] = (), *, fix: str | None = None,
            severity: Severity | str | None = None) -> Finding:
    """A Finding for one of the KV98x codes (rule defaults for severity and fix)."""
    r = EMIT_RULES[code]
    return Finding(code=r.code, name=r.name, severity=Severity(severity) if severity else r.severity,
                   message=message, fix=fix or r.fix, layers=sorted(set(layers)))


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """The planner's order: errors first, then code, first layer, message."""
    return sorted(findings, key=lambda f: (-f.severity.rank, f.code, f.layers[:1], f.message))
