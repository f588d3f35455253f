"""Plan -> rich terminal output: grouped per-layer table, totals, findings panel by severity."""
from __future__ import annotations

import itertools
from collections.abc import Iterable

from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kvplan.model.plan import DraftKv, LayerPlan, Plan, Totals
from kvplan.model.vocab import Severity

_KIND_SHORT = {"full_attention": "full", "sliding_attention": "sliding", "chunked_attention": "chunked",
               "linear_attention": "linear", "cross_attention": "cross", "encoder_only": "encoder"}
_SCALE_SHORT = {"default_1.0": "1.0 (uncal.)", "dynamic_per_token_head": "dynamic", "checkpoint_per_tensor":
                "ckpt tensor", "checkpoint_per_head": "ckpt head", "block_scales": "block"}
_MODE_STYLE = {"none": "green", "fp8_per_tensor": "yellow", "int8_per_token_head": "cyan",
               "fp8_per_token_head": "cyan", "int4_per_token_head": "magenta", "nvfp4": "magenta"}
_SEV_STYLE = {Severity.error: "bold red", Severity.warning: "yellow", Severity.info: "blue"}


def compress_indices(idx: list[int]) -> str:
    """0,1,2,3 -> '0-3'; 0,2,4,..,22 -> '0,2..22'; otherwise ranges, shortened past 6 parts."""
    if not idx:
        return "-"
    if len(idx) == 1:
        return str(idx[0])
    steps = {b - a for a, b in itertools.pairwise(idx)}
    if len(steps) == 1:
        step = steps.pop()
        if step == 1:
            return f"{idx[0]}-{idx[-1]}"
        if len(idx) > 2:
            return f"{idx[0]},{idx[1]}..{idx[-1]}"
    parts, start, prev = [], idx[0], idx[0]
    for i in [*idx[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    if len(parts) > 6:
        return ",".join(parts[:5]) + f",…{parts[-1]}"
    return ",".join(parts)


def _signature(lp: LayerPlan) -> tuple:
    return (lp.kind, lp.sliding_window, lp.attention_chunk_size, lp.num_kv_heads, lp.head_size,
            lp.head_size_v, lp.kv_cache_dtype, lp.dtype, lp.quant_mode, lp.scale_source, lp.skipped,
            lp.bytes_per_token, lp.bytes_per_token_exact, lp.kv_shared_with, lp.cross_attention_bytes_per_token,
            lp.backend, lp.flash_attn_version, lp.query_dtype, tuple(lp.decided_by))


def _bytes_cell(lp: LayerPlan) -> str:
    """B/token; a KV-sharing layer names the layer whose cache it reads, a cross-attention cache is per
    encoder token."""
    if lp.kv_shared_with is not None:
        return f"0 (L{lp.kv_shared_with}'s)"
    if lp.state_bytes is not None:
        return f"0 · state {lp.state_bytes:,}/req"
    if lp.cross_attention_bytes_per_token:
        return f"{lp.bytes_per_token:,} +{lp.cross_attention_bytes_per_token:,}/enc"
    if lp.bytes_per_token_exact is not None:
        return f"{lp.bytes_per_token_exact:,}"
    return f"{lp.bytes_per_token:,}"


def group_layers(layers: Iterable[LayerPlan], expand: bool = False) -> list[list[LayerPlan]]:
    """Layers with identical plans, in order of first appearance (one group per layer if expand)."""
    if expand:
        return [[lp] for lp in layers]
    groups: dict[tuple, list[LayerPlan]] = {}
    for lp in layers:
        groups.setdefault(_signature(lp), []).append(lp)
    return list(groups.values())


def _why(lp: LayerPlan) -> str:
    """The rule that set the layer's kv_cache_dtype last; a user policy's rule (KV9xx) first."""
    mine = [d for d in lp.decisions if d.field == "kv_cache_dtype"]
    policy = [d for d in mine if d.rule.startswith("KV9")]
    if policy and mine:
        engine = mine[-1]
        return f"{policy[-1].rule}: {policy[-1].fact} (engine: {engine.rule})"
    if mine:
        return f"{mine[-1].rule}: {mine[-1].fact}"
    return lp.decisions[-1].fact if lp.decisions else ""


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def _layer_table(plan: Plan, title: str, expand: bool, show_backend: bool,
                 with_rules: bool) -> tuple[Table, list[tuple[str, str]]]:
    """The per-layer table (grouped runs unless `expand`) and the why lines of its rows."""
    t = Table(title=title, title_justify="left", show_lines=False, expand=False)
    t.add_column("layers", overflow="fold", min_width=12, max_width=26)
    t.add_column("kind", no_wrap=True)
    t.add_column("win", justify="right", no_wrap=True)
    t.add_column("KV h×size", justify="right", no_wrap=True)
    t.add_column("kv_cache_dtype", no_wrap=True)
    t.add_column("stored", no_wrap=True)
    t.add_column("quant mode", no_wrap=True)
    t.add_column("scales", no_wrap=True)
    t.add_column("B/token", justify="right", no_wrap=True)
    if show_backend:
        t.add_column("backend", overflow="fold", min_width=8)
        t.add_column("query", overflow="fold", min_width=8)
    if with_rules:
        t.add_column("rules", min_width=6)
    whys: list[tuple[str, str]] = []
    flagged = {i for f in plan.findings for i in f.layers}
    for g in group_layers(plan.layers, expand):
        lp = g[0]
        idx = [x.index for x in g]
        mark = " ⚑" if flagged & set(idx) else ""
        window = str(lp.sliding_window or lp.attention_chunk_size or "-")
        geom = f"{lp.num_kv_heads}×{lp.head_size}" if lp.bytes_per_token or lp.kv_shared_with is not None else "-"
        if lp.kind == "mla" and lp.bytes_per_token:
            geom = f"latent {lp.head_size}"
        mode = lp.quant_mode.value
        label = compress_indices(idx) + (f" ({len(idx)})" if len(idx) > 1 else "") + mark
        scales = _SCALE_SHORT.get(lp.scale_source.value, lp.scale_source.value) if lp.quant_mode.is_quantized else "-"
        row: list[RenderableType] = [label, _KIND_SHORT.get(lp.kind, lp.kind), window, geom,
               lp.kv_cache_dtype or "-", lp.dtype or "-", Text(mode, style=_MODE_STYLE.get(mode, "")),
               scales, _bytes_cell(lp)]
        if show_backend:
            fa = f" FA{lp.flash_attn_version}" if lp.backend and lp.flash_attn_version else ""
            row += [(lp.backend or "-") + fa, lp.query_dtype or "-"]
        if with_rules:
            row.append(", ".join(c.removeprefix("KV") if i else c for i, c in enumerate(lp.decided_by)))
        t.add_row(*row)
        if lp.decided_by:
            whys.append((compress_indices(idx), _why(lp)))
    return t, whys


def render_plan(plan: Plan, console: Console, expand: bool = False) -> None:
    m = plan.model
    title = (f"{m.architecture or m.model_type} · {m.num_layers} layers · model dtype {m.dtype} · "
             f"{plan.engine.name} {plan.engine.version} · --kv-cache-dtype {plan.flags.get('kv_cache_dtype')}"
             + (f" → {plan.kv_cache_dtype}" if plan.kv_cache_dtype != plan.flags.get("kv_cache_dtype") else "")
             + (f" · GPU {plan.gpu.name}" if plan.gpu else ""))
    show_backend = any(lp.backend for lp in plan.layers)
    t, whys = _layer_table(plan, title, expand, show_backend, with_rules=True)
    if Measurement.get(console, console.options.update(max_width=10_000), t).maximum > console.width:
        # Too wide for this console: the rules column goes first (the why panel and `kvplan plan`'s
        # `decisions` carry the same facts) rather than cropping or folding every column.
        t, whys = _layer_table(plan, title, expand, show_backend, with_rules=False)
        t.caption = "rules column hidden at this width: widen the terminal (COLUMNS=200) or see `kvplan plan` decisions"
        t.caption_justify = "left"
    console.print(t)
    if whys:
        console.print(Panel("\n".join(f"layers {i}: {w}" for i, w in whys), title="why (kv_cache_dtype)",
                            title_align="left"))
    tot = plan.totals
    bpt = f"{tot.bytes_per_token_exact:,}" if tot.bytes_per_token_exact is not None else f"{tot.bytes_per_token:,}"
    lines = [f"KV bytes/token (per TP rank): {bpt}  ·  all-bf16 plan: {tot.bytes_per_token_bf16:,}"
             f"  ·  saving: {tot.saving_vs_bf16:.1%}  ·  KV layers {tot.kv_layers}, quantized {tot.quantized_layers}"]
    if tot.max_model_len:
        lines.append(f"one request at max-model-len {tot.max_model_len:,}: {_gib(tot.bytes_per_request)}")
    if tot.state_bytes_per_request:
        lines.append(f"state per request (one state per state layer, unpadded): {_gib(tot.state_bytes_per_request)}")
    if tot.draft is not None:
        lines.append(_draft_line(tot.draft))
    lines += layout_lines(tot)
    if tot.kv_budget_terms and tot.kv_budget_bytes is not None:
        lines += budget_lines(tot)
    if tot.kv_budget_bytes is not None and tot.tokens_capacity is not None:
        lines.append(f"KV budget {_gib(tot.kv_budget_bytes)} → {tot.tokens_capacity:,} tokens, "
                     f"{tot.max_concurrency} concurrent requests at max-model-len")
        if tot.kv_cache_layout is not None and tot.max_model_len and tot.max_concurrency is not None:
            lines.append(f"vLLM will log: GPU KV cache size: {tot.tokens_capacity:,} tokens, Maximum concurrency "
                         f"for {tot.max_model_len:,} tokens per request: {tot.max_concurrency:.2f}x")
    console.print(Panel("\n".join(lines), title="totals", title_align="left"))
    render_findings(plan.findings, console)


def budget_lines(tot: Totals) -> list[str]:
    """The GPU budget's terms, one a line, each with its error band, and their sum (what vLLM will log as
    'Available KV cache memory')."""
    terms = tot.kv_budget_terms or []
    if len(terms) == 1 and not terms[0].error_bytes:
        return [f"KV budget from {terms[0].name}: {_gib(terms[0].bytes)} ({terms[0].basis})"]
    width = max(len(t.name) for t in terms) + 2
    out = ["KV budget from the GPU (estimated; pass --kv-budget-gib with vLLM's logged 'Available KV cache "
           "memory' for exact figures):"]
    for i, t in enumerate(terms):
        sign = "  " if i == 0 else ("− " if t.bytes <= 0 else "+ ")
        err = f" ± {abs(t.error_bytes) / 2**30:.2f}" if t.error_bytes else "       "
        out.append(f"  {sign}{t.name:<{width}}{_gib(abs(t.bytes)):>11}{err}  {t.basis}")
    raw = sum(t.bytes for t in terms)
    err = f" ± {(tot.kv_budget_error_bytes or 0) / 2**30:.2f}" if tot.kv_budget_error_bytes else ""
    out.append(f"  = {'available KV':<{width}}{_gib(raw):>11}{err}  (vLLM logs 'Available KV cache memory')")
    return out


def _draft_line(d: DraftKv) -> str:
    """The speculative-decoding draft's KV layers and what they add to the pool."""
    what = f"draft model {d.model} adds" if d.model else "the checkpoint's MTP layers add"
    n, k = d.num_speculative_tokens, len(d.layers)
    dtypes = ", ".join(sorted({lp.kv_cache_dtype or "auto" for lp in d.layers}))
    return (f"speculative decoding ({d.method}, {n} draft token{'s' if n != 1 else ''}): {what} {k} KV "
            f"layer{'s' if k != 1 else ''} ({dtypes}), {d.bytes_per_token:,} B/token to the pool (in the request "
            "above)")


def layout_lines(tot: Totals) -> list[str]:
    """vLLM's KV cache layout in words: block size, page, groups, blocks per request and in the pool."""
    lay = tot.kv_cache_layout
    if lay is None:
        return []
    raised = " (raised so an attention page holds a state page)" if lay.state_page_size_bytes and any(
        g.kind != "state" for g in lay.groups) else ""
    out = [f"vLLM layout: block size {lay.block_size} tokens{raised}, page {lay.page_size_bytes:,} B"
           + (f" (state page {lay.state_page_size_bytes:,} B padded)" if lay.state_page_size_bytes
              and lay.state_page_size_bytes != lay.page_size_bytes else "")
           + f", {lay.bytes_per_block:,} B per block" + _memory_layout(lay)]
    kinds: dict[tuple[str, int], list[int]] = {}
    for g in lay.groups:  # a model laid out cache by cache names vLLM's spec class of each group
        kinds.setdefault((g.spec or g.kind, g.block_size), []).append(g.blocks_per_request)
    parts = [f"{len(v)} {k} group{'s' if len(v) > 1 else ''} × {v[0]} block{'s' if v[0] != 1 else ''}"
             + (f" of {b} tokens" if b != lay.block_size and k != "state" else "")
             for (k, b), v in kinds.items()]
    mode = f"; state cache mode {lay.mamba_cache_mode}" if lay.mamba_cache_mode else ""
    out.append(f"KV cache groups: {', '.join(parts)} = {lay.blocks_per_request} blocks per request{mode}"
               + (f"; {lay.num_blocks:,} blocks in the pool" if lay.num_blocks is not None else ""))
    return out


def _memory_layout(lay) -> str:
    """The physical layout vLLM resolves, where kvplan models it: block-outermost packs pages of several
    sizes side by side in one block."""
    if lay.memory_layout is None:
        return ""
    pages = {g.page_size_bytes for g in lay.groups if g.page_size_bytes}
    packed = lay.memory_layout.startswith("B") and len(pages) > 1
    return f", {lay.memory_layout}" + (" (pages of different sizes packed side by side in each block)"
                                       if packed else "")


def render_findings(findings, console: Console) -> None:
    if not findings:
        console.print(Panel("no findings", title="findings", title_align="left", style="green"))
        return
    parts = []
    for sev in (Severity.error, Severity.warning, Severity.info):
        fs = [f for f in findings if f.severity is sev]
        if not fs:
            continue
        parts.append(Text(f"{sev.value}s ({len(fs)})", style=_SEV_STYLE[sev]))
        for f in fs:
            layers = f" [layers {compress_indices(f.layers)}]" if f.layers else ""
            line = Text(f"  {f.code} {f.name}: ", style=_SEV_STYLE[sev])
            line.append(f.message + layers, style="")
            parts.append(line)
            if f.fix and sev is not Severity.info:
                parts.append(Text(f"      fix: {f.fix}", style="dim"))
    console.print(Panel(Group(*parts), title="findings", title_align="left"))
