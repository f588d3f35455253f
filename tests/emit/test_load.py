"""PLAN.json loading: the loader accepts what the published plan schema accepts, and names the problem."""
from __future__ import annotations

import copy
import json

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.api import compile as compile_plan
from kvplan.emit.load import load_plan, plan_from_data
from kvplan.errors import KvplanInputError
from kvplan.schemas import schema_dict
from tests.emit.helpers import EXAMPLES

SCHEMA = schema_dict("plan")
VALID = compile_plan(EXAMPLES / "gpt-oss-20b", "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window",
                     gpu="h100", kv_budget_bytes=10 * 2**30).model_dump(mode="json")
_WRONG = ["x", 7, None, [], {}, True, 1.5, -1]


def _paths(doc, prefix=()):
    """Every (path, value) in the document (dict keys and list indices)."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield (*prefix, k), v
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:2]):
            yield (*prefix, i), v
            yield from _paths(v, (*prefix, i))


PATHS = [p for p, _ in _paths(VALID)]


def _set(doc, path, value=..., delete=False):
    obj = doc
    for part in path[:-1]:
        obj = obj[part]
    if delete:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), how=st.sampled_from(["delete", "wrong", "extra"]), wrong=st.sampled_from(_WRONG))
def test_loader_is_as_strict_as_the_published_schema(path, how, wrong) -> None:
    doc = copy.deepcopy(VALID)
    if how == "delete" and isinstance(path[-1], str):
        _set(doc, path, delete=True)
    elif how == "extra" and isinstance(path[-1], str):
        _set(doc, (*path[:-1], "no_such_field"), wrong)
    else:
        _set(doc, path, wrong)
    try:
        jsonschema.validate(doc, SCHEMA)
        schema_ok = True
    except jsonschema.ValidationError:
        schema_ok = False
    try:
        plan_from_data(doc)
        loader_ok = True
    except KvplanInputError as e:
        loader_ok = False
        msg = str(e)
        assert "\n" not in msg
    if not schema_ok:
        assert not loader_ok, (path, how, wrong)
    elif not loader_ok:
        # The loader's only extra checks: vLLM 0.33 dtype names, and `kind` / `schema_version` present
        # with the right values (the schema gives both a default).
        assert any(s in msg for s in ("does not know", "schema_version", "not a kvplan plan")), (path, how, wrong, msg)


def test_valid_plan_round_trips() -> None:
    assert plan_from_data(json.loads(json.dumps(VALID))).model_dump(mode="json") == VALID


@pytest.mark.parametrize("mutate,expected", [
    (lambda d: d.update(kind="kvplan.lint-report"), "<request> is a kvplan.lint-report document."),
    (lambda d: d.pop("kind"), "<request> is not a kvplan plan"),
    (lambda d: d.update(schema_version="2.0"), "<request> has plan schema_version '2.0'; this kvplan reads 1.5."),
    (lambda d: d["layers"][3].update(kv_cache_dtype="fp8_e4m3fn"),
     "<request>: layers[3] (layer 3) has kv_cache_dtype 'fp8_e4m3fn', which vLLM 0.33 does not know."),
    (lambda d: d["layers"][0].pop("index"),
     "<request> does not match the plan schema: layers[0].index: Field required."),
    (lambda d: d["totals"].update(bytes_per_token="1"),
     "<request> does not match the plan schema: totals.bytes_per_token: Input should be a valid integer."),
])
def test_bad_plans_name_the_first_problem(mutate, expected: str) -> None:
    doc = copy.deepcopy(VALID)
    mutate(doc)
    with pytest.raises(KvplanInputError) as e:
        plan_from_data(doc)
    assert str(e.value).startswith(expected)
    assert str(e.value).endswith("(schema: `kvplan schema plan`).") or "Valid values" in str(e.value)


def test_load_plan_file_errors(tmp_path) -> None:
    with pytest.raises(KvplanInputError, match="plan file not found"):
        load_plan(tmp_path / "nope.json")
    (tmp_path / "p.json").write_text("[1, 2]")
    with pytest.raises(KvplanInputError, match="holds a JSON list, not a kvplan plan object"):
        load_plan(tmp_path / "p.json")
    (tmp_path / "q.json").write_text('{"kind": ')
    with pytest.raises(KvplanInputError, match=r"malformed JSON in .*q.json at line 1 column 10"):
        load_plan(tmp_path / "q.json")
