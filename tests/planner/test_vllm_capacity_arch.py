"""Every architecture vLLM builds: kvplan's KV cache layout and capacity equal vLLM's own, per release.

tests/data/vllm_oracle_capacity/cases_arch.json (scripts/oracle/capacity_arch_cases.py) holds one case per
architecture-oracle config (tests/data/vllm_oracle_arch/configs), --kv-cache-dtype auto and, for the state,
sliding-window and MLA families, fp8; answers/ (vLLM 0.33.0) and releases/<version>/ hold what
scripts/oracle/capacity_oracle.py computed with the release's code: KV cache groups (kind, layers, block
size, blocks per request), pool blocks, the "GPU KV cache size" and "Maximum concurrency" figures, or the
startup error when one request does not fit, or the release's refusal of the architecture.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.model.plan import Plan
from tests.conftest import ROOT
from tests.planner.arch_parity import load_answer, refused_by_vllm
from tests.planner.test_vllm_capacity_layouts import _argv, _config
from tests.planner.test_vllm_capacity_parity import assert_answer_current, refused_by_release

DATA = ROOT / "tests" / "data" / "vllm_oracle_capacity"
DOC = json.loads((DATA / "cases_arch.json").read_text())
CASES = DOC["cases"]
RELEASES = ["0.33.0", *sorted(p.name for p in (DATA / "releases").iterdir()
                              if (p / f"{CASES[0]['name']}.json").is_file())]
RUNS = [(r, c) for r in RELEASES for c in CASES]
_KIND = {"FullAttentionSpec": "full_attention", "SlidingWindowSpec": "sliding_attention",
         "ChunkedLocalAttentionSpec": "chunked_attention", "MLAAttentionSpec": "mla", "MambaSpec": "state",
         "CrossAttentionSpec": "cross_attention",
         # Reference sliding-window attention (UnlimitedOCR) derives from FullAttentionSpec and keeps its
         # max_memory_usage_bytes: a request holds max_model_len tokens, as kvplan's full attention
         "RSWASpec": "full_attention"}

ORACLE_LIMITS: dict[tuple[str, str], str] = {
    ("0.34.0", "arch__AriaForConditionalGeneration__default__auto"):
        "0.34 loads the model's image processor at create_engine_config; the architecture-oracle case carries "
        "no preprocessor_config.json (0.33 did not read it)",
    **{("0.34.0", f"arch__{a}__default__auto"):
       "the config is transformers' class defaults, timestamp_token_id None, which 0.34's Qwen3-ASR config class "
       "(a strict dataclass) refuses at create_engine_config; published checkpoints set it"
       for a in ("Qwen3ASRForConditionalGeneration", "Qwen3ASRRealtimeGeneration")},
}
"""(release, case): the release's code could not answer it on the CPU, and why (the oracle's limit)."""

_HYBRID_CLASS = ("vLLM decides the hybrid layout from the model class (IsHybrid: mamba_cache_mode align, the "
                 "attention block size raised to the class's state page from the config's attention geometry) "
                 "even where this config builds layers of one kind only; kvplan decides from the layers built "
                 "(no published checkpoint of the family lacks either kind)")
_NOT_MLA_MODEL = ("vLLM's ModelConfig.use_mla is False for model_type bailing_moe_v2_5 (not in "
                  "ModelArchConfigConvertor.is_deepseek_mla's list), so the hybrid alignment sizes the attention "
                  "page from FullAttentionSpec(num_key_value_heads, head_dim): block 256, the MLA layers' page "
                  "(256 x 1152 B) does not divide the 1 MiB state page and vLLM raises; kvplan aligns on the MLA "
                  "latent (block 1024) and lays it out")
MISMATCHES: dict[tuple[str, str], str] = {
    **{(r, f"arch__{stem}__{dt}"): _HYBRID_CLASS for r in RELEASES for dt in ("auto", "fp8")
       for stem in ("GraniteMoeHybridForCausalLM__default", "BailingMoeV2_5ForCausalLM__default")},
    **{(r, f"arch__BailingMoeV2_5ForCausalLM__group4__{dt}"): _NOT_MLA_MODEL for r in RELEASES
       for dt in ("auto", "fp8")},
}
"""(release, case): kvplan differs from the release, and why (strict xfail: fixing it turns the test red
until the entry goes)."""


def _answer(case: dict, release: str) -> dict[str, Any]:
    folder = DATA / "answers" if release == "0.33.0" else DATA / "releases" / release
    return json.loads((folder / f"{case['name']}.json").read_text())


def _plan(case: dict, tmp: Path, release: str) -> Plan:
    cfg, trust = _config(case, tmp)
    return kvplan.api.compile(cfg, [*_argv(case["flags"]), *trust], kv_budget_bytes=case["available_bytes"],
                              engine=f"vllm=={release}")


def _refused(answer: dict[str, Any], case: dict) -> bool:
    """The release refuses the architecture (its registry, or a model_type its config loading does not know)."""
    arch = case["name"].removeprefix("arch__").split("__")[0]
    return answer["error"] is not None and (refused_by_release(answer) or refused_by_vllm(answer, arch))


def _groups(lay: Any) -> list[tuple]:
    return sorted((g.kind, g.layers, g.block_size, g.blocks_per_request) for g in lay.groups)


def compare(plan: Plan, answer: dict[str, Any]) -> list[str]:
    """Differences between kvplan's layout and capacity and the release's answer (empty when equal)."""
    want, t = answer["answer"], plan.totals
    lay = t.kv_cache_layout
    want_groups = sorted((_KIND.get(g["spec"], g["spec"]), g["layers"], g["block_size"], g["blocks_per_request"])
                         for g in want["groups"])
    if lay is None:
        return [] if not want_groups else [f"kvplan computes no layout; vLLM: {want_groups}"]
    diffs = []
    if lay.block_size != answer["engine"]["block_size"]:
        diffs.append(f"block size {lay.block_size} != vLLM {answer['engine']['block_size']}")
    if _groups(lay) != want_groups:
        diffs.append(f"groups {_groups(lay)} != vLLM {want_groups}")
    # a group listing a layer twice (an MLA layer and its indexer cache) records its first spec's page only
    pages = [g["page_size_bytes"] for g in want["groups"] if len(set(g["layers"])) == len(g["layers"])]
    if pages and len(pages) == len(want["groups"]) and max(pages) != lay.page_size_bytes:
        diffs.append(f"page {lay.page_size_bytes} != vLLM {max(pages)}")
    kvp = next((f.message for f in plan.findings if f.code == "KV502"), None)
    if want["startup_error"] is not None:
        est = re.search(r"estimated maximum model length is (\d+)", want["startup_error"])
        if kvp is None or est is None or t.max_model_len_fits != int(est.group(1)):
            diffs.append(f"startup error: kvplan {kvp!r}, fits {t.max_model_len_fits}; vLLM {want['startup_error']!r}")
        return diffs
    if kvp is not None:
        diffs.append(f"kvplan reports a startup error vLLM does not raise: {kvp}")
    got = (lay.num_blocks, t.tokens_capacity, t.max_concurrency)
    exp = (want["num_blocks"], want["gpu_kv_cache_tokens"], round(want["max_concurrency"], 2))
    if got != exp:
        diffs.append(f"(num_blocks, tokens, concurrency) {got} != vLLM {exp}")
    return diffs


def check(case: dict, release: str, tmp: Path) -> list[str]:
    answer = _answer(case, release)
    if _refused(answer, case):
        try:
            _plan(case, tmp, release)
        except KvplanInputError:
            return []
        return [f"vLLM {release} refuses the architecture; kvplan plans it"]
    err = answer["error"]
    assert err is None or err["stage"] == "capacity", f"oracle error (add to ORACLE_LIMITS with the reason): {err}"
    try:
        plan = _plan(case, tmp, release)
    except KvplanInputError as e:
        return [f"kvplan refuses what vLLM {release} builds: {e}"]
    if err is not None:  # vLLM's own layout code raises: kvplan computes no layout and says so (KV504)
        message = err["message"].partition(": ")[2]
        found = [f.message for f in plan.findings if f.code == "KV504"]
        ok = plan.totals.kv_cache_layout is None and any(message in m for m in found)
        return [] if ok else [f"vLLM {release} raises {err['type']}: {err['message']}; kvplan: {found or 'a layout'}"]
    return compare(plan, answer)


def _marks(release: str, case: dict) -> list[Any]:
    reason = MISMATCHES.get((release, case["name"]))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


@pytest.mark.parametrize(("release", "case"), [pytest.param(r, c, marks=_marks(r, c)) for r, c in RUNS],
                         ids=[f"{r}-{c['name']}" for r, c in RUNS])
def test_layout_and_capacity_equal_vllms(release: str, case: dict, tmp_path: Path) -> None:
    if (release, case["name"]) in ORACLE_LIMITS:
        pytest.skip(f"vLLM {release} could not answer on the CPU: {ORACLE_LIMITS[release, case['name']]}")
    assert check(case, release, tmp_path) == []


@pytest.mark.parametrize("release", RELEASES)
def test_every_case_is_answered_for_its_config(release: str) -> None:
    for case in CASES:
        answer = _answer(case, release)
        assert_answer_current(case, answer, release)
        assert answer["available_bytes"] == case["available_bytes"], f"{case['name']}: re-run with --force"
        assert answer["flags"] == case["flags"], f"{case['name']}: re-run with --force"


def test_configs_left_out_are_refused_by_both(tmp_path: Path) -> None:
    """A config without a case is one vLLM 0.33.0 refuses (its architecture-oracle answer) and kvplan too."""
    for stem in DOC["refused_by_both"]:
        answer = load_answer(f"{stem}__auto")
        assert answer is not None and refused_by_vllm(answer), stem
        case = {"config": f"../vllm_oracle_arch/configs/{stem}.json"}
        with pytest.raises(KvplanInputError):
            kvplan.api.compile(_config(case, tmp_path / stem)[0], ["--kv-cache-dtype", "auto"],
                               engine="vllm==0.33.0")


def test_cases_file_is_current_and_covers_every_config() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "oracle" / "capacity_arch_cases.py"), "--check"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    arch = json.loads((ROOT / "tests" / "data" / "vllm_oracle_arch" / "cases.json").read_text())["cases"]
    stems = {c["name"].removesuffix("__auto") for c in arch if c["kv_cache_dtype"] == "auto"}
    covered = ({c["name"].removeprefix("arch__").rsplit("__", 1)[0] for c in CASES} | set(DOC["refused_by_both"])
               | {k.removesuffix("__fp8") for k in DOC["not_built_by_vllm"]})
    skipped = {s for s in stems if s.startswith(tuple(DOC["skipped_prefixes"]))}
    assert stems - skipped == covered


def test_configs_vllm_fails_to_build_are_its_errors() -> None:
    """A config (or its fp8 variant) left out because vLLM's model class raised while building it in the
    architecture oracle: that answer records the error."""
    for stem, line in DOC["not_built_by_vllm"].items():
        answer = load_answer(stem if stem.endswith("__fp8") else f"{stem}__auto")
        assert answer is not None and answer["error"] is not None and not refused_by_vllm(answer), stem
        assert line.startswith(f"{answer['error']['stage']}: {answer['error']['type']}"), stem
