"""`kvplan tune`: the smallest set of layers to keep in the model dtype so that a quantized KV cache
meets an accuracy budget, measured end to end on the model itself.

Trying every subset is exponential; the search uses the per-layer sensitivities instead:

1. run every executed layer quantized; if that meets the budget the skip set is empty;
2. quantize one layer at a time (every other layer in the model dtype): each layer's KL;
3. order layers by that KL, largest first, and predict the KL of skipping the first k as the
   all-quantized KL minus their single-layer KLs (the first-order, additive model);
4. run the smallest k the prediction says meets the budget end to end; while a run misses it,
   scale the prediction by what the skipped layers really removed and run the next k it accepts;
   then bisect between the last k over the budget and the first within it. The answer is the
   shortest prefix of the sensitivity order measured within the budget (the confirmation is always
   a measurement, never the prediction).

With ``min_top1`` the same is done with top-1 disagreement (1 - agreement) in place of KL.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kvplan import __version__
from kvplan.errors import KvplanInputError
from kvplan.runtime.model_eval import (
    EVAL_TOKENS,
    Evaluator,
    KVConfig,
    attention_layers,
    locate_model,
    open_model,
    plan_config,
)
from kvplan.runtime.tune_model import Budget, Trial, TuneReport
from kvplan.runtime.validate_model import EvalRow, Sensitivity

Progress = Callable[[str, int, int], None]
_UNQUANTIZED = ("auto", "bfloat16", "float16", "float32", "half", "float")


def _meets(row: EvalRow, budget: Budget) -> bool:
    return ((budget.max_kl is None or row.kl_mean <= budget.max_kl)
            and (budget.min_top1 is None or row.top1_agreement >= budget.min_top1))


def _error(row_kl: float, row_top1: float, budget: Budget) -> float:
    return row_kl if budget.max_kl is not None else 1.0 - row_top1


def vllm_skip_values(skip: list[int], plan: Any) -> list[str]:
    """vLLM's --kv-cache-dtype-skip-layers values for ``skip``: 'sliding_window' for the sliding
    layers when the set holds every one of them (vLLM matches the keyword on any layer with a
    sliding window), then the remaining indices."""
    sliding = {lp.index for lp in plan.layers if lp.sliding_window and lp.kv_cache_dtype}
    chosen = set(skip)
    if sliding and sliding <= chosen:
        return [str(i) for i in sorted(chosen - sliding)] + ["sliding_window"]
    return [str(i) for i in sorted(chosen)]


def _with_skip(cfg: KVConfig, skip: list[int], name: str) -> KVConfig:
    from kvplan.runtime.causal_lm import LayerKVMode
    modes = {i: (LayerKVMode("none", sliding_window=m.sliding_window) if i in skip else m)
             for i, m in cfg.modes.items()}
    return KVConfig(name, f"layers {','.join(map(str, skip)) or '-'} kept in the model dtype", modes)


def _single(cfg: KVConfig, index: int) -> KVConfig:
    from kvplan.runtime.causal_lm import LayerKVMode
    modes = {i: (m if i == index else LayerKVMode("none", sliding_window=m.sliding_window))
             for i, m in cfg.modes.items()}
    return KVConfig(f"layer {index}", "", modes)


def _sensitivity(ev: Evaluator, full: KVConfig, kv: str, progress: Progress) -> Sensitivity:
    """Each layer quantized alone with the plan's own storage for it (scales included)."""
    from kvplan.model.vocab import quant_mode_of
    from kvplan.runtime.validate_model import LayerSensitivity
    rows = []
    for n, lay in enumerate(ev.layers):
        progress(f"tune: layer {lay.index} alone", n, len(ev.layers))
        rows.append((lay, ev.run(_single(full, lay.index))))
    total = sum(r.kl_mean for _, r in rows) or 1.0
    out = [LayerSensitivity(index=lay.index, kind=lay.kind, kl_mean=r.kl_mean, kl_max=r.kl_max,
                            top1_agreement=r.top1_agreement, share=r.kl_mean / total) for lay, r in rows]
    out.sort(key=lambda s: (-s.kl_mean, s.index))
    return Sensitivity(kv_cache_dtype=kv, quant_mode=quant_mode_of(kv).value, layers=out)


def search(ev: Evaluator, full_cfg: KVConfig, budget: Budget, kv: str,
           progress: Progress = lambda *a: None) -> tuple[EvalRow, EvalRow, list[Trial], Sensitivity | None, int]:
    """(all-quantized row, chosen row, trials, sensitivity, forward passes) of the greedy search."""
    full = ev.run(_with_skip(full_cfg, [], "all-quantized"))
    passes = 1
    if _meets(full, budget):
        return full, full, [], None, passes
    sens = _sensitivity(ev, full_cfg, kv, progress)
    passes += len(sens.layers)
    order = [s.index for s in sens.layers]
    by = {s.index: s for s in sens.layers}
    err_full = _error(full.kl_mean, full.top1_agreement, budget)
    limit = budget.max_kl if budget.max_kl is not None else 1.0 - (budget.min_top1 or 0.0)
    predicted = [err_full]
    for i in order:
        predicted.append(predicted[-1] - _error(by[i].kl_mean, by[i].top1_agreement, budget))
    k = max(1, _first_within(predicted, limit, 1.0))
    trials: list[Trial] = []
    failed, best = 0, None  # largest prefix measured over the budget; smallest measured within it

    def confirm(k: int) -> Trial:
        nonlocal passes
        skip = sorted(order[:k])
        progress(f"tune: confirm {len(skip)} skipped", len(trials), len(order))
        row = ev.run(_with_skip(full_cfg, skip, f"skip {len(skip)}"))
        passes += 1
        t = Trial(skip_layers=skip, predicted_kl=max(0.0, predicted[k]) if budget.max_kl is not None
                  else full.kl_mean, row=row, meets_budget=_meets(row, budget))
        trials.append(t)
        return t

    while best is None:
        t = confirm(k)
        if t.meets_budget or k >= len(order):
            best = (k, t)
            break
        failed = k
        # Single-layer errors rarely add up (quantization noise of several layers partly cancels): scale
        # the prediction by what skipping these k layers really removed, then try the next k it accepts.
        removed = err_full - _error(t.row.kl_mean, t.row.top1_agreement, budget)
        ratio = removed / (err_full - predicted[k]) if err_full > predicted[k] else 0.0
        nxt = _first_within(predicted, limit, min(1.0, ratio), err_full) if ratio > 0 else k + 1
        k = min(len(order), max(k + 1, nxt))
    # a jump may overshoot: bisect between the last prefix over the budget and the first within it
    hi, t_hi = best
    while t_hi.meets_budget and hi - failed > 1:
        mid = (failed + hi) // 2
        t = confirm(mid)
        if t.meets_budget:
            hi, t_hi = mid, t
        else:
            failed = mid
    return full, t_hi.row, trials, sens, passes


def _first_within(predicted: list[float], limit: float, ratio: float, err_full: float | None = None) -> int:
    """Smallest k whose (ratio-scaled) predicted error is within ``limit`` (len - 1 when none is)."""
    full = predicted[0] if err_full is None else err_full
    for k, p in enumerate(predicted):
        if full - ratio * (full - p) <= limit:
            return k
    return len(predicted) - 1


def tune(source: str, flags: list[str], *, max_kl: float | None = None, min_top1: float | None = None,
         device: str = "cpu", model: str | None = None, text: Any = None, tokens: int = EVAL_TOKENS,
         offline: bool | None = None, random_weights: bool = False, gpu: str | None = None,
         kv_budget_bytes: int | None = None, progress: Progress = lambda *a: None,
         log: Callable[[str], None] = lambda s: None) -> tuple[TuneReport, Any]:
    """Search the skip list; returns the report and the tuned plan (for `kvplan emit`)."""
    if (max_kl is None) == (min_top1 is None):
        raise KvplanInputError("kvplan tune needs exactly one budget: --max-kl X or --min-top1 Y.",
                               "Pass e.g. --max-kl 0.01.")
    if any(f == "--kv-cache-dtype-skip-layers" or f.startswith("--kv-cache-dtype-skip-layers=") for f in flags):
        raise KvplanInputError("kvplan tune chooses --kv-cache-dtype-skip-layers itself.",
                               "Drop --kv-cache-dtype-skip-layers from the flags.")
    from kvplan.pipeline import run as run_pipeline
    plan, quant = run_pipeline(source, flags, gpu, kv_budget_bytes=kv_budget_bytes, offline=offline)
    kv = plan.kv_cache_dtype
    if kv in _UNQUANTIZED:
        raise KvplanInputError(f"kvplan tune needs a quantized --kv-cache-dtype (the plan stores {kv}).",
                               "Pass e.g. --kv-cache-dtype fp8.")
    budget = Budget(max_kl=max_kl, min_top1=min_top1)
    ref = locate_model(plan, model, offline=offline, random_weights=random_weights)
    om = open_model(plan, ref, device=device, text=text, tokens=tokens, log=log)
    t0 = time.perf_counter()
    ev = Evaluator(om.model, om.ids, om.layers, fixed_bytes=om.fixed_bytes)
    full_cfg = plan_config(plan, om.layers, None, quant, om.calibrated)
    full, chosen, trials, sens, passes = search(ev, full_cfg, budget, kv, progress)
    skip = chosen.skip_layers
    values = vllm_skip_values(skip, plan)
    args = ["--kv-cache-dtype", kv] + (["--kv-cache-dtype-skip-layers", *values] if values else [])
    tuned, _ = run_pipeline(source, [*flags, *args[2:]], gpu, kv_budget_bytes=kv_budget_bytes, offline=offline)
    _check_skip(tuned, skip)
    bpt, bpt_all = tuned.totals.bytes_per_token, plan.totals.bytes_per_token
    _, unq = attention_layers(plan)
    report = TuneReport(
        kvplan_version=__version__, engine={"name": plan.engine.name, "version": plan.engine.version},
        model=ref.label, weights={"gguf": "gguf", "random": "random"}.get(ref.kind, "checkpoint"),
        device=_device_name(device), text=om.text_name, tokens=int(om.ids.shape[1]), kv_cache_dtype=kv,
        budget=budget, met=_meets(chosen, budget), skip_layers=skip, skip_layers_vllm=values, vllm_args=args,
        bytes_per_token=bpt, bytes_per_token_all_quantized=bpt_all,
        bytes_per_token_bf16=tuned.totals.bytes_per_token_bf16,
        capacity_cost=(1.0 - bpt_all / bpt) if bpt else 0.0,
        tokens_capacity=tuned.totals.tokens_capacity, tokens_capacity_all_quantized=plan.totals.tokens_capacity,
        reference_perplexity=ev.ref_ppl, all_quantized=full, chosen=chosen, trials=trials, sensitivity=sens,
        unquantized_layers=unq, forward_passes=passes + 2, seconds=round(time.perf_counter() - t0, 3))
    return report, tuned


def _check_skip(tuned: Any, skip: list[int]) -> None:
    """The planner, given the emitted flags, keeps exactly ``skip`` (of the executed layers) unquantized."""
    kept = {lp.index for lp in tuned.layers if lp.quant_mode.value == "none" and lp.kv_cache_dtype}
    missing = sorted(set(skip) - kept)
    if missing:
        raise AssertionError(f"the emitted skip flags leave layers {missing} quantized")


def _device_name(device: str) -> str:
    from kvplan.runtime.validate import _device_name as name
    return name(device)


def policy_yaml(report: TuneReport) -> str:
    """A policy file recording the result (kvplan plan/emit --policy FILE reproduces the flags)."""
    import yaml
    rules: list[dict[str, Any]] = [
        {"code": "KV901", "name": "tuned-kv-cache-dtype",
         "reason": f"kvplan tune: {report.kv_cache_dtype} KV cache for {report.model}.",
         "set": {"kv_cache_dtype": report.kv_cache_dtype}}]
    if report.skip_layers:
        budget = (f"mean KL <= {report.budget.max_kl:g}" if report.budget.max_kl is not None
                  else f"top-1 agreement >= {report.budget.min_top1:g}")
        rules.append({"code": "KV902", "name": "tuned-skip-layers",
                      "reason": f"kvplan tune: keeping these layers in the model dtype meets {budget} "
                                f"(measured {report.chosen.kl_mean:.3g} KL, top-1 {report.chosen.top1_agreement:.4f} "
                                f"on {report.tokens} tokens of {report.text}).",
                      "select": {"index": list(report.skip_layers)}, "set": {"kv_cache_dtype": "model"}})
    doc = {"version": 1, "name": "kvplan-tune",
           "description": f"Written by kvplan tune {report.kvplan_version} for {report.model}.", "rules": rules}
    return yaml.safe_dump(doc, sort_keys=False, width=120)
