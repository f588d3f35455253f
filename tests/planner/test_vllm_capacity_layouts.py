"""Layouts beyond plain attention and state layers: kvplan's KV cache layout and capacity equal vLLM 0.33.0's own.

tests/data/vllm_oracle_capacity/cases_speculative.json: a --speculative-config (an EAGLE3 head's config.json,
the checkpoint's MTP layers, or ngram with no draft); answers/ holds what scripts/oracle/capacity_oracle.py
computed with vLLM's code, the drafter's model built as its load_model builds it (the draft's layers marked).
tests/data/vllm_oracle_capacity/cases_extra.json: sparse-MLA indexer key caches (DeepSeek-V3.2, GLM-5),
cross-attention (Whisper), --kv-cache-dtype-skip-layers next to MLA and state layers, KDA state layers.
tests/data/vllm_oracle_capacity/cases_audio.json: Voxtral Realtime's causal audio encoder caches (block-pooled
sliding windows numbered with the decoder layers), from its Mistral-format params.json.
tests/data/vllm_oracle_capacity/cases_refused.json: layouts vLLM raises on (its exception is the answer); a
release that lays such a case out (its answer has no exception) is checked like the others.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.model.plan import Plan
from kvplan.planner.layout import UNIFY_REFUSAL_BEFORE_024
from tests.conftest import ROOT
from tests.planner.test_vllm_capacity_parity import (
    assert_answer_current,
    check_layout_refusal,
    crashes_laying_out,
    refused_by_release,
)

DATA = ROOT / "tests" / "data" / "vllm_oracle_capacity"
SPECULATIVE = json.loads((DATA / "cases_speculative.json").read_text())["cases"]
EXTRA = json.loads((DATA / "cases_extra.json").read_text())["cases"]
AUDIO = json.loads((DATA / "cases_audio.json").read_text())["cases"]
CASES = SPECULATIVE + EXTRA + AUDIO
REFUSED = json.loads((DATA / "cases_refused.json").read_text())["cases"]
RELEASES = ["0.33.0", *sorted(p.name for p in (DATA / "releases").iterdir() if p.is_dir())]


_KIND = {"FullAttentionSpec": "full_attention", "SlidingWindowSpec": "sliding_attention",
         "ChunkedLocalAttentionSpec": "chunked_attention", "MLAAttentionSpec": "mla", "MambaSpec": "state",
         "CrossAttentionSpec": "cross_attention"}


def _answer(case: dict, release: str = "0.33.0") -> dict[str, Any]:
    folder = DATA / "answers" if release == "0.33.0" else DATA / "releases" / release
    return json.loads((folder / f"{case['name']}.json").read_text())


# A case vLLM refuses from one release on is laid out by the releases before it (the Kimi-Linear + Kimi-K2
# EAGLE3 case: 0.28 pads the MLA pages, ENGINE_FEATURES mla_page_padding): those releases check its layout.
RUNS = [(r, c) for r in RELEASES for c in CASES] + [
    (r, c) for r in RELEASES for c in REFUSED if _answer(c, r)["error"] is None]
_REFUSED_RUNS = [(r, c) for r in RELEASES for c in REFUSED if _answer(c, r)["error"] is not None]


def _argv(flags: dict[str, Any]) -> list[str]:
    argv = ["--max-model-len", str(flags["max_model_len"]), "--kv-cache-dtype", flags.get("kv_cache_dtype", "auto")]
    if flags.get("enable_prefix_caching") is False:
        argv.append("--no-enable-prefix-caching")
    if flags.get("disable_hybrid_kv_cache_manager"):
        argv.append("--disable-hybrid-kv-cache-manager")
    if "max_num_batched_tokens" in flags:
        argv += ["--max-num-batched-tokens", str(flags["max_num_batched_tokens"])]
    if flags.get("kv_cache_dtype_skip_layers"):
        argv += ["--kv-cache-dtype-skip-layers", *flags["kv_cache_dtype_skip_layers"]]
    if "speculative_config" not in flags:
        return argv
    spec = dict(flags["speculative_config"])
    if spec.get("model"):
        spec["model"] = str((DATA / spec["model"]).resolve())
    return [*argv, "--speculative-config", json.dumps(spec)]


def _config(case: dict, tmp: Path) -> tuple[Path, list[str]]:
    """The config as the oracle ran it (tests/planner/arch_parity.py::case_input): a case that drops the weight
    quantization (no FP8 / NVFP4 weight kernel runs on the CPU) is planned from a copy without it and without
    the checkpoint's hf_quant_config.json; a model_type only the oracle's stand-in config class loads is planned
    through that class, under --trust-remote-code as the oracle ran it."""
    from tests.planner.arch_parity import case_input

    cfg = case_input(case, DATA, tmp)
    stand_in = str((json.loads(cfg.read_text()).get("auto_map") or {}).get("AutoConfig", "")).startswith("arch_oracle.")
    return cfg, ["--trust-remote-code"] if stand_in else []


def _plan(case: dict, tmp: Path, release: str = "0.33.0") -> Plan:
    cfg, trust = _config(case, tmp)
    return kvplan.api.compile(cfg, [*_argv(case["flags"]), *trust],
                              kv_budget_bytes=case["available_bytes"], engine=f"vllm=={release}")


def _layer_index(name: str, drafts: list[str], num_layers: int) -> int:
    """vLLM's layer name -> kvplan's index: the draft's layers are numbered after the model's."""
    if name in drafts:
        return num_layers + drafts.index(name)
    found = re.findall(r"\.(\d+)\.", name)
    assert found, name
    return int(found[-1])


@pytest.mark.parametrize("release", RELEASES)
def test_every_case_is_answered_for_its_config(release: str) -> None:
    for case in CASES:
        answer = _answer(case, release)
        assert_answer_current(case, answer, release)
        assert (answer["error"] is None or refused_by_release(answer) or crashes_laying_out(answer)
                or _refuses_draft_kv_cache_dtype(answer)), case["name"]
    # the cases cover an EAGLE3 head, MTP on an MLA, a GQA and a hybrid model, and a method with no draft
    drafts = {case["name"]: _answer(case)["answer"].get("draft_layer_names") for case in SPECULATIVE}
    assert any(d and "mtp." in d[0] for d in drafts.values()) and any(d is None for d in drafts.values())


def _refuses_draft_kv_cache_dtype(answer: dict[str, Any]) -> bool:
    """The release's SpeculativeConfig has no kv_cache_dtype (before 0.28): vLLM exits at create_engine_config."""
    err = answer["error"]
    return (err is not None and err["stage"] == "create_engine_config" and "SpeculativeConfig" in err["message"]
            and "kv_cache_dtype" in " ".join(err["traceback_tail"]))


@pytest.mark.parametrize(("release", "case"), RUNS, ids=[f"{r}-{c['name']}" for r, c in RUNS])
def test_layout_and_capacity_equal_vllms(release: str, case: dict, tmp_path: Path) -> None:
    answer = _answer(case, release)
    want = answer["answer"]
    try:
        plan = _plan(case, tmp_path, release)
    except KvplanInputError as e:
        # A model type newer than the release's transformers pin (bailing_hybrid before 0.33): that release
        # refuses the config, as kvplan does; the oracle built it only because its venv carries 0.33's
        # transformers (scripts/oracle/releases/README.md), so its layout is not the release's. An architecture
        # the release does not have (BailingMoeV3VL before 0.29, BailingMoeV3 before 0.28): the release's own
        # answer is that refusal, and kvplan names it.
        assert release != "0.33.0"
        assert ("cannot load this config" in str(e) and "unknown to transformers" in str(e)) or (
            refused_by_release(answer) and f"vLLM {release} refuses this config" in str(e))
        return
    assert not refused_by_release(answer), f"vLLM {release} refuses {case['name']}; kvplan plans it"
    if crashes_laying_out(answer):
        check_layout_refusal(plan, answer)
        return
    if _refuses_draft_kv_cache_dtype(answer):
        (finding,) = [f for f in plan.findings if f.code == "KV004"]
        assert "--speculative-config kv_cache_dtype does not exist" in finding.message
        return
    t = plan.totals
    lay = t.kv_cache_layout
    assert lay is not None, "kvplan computes no layout"
    drafts = want.get("draft_layer_names", [])
    n = plan.model.num_layers
    assert lay.block_size == answer["engine"]["block_size"]
    got = sorted((g.kind, sorted(g.layers), g.block_size, g.blocks_per_request) for g in lay.groups)
    wanted = sorted((_KIND[g["spec"]], sorted(_layer_index(x, drafts, n) for x in g["layer_names"]),
                     g["block_size"], g["blocks_per_request"]) for g in want["groups"])
    assert got == wanted
    assert lay.num_blocks == want["num_blocks"]
    assert t.tokens_capacity == want["gpu_kv_cache_tokens"]
    assert t.max_concurrency == round(want["max_concurrency"], 2)
    # the draft's layers are in the plan with their bytes, numbered as in the layout
    assert sorted(lp.index for lp in (t.draft.layers if t.draft else [])) == [n + i for i in range(len(drafts))]


@pytest.mark.parametrize(("release", "case"), _REFUSED_RUNS, ids=[f"{r}-{c['name']}" for r, c in _REFUSED_RUNS])
def test_layout_vllm_refuses_is_finding_kv504(release: str, case: dict, tmp_path: Path) -> None:
    """Where vLLM's own layout code raises (its exception recorded by the oracle), kvplan computes no layout and
    reports KV504 with vLLM's message, naming the same layer."""
    answer = _answer(case, release)
    digest = hashlib.sha256((DATA / case["config"]).resolve().read_bytes()).hexdigest()
    assert answer["vllm_version"] == release and answer["config_sha256"] == digest
    err = answer["error"]
    assert err is not None and err["stage"] == "capacity"
    plan = _plan(case, tmp_path, release)
    assert plan.totals.kv_cache_layout is None
    (finding,) = [f for f in plan.findings if f.code == "KV504"]
    assert finding.severity.value == "error"
    if err["message"].startswith("Layer "):  # "Layer <name>: <why>": the layer vLLM names
        name, _, message = err["message"].partition(": ")
        assert message in finding.message
        assert finding.layers == [_layer_index(name + ".", [], plan.model.num_layers)]
    elif err["message"] == UNIFY_REFUSAL_BEFORE_024:  # before 0.24 vLLM names no layer; kvplan names the first
        assert err["message"] in finding.message and finding.layers
    else:  # the hybrid manager off next to state layers: vLLM names none; kvplan lists the state layers
        assert f'"{err["message"]}"' in finding.message
        assert finding.layers == [lp.index for lp in plan.layers if lp.kind in ("mamba", "linear_attention")]


def _eagle_flags(model: str, kv: str = "fp8") -> list[str]:
    return ["--max-model-len", "65536", "--kv-cache-dtype", kv, "--speculative-config",
            json.dumps({"method": "eagle3", "model": model, "num_speculative_tokens": 3})]


def test_plan_json_shows_the_drafts_layers_and_bytes() -> None:
    draft = str(DATA / "configs" / "drafts" / "EAGLE3-LLaMA3.1-Instruct-8B.json")
    plan = kvplan.api.compile(ROOT / "tests/data/corpus/Meta-Llama-3.1-8B/config.json", _eagle_flags(draft),
                              kv_budget_bytes=10 << 30)
    doc = json.loads(plan.model_dump_json())
    d = doc["totals"]["draft"]
    assert (d["method"], d["model"], d["num_speculative_tokens"], d["bytes_per_token"]) == ("eagle3", draft, 3, 2048)
    assert [(lp["index"], lp["kind"], lp["kv_cache_dtype"]) for lp in d["layers"]] == [(32, "full_attention", "fp8")]
    assert doc["flags"]["speculative_config"] == {"method": "eagle3", "model": draft, "num_speculative_tokens": 3}
    assert doc["totals"]["bytes_per_token"] == 32 * 2048  # the target's alone; the draft's is its own figure
    assert doc["totals"]["bytes_per_request"] == 33 * 2048 * 65536  # the pool holds both


def test_no_draft_no_draft_entry() -> None:
    plan = kvplan.api.compile(ROOT / "tests/data/corpus/Meta-Llama-3.1-8B/config.json", "--max-model-len 8192")
    assert "draft" not in json.loads(plan.model_dump_json())["totals"]


def test_a_missing_draft_model_is_one_input_error() -> None:
    from kvplan.errors import KvplanInputError

    with pytest.raises(KvplanInputError, match=r"^--speculative-config model '/nonexistent/draft': path not found"):
        kvplan.api.compile(ROOT / "tests/data/corpus/Meta-Llama-3.1-8B/config.json",
                           _eagle_flags("/nonexistent/draft"))


def test_explain_names_the_drafts_kv_layers() -> None:
    from typer.testing import CliRunner

    from kvplan.cli.main import app

    args = ["explain", str(ROOT / "tests/data/corpus/DeepSeek-V3/config.json"), "--max-model-len", "65536",
            "--kv-budget-gib", "20", "--engine", "vllm==0.33.0", "--speculative-config",
            json.dumps({"method": "mtp", "num_speculative_tokens": 1})]
    out = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    assert ("speculative decoding (mtp, 1 draft token): the checkpoint's MTP layers add 1 KV layer (auto), "
            "1,152 B/token to the pool") in out.output
    assert "GPU KV cache size: 300,656 tokens" in out.output  # the oracle's answer for this case
