"""Types for engine versions, attention-backend capability rows and engine feature history.

The data lives in per-engine modules (:mod:`kvplan.backends.vllm_rows`); the selection walk in
:mod:`kvplan.backends.select`, each backend's quirks in :mod:`kvplan.backends.impl`. Version ranges are
small PEP 440-like strings (`">=0.33,<0.34"`) compared on (major, minor, patch) tuples; pre-release/dev
suffixes are ignored.
"""
from __future__ import annotations

import difflib
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from kvplan.errors import KvplanInputError
from kvplan.releases import DEFAULT_ENGINE, DEFAULT_ENGINE_VERSION

__all__ = [
    "DEFAULT_ENGINE",
    "KNOWN_ENGINES",
    "AttnType",
    "BackendCapability",
    "EngineFeature",
    "EngineVersion",
    "PlatformName",
    "Version",
    "parse_version",
    "version_in_range",
]

Version = tuple[int, int, int]
AttnType = Literal["decoder", "encoder", "encoder_only", "encoder_decoder"]
PlatformName = Literal["cuda", "rocm", "cpu"]

# Canonical engine names and the spellings users type.
KNOWN_ENGINES: dict[str, str] = {
    "vllm": "vllm",
    "sglang": "sglang",
    "trtllm": "trtllm", "tensorrt-llm": "trtllm", "tensorrt_llm": "trtllm", "trt-llm": "trtllm",
    "tensorrtllm": "trtllm",
    "lmdeploy": "lmdeploy",
}
_VERSION_RE = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:(?:[.+\-_]|rc|a|b|dev|post).*)?$")


def parse_version(text: str) -> Version | None:
    """`0.33.0` / `0.33` / `v0.33.1rc1` / `0.26.1.dev0+g568afb3a1` -> (0, 33, 0) ...; None if not a version."""
    m = _VERSION_RE.match(text.strip().lower())
    if not m:
        return None
    return int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)


DEFAULT_VLLM_VERSION: Version = parse_version(DEFAULT_ENGINE_VERSION) or (0, 0, 0)
"""(major, minor, patch) of `DEFAULT_ENGINE`."""


_CLAUSE_RE = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*([0-9][0-9.]*)\s*$")


def version_in_range(version: Version, spec: str) -> bool:
    """True if `version` satisfies every comma-separated clause of `spec` (`">=0.33,<0.34"`).

    An empty spec or `*` matches everything. `==0.33` matches any 0.33.x.
    """
    spec = spec.strip()
    if spec in ("", "*"):
        return True
    for clause in spec.split(","):
        m = _CLAUSE_RE.match(clause)
        if not m:
            raise ValueError(f"bad version clause {clause!r} in {spec!r}")
        op, text = m.groups()
        parts = [int(p) for p in text.split(".") if p != ""]
        n = len(parts)
        bound = tuple(parts + [0] * (3 - n))
        if op == "==":
            ok = version[:n] == tuple(parts)
        elif op == "!=":
            ok = version[:n] != tuple(parts)
        elif op == ">=":
            ok = version >= bound
        elif op == ">":
            ok = version > bound
        elif op == "<=":
            ok = version <= bound
        else:
            ok = version < bound
        if not ok:
            return False
    return True


class EngineVersion(BaseModel):
    """An inference engine and (optionally) its version, e.g. vLLM 0.33.0."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    engine: str = "vllm"
    """Canonical engine name: `vllm`, `sglang`, `trtllm` or `lmdeploy`."""
    version: Version | None = DEFAULT_VLLM_VERSION
    """(major, minor, patch); None when the user named an engine without a version (non-vLLM)."""

    @classmethod
    def parse(cls, spec: str | None = None) -> EngineVersion:
        """Parse `vllm==0.33.0`, `vllm@0.33`, `vllm 0.33`, `0.33.0`, `vllm` (-> 0.33.0), `sglang`.

        Raises KvplanInputError for an unknown engine name or an unparsable version.
        """
        if spec is None or not spec.strip():
            return cls()
        raw = spec.strip()
        m = re.match(r"^([A-Za-z][A-Za-z0-9_\-]*?)\s*(?:==|@|=|\s|-(?=v?\d))\s*(.+)$", raw)
        if m:
            name_part, ver_part = m.group(1), m.group(2)
        elif parse_version(raw) is not None:
            name_part, ver_part = "vllm", raw
        else:
            name_part, ver_part = raw, None
        engine = KNOWN_ENGINES.get(name_part.lower())
        if engine is None:
            close = difflib.get_close_matches(name_part.lower(), list(KNOWN_ENGINES), n=3, cutoff=0.5)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise KvplanInputError(
                f"unknown engine {name_part!r} in --engine {raw!r}.{hint}",
                f"pass --engine {DEFAULT_ENGINE} (known engines: vllm, sglang, trtllm, lmdeploy)",
            )
        if ver_part is None:
            return cls(engine=engine, version=DEFAULT_VLLM_VERSION if engine == "vllm" else None)
        version = parse_version(ver_part)
        if version is None:
            raise KvplanInputError(
                f"cannot read engine version {ver_part!r} in --engine {raw!r}.",
                f"pass a pinned version such as --engine {DEFAULT_ENGINE}",
            )
        return cls(engine=engine, version=version)

    @property
    def version_str(self) -> str | None:
        """`0.33.0`, or None."""
        return ".".join(map(str, self.version)) if self.version else None

    def __str__(self) -> str:
        return f"{self.engine}=={self.version_str}" if self.version else self.engine

    def satisfies(self, spec: str) -> bool:
        """True if this is the row's engine version range (always False without a version)."""
        return self.version is not None and version_in_range(self.version, spec)


class BackendCapability(BaseModel):
    """One attention backend of one engine version range: what it accepts, as data.

    Mirrors the backend class attributes read by vLLM's `validate_configuration`
    (`vllm/v1/attention/backend.py`). Rules that are code rather than data in vLLM (FlashAttention
    version, FlashInfer NVFP4 paths, MLA dimension checks) are hooks of the backend's family module in
    :mod:`kvplan.backends.impl`, and are described in `notes`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str
    """Registry name as passed to `--attention-backend` (`AttentionBackendEnum` member)."""
    engine: str = "vllm"
    """Engine the row belongs to."""
    engine_versions: str
    """Version range in which the row holds, e.g. `>=0.33,<0.34`."""
    platforms: tuple[PlatformName, ...]
    """vLLM platforms that can select it."""
    file: str
    """Source file in the engine (package-relative)."""
    use_mla: bool = False
    """True for MLA (latent-cache) backends; MLA layers only match MLA backends and vice versa."""
    sparse: bool = False
    """True for sparse-MLA (DeepSeek-V3.2-style indexer) backends; must match the layer."""
    explicit_only: bool = False
    """Never in an automatic priority list on the platforms it lists: only `--attention-backend`
    (or a model that pins it) selects it."""
    model_dtypes: tuple[str, ...] = ("float16", "bfloat16")
    """Model (activation) dtypes accepted (`supported_dtypes`)."""
    kv_cache_dtypes: tuple[str, ...]
    """`supported_kv_cache_dtypes` (the strings `--kv-cache-dtype` may carry for this backend)."""
    min_compute_capability: tuple[int, int] | None = None
    """Lowest CUDA compute capability (inclusive); None = no lower bound."""
    max_compute_capability: tuple[int, int] | None = None
    """Highest CUDA compute capability (inclusive); None = no upper bound."""
    cc_majors: tuple[int, ...] | None = None
    """If set, CUDA compute-capability majors (vLLM families) allowed, e.g. (10,) for SM100/SM103."""
    rocm_archs: tuple[str, ...] | None = None
    """If set, ROCm gfx-target prefixes allowed (e.g. `gfx94`, `gfx95`)."""
    head_sizes: tuple[int, ...] | None = None
    """Explicit head sizes; None = see min/max/multiple-of (or any)."""
    min_head_size: int | None = None
    """Smallest head size accepted (inclusive)."""
    max_head_size: int | None = None
    """Largest head size accepted (inclusive), before version-specific extensions."""
    head_size_multiple_of: int | None = None
    """Head size must be a multiple of this."""
    block_sizes: tuple[int, ...] | None = None
    """Explicit kernel block sizes; None = see `block_size_multiple_of` (or any)."""
    block_size_multiple_of: int | None = None
    """Kernel block size must be a multiple of this (vLLM `MultipleOf`)."""
    supports_sliding_window: bool = False
    """`supports_sliding_window()`: sliding-window layers may use it."""
    supports_sinks: bool = False
    """`supports_sink()` in the common case (CC or path conditions in `notes`)."""
    supports_per_head_quant_scales: bool = False
    """Can consume compressed-tensors `attn_head` (per-KV-head) k/v/q scales."""
    supports_quant_query_input: bool = False
    """Impl `supports_quant_query_input` in the common case: the layer quantizes its query to FP8
    when its KV cache dtype starts with fp8/nvfp4 (reference §4.5). Conditions in `notes`."""
    attn_types: tuple[str, ...] = ("decoder",)
    """Attention types (`AttentionType`) accepted."""
    notes: tuple[str, ...] = ()
    """Conditions and impl-time errors not expressible as the fields above."""
    source: str
    """Engine function(s) the row was read from and the reference section."""
    references: tuple[str, ...] = ()
    """Upstream PR/issue links relevant to the row."""


class EngineFeature(BaseModel):
    """A versioned engine behaviour (feature or known bug) with the versions where it holds."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str
    """Stable id, e.g. `kv_cache_dtype_skip_layers`."""
    engine: str = "vllm"
    """Engine it belongs to."""
    kind: Literal["feature", "bug", "removed_feature"]
    """`feature`: exists in `versions`; `bug`: the defect is present in `versions`;
    `removed_feature`: existed in `versions`, gone after."""
    versions: str
    """Version range where the feature exists / the bug is present."""
    summary: str
    """One line: what it is."""
    introduced_by: str | None = None
    """PR that added the feature or introduced the bug."""
    introduced_merged: str | None = None
    """Merge date of `introduced_by` (ISO date)."""
    fixed_or_removed_by: str | None = None
    """PR that fixed the bug or removed the feature."""
    fixed_or_removed_merged: str | None = None
    """Merge date of `fixed_or_removed_by` (ISO date)."""
    source: str
    """How the PR dates were mapped to release versions (stated assumptions included)."""

    def holds_for(self, engine: EngineVersion) -> bool:
        """True if the engine is this feature's engine and its version is in `versions`."""
        return engine.engine == self.engine and engine.satisfies(self.versions)
