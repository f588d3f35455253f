"""The public API: a tested __all__ and a runnable example."""
from __future__ import annotations

import kvplan
from tests.conftest import EXAMPLES


def test_all_is_exactly_the_public_api() -> None:
    assert set(kvplan.__all__) == {"__version__", "compile", "explain", "lint", "validate", "KvplanInputError", "Plan"}
    for name in kvplan.__all__:
        assert hasattr(kvplan, name) or name in ("lint", "validate")


def test_compile_returns_typed_plan() -> None:
    plan = kvplan.compile(EXAMPLES / "gpt-oss-20b" / "config.json", "--kv-cache-dtype fp8")
    assert isinstance(plan, kvplan.Plan)
    assert plan.totals.bytes_per_token == 24 * 1024


def test_compile_accepts_dict_flags() -> None:
    plan = kvplan.compile(EXAMPLES / "gpt-oss-20b", {"kv_cache_dtype": "fp8", "kv_cache_dtype_skip_layers": ["sliding_window"]})
    assert plan.layers[0].kv_cache_dtype == "auto" and plan.layers[1].kv_cache_dtype == "fp8"


def test_explain_returns_text() -> None:
    text = kvplan.explain(EXAMPLES / "Meta-Llama-3.1-8B" / "config.json", "--kv-cache-dtype int8_per_token_head")
    assert "int8_per_token_head" in text and "2,112" in text
