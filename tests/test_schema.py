"""The published plan schema is generated from the models and checked in (drift test)."""
from __future__ import annotations

import json

from kvplan.schemas import schema_dict
from tests.conftest import ROOT


def test_schema_plan_checked_in_matches_models() -> None:
    on_disk = json.loads((ROOT / "schemas" / "plan.schema.json").read_text())
    assert on_disk == schema_dict("plan"), "run: kvplan schema plan > schemas/plan.schema.json"


def test_schema_documents_every_field() -> None:
    s = schema_dict("plan")
    for name, d in s["$defs"].items():
        for field, spec in d.get("properties", {}).items():
            assert spec.get("description"), f"{name}.{field} has no description"
