"""Apply a policy: settings as a pre-pass that rewrites the serving flags, constraints as check rules.

For vLLM 0.33 a setting can only choose the global --kv-cache-dtype and which layers are skipped
(kept in the model dtype). So:

1. compile the plan for the user's flags (the baseline) and for `--kv-cache-dtype auto` (what the
   checkpoint resolves each layer to);
2. give every KV layer its target: the setting of the last policy rule that selects it, else its
   baseline dtype;
3. realise the targets as flags with the same solver `kvplan emit --to vllm` uses (the checkpoint's
   'auto' is kept when it already gives the targets); what cannot be expressed is a KV990 finding;
4. compile with the realised flags and the policy's constraints as extra check rules;
5. record each rule's code and reason at the front of the layers' decided_by / decisions (the policy
   chose the flags the built-in rules then read), via `model_copy`.
"""
from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kvplan.emit._common import compact
from kvplan.emit.codes import sort_findings
from kvplan.emit.vllm import LayerTarget, auto_values, group_differences, has_kv, realise
from kvplan.model.arch import ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import Decision, Finding, LayerPlan, Plan
from kvplan.model.vocab import QuantMode, quant_mode_of
from kvplan.policy.codes import POLICY_RULES
from kvplan.policy.load import policy_line, policy_source
from kvplan.policy.model import MODEL_DTYPE_WORDS, Constraint, Policy, PolicyRule, Selector
from kvplan.rules.base import Emit, Rule
from kvplan.rules.context import RuleContext

# quant mode -> the kv_cache_dtype string a setting `quant_mode: X` means when the checkpoint has no match.
_CANONICAL = {QuantMode.fp8_per_tensor: "fp8", QuantMode.none: "auto"}


def _layer_facts(arch: ModelArch, index: int, kind: str, sliding_window: int | None) -> dict[str, Any]:
    la = next((a for a in arch.layers if a.index == index), None)
    return dict(index=index, kind=kind, sliding_window=sliding_window,
                head_size=la.head_size if la else None, num_kv_heads=la.num_kv_heads if la else None,
                model_types=(arch.model_type, arch.text_model_type), num_layers=arch.num_layers)


def _selects(sel: Selector, arch: ModelArch, lp: LayerPlan) -> bool:
    return sel.matches(**_layer_facts(arch, lp.index, lp.kind, lp.sliding_window))


def _where(policy: Policy, group: str, i: int) -> str:
    line = policy_line(policy, (group, i))
    return f"{policy_source(policy)}:{line}" if line else policy_source(policy)


def _label(policy: Policy) -> str:
    return f"policy {policy.name!r}" if policy.name else "policy"


def setting_target(rule: PolicyRule, current: str, auto_value: str | None) -> str:
    """The kv_cache_dtype a rule asks for on a layer whose dtype is now `current`."""
    s = rule.setting
    if s.kv_cache_dtype is not None:
        return "auto" if s.kv_cache_dtype in MODEL_DTYPE_WORDS else s.kv_cache_dtype
    q = s.quant_mode
    assert q is not None
    if q is QuantMode.none:
        return "auto" if quant_mode_of(current).is_quantized else current
    for have in (current, auto_value):  # keep the checkpoint's own spelling when its mode matches
        if have is not None and quant_mode_of(have) is q:
            return have
    return _CANONICAL.get(q, q.value)


def constraint_rule(c: Constraint, policy: Policy, where: str) -> Rule:
    """A policy constraint as an (unregistered) check rule for `compile_plan(extra_checks=...)`."""
    label = f"{_label(policy)} constraint {c.code} {c.name} ({where})"

    def check(ctx: RuleContext) -> Iterable[Emit]:
        if c.forbid is not None or c.require is not None:
            groups: dict[str, list[int]] = {}
            for lp in ctx.layers:
                if not has_kv(lp) or not _selects(c.select, ctx.arch, lp):
                    continue
                dtype = lp.kv_cache_dtype or "auto"
                bad = (c.forbid.hits(kv_cache_dtype=dtype, quant_mode=lp.quant_mode, skipped=lp.skipped)
                       if c.forbid is not None else
                       c.require.misses(kv_cache_dtype=dtype, quant_mode=lp.quant_mode, skipped=lp.skipped)
                       if c.require is not None else [])
                if bad:
                    groups.setdefault(" and ".join(bad), []).append(lp.index)
            rule_text = (f"forbids {c.forbid.describe()}" if c.forbid is not None
                         else f"requires {c.require.describe() if c.require is not None else ''}")
            for what, layers in sorted(groups.items(), key=lambda kv: kv[1][0]):
                yield Emit(f"layer(s) {compact(layers)}: {what}; {label} {rule_text}: {c.reason}", tuple(layers))
            return
        t = ctx.globals.get("totals")
        if c.max_bytes_per_token is not None and t is not None and t.bytes_per_token > c.max_bytes_per_token:
            yield Emit(f"KV bytes per token are {t.bytes_per_token:,} but {label} allows at most "
                       f"{c.max_bytes_per_token:,}: {c.reason}")
        if t is None or t.kv_budget_bytes is None or not t.bytes_per_request or not t.max_model_len:
            return  # reported as KV992 by the policy engine
        concurrency = t.kv_budget_bytes / t.bytes_per_request
        tokens = int(t.kv_budget_bytes * t.max_model_len // t.bytes_per_request)
        if c.min_tokens is not None and tokens < c.min_tokens:
            yield Emit(f"KV capacity at --max-model-len {t.max_model_len:,} is {tokens:,} tokens ({concurrency:.2f} "
                       f"requests) but {label} requires at least {c.min_tokens:,}: {c.reason}")
        if c.min_concurrency is not None and concurrency < c.min_concurrency:
            yield Emit(f"{concurrency:.2f} requests of --max-model-len {t.max_model_len:,} fit in the KV cache but "
                       f"{label} requires at least {c.min_concurrency:g}: {c.reason}")

    summary = c.reason if len(c.reason) <= 120 else c.reason[:117] + "..."
    return Rule(code=c.code, name=c.name, severity=c.severity, summary=summary, why=c.reason,
                fix=c.fix or "Change the launch flags or the policy's settings so the constraint holds.",
                family="policy", kind="check", scope="plan", references=(where,), fn=check)


def constraint_rules(policy: Policy) -> list[Rule]:
    return [constraint_rule(c, policy, _where(policy, "constraints", i)) for i, c in enumerate(policy.constraints)]


def _finding(code: str, message: str, layers: Iterable[int] = ()) -> Finding:
    r = POLICY_RULES[code]
    return Finding(code=r.code, name=r.name, severity=r.severity, message=message, fix=r.fix,
                   layers=sorted(set(layers)))


def _flag_text(kv_cache_dtype: str, skip: Sequence[str]) -> str:
    argv = ["--kv-cache-dtype", kv_cache_dtype] + (["--kv-cache-dtype-skip-layers", *skip] if skip else [])
    return shlex.join(argv)


PlanFor = Callable[[ServingFlags, Iterable[Rule]], Plan]
"""Compiles the model the policy applies to under the given flags, with the given extra check rules."""
Matched = dict[int, tuple[int, PolicyRule]]
"""layer index -> (position in policy.rules, the rule): the last rule that selects the layer."""


def plan_with_policy(policy: Policy, arch: ModelArch, flags: ServingFlags, plan_for: PlanFor,
                     extra_checks: Iterable[Rule] = ()) -> Plan:
    """The plan for `flags` with `policy` applied (steps 1-5 above); `kvplan.compile(..., policy=)` calls it.

    `plan_for(flags, checks)` compiles the same model under other flags: the pipeline passes it, so the
    model is read once and every compile sees the same inputs.
    """
    checks = [*extra_checks, *constraint_rules(policy)]
    baseline = plan_for(flags, ())
    matched = _matched_rules(policy, arch, baseline)
    findings: list[Finding] = []
    targets: dict[int, str] = {}
    final_flags = flags
    if matched:
        lts = _layer_targets(matched, baseline, flags, plan_for)
        targets = {lt.index: lt.target for lt in lts}
        if any(targets[lp.index] != (lp.kv_cache_dtype or "auto") for lp in baseline.layers if has_kv(lp)):
            final_flags = _realise(policy, matched, lts, flags, findings)
    plan = plan_for(final_flags, checks)
    findings += _selection_findings(policy, arch, baseline, plan)
    layers = _with_policy_decisions(policy, matched, targets, final_flags, plan)
    return plan.model_copy(update={"layers": layers, "findings": sort_findings([*plan.findings, *findings])})


def _matched_rules(policy: Policy, arch: ModelArch, baseline: Plan) -> Matched:
    matched: Matched = {}
    for lp in baseline.layers:
        if has_kv(lp):
            for i, rule in enumerate(policy.rules):
                if _selects(rule.select, arch, lp):
                    matched[lp.index] = (i, rule)  # a later rule overrides an earlier one
    return matched


def _layer_targets(matched: Matched, baseline: Plan, flags: ServingFlags, plan_for: PlanFor) -> list[LayerTarget]:
    """Every KV layer's kv_cache_dtype target: its rule's setting, else its baseline dtype."""
    auto_plan = baseline if flags.kv_cache_dtype == "auto" else plan_for(flags.model_copy(update={
        "kv_cache_dtype": "auto", "kv_cache_dtype_explicit": False, "kv_cache_dtype_skip_layers": ()}), ())
    av = auto_values(auto_plan) or {}
    lts = []
    for lp in baseline.layers:
        if not has_kv(lp):
            continue
        current = lp.kv_cache_dtype or "auto"
        target = setting_target(matched[lp.index][1], current, av.get(lp.index)) if lp.index in matched else current
        lts.append(LayerTarget(index=lp.index, kind=lp.kind, sliding_window=lp.sliding_window, target=target,
                               auto_value=av.get(lp.index)))
    return lts


def _realise(policy: Policy, matched: Matched, lts: list[LayerTarget], flags: ServingFlags,
             findings: list[Finding]) -> ServingFlags:
    """The flags that give the targets (the `kvplan emit` solver); KV991 / KV990 findings say what changed."""
    realisation = realise(lts, candidates=(flags.kv_cache_dtype,))
    final_flags = flags.model_copy(update={"kv_cache_dtype": realisation.kv_cache_dtype,
                                           "kv_cache_dtype_explicit": True,
                                           "kv_cache_dtype_skip_layers": realisation.skip_tokens})
    before = _flag_text(flags.kv_cache_dtype, flags.kv_cache_dtype_skip_layers)
    after = _flag_text(realisation.kv_cache_dtype, realisation.skip_tokens)
    if before != after:
        findings.append(_finding("KV991", f"{_label(policy)} realised its settings as `{after}` "
                                          f"(the launch flags had `{before}`)."))
    if realisation.differences:
        detail = group_differences(realisation.differences,
                                   lambda i: matched[i][1].code if i in matched else "launch flags")
        findings.append(_finding("KV990", f"{_label(policy)}: {len(realisation.differences)} layer(s) cannot "
                                          f"get their setting in vLLM 0.33: {detail}.",
                                 [d[0] for d in realisation.differences]))
    return final_flags


def _selection_findings(policy: Policy, arch: ModelArch, baseline: Plan, plan: Plan) -> list[Finding]:
    """KV993 for a rule or constraint that selects no KV layer, KV992 for a constraint without a budget."""
    findings: list[Finding] = []
    for i, rule in enumerate(policy.rules):
        if not any(has_kv(lp) and _selects(rule.select, arch, lp) for lp in baseline.layers):
            findings.append(_finding("KV993", f"{_label(policy)} rule {rule.code} {rule.name} "
                                              f"({_where(policy, 'rules', i)}) selects no KV layer "
                                              f"({rule.select.describe()})."))
    for i, c in enumerate(policy.constraints):
        if c.needs_budget and plan.totals.kv_budget_bytes is None:
            findings.append(_finding("KV992", f"{_label(policy)} constraint {c.code} {c.name} "
                                              f"({_where(policy, 'constraints', i)}) needs a KV budget; "
                                              "pass --gpu or --kv-budget-gib."))
        elif (c.forbid is not None or c.require is not None) and not any(
                has_kv(lp) and _selects(c.select, arch, lp) for lp in plan.layers):
            findings.append(_finding("KV993", f"{_label(policy)} constraint {c.code} {c.name} "
                                              f"({_where(policy, 'constraints', i)}) selects no KV layer "
                                              f"({c.select.describe()})."))
    return findings


def _with_policy_decisions(policy: Policy, matched: Matched, targets: dict[int, str], flags: ServingFlags,
                           plan: Plan) -> list[LayerPlan]:
    """Each selected layer with its rule's code and reason in front of decided_by / decisions."""
    layers = []
    flag_text = _flag_text(flags.kv_cache_dtype, flags.kv_cache_dtype_skip_layers)
    for lp in plan.layers:
        if lp.index not in matched or not has_kv(lp):
            layers.append(lp)
            continue
        i, rule = matched[lp.index]
        fact = (f"{_label(policy)} rule {rule.code} {rule.name} ({_where(policy, 'rules', i)}) selects "
                f"{rule.select.describe()} and sets {rule.setting.describe()}: {rule.reason.rstrip('.')}; "
                f"realised as {flag_text}")
        d = Decision(field="kv_cache_dtype", value=targets.get(lp.index, lp.kv_cache_dtype), rule=rule.code, fact=fact)
        layers.append(lp.model_copy(update={"decided_by": [rule.code, *(c for c in lp.decided_by if c != rule.code)],
                                            "decisions": [d, *lp.decisions]}))
    return layers
