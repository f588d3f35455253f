"""Rule cases as YAML (tests/rules/cases/KVnnn.yaml): minimal inputs, expected findings/decisions.

Each case: `base` (a corpus model, `arch:<name>` a config of tests/data/vllm_oracle_arch/configs, or
`params:<folder>` a Mistral params.json of tests/data/mistral_large4),
optional `config` (keys merged into its config.json),
optional `hf_quant_config`, `flags` (a launch-line string), `gpu`, `engine` (`vllm==0.19.0`; default
kvplan's default release), and what must / must not happen:
`expect_codes` (the rule fires, optionally on `expect_layers`), `absent` (it must not fire),
`layers` ({index: {field: value}} on the plan).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import kvplan.api
from kvplan.rules.base import all_rules
from tests.conftest import CORPUS

CASES_DIR = Path(__file__).parent / "cases"
ARCH_CONFIGS = Path(__file__).parents[1] / "data" / "vllm_oracle_arch" / "configs"
MISTRAL_PARAMS = Path(__file__).parents[1] / "data" / "mistral_large4"
CASES = [(p.stem, i, c) for p in sorted(CASES_DIR.glob("KV*.yaml"))
         for i, c in enumerate(yaml.safe_load(p.read_text())["cases"])]


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@pytest.mark.parametrize("code,i,case", CASES, ids=[f"{c}-{i}-{x.get('name', '')}" for c, i, x in CASES])
def test_rule_case(code: str, i: int, case: dict, tmp_path: Path) -> None:
    name = case["base"]
    src = (ARCH_CONFIGS / f"{name[5:]}.json" if name.startswith("arch:")
           else MISTRAL_PARAMS / name[7:] / "params.json" if name.startswith("params:")
           else CORPUS / name / "config.json")
    base = json.loads(src.read_text())
    cfg = _merge(base, case.get("config", {}))
    for k in case.get("drop", []):
        cfg.pop(k, None)
    (tmp_path / ("params.json" if name.startswith("params:") else "config.json")).write_text(json.dumps(cfg))
    if "hf_quant_config" in case:
        (tmp_path / "hf_quant_config.json").write_text(json.dumps(case["hf_quant_config"]))
    if "scales" in case:
        from tests.ingest.test_safetensors import write_safetensors
        # `name: shape`, or `name: {shape: [...], value: v}` (the value of every element; v may be
        # .nan / .inf in YAML); scales default to 0.05
        write_safetensors(tmp_path / "model.safetensors", {
            n: ("F32", spec["shape"], spec["value"]) if isinstance(spec, dict) else ("F32", spec)
            for n, spec in case["scales"].items()})
    budget = int(case["kv_budget_gib"] * 2**30) if "kv_budget_gib" in case else None
    plan = kvplan.api.compile(tmp_path, case.get("flags", ""), case.get("gpu"), kv_budget_bytes=budget,
                              engine=case.get("engine"))
    fired = [f for f in plan.findings if f.code == code]
    if case.get("fires", True):
        assert fired, f"{code} should fire: {[f.code for f in plan.findings]}"
        if "expect_layers" in case:
            assert sorted({i for f in fired for i in f.layers}) == case["expect_layers"]
        if "severity" in case:
            assert fired[0].severity.value == case["severity"]
        if "message_contains" in case:
            assert case["message_contains"] in fired[0].message
    else:
        assert not fired, f"{code} should not fire: {[f.message for f in fired]}"
    for idx, fields in (case.get("layers") or {}).items():
        lp = plan.layers[int(idx)].model_dump(mode="json")
        for k, v in fields.items():
            assert lp[k] == v, f"layer {idx} {k}"


def test_every_check_rule_has_a_case_file() -> None:
    have = {p.stem for p in CASES_DIR.glob("KV*.yaml")}
    planner_checks = {r.code for r in all_rules() if r.kind == "check" and r.code < "KV700"}
    missing = sorted(planner_checks - have)
    assert not missing, f"rules without YAML cases: {missing}"
