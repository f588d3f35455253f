"""`--e2e` and `kvplan tune` on tiny random-weight checkpoints of several families (CPU, torch
reference quantizers): the model loads from a folder or a Hub id, every attention layer's K/V go
through kvplan's storage, and the numbers order as quantization theory says."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hubserver import FakeHub, fake_hub_fixture, go_offline  # noqa: F401 - fixture
from tests.validate.tiny_models import build

pytest.importorskip("torch")
pytest.importorskip("transformers")

TOKENS = 40


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny")
    out = {f: build(f, root / f) for f in ("llama", "qwen3", "mistral", "gemma3", "gpt-oss")}
    out["llama-outliers"] = build("llama", root / "llama-outliers", seed=1, outlier_channels=True)
    out["qwen3.5"] = build("qwen3.5", root / "qwen3.5")
    return out


def _eval(folder: Path, flags=("--kv-cache-dtype", "fp8"), **kw):
    from kvplan.api import compile as compile_plan
    from kvplan.runtime.model_eval import evaluate_plan
    plan = compile_plan(folder, list(flags))
    return plan, evaluate_plan(plan, device="cpu", tokens=TOKENS, **kw)


@pytest.mark.parametrize("family", ["llama", "qwen3", "mistral", "gemma3", "gpt-oss"])
def test_e2e_every_family_runs_with_a_zero_kl_control(models, family) -> None:
    plan, ev = _eval(models[family])
    rows = {r.name: r for r in ev.rows}
    assert [r.name for r in ev.rows][:2] == ["plan", "bf16"] and len(ev.rows) == 11
    assert rows["bf16"].kl_mean < 1e-9 and rows["bf16"].top1_agreement == 1.0
    # the plan (fp8, scale 1.0) is the uncalibrated per-tensor row, configured independently
    assert rows["plan"].kl_mean == pytest.approx(rows["fp8-scale-1.0"].kl_mean)
    assert rows["int4-pth"].kl_mean == max(r.kl_mean for r in ev.rows)
    assert all(rows[n].kl_mean > 0 for n in ("fp8-scale-1.0", "int8-pth", "fp8-pth", "int4-pth"))
    n = len(plan.layers)
    assert ev.skipped_layers == [0, n - 1] and rows["int8-pth+skip"].skip_layers == [0, n - 1]
    # bytes per token are the planner's: the plan row equals the plan's totals
    assert rows["plan"].bytes_per_token == plan.totals.bytes_per_token
    assert rows["bf16"].bytes_per_token == plan.totals.bytes_per_token_bf16
    assert ev.tokens == TOKENS and ev.weights == "checkpoint" and ev.model_dtype == "bfloat16"


def test_linear_attention_layers_run_unquantized_and_are_named(models) -> None:
    """Qwen3.5: three gated-delta-net layers (no KV cache) per full-attention layer."""
    plan, ev = _eval(models["qwen3.5"])
    assert [(u.index, u.kind) for u in ev.unquantized_layers] == [(0, "linear_attention"), (1, "linear_attention"),
                                                                  (2, "linear_attention")]
    rows = {r.name: r for r in ev.rows}
    assert rows["fp8-scale-1.0"].quantized_layers == 1 and ev.skipped_layers == [3]
    assert rows["plan"].bytes_per_token == plan.totals.bytes_per_token and rows["bf16"].kl_mean < 1e-9
    assert 0 < rows["int8-pth"].kl_mean < rows["int4-pth"].kl_mean


@pytest.mark.parametrize("family", ["gemma3", "gpt-oss"])
def test_kvplan_attention_reproduces_the_models_own(models, family) -> None:
    """Sliding windows (Gemma 3) and sinks (gpt-oss) through kvplan's attention function give the
    logits of the model's own attention implementation (the reference is not a different model)."""
    import torch

    from kvplan.api import compile as compile_plan
    from kvplan.runtime.model_eval import locate_model, open_model, scores
    plan = compile_plan(models[family], [])
    assert any(lp.sliding_window for lp in plan.layers)
    om = open_model(plan, locate_model(plan), tokens=TOKENS)
    ours = om.model.logits(om.ids, om.model.reference_run())
    native = om.model.logits(om.ids)  # sdpa / eager, kvplan not involved
    kl, _, top1, _ = scores(native, ours, om.ids)
    assert kl < 1e-3 and top1 >= 0.95
    # and the window matters: attention without it is another model
    run = om.model.reference_run()
    from kvplan.runtime import causal_lm
    orig = causal_lm.torch_attention

    def no_window(q, k, v, mask, **kw):
        return orig(q, k, v, None, **{**kw, "sliding_window": None})
    causal_lm.torch_attention = no_window
    try:
        full = om.model.logits(om.ids, run)
    finally:
        causal_lm.torch_attention = orig
    assert float((full - ours).norm()) > 3 * float((native - ours).norm())
    assert torch.isfinite(ours).all()


def test_quantized_rows_order_on_planted_outlier_channels(models) -> None:
    """Outlier key channels (40x) hurt the shared per-tensor FP8 scale and INT4 most; INT8 per token
    and head stays closest to the reference."""
    _, ev = _eval(models["llama-outliers"])
    kl = {r.name: r.kl_mean for r in ev.rows}
    assert kl["bf16"] < kl["int8-pth"] < kl["fp8-pth"] < kl["int4-pth"]
    assert kl["int8-pth"] < min(kl["fp8-scale-1.0"], kl["fp8-calibrated"])
    assert kl["int8-pth+skip"] <= kl["int8-pth"] * 1.05


def test_sensitivity_sorted_and_text_file(models, tmp_path) -> None:
    text = tmp_path / "eval.jsonl"
    text.write_text("\n".join(json.dumps({"text": f"Sample {i}: the cache stores keys and values."})
                              for i in range(4)) + "\n")
    plan, ev = _eval(models["gemma3"], sensitivity=True, text=text)
    assert ev.text == "eval.jsonl"
    s = ev.sensitivity
    assert s is not None and s.kv_cache_dtype == "fp8" and len(s.layers) == len(plan.layers)
    kls = [x.kl_mean for x in s.layers]
    assert kls == sorted(kls, reverse=True) and sum(x.share for x in s.layers) == pytest.approx(1.0)
    assert {x.kind for x in s.layers} == {"sliding_attention", "full_attention"}


def test_tune_meets_its_budget_when_confirmed(models, tmp_path) -> None:
    from kvplan.api import compile as compile_plan
    from kvplan.runtime.model_eval import evaluate_plan
    from kvplan.runtime.tune import tune
    folder = models["gpt-oss"]
    _, ev = _eval(folder)
    full = {r.name: r for r in ev.rows}["fp8-scale-1.0"].kl_mean
    budget = full / 5
    report, tuned = tune(str(folder), ["--kv-cache-dtype", "fp8"], max_kl=budget, device="cpu", tokens=TOKENS)
    assert report.met and report.chosen.kl_mean <= budget
    assert 0 < len(report.skip_layers) < 4
    assert any(t.skip_layers == report.skip_layers and t.meets_budget for t in report.trials)
    # no shorter prefix of the sensitivity order was measured within the budget
    assert all(not t.meets_budget for t in report.trials if len(t.skip_layers) < len(report.skip_layers))
    assert report.forward_passes < 2 ** 4  # cheaper than trying every subset
    # the most sensitive layer is kept
    assert report.sensitivity is not None and report.sensitivity.layers[0].index in report.skip_layers
    # the flags it emits, planned and run again independently, meet the budget too
    plan = compile_plan(folder, report.vllm_args)
    assert sorted(lp.index for lp in plan.layers if lp.quant_mode.value == "none") == report.skip_layers
    again = evaluate_plan(plan, device="cpu", tokens=TOKENS)
    assert again.rows[0].kl_mean == pytest.approx(report.chosen.kl_mean) and again.rows[0].kl_mean <= budget
    assert report.bytes_per_token == plan.totals.bytes_per_token > report.bytes_per_token_all_quantized
    assert report.capacity_cost == pytest.approx(1 - report.bytes_per_token_all_quantized / report.bytes_per_token)
    assert tuned.totals.bytes_per_token == report.bytes_per_token


def test_tune_min_top1_and_nothing_to_skip(models) -> None:
    from kvplan.runtime.tune import tune
    report, _ = tune(str(models["mistral"]), ["--kv-cache-dtype", "int8_per_token_head"], min_top1=0.5,
                     device="cpu", tokens=TOKENS)
    assert report.met and report.skip_layers == [] and report.trials == [] and report.sensitivity is None
    assert report.vllm_args == ["--kv-cache-dtype", "int8_per_token_head"] and report.capacity_cost == 0.0


def test_e2e_from_a_hub_id_downloads_once_then_runs_offline(models, fake_hub: FakeHub, monkeypatch) -> None:
    fake_hub.add("org/tiny-llama", models["llama"], tags=("v1",))
    _, ev = _eval("org/tiny-llama")
    assert ev.model == "org/tiny-llama" and ev.rows[1].kl_mean < 1e-9
    _, tagged = _eval("org/tiny-llama", ("--kv-cache-dtype", "fp8", "--revision", "v1"))
    assert tagged.model == "org/tiny-llama@v1"
    weights = fake_hub.count("GET", "model.safetensors")
    assert weights >= 1
    go_offline(monkeypatch)
    _, again = _eval("org/tiny-llama")
    assert fake_hub.count("GET", "model.safetensors") == weights  # from the HF cache
    assert [r.kl_mean for r in again.rows] == [r.kl_mean for r in ev.rows]


def test_a_model_that_does_not_fit_is_refused_in_one_line(models) -> None:
    from kvplan.errors import KvplanInputError
    from kvplan.runtime.causal_lm import placement, weight_bytes
    cfg = json.loads((models["llama"] / "config.json").read_text())
    need = weight_bytes(cfg, "bfloat16")
    assert 0 < need < 2**22  # counted on the meta device, nothing allocated
    assert placement(need, "cpu") == (None, None)
    with pytest.raises(KvplanInputError, match=r"need 931322\.6 GiB .* available"):
        placement(10**15, "cpu")
