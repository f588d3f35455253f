"""Capacity as vLLM computes and logs it at startup: block size, KV cache groups, tokens and concurrency.

tests/data/capacity/startup_logs.json holds public vLLM startup logs (URL, model, flags, the logged KV memory
and the "GPU KV cache size" / "Maximum concurrency" lines). The logged memory is rounded to 0.01 GiB, so a
log is reproduced when some budget that rounds to it gives vLLM's exact figures.
"""
from __future__ import annotations

import json
import math

import pytest

import kvplan.api
from kvplan.model.plan import Plan
from tests.conftest import ROOT

CAPACITY = ROOT / "tests" / "data" / "capacity"
STARTUP_LOGS = json.loads((CAPACITY / "startup_logs.json").read_text())
LOGS = STARTUP_LOGS["logs"]
EXCLUDED_LOGS = STARTUP_LOGS["excluded_logs"]
QWEN36_35B = CAPACITY / "Qwen3.6-35B-A3B"
QWEN35_27B = ROOT / "tests" / "data" / "corpus" / "Qwen3.5-27B"
GIB = 2**30
# the expectations below were read off vLLM 0.33.0 (the logs name their own release)
ENGINE = "vllm==0.33.0"


def _plan(path, flags: list[str], budget: int | None = None, engine: str = ENGINE) -> Plan:
    return kvplan.api.compile(path, flags, kv_budget_bytes=budget, engine=engine)


def _log_id(log: dict) -> str:
    return log["url"].rsplit("/", 1)[-1]


def _engine(log: dict) -> str:
    version = log.get("vllm_version")
    return log.get("engine") or (f"vllm=={version}" if version else ENGINE)


def _same_concurrency(conc: float | None, logged: float | None) -> bool:
    """Maximum concurrency as vLLM prints it (%.2f); a log without the line checks the tokens only."""
    return logged is None or (conc is not None and f"{conc:.2f}" == f"{logged:.2f}")


@pytest.mark.parametrize("log", LOGS, ids=[_log_id(x) for x in LOGS])
def test_startup_log_is_reproduced(log: dict) -> None:
    cfg = (CAPACITY / log["config"]).resolve()
    engine = _engine(log)
    layout = _plan(cfg, log["flags"], budget=GIB, engine=engine).totals.kv_cache_layout
    assert layout is not None
    if log["available_kv_gib"] is None:  # memory not in the log: any pool size
        lo, hi = layout.bytes_per_block, 20_000 * layout.bytes_per_block
    else:
        lo = math.ceil((log["available_kv_gib"] - 0.005) * GIB)
        hi = math.floor((log["available_kv_gib"] + 0.005) * GIB)
    hits = []
    for n in range(lo // layout.bytes_per_block, hi // layout.bytes_per_block + 1):
        budget = max(n * layout.bytes_per_block, lo)
        if not _same_concurrency(n / layout.blocks_per_request, log["max_concurrency"]):
            continue
        t = _plan(cfg, log["flags"], budget=budget, engine=engine).totals
        if t.tokens_capacity == log["gpu_kv_cache_tokens"] and _same_concurrency(t.max_concurrency,
                                                                                  log["max_concurrency"]):
            hits.append(n)
    assert hits, f"no budget rounding to {log['available_kv_gib']} GiB gives vLLM's logged figures"


@pytest.mark.parametrize("log", EXCLUDED_LOGS, ids=[_log_id(x) for x in EXCLUDED_LOGS])
def test_excluded_startup_log_stays_where_recorded(log: dict) -> None:
    """A log kvplan does not reproduce keeps its reason and kvplan's figures at the logged memory: kvplan still
    misses vLLM's (else the log belongs in `logs`) and gives what the record says (else the reason is stale)."""
    assert log["reason"] and log["url"].startswith("https://")
    cfg = (CAPACITY / log["config"]).resolve()
    t = _plan(cfg, log["flags"], budget=int(log["available_kv_gib"] * GIB), engine=_engine(log)).totals
    mine = log["kvplan"]
    assert t.tokens_capacity == mine["gpu_kv_cache_tokens"] != log["gpu_kv_cache_tokens"]
    if mine["max_concurrency"] is not None:
        assert t.max_concurrency is not None and f"{t.max_concurrency:.2f}" == f"{mine['max_concurrency']:.2f}"


def test_tokens_line_follows_the_release_formula() -> None:
    """vLLM 0.20.0 still logs num_blocks // groups x block size; 0.20.1 logs int(concurrency x max-model-len)
    (_report_kv_cache_config, read in both wheels). Qwen3.6-35B-A3B at fp8 and 8192 with 15 blocks of 2096
    tokens in 4 groups, 10 per request: 0.20.0 prints 6,288 tokens, 0.20.1 12,288, both 1.50x. (Prefix caching
    named: before 0.27 a hybrid model runs without it by default.)"""
    flags = ["--kv-cache-dtype", "fp8_e4m3", "--max-model-len", "8192", "--max-num-seqs", "32",
             "--enable-prefix-caching"]
    layout = _plan(QWEN36_35B, flags, budget=GIB, engine="vllm==0.20.0").totals.kv_cache_layout
    assert layout is not None
    budget = 15 * layout.bytes_per_block
    old = _plan(QWEN36_35B, flags, budget=budget, engine="vllm==0.20.0").totals
    new = _plan(QWEN36_35B, flags, budget=budget, engine="vllm==0.20.1").totals
    assert old.max_concurrency == new.max_concurrency == 15 / 10
    assert old.tokens_capacity == 15 // 4 * 2096 == 6288 and new.tokens_capacity == int(1.5 * 8192) == 12288


def test_hybrid_block_size_is_raised_to_hold_the_state_page() -> None:
    """vLLM logs "Setting attention block size to 2096 tokens" for Qwen3.6-35B-A3B with an fp8 KV cache and
    1568 for Qwen3.6-27B at TP 2 (issue 44)."""
    t = _plan(QWEN36_35B, ["--kv-cache-dtype", "fp8", "--max-model-len", "131072"]).totals
    assert t.kv_cache_layout is not None and t.kv_cache_layout.block_size == 2096
    assert t.kv_cache_layout.page_size_bytes == 2096 * 1024
    assert t.kv_cache_layout.state_page_size_bytes == 3 * 8192 * 2 + 32 * 128 * 128 * 4
    t = _plan(QWEN35_27B, ["--kv-cache-dtype", "fp8_e5m2", "-tp", "2", "--max-model-len", "131072"]).totals
    assert t.kv_cache_layout is not None and t.kv_cache_layout.block_size == 1568


def test_hybrid_groups_and_blocks_per_request() -> None:
    """10 full-attention and 30 gated-delta-net layers: 4 groups of 10; a request at 131072 holds
    cdiv(131072, 2096) attention blocks and, with prefix caching (align mode), 2 blocks per state group."""
    lay = _plan(QWEN36_35B, ["--kv-cache-dtype", "fp8", "--max-model-len", "131072"],
                budget=6 * GIB).totals.kv_cache_layout
    assert lay is not None
    assert [(g.kind, len(g.layers), g.blocks_per_request) for g in lay.groups] == \
        [("full_attention", 10, 63), ("state", 10, 2), ("state", 10, 2), ("state", 10, 2)]
    assert lay.groups[1].layers == list(range(0, 40, 4))  # bucket layers i, i + n, ... (vLLM's layers[i::n])
    assert lay.bytes_per_block == 10 * 2096 * 1024 and lay.blocks_per_request == 69
    assert lay.mamba_cache_mode == "align" and lay.num_blocks == 6 * GIB // lay.bytes_per_block


def test_prefix_caching_and_speculative_tokens_change_state_blocks() -> None:
    base = ["--kv-cache-dtype", "fp8", "--max-model-len", "131072"]
    off = _plan(QWEN36_35B, [*base, "--no-enable-prefix-caching"]).totals.kv_cache_layout
    assert off is not None and off.mamba_cache_mode == "none"
    assert [g.blocks_per_request for g in off.groups if g.kind == "state"] == [1, 1, 1]
    mtp = _plan(QWEN36_35B, [*base, "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 2}'])
    lay = mtp.totals.kv_cache_layout
    assert lay is not None
    assert [g.blocks_per_request for g in lay.groups if g.kind == "state"] == [4, 4, 4]
    # the MTP draft layer's own attention cache joins the full-attention layers: groups of 11, the 30 state
    # layers split into cdiv(30, 11) = 3 groups of 10 (one padding layer each)
    assert [len(g.layers) for g in lay.groups] == [11, 10, 10, 10] and 40 in lay.groups[0].layers
    # conv states keep the draft tokens' columns: a larger state page, so a larger block
    assert lay.block_size == (5 * 8192 * 2 + 32 * 128 * 128 * 4) // 1024 == 2128
    assert mtp.layers[0].state_shapes == [[5, 8192], [32, 128, 128]]


def test_state_layers_count_in_the_totals() -> None:
    p = _plan(QWEN36_35B, ["--kv-cache-dtype", "fp8", "--max-model-len", "131072"], budget=6 * GIB)
    states = [lp for lp in p.layers if lp.kind == "linear_attention"]
    assert len(states) == 30 and all(lp.state_bytes == 2_146_304 for lp in states)
    assert p.totals.state_bytes_per_request == 30 * 2_146_304
    lay = p.totals.kv_cache_layout
    assert lay is not None
    assert p.totals.bytes_per_request == lay.bytes_per_block * lay.blocks_per_request
    assert p.totals.max_concurrency == round(lay.num_blocks / 69, 2)
    assert p.totals.tokens_capacity == int(lay.num_blocks / 69 * 131072)


def test_dense_model_is_one_group() -> None:
    """All layers full attention with one spec: one group, pages summed; the logged size is
    int(num_blocks / cdiv(L, 16) x L)."""
    p = _plan(ROOT / "tests" / "data" / "corpus" / "Qwen3-8B", ["--max-model-len", "32768"], budget=20 * GIB)
    lay = p.totals.kv_cache_layout
    assert lay is not None and len(lay.groups) == 1 and lay.block_size == 16
    assert lay.bytes_per_block == 16 * p.totals.bytes_per_token
    n = 20 * GIB // lay.bytes_per_block
    assert lay.num_blocks == n and p.totals.tokens_capacity == int(n / 2048 * 32768)


def test_sliding_and_full_layers_are_grouped_by_window() -> None:
    """Gemma 3 4B (34 layers, 5 sliding : 1 full, so 5 full and 29 sliding): equal pages, groups of 5 (one full
    group, cdiv(29, 5) = 6 sliding groups); the sliding groups hold their window + one prefill chunk, + 1 block."""
    p = _plan(ROOT / "tests" / "data" / "corpus" / "gemma-3-4b-it", ["--max-model-len", "32768"])
    lay = p.totals.kv_cache_layout
    assert lay is not None
    kinds = [g.kind for g in lay.groups]
    assert kinds.count("full_attention") == 1 and kinds.count("sliding_attention") == 6
    assert lay.bytes_per_block == 5 * lay.page_size_bytes
    sw = next(lp for lp in p.layers if lp.kind == "sliding_attention").sliding_window
    assert sw is not None
    want = math.ceil(min(sw - 1 + 8192, 32768) / 16) + 1
    assert {g.blocks_per_request for g in lay.groups if g.kind == "sliding_attention"} == {want}


def test_too_small_budget_reads_like_vllms_startup_error() -> None:
    p = _plan(QWEN36_35B, ["--kv-cache-dtype", "fp8", "--max-model-len", "131072"], budget=int(1.2 * GIB))
    lay = p.totals.kv_cache_layout
    assert lay is not None
    fs = [f for f in p.findings if f.code == "KV502"]
    assert len(fs) == 1
    # (blocks after the null block - 6 state blocks) x 2096 tokens
    want = (int(1.2 * GIB) // lay.bytes_per_block - 1 - 6) * 2096
    assert p.totals.max_model_len_fits == want
    assert fs[0].message.startswith("To serve at least one request with the model's max seq len (131072)")
    assert f"the estimated maximum model length is {want}." in fs[0].message
    ok = _plan(QWEN36_35B, ["--kv-cache-dtype", "fp8", "--max-model-len", "131072"], budget=2 * GIB)
    assert not [f for f in ok.findings if f.code == "KV502"] and ok.totals.max_model_len_fits is None


def _gpt_oss_with_mtp(n: int) -> dict:
    cfg = json.loads((ROOT / "tests" / "data" / "corpus" / "gpt-oss-20b" / "config.json").read_text())
    return {**cfg, "num_nextn_predict_layers": n}


@pytest.mark.parametrize(("mtp_layers", "tokens", "retained"), [(2, 3, 2), (2, 1, 0), (1, 3, 0), (3, 2, 1)])
def test_several_mtp_modules_keep_more_of_each_sliding_window(mtp_layers: int, tokens: int, retained: int) -> None:
    """Modelled, not oracle-verified (no checked-in config has sliding windows and several MTP layers):
    get_global_kv_cache_groups (vllm/v1/core/kv_cache_planning.py) gives every SlidingWindowSpec
    extra_retained_tokens = num_prefill_lookahead_tokens - 1, which is num_speculative_tokens with more than
    one MTP module in use (VllmConfig.num_prefill_lookahead_tokens, SpeculativeConfig.use_multi_module_mtp),
    and SlidingWindowSpec.max_admission_blocks_per_request counts them below the window."""
    spec = json.dumps({"method": "mtp", "num_speculative_tokens": tokens})
    lay = _plan(_gpt_oss_with_mtp(mtp_layers), ["--max-model-len", "65536", "--speculative-config", spec],
                budget=10 * GIB).totals.kv_cache_layout
    assert lay is not None
    sliding = next(g for g in lay.groups if g.kind == "sliding_attention")
    full = next(g for g in lay.groups if g.kind == "full_attention")
    assert sliding.blocks_per_request == math.ceil((128 - 1 + retained + 8192) / lay.block_size) + 1
    assert full.blocks_per_request == 65536 // lay.block_size
    assert len(full.layers) == 12 + mtp_layers  # the MTP layers join the full-attention group


@pytest.mark.parametrize(("spec", "method"), [
    ({"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}, "eagle3"),
    ({"model": "yuhuili/EAGLE-LLaMA3-Instruct-8B"}, "eagle"),
    ({"model": "meta-llama/Llama-3.2-1B"}, "draft_model"),
    ({"method": "draft_model", "model": "AngelSlim/Qwen3-8B_eagle3"}, "eagle3"),
    ({"method": "eagle", "model": "org/some-eagle3-head"}, "eagle"),
    ({"method": "deepseek_mtp"}, "mtp"),
    ({"model": "ngram"}, "ngram"),
])
def test_speculative_method_is_resolved_as_vllm_does(spec: dict, method: str) -> None:
    """SpeculativeConfig.__post_init__ (vllm/config/speculative.py, 0.33.0): a model without a method is a
    draft_model, then the draft model's name decides eagle ("eagle-") or eagle3 ("eagle3") unless the method
    already is eagle / eagle3 / dflash / dspark; deprecated MTP method names become mtp."""
    from kvplan.ingest.flags import flags_from
    from kvplan.planner.layout import speculative_method

    flags = flags_from(["--speculative-config", json.dumps({**spec, "num_speculative_tokens": 2})])
    assert speculative_method(flags) == method


GLM5 = ROOT / "tests" / "data" / "vllm_oracle_arch" / "configs" / "GlmMoeDsaForCausalLM__default.json"
EAGLE3_HEAD = ROOT / "tests" / "data" / "vllm_oracle_capacity" / "configs" / "drafts" / \
    "EAGLE3-LLaMA3.1-Instruct-8B.json"


def _glm5_with_eagle3(engine: str, gpu: str = "b200", **spec: str) -> Plan:
    cfg = json.dumps({"method": "eagle3", "model": str(EAGLE3_HEAD), "num_speculative_tokens": 3, **spec})
    return kvplan.api.compile(GLM5, ["--max-model-len", "8192", "--speculative-config", cfg], gpu,
                              kv_budget_bytes=10 * GIB, engine=engine)


@pytest.mark.parametrize("engine,kv,stored,bpt", [
    ("vllm==0.33.0", "auto", "bfloat16", 4096),        # GlmMoeDsaForCausalLM sets the draft's kv_cache_dtype to auto
    ("vllm==0.34.0", "fp8_e4m3", "float8_e4m3fn", 2048),  # 0.34 drops that: the draft inherits fp8_e4m3
])
def test_glm5_draft_cache_dtype_follows_the_release(engine: str, kv: str, stored: str, bpt: int) -> None:
    """vllm/model_executor/models/config.py::GlmMoeDsaForCausalLM.verify_and_update_config, read in both wheels:
    on SM100 the target's 'auto' becomes fp8_e4m3; 0.33 also forces a separate (non-MTP) draft to 'auto'."""
    plan = _glm5_with_eagle3(engine)
    assert plan.kv_cache_dtype == "fp8_e4m3" and plan.layers[0].kv_cache_dtype == "fp8_e4m3"
    draft = plan.totals.draft
    assert draft is not None and [(lp.index, lp.kv_cache_dtype, lp.dtype) for lp in draft.layers] == [(78, kv, stored)]
    assert draft.bytes_per_token == bpt
    fact = next(d.fact for d in draft.layers[0].decisions if d.field == "kv_cache_dtype")
    assert ("sets the eagle3 draft's kv_cache_dtype to 'auto'" in fact) is (kv == "auto")
    (finding,) = [f for f in plan.findings if f.code == "KV118"]
    assert finding.layers == [78] and f"{bpt} B/token" in finding.message


def test_glm5_draft_cache_dtype_from_the_speculative_config_or_off_sm100() -> None:
    """An explicit speculative kv_cache_dtype is the draft's in both releases; off SM100 the target stays 'auto'
    and so does the draft (no finding)."""
    for engine in ("vllm==0.33.0", "vllm==0.34.0"):
        plan = _glm5_with_eagle3(engine, kv_cache_dtype="fp8_e4m3")
        assert plan.totals.draft is not None and plan.totals.draft.layers[0].kv_cache_dtype == "fp8_e4m3"
        assert not [f for f in plan.findings if f.code == "KV118"]
        h100 = _glm5_with_eagle3(engine, gpu="h100")
        assert h100.totals.draft is not None and h100.totals.draft.layers[0].kv_cache_dtype == "auto"
        assert not [f for f in h100.findings if f.code == "KV118"]


def test_draft_runs_in_the_target_model_dtype() -> None:
    """SpeculativeConfig builds the draft model config with the target's dtype: the EAGLE3 head's float16 config
    stores bfloat16 next to a bfloat16 target."""
    plan = _glm5_with_eagle3("vllm==0.33.0", gpu="h100")
    assert plan.model.dtype == "bfloat16" and plan.totals.draft is not None
    assert plan.totals.draft.layers[0].dtype == "bfloat16"


def test_docs_list_every_startup_log() -> None:
    """docs/capacity-layouts.md's tables carry every log of startup_logs.json with its logged tokens, and every
    excluded one with kvplan's figure."""
    doc = (ROOT / "docs" / "capacity-layouts.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| [")]
    for log in LOGS:
        assert any(log["url"] in r and f"{log['gpu_kv_cache_tokens']:,}" in r for r in rows), log["url"]
    for log in EXCLUDED_LOGS:
        assert any(log["url"] in r and f"{log['kvplan']['gpu_kv_cache_tokens']:,}" in r and
                   f"{log['gpu_kv_cache_tokens']:,}" in r for r in rows), log["url"]
