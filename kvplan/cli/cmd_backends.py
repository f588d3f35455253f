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

import kvplan
from kvplan.backends.capabilities import BackendCapability, EngineVersion
from kvplan.backends.gpus import GPU_PROFILES, resolve_gpu
from kvplan.backends.select import BackendRequest, hardware_reasons, select_backend
from kvplan.backends.vllm_033 import BACKENDS, ENGINE_VERSIONS
from kvplan.errors import KvplanInputError
from kvplan.model.gpu import GpuProfile
from kvplan.model.vocab import VLLM_033_KV_CACHE_DTYPES

__all__ = ["COMMANDS", "SCHEMA_VERSION", "backends", "backends_document", "gpus", "gpus_document"]

SCHEMA_VERSION = "1.0"
_FORMATS = ("text", "json", "markdown")
_DEFAULT_ENGINE = "vllm==0.33.0"
# Representative layers for the per-GPU matrix: Llama-style dense head 128, DeepSeek-R1 MLA.
_DENSE = {"head_size": 128, "num_heads": 32, "num_kv_heads": 8}
_MLA = {"head_size": 576, "use_mla": True, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128, "v_head_dim": 128, "num_heads": 128, "num_kv_heads": 1}


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


def _engine_ref(ev: EngineVersion) -> dict[str, str | None]:
    return {"name": ev.engine, "version": ev.version_str}


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
def gpus_document() -> dict[str, Any]:
    """The `kvplan gpus --format json` document (stable, sorted by GPU name)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kvplan_version": kvplan.__version__,
        "engine": _engine_ref(EngineVersion()),
        "gpus": [GPU_PROFILES[n].model_dump(mode="json") for n in sorted(GPU_PROFILES)],
    }


def gpus(
    format: Annotated[str, typer.Option(  # noqa: A002 - the flag is --format
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
def _engine(engine: str) -> EngineVersion:
    ev = EngineVersion.parse(engine)
    if ev.engine != "vllm" or not ev.satisfies(ENGINE_VERSIONS):
        older = ev.engine == "vllm" and ev.version is not None and ev.version < (0, 33, 0)
        raise KvplanInputError(
            f"the attention-backend table for {ev} is not modelled yet (kvplan's table was read from vllm "
            f"{ENGINE_VERSIONS}" + ("; `kvplan plan --engine` plans older releases with it plus the dated "
                                    "differences, see `kvplan rule KV009`" if older else "") + ").",
            f"pass --engine {_DEFAULT_ENGINE}")
    return ev


def _row_doc(row: BackendCapability) -> dict[str, Any]:
    return row.model_dump(mode="json")


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


def _kind(row: BackendCapability) -> str:
    return "sparse-MLA" if row.sparse else "MLA" if row.use_mla else "dense"


def _request_for(row: BackendCapability, kv: str) -> BackendRequest:
    base: dict[str, Any] = dict(_MLA if row.use_mla else _DENSE)
    if row.sparse:
        base.update(use_sparse=True, index_topk=2048)
    base["model_dtype"] = _model_dtype_for(kv)
    return BackendRequest(kv_cache_dtype=kv, **base)


def _model_dtype_for(kv: str) -> str:
    # An explicit float16 cache needs a float16 model (_reject_mismatched_float_kv_cache).
    return "float16" if kv == "float16" else "bfloat16"


def _gpu_matrix(gpu: GpuProfile, ev: EngineVersion) -> dict[str, Any]:
    """Per backend on this GPU: eligible (platform + CC) and the outcome per kv dtype."""
    out: list[dict[str, Any]] = []
    for name in sorted(BACKENDS):
        row = BACKENDS[name]
        if gpu.platform not in row.platforms:
            continue
        dtypes: dict[str, dict[str, Any]] = {}
        any_ok = False
        for kv in row.kv_cache_dtypes:
            choice = select_backend(_request_for(row, kv), gpu, ev, forced=name)
            if choice.status == "selected":
                status, detail = "ok", None
                any_ok = True
            elif choice.error_stage == "selection":
                status, detail = "rejected", "; ".join(choice.rejected.get(name, ())) or choice.error
            else:
                status, detail = f"{choice.error_stage}_error", choice.error
            dtypes[kv] = {"status": status, "detail": detail}
        cc_reasons = hardware_reasons(name, gpu)
        out.append({"name": name, "kind": _kind(row), "explicit_only": row.explicit_only,
                    "eligible": not cc_reasons and any_ok, "reasons": cc_reasons,
                    "kv_cache_dtypes": dtypes})
    return {"backends": out, "default_backend": _defaults(gpu, ev)}


def _defaults(gpu: GpuProfile, ev: EngineVersion) -> dict[str, dict[str, Any]]:
    """What automatic selection picks per kv dtype for the representative layers."""
    result: dict[str, dict[str, Any]] = {}
    for label, spec in (("dense_head128", _DENSE), ("mla_deepseek_r1", _MLA)):
        per: dict[str, Any] = {}
        for kv in VLLM_033_KV_CACHE_DTYPES:
            c = select_backend(BackendRequest(kv_cache_dtype=kv, model_dtype=_model_dtype_for(kv),
                                              **spec), gpu, ev)
            per[kv] = {"backend": c.backend if c.status == "selected" else None,
                       "error": c.error, "flash_attn_version": c.flash_attn_version,
                       "query_quant": c.query_quant}
        result[label] = per
    return result


def backends_document(gpu: str | None = None, engine: str = _DEFAULT_ENGINE) -> dict[str, Any]:
    """The `kvplan backends --format json` document (sorted, stable)."""
    ev = _engine(engine)
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kvplan_version": kvplan.__version__,
        "engine": _engine_ref(ev),
        "engine_versions": ENGINE_VERSIONS,
        "gpu": None,
        "backends": [_row_doc(BACKENDS[n]) for n in sorted(BACKENDS)],
    }
    if gpu is not None:
        prof = resolve_gpu(gpu)
        doc["gpu"] = prof.model_dump(mode="json")
        doc["on_gpu"] = _gpu_matrix(prof, ev)
    return doc


def backends(
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="Show which backends are eligible on this GPU and for which kv dtypes "
                      "(name, alias or compute capability such as h100, sm90, mi300x).")] = None,
    engine: Annotated[str, typer.Option(
        "--engine", help="Engine and version whose backend table to show.")] = _DEFAULT_ENGINE,
    format: Annotated[str, typer.Option(  # noqa: A002 - the flag is --format
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
        for n in sorted(BACKENDS):
            r = BACKENDS[n]
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
