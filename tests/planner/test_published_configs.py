"""Configs as published: kvplan plans each exactly as vLLM 0.33.0 builds it, whatever spelling the file uses.

tests/data/published_configs holds config.json files (and hf_quant_config.json where the checkpoint
ships one) collected from public repositories: base and instruct releases, quantized re-uploads
(FP8, NVFP4, AWQ, GPTQ, compressed-tensors with and without kv_cache_scheme, modelopt), fine-tunes, older and
newer revisions of the same model (PROVENANCE.md: source, commit, sha256). Two answers per file:

* `answers/` (scripts/oracle/arch_oracle.py): the layers vLLM's own model class builds, every KV
  cache spec per layer. A quantized re-upload is answered without its weight quantization (no FP8 /
  NVFP4 / MXFP4 weight kernel runs on the CPU oracle), an auto_map without its remote code
  (`drop_keys` of the case): kvplan plans the same input and is compared layer by layer
  (kv_cache_dtype, quant mode, window, KV heads, head sizes, bytes per token, indexer caches);
  where vLLM refused the config, kvplan refuses it with vLLM's reason.
* `dtype_answers/` (scripts/oracle/published_dtype_oracle.py): for the quantized files as published,
  the kv_cache_dtype and quant mode vLLM gives every attention layer.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.model.vocab import NO_KV_KINDS
from tests.conftest import ROOT
from tests.planner.arch_parity import case_input, check_case, flags_of, load_answer, load_cases

SUITE = ROOT / "tests" / "data" / "published_configs"
PROVENANCE = json.loads((SUITE / "PROVENANCE.json").read_text())["configs"]
CASES = load_cases(SUITE)
DTYPE_CASES = sorted(p.stem for p in (SUITE / "dtype_answers").glob("*.json"))


def _suite_script():
    spec = importlib.util.spec_from_file_location("published_suite", ROOT / "scripts" / "oracle" / "published_suite.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_suite_is_configs_as_published_with_their_provenance() -> None:
    mod = _suite_script()
    assert mod.stale_files(PROVENANCE) == [], "a stored file differs from its recorded sha256"
    assert mod.render_cases(PROVENANCE) == (SUITE / "cases.json").read_text(), \
        "run `python scripts/oracle/published_suite.py`"
    assert mod.render_provenance(PROVENANCE) == (SUITE / "PROVENANCE.md").read_text()
    assert len(PROVENANCE) >= 30
    for c in PROVENANCE:
        f = c["files"]["config.json"]
        assert len(f["commit"]) == 40 and f["url"].startswith("https://github.com/") and c["spelling"], c["name"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_published_config_plans_as_vllm_builds_it(case: dict, tmp_path: Path) -> None:
    answer = load_answer(case["name"], SUITE)
    assert answer is not None, "no oracle answer: run scripts/oracle/arch_oracle.py on the suite"
    assert answer["config_sha256"] == hashlib.sha256((SUITE / case["config"]).read_bytes()).hexdigest(), \
        "the answer is for an older version of the config: rerun the oracle"
    status, diffs = check_case(case, SUITE, tmp_path)
    assert status in ("exact", "refused-ok"), "; ".join(diffs)
    if status == "refused-ok":
        # vLLM's own words are in kvplan's one line.
        err = answer["error"]
        said = err["message"] + " ".join(err.get("traceback_tail", []))
        with pytest.raises(KvplanInputError) as e:
            kvplan.api.compile(case_input(case, SUITE, tmp_path), flags_of(case))
        words = [w for w in _VLLM_REFUSALS if w in said]
        assert words and all(w in str(e.value) for w in words), (said[:300], str(e.value))


# How vLLM 0.33 words the refusals kvplan repeats: a model_type nothing loads (transformers'
# AutoConfig), an architecture nothing builds (its model registry).
_VLLM_REFUSALS = ("but Transformers does not recognize this architecture", "are not supported for now")


@pytest.mark.parametrize(("name", "words"), [
    ("DeepSeek-V4-Flash-FP8-deepseek_ref", "has model type `deepseek_ref` but Transformers does not recognize"),
    ("MiMo-7B-Base", "has model type `mimo` but Transformers does not recognize"),
    ("Step-3.7-Flash", "Model architectures ['Step3p7FlashForCausalLM'] are not supported for now")])
def test_published_config_vllm_refuses_is_refused_in_vllms_words(name: str, words: str) -> None:
    """Published files vLLM 0.33 refuses as they stand (the oracle's answers say so): kvplan plan exits 2
    with one line that carries vLLM's words, whatever the flags."""
    answer = load_answer(f"{name}__auto", SUITE)
    err = (answer or {}).get("error") or {}
    assert words in err.get("message", "") + " ".join(err.get("traceback_tail", []))
    with pytest.raises(KvplanInputError) as e:
        kvplan.api.compile(SUITE / name / "config.json", "--trust-remote-code --kv-cache-dtype auto")
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("name", DTYPE_CASES)
def test_quantized_published_config_kv_dtypes_are_vllms(name: str) -> None:
    """The checkpoint's own quantization_config / hf_quant_config.json decide the KV cache dtype.

    Where vLLM's model class could not be built on the CPU (no weight kernel), the answer comes from
    vLLM's Attention layers built with the checkpoint's quant config: the cache dtype vLLM resolves
    (e.g. ModelOpt's kv_cache_quant_algo FP8 -> fp8_e4m3 under `auto`) and every plain attention
    layer's dtype and quant mode are compared; an MLA layer's own cache format (fp8_ds_mla ...) is
    its model class's, checked by the geometry answer above."""
    o = json.loads((SUITE / "dtype_answers" / f"{name}.json").read_text())
    config, flag = name.rsplit("__", 1)
    path = SUITE / config / "config.json"
    assert o["config_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert o["error"] is None, f"{o['error']['type']}: {o['error']['message'][:200]}"
    plan = kvplan.api.compile(path, ["--kv-cache-dtype", flag])
    assert plan.model.dtype == o["engine"]["model_dtype"]
    # The plan's global dtype is the flag after config-time resolution (create_engine_config); a
    # compressed-tensors kv_cache_scheme rewrites cache_config.cache_dtype to fp8 only while the model
    # is built (Attention.__init__), which the attention layers' own dtypes below carry.
    assert plan.kv_cache_dtype == o["engine"]["cache_dtype_after_create_engine_config"]
    rewritten = o["engine"]["cache_dtype_after_model_build"]
    if rewritten != plan.kv_cache_dtype:
        assert any(lp.kv_cache_dtype == rewritten for lp in plan.layers), f"no layer ends with {rewritten}"
    want = {rec["index"]: rec for rec in o["layers"] if rec["index"] is not None}
    for lp in plan.layers:
        rec = want.get(lp.index)
        if rec is None or lp.kind in NO_KV_KINDS or (lp.kind == "mla" and o["mode"] != "model"):
            continue  # attention-mode answers build one Attention per decoder layer
        assert lp.kv_cache_dtype == rec["kv_cache_dtype"], f"L{lp.index} kv_cache_dtype"
        assert lp.quant_mode.value == (rec["kv_quant_mode"] or "none").lower(), f"L{lp.index} quant_mode"
