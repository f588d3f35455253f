"""The explore session without widgets: flags round trip, toggles, recompiles, totals against the start."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvplan.cli.main import app
from kvplan.explore.state import (
    DEFAULT_ENGINE,
    ExploreSession,
    engine_versions,
    findings_sorted,
    layer_fields,
    strip_flags,
)
from kvplan.ingest.flags import parse_flags
from kvplan.model.vocab import Severity
from tests.conftest import CASES, EXAMPLES

GPT_OSS = EXAMPLES / "gpt-oss-20b" / "config.json"
ENV = {"COLUMNS": "160", "NO_COLOR": "1"}
runner = CliRunner()


def kvplan_plan_json(*args: str) -> str:
    r = runner.invoke(app, ["plan", *args, "--format", "json", "--no-policy"], env=ENV)
    assert r.exit_code in (0, 1), r.output
    return r.stdout


@pytest.mark.parametrize("argv", [
    ["vllm", "serve", "openai/gpt-oss-20b", "--kv-cache-dtype=fp8", "--port", "8000"],
    ["--kv_cache_dtype", "fp8", "--kv-cache-dtype-skip-layers", "0", "2", "-tp", "2", "--enforce-eager"],
    ["--max-model-len", "32k", "--kv-cache-dtype-skip-layers", "sliding_window,1", "--dtype", "bfloat16",
     "--kv-cache-typo", "fp8"],
    ["--attention-config", '{"backend": "FLASHINFER"}', "--tensor-parallel-size=4", "--kv-cache-dtype", "auto"],
    *CASES.values(),
])
def test_strip_flags_and_controls_rebuild_the_same_serving_flags(argv: list[str]) -> None:
    s = ExploreSession(GPT_OSS, argv)
    assert parse_flags(s.argv()) == parse_flags(argv)
    assert not {"--kv-cache-dtype", "--kv-cache-dtype-skip-layers", "-tp", "--max-model-len"} & set(s.passthrough)


def test_strip_flags_keeps_other_flags_verbatim() -> None:
    argv = ["vllm", "serve", "m", "--kv-cache-dtype=fp8", "--kv_cache_dtype_skip_layers", "1", "2", "-tp", "2",
            "--port", "8000", "--max-model-len", "32k", "--kv-cache-typo", "fp8"]
    assert strip_flags(argv) == ["vllm", "serve", "m", "--port", "8000", "--kv-cache-typo", "fp8"]


def test_session_start_plan_equals_kvplan_plan_for_the_given_flags() -> None:
    argv = ["--kv-cache-dtype", "fp8", "--dtype", "bfloat16", "--max-model-len", "32k"]
    s = ExploreSession(GPT_OSS, argv, gpu="h100", kv_budget_gib=40)
    assert s.export_json() == kvplan_plan_json(str(GPT_OSS), *argv, "--gpu", "h100", "--kv-budget-gib", "40")


def test_session_what_if_steps_recompile_and_match_kvplan_plan() -> None:
    s = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "fp8"], gpu="h100", kv_budget_gib=40)
    assert s.toggle_sliding_window() is None
    assert s.set_kv_cache_dtype("int8_per_token_head") is None
    assert s.set_tensor_parallel_size("2") is None
    assert s.set_max_model_len("32k") is None
    assert s.set_gpu("h200") is None
    assert s.argv() == ["--kv-cache-dtype", "int8_per_token_head", "--kv-cache-dtype-skip-layers", "sliding_window",
                        "--tensor-parallel-size", "2", "--max-model-len", "32000"]
    assert s.compiles == 6
    assert s.export_json() == kvplan_plan_json(str(GPT_OSS), *s.argv(), "--gpu", "h200", "--kv-budget-gib", "40")
    assert s.plan_command() == ("kvplan plan " + str(GPT_OSS) + " --kv-cache-dtype int8_per_token_head "
                                "--kv-cache-dtype-skip-layers sliding_window --tensor-parallel-size 2 "
                                "--max-model-len 32000 --gpu h200 --kv-budget-gib 40 --format json")
    assert s.changes() == ["kv-cache-dtype fp8 → int8_per_token_head", "skip [-] → [sliding_window]", "TP 1 → 2",
                           "max-model-len - → 32000", "GPU h100 → h200"]


def test_toggle_sliding_window_twice_returns_to_no_skips() -> None:
    s = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "fp8"])
    s.toggle_sliding_window()
    assert s.controls.skip_layers == ("sliding_window",)
    assert [lp.index for lp in s.plan.layers if lp.skipped] == list(range(0, 24, 2))
    s.toggle_sliding_window()
    assert s.controls.skip_layers == ()
    assert not any(lp.skipped for lp in s.plan.layers)


def test_toggle_one_layer_expands_the_keyword_and_adds_indices() -> None:
    s = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "sliding_window"])
    s.toggle_layers([0])  # layer 0 was skipped by the keyword: the keyword becomes the other sliding layers
    assert s.controls.skip_layers == tuple(str(i) for i in range(2, 24, 2))
    assert not s.plan.layers[0].skipped and s.plan.layers[2].skipped
    s.toggle_layers([1])
    assert s.plan.layers[1].skipped and s.controls.skip_layers[-1] == "1"
    s.toggle_layers([1])
    assert not s.plan.layers[1].skipped
    s.toggle_sliding_window()  # 0 is not skipped, so this skips them all again, with the keyword
    assert s.controls.skip_layers == ("sliding_window",)


def test_bad_control_values_leave_the_plan_unchanged_with_one_line() -> None:
    s = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "fp8"])
    before = s.plan
    for err in (s.set_tensor_parallel_size("0"), s.set_max_model_len("abc"), s.set_kv_cache_dtype("fp9"),
                s.set_kv_budget_gib("-3"), s.set_engine("vllm==9.9.9")):
        assert err and "\n" not in err
    assert s.plan is before and s.compiles == 1
    assert "did you mean 'fp8'" in s.set_kv_cache_dtype("fp9").lower()


def test_totals_show_change_against_the_start() -> None:
    s = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "fp8"], kv_budget_gib=40,
                       engine="vllm==0.33.0")  # the capacity figures are vLLM 0.33.0's (16-token blocks)
    s.toggle_sliding_window()
    s.set_kv_cache_dtype("int8_per_token_head")
    bpt, fit, conc, saving = s.totals()
    assert (bpt.start, bpt.now, bpt.delta) == (24576, 37632, "+13,056 (+53.1%)")
    assert fit.text == "2,918,417" and fit.delta.startswith("−367,830")  # vLLM's int(concurrency x 131072)
    assert conc.label == "concurrency @ 131,072" and conc.text == "22.27" and conc.delta == "−2.80 (−11.2%)"
    assert saving.text == "23.4%" and saving.delta == "was 50.0%"
    s.reset()
    assert all(t.delta == "" for t in s.totals()) and s.changes() == []


def test_totals_without_budget_say_so() -> None:
    s = ExploreSession(GPT_OSS, [])
    assert s.totals()[1].text == "- (no KV budget)"


def test_findings_sorted_by_severity_both_ways() -> None:
    s = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "fp8"], gpu="a100-80gb")  # KV701 error, KV401 warning
    ranks = [f.severity.rank for f in findings_sorted(s.plan.findings, "severity")]
    assert ranks == sorted(ranks, reverse=True) and len(set(ranks)) > 1
    assert [f.severity.rank for f in findings_sorted(s.plan.findings, "severity (info first)")] == sorted(ranks)
    assert findings_sorted(s.plan.findings, "code")[0].code == min(f.code for f in s.plan.findings)


def test_findings_for_a_layer_and_layer_fields() -> None:
    s = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "sliding_window"],
                       gpu="h100")
    assert [f.code for f in s.findings_for([1])] == ["KV401"] and s.findings_for([0]) == []
    fields = dict(layer_fields(s.plan.layers[1]))
    assert fields["kv_cache_dtype"] == "fp8" and fields["quant_mode"] == "fp8_per_tensor"
    assert fields["backend"] and "decisions" not in fields


def test_vllm_flags_realise_the_current_plan() -> None:
    s = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "fp8"])
    s.toggle_layers(list(range(0, 24, 2)))
    command, findings = s.vllm_flags()
    assert command == "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window" and findings == []


def test_engine_defaults_to_the_modelled_version() -> None:
    s = ExploreSession(GPT_OSS, [])
    assert engine_versions()[0] == "vllm==0.34.0"  # the newest first
    assert s.controls.engine == DEFAULT_ENGINE == engine_versions()[0]  # the default is the newest release
    assert f"{s.plan.engine.name}=={s.plan.engine.version}" == DEFAULT_ENGINE
    assert engine_versions("vllm==0.19.1")[0] == "vllm==0.19.1" and "vllm==0.18.0" in engine_versions()


def test_engine_control_plans_an_older_release_like_kvplan_plan_engine() -> None:
    s = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "int8_per_token_head"], gpu="h100")
    assert s.set_engine("vllm==0.19.0") is None
    assert s.plan.engine.version == "0.19.0"
    assert any(f.code == "KV005" and f.severity is Severity.error for f in s.plan.findings)  # 0.20 added it
    assert s.plan_command().endswith("--gpu h100 --engine vllm==0.19.0 --format json")
    assert s.export_json() == kvplan_plan_json(str(GPT_OSS), *s.argv(), "--gpu", "h100", "--engine", "vllm==0.19.0")
    assert s.changes() == [f"engine {DEFAULT_ENGINE} → vllm==0.19.0"]
    err = s.set_engine("sglang==0.5.0")
    assert err and "\n" not in err and "vLLM only" in err and s.plan.engine.version == "0.19.0"


def test_severity_ranks_order_errors_first() -> None:
    assert Severity.error.rank > Severity.warning.rank > Severity.info.rank


def test_session_with_a_policy_plans_like_kvplan_plan_policy() -> None:
    policy = EXAMPLES / "policies" / "gpt-oss-sliding.yaml"
    s = ExploreSession(GPT_OSS, [], policy=policy)
    assert s.plan.flags["kv_cache_dtype"] == "fp8" and s.plan.layers[0].decided_by[0] == "KV921"
    assert s.set_tensor_parallel_size(2) is None
    assert s.plan_command().endswith(f"--policy {policy} --format json")
    r = runner.invoke(app, ["plan", str(GPT_OSS), *s.argv(), "--policy", str(policy), "--format", "json"], env=ENV)
    assert r.exit_code in (0, 1), r.output
    assert s.export_json() == r.stdout
