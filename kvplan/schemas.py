"""JSON Schemas generated from the pydantic models (checked in under schemas/, drift-tested)."""
from __future__ import annotations

import json
from typing import Any

from kvplan.model.plan import SCHEMA_VERSION, Plan

SCHEMAS: dict[str, Any] = {"plan": Plan}


def schema_dict(name: str) -> dict[str, Any]:
    s = SCHEMAS[name].model_json_schema(mode="serialization")
    s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    s["$id"] = f"https://kvplan.dev/schemas/{name}-{SCHEMA_VERSION}.json"
    return s


def schema_text(name: str) -> str:
    return json.dumps(schema_dict(name), indent=2, sort_keys=True) + "\n"
