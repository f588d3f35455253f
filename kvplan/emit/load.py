"""Read and validate a PLAN.json (the published plan schema) with one clear error line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kvplan.errors import KvplanInputError
from kvplan.ingest.limits import InputLimitError, check_json_depth, loads_json, read_bounded
from kvplan.model.plan import SCHEMA_VERSION, Plan
from kvplan.model.vocab import VLLM_033_KV_CACHE_DTYPES

REGENERATE = "Regenerate it with `kvplan plan CONFIG --format json --out PLAN.json` (schema: `kvplan schema plan`)."


def looks_like_plan(data: Any) -> bool:
    """A JSON object meant as a kvplan document (as opposed to a model config.json)."""
    return isinstance(data, dict) and (str(data.get("kind", "")).startswith("kvplan.")
                                      or ("layers" in data and "schema_version" in data))


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document)"


def plan_from_data(data: Any, source: str = "<request>") -> Plan:
    """Validate a parsed PLAN.json against the plan schema; KvplanInputError names the first problem.

    Validation is pydantic's strict JSON mode over the same model the published schema
    (`kvplan.schemas.schema_dict("plan")`) is generated from, so the two accept the same documents.
    """
    if not isinstance(data, dict):
        raise KvplanInputError(f"{source} holds a JSON {type(data).__name__}, not a kvplan plan object.", REGENERATE)
    check_json_depth(data, source)  # before json.dumps recurses over a hostile request body
    kind = data.get("kind")
    if kind != "kvplan.plan":
        if isinstance(kind, str) and kind:
            what = f"a {kind} document"
        else:
            what = 'not a kvplan plan (no "kind": "kvplan.plan")'
        raise KvplanInputError(f"{source} is {what}.", REGENERATE)
    sv = data.get("schema_version")
    if not isinstance(sv, str) or sv.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise KvplanInputError(f"{source} has plan schema_version {sv!r}; this kvplan reads {SCHEMA_VERSION}.",
                               REGENERATE)
    try:
        plan = Plan.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as e:
        errs = e.errors()
        first = errs[0]
        more = f" (and {len(errs) - 1} more problem(s))" if len(errs) > 1 else ""
        raise KvplanInputError(f"{source} does not match the plan schema: {_loc(first['loc'])}: {first['msg']}{more}.",
                               REGENERATE) from None
    for lp in plan.layers:
        if lp.kv_cache_dtype is not None and lp.kv_cache_dtype not in VLLM_033_KV_CACHE_DTYPES:
            raise KvplanInputError(f"{source}: layers[{plan.layers.index(lp)}] (layer {lp.index}) has kv_cache_dtype "
                                   f"{lp.kv_cache_dtype!r}, which vLLM 0.33 does not know.",
                                   "Valid values: " + ", ".join(VLLM_033_KV_CACHE_DTYPES) + ".")
    return plan


def read_json(path: str | Path, what: str = "plan") -> Any:
    """Read a JSON file; every failure is one KvplanInputError line."""
    p = Path(path)
    try:
        text = read_bounded(p, f"{what} file").decode("utf-8")
    except FileNotFoundError:
        raise KvplanInputError(f"{what} file not found: {p}.",
                               "Pass the path of a PLAN.json (kvplan plan ... --out PLAN.json).") from None
    except IsADirectoryError:
        raise KvplanInputError(f"{p} is a directory, not a {what} file.", "Pass a PLAN.json file.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise KvplanInputError(f"cannot read {what} file {p}: {e.__class__.__name__}.",
                               "Check the file exists, is readable and is UTF-8 JSON.") from None
    try:
        return loads_json(text, str(p))
    except InputLimitError:
        raise
    except KvplanInputError as e:
        raise KvplanInputError(e.problem, REGENERATE) from None


def load_plan(path: str | Path) -> Plan:
    """Read a PLAN.json and validate it against the plan schema."""
    return plan_from_data(read_json(path), str(path))
