"""Rich text rendering of a validate report (the default `kvplan validate` output)."""
from __future__ import annotations

from rich.console import Console, JustifyMethod
from rich.table import Table

from kvplan.runtime.validate_model import LayerResult, ValidateReport


def _scales(r: LayerResult) -> str:
    if r.k_scale is None:
        return "inline" if r.quant_mode.endswith("per_token_head") else "-"
    return f"{r.k_scale:.3g}/{r.v_scale:.3g}"


def _runs(idx: list[int]) -> str:
    """[0, 1, 2, 3, 7] -> '0..3,7'."""
    out, i = [], 0
    idx = sorted(idx)
    while i < len(idx):
        j = i
        while j + 1 < len(idx) and idx[j + 1] == idx[j] + 1:
            j += 1
        out.append(str(idx[i]) if i == j else f"{idx[i]}..{idx[j]}")
        i = j + 1
    return ",".join(out)


def render_report(report: ValidateReport, console: Console) -> None:
    src = report.kv_source
    console.print(f"kvplan validate · {report.model_type} · plan {report.plan_source} · {report.engine['name']} "
                  f"{report.engine['version']} · device {report.device}"
                  + (" (Triton interpreter)" if report.triton_interpret else ""), highlight=False)
    console.print(f"K/V: {src.description} · block size {report.block_size} · decode = last token, prefill = "
                  f"last {report.prefill_tokens} tokens, vs fp32 attention on the unquantized K/V", highlight=False)
    t = Table(title_justify="left", show_edge=False, pad_edge=False, title="per layer (rel = relative L2 of the "
              "attention output; kernel = Triton vs torch reference on the same cache)")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("layer", "right"), ("quant mode", "left"), ("k/v scale", "left"), ("B/token", "right"),
        ("alloc = plan", "left"), ("decode rel", "right"), ("prefill rel", "right"), ("min cos", "right"),
        ("max abs", "right"), ("tol", "right"), ("kernel", "right"), ("", "left"))
    for c, j in columns:
        t.add_column(c, justify=j, no_wrap=True)
    skipped: dict[str, list[int]] = {}
    for r in report.layers:
        if r.status == "skipped":
            skipped.setdefault(r.reason or "", []).append(r.index)
            continue
        assert r.decode is not None and r.prefill is not None
        alloc = f"{r.bytes_allocated:,} ✓" if r.bytes_equal else f"{r.bytes_allocated:,} ≠ {r.bytes_expected:,}"
        mark = "[green]pass[/]" if r.status == "pass" else "[bold red]FAIL[/]"
        t.add_row(str(r.index), r.quant_mode, _scales(r), f"{r.bytes_per_token_plan:,}",
                  alloc, f"{r.decode.rel_l2:.4f}", f"{r.prefill.rel_l2:.4f}",
                  f"{min(r.decode.cosine, r.prefill.cosine):.5f}", f"{max(r.decode.max_abs, r.prefill.max_abs):.3g}",
                  f"{r.tolerance:g}", f"{r.kernel_rel_err:.1e}", mark)
    console.print(t)
    for reason, idx in skipped.items():
        console.print(f"skipped: layers {_runs(idx)} ({len(idx)}): {reason}", highlight=False, markup=False)
    if report.modes:
        m = Table(title="per quant mode (rel L2 = worse of decode/prefill)", title_justify="left", show_edge=False)
        for c in ("quant mode", "layers", "failed", "mean rel L2", "max rel L2", "min cosine", "tolerance"):
            m.add_column(c, justify="left" if c == "quant mode" else "right")
        for s in report.modes:
            m.add_row(s.quant_mode, str(s.layers), str(s.failed), f"{s.mean_rel_l2:.4f}", f"{s.max_rel_l2:.4f}",
                      f"{s.min_cosine:.5f}", f"{s.tolerance:g}")
        console.print(m)
    if report.model_eval is not None:
        e = report.model_eval
        et = Table(title=f"end to end: {e.model}, {e.tokens} tokens of {e.text}; reference perplexity "
                         f"{e.reference_perplexity:.3f}; quantizer: {e.quantizer}",
                   title_justify="left", show_edge=False)
        for c in ("config", "quantized layers", "KV B/token", "mean KL", "max KL", "top-1 agree", "perplexity", "what"):
            et.add_column(c, justify="left" if c in ("config", "what") else "right")
        for row in e.rows:
            et.add_row(row.name, str(row.quantized_layers), f"{row.bytes_per_token:,}", f"{row.kl_mean:.5f}",
                       f"{row.kl_max:.4f}", f"{row.top1_agreement:.4f}", f"{row.perplexity:.3f}", row.description)
        console.print(et)
        if e.unquantized_layers:
            by: dict[str, list[int]] = {}
            for u in e.unquantized_layers:
                by.setdefault(f"{u.kind}: {u.reason}", []).append(u.index)
            for why, idx in by.items():
                console.print(f"run unquantized in every row: layers {_runs(idx)} ({why})", highlight=False,
                              markup=False)
        if e.torch_attention_layers:
            console.print(f"attention read in torch from the written cache (sinks / soft-capping): layers "
                          f"{_runs(e.torch_attention_layers)}", highlight=False, markup=False)
        if e.sensitivity is not None:
            render_sensitivity(e.sensitivity, console)
    executed = sum(r.status != "skipped" for r in report.layers)
    n_skipped = len(report.layers) - executed
    if report.failures:
        console.print(f"[bold red]FAILED[/]: {len(report.failures)} of {executed} executed layer(s) over tolerance"
                      + (f" ({n_skipped} skipped)" if n_skipped else ""))
        for f in report.failures:
            console.print(f"  {f}", highlight=False, markup=False)
    elif executed:
        console.print(f"[green]passed[/]: {executed} layer(s) within tolerance, allocations equal to the plan"
                      + (f" ({n_skipped} skipped)" if n_skipped else ""))
    else:
        console.print(f"[bold red]FAILED[/]: no layer could be executed ({n_skipped} skipped)")


def render_sensitivity(sens, console: Console, limit: int | None = None) -> None:
    """Per-layer sensitivity table, most sensitive first."""
    t = Table(title=f"per-layer sensitivity: one layer {sens.kv_cache_dtype} ({sens.quant_mode}) at a time, "
                    "every other layer in the model dtype; sorted by KL", title_justify="left", show_edge=False)
    for c in ("rank", "layer", "kind", "mean KL", "max KL", "top-1 agree", "share"):
        t.add_column(c, justify="left" if c == "kind" else "right")
    for n, s in enumerate(sens.layers[:limit] if limit else sens.layers, 1):
        t.add_row(str(n), str(s.index), s.kind, f"{s.kl_mean:.6f}", f"{s.kl_max:.4f}", f"{s.top1_agreement:.4f}",
                  f"{s.share:.1%}")
    console.print(t)


def render_tune(report, console: Console) -> None:
    """The tune result: the flags first, then the measured rows and the sensitivity table."""
    b = report.budget
    budget = f"mean KL <= {b.max_kl:g}" if b.max_kl is not None else f"top-1 agreement >= {b.min_top1:g}"
    console.print(f"kvplan tune · {report.model} · {report.kv_cache_dtype} · budget {budget} · {report.tokens} tokens "
                  f"of {report.text} · device {report.device} · {report.forward_passes} forward passes, "
                  f"{report.seconds:.1f} s", highlight=False, markup=False)
    mark = "[green]meets the budget[/]" if report.met else "[bold red]does NOT meet the budget[/]"
    skip = " ".join(report.skip_layers_vllm) or "(none)"
    console.print(f"keep in bf16: {skip} → {mark}", highlight=False)
    console.print("vllm serve MODEL " + " ".join(report.vllm_args), highlight=False, markup=False)
    cap = (f"; capacity {report.tokens_capacity:,} tokens vs {report.tokens_capacity_all_quantized:,} all-quantized"
           if report.tokens_capacity and report.tokens_capacity_all_quantized else "")
    console.print(f"KV bytes/token: {report.bytes_per_token:,} (all quantized "
                  f"{report.bytes_per_token_all_quantized:,}, "
                  f"bf16 {report.bytes_per_token_bf16:,}); the skip set costs {report.capacity_cost:.1%} of the "
                  f"all-quantized capacity{cap}", highlight=False, markup=False)
    t = Table(title=f"end to end (reference perplexity {report.reference_perplexity:.3f})", title_justify="left",
              show_edge=False)
    for c in ("run", "skipped", "mean KL", "max KL", "top-1 agree", "perplexity", "budget"):
        t.add_column(c, justify="left" if c in ("run", "skipped") else "right")
    rows = [("all quantized", report.all_quantized, None)] + [
        (f"confirm {n}", tr.row, tr.meets_budget) for n, tr in enumerate(report.trials, 1)]
    for name, r, ok in rows:
        ok = ok if ok is not None else (report.met if not report.trials else False)
        t.add_row(name, _runs(r.skip_layers) or "-", f"{r.kl_mean:.6f}", f"{r.kl_max:.4f}", f"{r.top1_agreement:.4f}",
                  f"{r.perplexity:.3f}", "meets" if ok else "over")
    console.print(t)
    if report.sensitivity is not None:
        render_sensitivity(report.sensitivity, console, limit=max(10, len(report.skip_layers) + 3))
    for u in report.unquantized_layers:
        console.print(f"run unquantized: layer {u.index} ({u.kind}: {u.reason})", highlight=False, markup=False)
