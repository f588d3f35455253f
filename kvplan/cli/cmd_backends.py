"""`kvplan gpus` and `kvplan backends`: print the GPU table and the attention-backend matrix.

Plain typer-compatible functions; the main app registers them. Results go to stdout; bad input
raises KvplanInputError (the main app prints it and exits 2).
"""
from __future__ import annotations

import json
import os
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kvplan.backends.capabilities import DEFAULT_ENGINE, BackendCapability
from kvplan.backends.document import SCHEMA_VERSION, _engine, _kind, backends_document, gpus_document
from kvplan.backends.gpus import GPU_PROFILES
from kvplan.backends.vllm_rows import rows_for
from kvplan.errors import KvplanInputError
from kvplan.model.vocab import VLLM_033_KV_CACHE_DTYPES

__all__ = ["COMMANDS", "SCHEMA_VERSION", "backends", "backends_document", "gpus", "gpus_document"]

_FORMATS = ("text", "json", "markdown")


def _check_format(fmt: str) -> str:
    f = fmt.strip().lower()
    if f not in _FORMATS:
        raise KvplanInputError(f"unknown --format {fmt!r}.", f"use one of: {', '.join(_FORMATS)}")
    return f


def _dump(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True)


def _console() -> Console:
    """stdout console (same policy as the main app): NO_COLOR, COLUMNS, 140 columns off a TTY."""
    no_color = bool(os.environ.get("NO_COLOR")) or None
    width = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else None
    c = Console(no_color=no_color, soft_wrap=False, highlight=False, width=width)
    if width is None and not c.is_terminal:
        c = Console(no_color=no_color, soft_wrap=False, highlight=False, width=140)
    return c




def _md(headers: list[str], rows: list[list[str]]) -> str:
    esc = [[c.replace("|", "\\|") for c in r] for r in rows]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in esc]
    return "\n".join(lines)


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:g}"


# ============================================================================ gpus


def gpus(
    format: Annotated[str, typer.Option(
        "--format", help="Output format: text (table), json or markdown.")] = "text",
) -> None:
    """List the GPU profiles kvplan knows (`--gpu` accepts these names, aliases or an SM like sm90)."""
    fmt = _check_format(format)
    if fmt == "json":
        typer.echo(_dump(gpus_document()))
        return
    headers = ["name", "GPU", "arch", "CC", "memory GiB", "bandwidth GB/s", "FP8 KV", "FP8 TC",
               "aliases"]
    rows = []
    for g in GPU_PROFILES.values():
        rows.append([g.name, g.display_name, g.arch, g.cc_str or "-", _num(g.memory_gib),
                     _num(g.hbm_bandwidth_gbs), g.fp8, "yes" if g.native_fp8_tensor_cores else "no",
                     ", ".join(g.aliases) or "-"])
    if fmt == "markdown":
        typer.echo(_md(headers, rows))
        return
    table = Table(title="GPU profiles (FP8 KV = format vLLM 0.33 stores; CC = compute capability)")
    for i, h in enumerate(headers):
        table.add_column(h, no_wrap=i == 0, overflow="fold")
    for r in rows:
        table.add_row(*r)
    _console().print(table)


# ============================================================================ backends




def _cc_text(row: BackendCapability) -> str:
    parts = []
    if row.cc_majors:
        parts.append("SM" + "/".join(f"{m}x" for m in row.cc_majors))
    if row.min_compute_capability and row.max_compute_capability == row.min_compute_capability:
        parts.append(f"=={row.min_compute_capability[0]}.{row.min_compute_capability[1]}")
    else:
        if row.min_compute_capability:
            parts.append(f">={row.min_compute_capability[0]}.{row.min_compute_capability[1]}")
        if row.max_compute_capability:
            parts.append(f"<={row.max_compute_capability[0]}.{row.max_compute_capability[1]}")
    if row.rocm_archs:
        parts.append("/".join(row.rocm_archs) + "*")
    return " ".join(parts) or "any"


def _heads_text(row: BackendCapability) -> str:
    if row.head_sizes:
        return ",".join(map(str, row.head_sizes))
    parts = []
    if row.min_head_size:
        parts.append(f">={row.min_head_size}")
    if row.max_head_size:
        parts.append(f"<={row.max_head_size}")
    if row.head_size_multiple_of:
        parts.append(f"%{row.head_size_multiple_of}")
    return " ".join(parts) or "any"


def _blocks_text(row: BackendCapability) -> str:
    parts = []
    if row.block_sizes:
        parts.append(",".join(map(str, row.block_sizes)))
    if row.block_size_multiple_of:
        parts.append(f"x{row.block_size_multiple_of}")
    return " ".join(parts) or "any"














def backends(
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="Show which backends are eligible on this GPU and for which kv dtypes "
                      "(name, alias or compute capability such as h100, sm90, mi300x).")] = None,
    engine: Annotated[str, typer.Option(
        "--engine", help="Engine and version whose backend table to show (default: the default release; "
                         "releases whose rows are verified against their own selector, see `kvplan engines`).")]
        = DEFAULT_ENGINE,
    format: Annotated[str, typer.Option(
        "--format", help="Output format: text (table), json or markdown.")] = "text",
) -> None:
    """Print the attention-backend capability matrix (optionally evaluated on one GPU)."""
    fmt = _check_format(format)
    ev = _engine(engine)
    doc = backends_document(gpu, engine)
    if fmt == "json":
        typer.echo(_dump(doc))
        return
    if gpu is None:
        headers = ["backend", "kind", "platforms", "kv cache dtypes", "CC / arch", "head sizes",
                   "blocks", "SW", "sinks", "per-head", "Q fp8", "attn types"]
        rows = []
        for n, r in sorted(rows_for(ev).items()):
            rows.append([n + (" (explicit)" if r.explicit_only else ""), _kind(r),
                         ",".join(r.platforms), ", ".join(r.kv_cache_dtypes), _cc_text(r),
                         _heads_text(r), _blocks_text(r), _yn(r.supports_sliding_window),
                         _yn(r.supports_sinks), _yn(r.supports_per_head_quant_scales),
                         _yn(r.supports_quant_query_input), ",".join(r.attn_types)])
        title = f"Attention backends, {ev} (rules with conditions: see --format json notes)"
        _emit(fmt, title, headers, rows)
        return
    on = doc["on_gpu"]
    headers = ["backend", "kind", "eligible", "kv dtypes that work", "kv dtypes that fail"]
    rows = []
    for b in on["backends"]:
        ok = [k for k, v in b["kv_cache_dtypes"].items() if v["status"] == "ok"]
        bad = [f"{k} ({v['status']})" for k, v in b["kv_cache_dtypes"].items() if v["status"] != "ok"]
        rows.append([b["name"] + (" (explicit)" if b["explicit_only"] else ""), b["kind"],
                     _yn(b["eligible"]), ", ".join(ok) or "-", ", ".join(bad) or "-"])
    title = f"Attention backends on {doc['gpu']['display_name']}, {ev}"
    _emit(fmt, title, headers, rows)
    d_headers = ["kv cache dtype", "dense head 128", "MLA (DeepSeek-R1 dims)"]
    d_rows = []
    for kv in VLLM_033_KV_CACHE_DTYPES:
        cells = []
        for label in ("dense_head128", "mla_deepseek_r1"):
            e = on["default_backend"][label][kv]
            if e["backend"]:
                fa = f" FA{e['flash_attn_version']}" if e["flash_attn_version"] else ""
                cells.append(e["backend"] + fa + (" (fp8 Q)" if e["query_quant"] else ""))
            else:
                cells.append("error")
        d_rows.append([kv, *cells])
    _emit(fmt, "Automatic selection (vLLM priority order)", d_headers, d_rows)


def _yn(b: bool) -> str:
    return "yes" if b else "no"


def _emit(fmt: str, title: str, headers: list[str], rows: list[list[str]]) -> None:
    if fmt == "markdown":
        typer.echo(f"### {title}\n\n{_md(headers, rows)}\n")
        return
    table = Table(title=title)
    for i, h in enumerate(headers):
        table.add_column(h, no_wrap=i == 0, overflow="fold")
    for r in rows:
        table.add_row(*r)
    _console().print(table)


COMMANDS = {"gpus": gpus, "backends": backends}
"""Commands the main app registers (`kvplan gpus`, `kvplan backends`)."""
