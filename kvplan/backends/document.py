"""The `kvplan gpus` / `kvplan backends` JSON documents (data only; the CLI and the HTTP service
render or return them)."""
from __future__ import annotations

from typing import Any

import kvplan
from kvplan.backends.capabilities import DEFAULT_ENGINE, DEFAULT_VLLM_VERSION, BackendCapability, EngineVersion
from kvplan.backends.gpus import GPU_PROFILES, resolve_gpu
from kvplan.backends.request import BackendRequest, ModelDtype
from kvplan.backends.select import hardware_reasons, select_backend
from kvplan.backends.vllm_rows import BACKEND_ORACLE_RELEASES, BACKENDS, ENGINE_VERSIONS, rows_for
from kvplan.errors import KvplanInputError
from kvplan.model.gpu import GpuProfile
from kvplan.model.vocab import VLLM_033_KV_CACHE_DTYPES

__all__ = ["SCHEMA_VERSION", "backends_document", "gpus_document"]

SCHEMA_VERSION = "1.0"
# Representative layers for the per-GPU matrix: Llama-style dense head 128, DeepSeek-R1 MLA.
_DENSE: dict[str, Any] = {"head_size": 128, "num_heads": 32, "num_kv_heads": 8}
_MLA: dict[str, Any] = {"head_size": 576, "use_mla": True, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128, "v_head_dim": 128, "num_heads": 128, "num_kv_heads": 1}
def _engine_ref(ev: EngineVersion) -> dict[str, str | None]:
    return {"name": ev.engine, "version": ev.version_str}


def gpus_document() -> dict[str, Any]:
    """The `kvplan gpus --format json` document (stable, sorted by GPU name)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kvplan_version": kvplan.__version__,
        "engine": _engine_ref(EngineVersion()),
        "gpus": [GPU_PROFILES[n].model_dump(mode="json") for n in sorted(GPU_PROFILES)],
    }


def _engine(engine: str) -> EngineVersion:
    """A release whose backend rows are verified against its own selector (`BACKEND_ORACLE_RELEASES`)."""
    from kvplan.backends.engines import tables_exact
    ev = EngineVersion.parse(engine)
    if not tables_exact(ev):
        older = ev.engine == "vllm" and ev.version is not None and ev.version < DEFAULT_VLLM_VERSION
        raise KvplanInputError(
            f"the attention-backend table for {ev} is not verified (kvplan's rows are checked against vLLM "
            f"{', '.join(BACKEND_ORACLE_RELEASES)}" + ("; `kvplan plan --engine` plans older releases with them "
                                                      "plus the dated differences, see `kvplan rule KV009`"
                                                      if older else "") + ").",
            f"pass --engine {DEFAULT_ENGINE}")
    return ev


def _row_doc(row: BackendCapability) -> dict[str, Any]:
    return row.model_dump(mode="json")


def _kind(row: BackendCapability) -> str:
    return "sparse-MLA" if row.sparse else "MLA" if row.use_mla else "dense"


def _request_for(row: BackendCapability, kv: str) -> BackendRequest:
    base: dict[str, Any] = dict(_MLA if row.use_mla else _DENSE)
    if row.sparse:
        base.update(use_sparse=True, index_topk=2048)
    base["model_dtype"] = _model_dtype_for(kv)
    return BackendRequest(kv_cache_dtype=kv, **base)


def _model_dtype_for(kv: str) -> ModelDtype:
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


def backends_document(gpu: str | None = None, engine: str = DEFAULT_ENGINE) -> dict[str, Any]:
    """The `kvplan backends --format json` document (sorted, stable)."""
    ev = _engine(engine)
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kvplan_version": kvplan.__version__,
        "engine": _engine_ref(ev),
        "engine_versions": ENGINE_VERSIONS,
        "gpu": None,
        "backends": [_row_doc(row) for _, row in sorted(rows_for(ev).items())],
    }
    if gpu is not None:
        prof = resolve_gpu(gpu)
        doc["gpu"] = prof.model_dump(mode="json")
        doc["on_gpu"] = _gpu_matrix(prof, ev)
    return doc
