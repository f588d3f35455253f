"""The typed rule contract (kvplan/rules/state.py): a closed set of fields, each with one value type,
and decision rules that declare the fields they set. Broken contracts fail loudly, never silently."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kvplan.model.vocab import QuantMode, ScaleSource
from kvplan.planner.precedence import DECISION_ORDER
from kvplan.rules.base import all_rules
from kvplan.rules.state import (
    GLOBAL_FIELDS,
    LAYER_FIELDS,
    GlobalDecision,
    GlobalState,
    LayerDecision,
    LayerState,
    RuleContractError,
    Set,
    apply_set,
    check_declared,
    decides_global,
    decides_layer,
)

ROOT = Path(__file__).resolve().parents[2]


def test_set_unknown_field_fails_loudly() -> None:
    with pytest.raises(RuleContractError, match="unknown field 'kv_cache_dtyp'"):
        Set("kv_cache_dtyp", "fp8", "a typo")  # type: ignore[call-overload]


@pytest.mark.parametrize("field,value", [
    ("quant_mode", "fp8_per_tensor"),        # the enum's value, not the enum
    ("scale_source", QuantMode.none),        # another enum
    ("bytes_per_token", 12.0),               # float for int
    ("bytes_per_token", True),               # bool is an int in Python, not here
    ("skipped", 1),                          # int for bool
    ("kv_cache_dtype", None),                # only query_dtype may be None
    ("kv_cache_dtype", QuantMode.fp8_per_tensor),  # a str enum is a str to Python and mypy, not here
])
def test_set_value_of_wrong_type_fails(field: str, value: object) -> None:
    with pytest.raises(RuleContractError, match=f"field '{field}' takes"):
        Set(field, value, "wrong type")  # type: ignore[call-overload]


def test_set_accepts_each_field_with_its_type() -> None:
    assert Set("quant_mode", QuantMode.fp8_per_tensor, "f").value is QuantMode.fp8_per_tensor
    assert Set("scale_source", ScaleSource.none, "f").field == "scale_source"
    assert Set("query_dtype", None, "f").value is None
    assert Set("skipped", True, "f").value is True
    assert Set("bytes_per_token", 0, "f") == Set("bytes_per_token", 0, "f")  # frozen, comparable


def test_states_take_only_their_own_fields() -> None:
    st = LayerState(kv_cache_dtype="auto")
    apply_set(st, Set("kv_cache_dtype", "fp8", "f"))
    assert st.kv_cache_dtype == "fp8"
    with pytest.raises(RuleContractError, match="'model_dtype' is not a layer field"):
        apply_set(st, Set("model_dtype", "bfloat16", "f"))
    g = GlobalState()
    apply_set(g, Set("model_dtype", "float16", "f"))
    assert g == GlobalState(model_dtype="float16")
    with pytest.raises(RuleContractError, match="'dtype' is not a global field"):
        apply_set(g, Set("dtype", "float8_e4m3fn", "f"))
    with pytest.raises(AttributeError):  # frozen: rules read the state, only the planner writes it
        st.kv_cache_dtype = "auto"  # type: ignore[misc]


def test_declaring_unknown_or_foreign_fields_fails_at_declaration() -> None:
    with pytest.raises(RuleContractError, match="'kv_cache_dtyp' is not layer field"):
        decides_layer("kv_cache_dtyp")  # type: ignore[arg-type]
    with pytest.raises(RuleContractError, match="'model_dtype' is not layer field"):
        decides_layer("model_dtype")  # type: ignore[arg-type]
    with pytest.raises(RuleContractError, match="'dtype' is not global field"):
        decides_global("dtype")  # type: ignore[arg-type]
    with pytest.raises(RuleContractError, match="at least one field"):
        decides_layer()


def test_setting_an_undeclared_field_is_refused() -> None:
    declared = frozenset({"dtype", "quant_mode"})
    check_declared("KV110", declared, Set("dtype", "bfloat16", "declared"))
    with pytest.raises(RuleContractError, match=r"rule KV110 set 'skipped', which it does not declare "
                                                r"\(it declares dtype, quant_mode\)"):
        check_declared("KV110", declared, Set("skipped", True, "not declared"))


def test_every_decision_rule_declares_fields_of_its_scope() -> None:
    decisions = [r for r in all_rules() if r.kind == "decision"]
    assert sorted(r.code for r in decisions) == sorted(DECISION_ORDER)  # each runs, in one visible order
    for r in decisions:
        if r.scope == "global":
            assert isinstance(r.fn, GlobalDecision), r.code
            assert r.fn.fields <= GLOBAL_FIELDS, r.code
        else:
            assert r.scope == "layer" and isinstance(r.fn, LayerDecision), r.code
            assert r.fn.fields <= LAYER_FIELDS, r.code
    declared = {r.code: sorted(r.fn.fields) for r in decisions if isinstance(r.fn, LayerDecision)}
    assert declared["KV103"] == ["cache_config_dtype", "kv_cache_dtype"]  # its cross-layer write, explicit
    assert declared["KV104"] == ["kv_cache_dtype", "skipped"]


def test_mypy_rejects_unknown_fields_and_wrong_value_types(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the overloads of Set and the Literal field names buy: the type checker catches the mistakes
    the runtime checks above would only catch when the rule runs."""
    pytest.importorskip("mypy")
    snippet = tmp_path / "rule_snippet.py"
    snippet.write_text(textwrap.dedent("""\
        from collections.abc import Iterator
        from kvplan.model.vocab import QuantMode
        from kvplan.rules.state import LayerState, Set, decides_layer

        ok = [Set("kv_cache_dtype", "fp8", "f"), Set("quant_mode", QuantMode.none, "f"),
              Set("bytes_per_token", 12, "f"), Set("query_dtype", None, "f")]
        typo = Set("kv_cache_dtyp", "fp8", "f")
        not_enum = Set("quant_mode", "fp8_per_tensor", "f")
        not_int = Set("num_kv_heads", "8", "f")
        global_field = decides_layer("model_dtype")

        def writes_state(st: LayerState) -> None:
            st.kv_cache_dtype = "fp8"
        """))
    # In a subprocess: mypy raises the interpreter's recursion limit, which would leak into later tests.
    env = {**os.environ, "MYPYPATH": str(ROOT)}  # this checkout's kvplan, wherever pytest runs from
    r = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--follow-imports", "silent",
                        "--ignore-missing-imports", "--cache-dir", str(tmp_path / "cache"), str(snippet)],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    stdout, status = r.stdout, r.returncode
    lines = {int(line.split(":")[1]) for line in stdout.splitlines() if ": error:" in line}
    assert status == 1
    assert lines == {7, 8, 9, 10, 13}, stdout  # every mistake, and nothing on the correct lines 5-6
