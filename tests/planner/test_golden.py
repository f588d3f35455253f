"""Golden plans for every corpus model under the standard flag matrix.

Reviewed by hand once (and diffed against vLLM 0.33.0's recorded answers in test_vllm_parity),
then diffed forever. Regenerate after an intended change with:
    KVPLAN_UPDATE_GOLDEN=1 pytest tests/planner/test_golden.py
and review the diff.
"""
from __future__ import annotations

import json
import os

import pytest

import kvplan.api
from tests.conftest import CASES, CORPUS, GOLDEN, MODELS
from tests.planner.golden_util import compact

PARAMS = [(m, c) for m in MODELS for c in CASES]


@pytest.mark.parametrize("model,case", PARAMS, ids=[f"{m}-{c}" for m, c in PARAMS])
def test_golden_plan_matches(model: str, case: str) -> None:
    plan = kvplan.api.compile(CORPUS / model / "config.json", CASES[case])
    got = compact(plan)
    path = GOLDEN / f"{model}__{case}.json"
    if os.environ.get("KVPLAN_UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(path.read_text())
    assert got == want, f"plan changed for {model} / {case}; review and regenerate the golden file"
