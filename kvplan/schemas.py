"""Published JSON Schemas, generated from the pydantic models (checked in under schemas/, drift-tested).

`kvplan schema NAME` prints one; `schemas/NAME.schema.json` holds the same text. Each entry is a
zero-argument function so that only the requested document's models are imported.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def _plan() -> dict[str, Any]:
    from kvplan.model.plan import SCHEMA_VERSION, Plan
    s = Plan.model_json_schema(mode="serialization")
    s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    s["$id"] = f"https://kvplan.dev/schemas/plan-{SCHEMA_VERSION}.json"
    return s


def _lint_report() -> dict[str, Any]:
    from kvplan.lint.report import lint_report_schema
    return lint_report_schema()


def _emit_result() -> dict[str, Any]:
    from kvplan.emit.model import emit_schema
    return emit_schema()


def _policy() -> dict[str, Any]:
    from kvplan.policy.model import policy_schema
    return policy_schema()


def _validate_report() -> dict[str, Any]:
    from kvplan.runtime.validate_model import validate_report_schema
    return validate_report_schema()


def _kv_scales() -> dict[str, Any]:
    from kvplan.model.kv_scales import kv_scales_schema
    return kv_scales_schema()


def _bench_result() -> dict[str, Any]:
    from kvplan.runtime.bench_model import bench_result_schema
    return bench_result_schema()


def _tune_report() -> dict[str, Any]:
    from kvplan.runtime.tune_model import tune_report_schema
    return tune_report_schema()


def _engines() -> dict[str, Any]:
    from kvplan.backends.release_list import SCHEMA_VERSION, EnginesDocument
    s = EnginesDocument.model_json_schema(mode="serialization")
    s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    s["$id"] = f"https://kvplan.dev/schemas/engines-{SCHEMA_VERSION}.json"
    return s


SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "plan": _plan,
    "lint-report": _lint_report,
    "emit-result": _emit_result,
    "policy": _policy,
    "validate-report": _validate_report,
    "kv-scales": _kv_scales,
    "bench-result": _bench_result,
    "tune-report": _tune_report,
    "engines": _engines,
}
"""Schema name -> generator. The file is `schemas/<name>.schema.json`."""


def schema_dict(name: str) -> dict[str, Any]:
    return SCHEMAS[name]()


def schema_text(name: str) -> str:
    return json.dumps(schema_dict(name), indent=2, sort_keys=True) + "\n"
