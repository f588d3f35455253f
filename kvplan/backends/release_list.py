"""`kvplan engines`: every vLLM release kvplan knows and what is exact for each (a versioned document)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from kvplan import __version__
from kvplan.backends.engines import backend_rows_status, plan_status
from kvplan.backends.vllm_rows import BACKEND_ORACLE_RELEASES
from kvplan.releases import DEFAULT_ENGINE_VERSION, known_releases

__all__ = ["SCHEMA_VERSION", "EngineRelease", "EnginesDocument", "engines_document"]

SCHEMA_VERSION = "1"


class EngineRelease(BaseModel):
    """One vLLM release and what kvplan models of it."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    version: str
    """The release as the package index spells it (`0.34.0`)."""
    engine: str
    """The `--engine` value that names it (`vllm==0.34.0`)."""
    default: bool
    """kvplan models this release when none is named."""
    launch_lines: Literal["exact"]
    """Launch lines are judged by the release's own `vllm serve` option table (spellings, abbreviations,
    choices, `--kv-cache-dtype` values), generated from its wheel."""
    plan: Literal["exact", "verified", "modelled", "launch-lines-only"]
    """exact: per-layer KV decisions (kvplan's corpus) and attention-backend rows (the backend grid) both checked
    against this release's own code; verified: per-layer KV decisions checked, backend rows those of 0.33 plus
    the dated differences; modelled: the release's own options and dtypes, rules with their version ranges, 0.33's
    backend rows (KV009 says so); launch-lines-only: no KV plan (older than 0.18)."""
    backend_rows: Literal["verified", "assumed", "none"]
    """verified: this release's own attention selector and backend `validate_configuration` answered kvplan's
    backend grid (scripts/oracle/backend_oracle.py) and kvplan agrees on every case; assumed: 0.33's rows plus the
    dated differences (KV009 says so); none: no KV plan."""
    options: int
    """Number of `vllm serve` options."""
    kv_cache_dtypes: list[str]
    """`--kv-cache-dtype` values, in vLLM's order."""
    quantization_methods: int
    """Number of quantization methods vLLM loads."""
    architectures: int
    """Number of architectures in the model registry."""
    wheel: str
    """The wheel the data was generated from."""


class EnginesDocument(BaseModel):
    """`kvplan engines --format json`."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    schema_version: str = SCHEMA_VERSION
    """Version of this document's schema."""
    kvplan_version: str
    """kvplan version that wrote it."""
    default: str
    """The default release."""
    backend_rows_from: str
    """The releases whose own attention selector verified kvplan's attention-backend rows (comma-separated)."""
    releases: list[EngineRelease]
    """Every release kvplan knows, newest first."""


def engines_document() -> EnginesDocument:
    rows = []
    for r in reversed(known_releases()):
        rows.append(EngineRelease(
            version=r.version, engine=f"vllm=={r.version}", default=r.version == DEFAULT_ENGINE_VERSION,
            launch_lines="exact", plan=plan_status(r),  # type: ignore[arg-type]
            backend_rows=backend_rows_status(r),  # type: ignore[arg-type]
            options=len(r.options.options), kv_cache_dtypes=list(r.kv_cache_dtypes),
            quantization_methods=len(r.quantization_methods), architectures=len(r.architectures),
            wheel=str(r.entry.get("wheel", ""))))
    return EnginesDocument(kvplan_version=__version__, default=DEFAULT_ENGINE_VERSION,
                           backend_rows_from=", ".join(BACKEND_ORACLE_RELEASES), releases=rows)
