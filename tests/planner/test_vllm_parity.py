"""Differential test: kvplan's per-layer decisions equal vLLM 0.33.0's own.

tests/data/vllm_oracle holds what vLLM 0.33.0 itself decided (its real model classes built on
the meta device) for every corpus model under six flag sets. Where vLLM rejected the
configuration because of the KV cache, kvplan must report an error finding.
"""
from __future__ import annotations

import json

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.model.vocab import NO_KV_KINDS
from tests.conftest import CASES, CORPUS, MODELS, ORACLE, REFUSED_MODELS

PARAMS = [(m, c) for m in MODELS for c in CASES if (ORACLE / f"{m}__{c}.json").is_file()]


def _load(p):
    return json.loads(p.read_text()) if p.is_file() else None


@pytest.mark.parametrize("model,case", PARAMS, ids=[f"{m}-{c}" for m, c in PARAMS])
def test_vllm_parity_per_layer(model: str, case: str) -> None:
    o = _load(ORACLE / f"{model}__{case}.json")
    err = o.get("error")
    if err and "architectures" in err["message"] and "inspected" in err["message"]:
        pytest.skip("vLLM could not inspect this architecture on the CPU (no answer recorded)")
    plan = kvplan.api.compile(CORPUS / model / "config.json", CASES[case])
    if err:
        assert "kv_cache_dtype" in err["message"]
        assert any(f.severity.value == "error" for f in plan.findings), "vLLM rejects this; kvplan must say so"
        return
    geo = _load(ORACLE / f"{model}__geometry.json") or {}
    geo_layers = {layer["index"]: layer for layer in geo.get("layers", [])}
    want_layers = {layer["index"]: layer for layer in o["layers"]}
    assert plan.model.dtype == o["engine"]["model_dtype"]
    for lp in plan.layers:
        ol = want_layers.get(lp.index)
        if ol is None:
            assert lp.kind in NO_KV_KINDS, f"L{lp.index}: kvplan plans KV where vLLM builds no attention"
            continue
        assert lp.kv_cache_dtype == ol["kv_cache_dtype"], f"L{lp.index} kv_cache_dtype"
        assert lp.quant_mode.value == ol["kv_quant_mode"].lower(), f"L{lp.index} quant_mode"
        g = geo_layers.get(lp.index) if o["mode"] == "attention" else ol
        if g is not None and lp.kind != "mla":
            assert lp.sliding_window == g["sliding_window"], f"L{lp.index} sliding_window"
            assert (lp.num_kv_heads, lp.head_size) == (g["num_kv_heads"], g["head_size"]), f"L{lp.index} geometry"
    assert sorted(want_layers) == sorted(lp.index for lp in plan.layers if lp.index in want_layers)


@pytest.mark.parametrize("model", REFUSED_MODELS)
def test_corpus_model_vllm_refuses_is_refused(model: str) -> None:
    """T5: vLLM 0.33's registry does not list it and its Transformers-backend fallback fails to build it
    (the architecture oracle's answer; the answers above built bare Attention layers instead of the model
    class). kvplan refuses it under every flag set, with vLLM's reason."""
    for flags in CASES.values():
        with pytest.raises(KvplanInputError, match=r"refuses architecture .*Transformers-backend fallback fails"):
            kvplan.api.compile(CORPUS / model / "config.json", flags)
