"""Which engine versions kvplan plans for, and what each version accepts (data + lookups).

A plan models one vLLM release (`--engine vllm==0.33.0` by default). kvplan's KV rules carry the
version ranges in which they hold (`ENGINE_FEATURES` in :mod:`kvplan.backends.vllm_033`), so a plan
for an older release reports that release's behaviour for the modelled history: the
`--calculate-kv-scales` deprecation and removal, `--kv-cache-dtype-skip-layers` (PR #33695), the
FlashInfer skip-layer crash and its fix (PR #39002), per-token-head KV dtypes (PR #38378), and
explicit `--kv-cache-dtype` over a checkpoint `kv_cache_scheme` (PR #42782).

The attention-backend capability rows are read from vLLM 0.33.0 only (`ENGINE_VERSIONS`); for an
older release kvplan selects backends with those rows and says so in the plan (KV009), never
silently.
"""
from __future__ import annotations

from kvplan.backends.capabilities import DEFAULT_ENGINE, EngineVersion, Version, version_in_range
from kvplan.backends.vllm_033 import ENGINE_VERSIONS as TABLE_VERSIONS
from kvplan.backends.vllm_033 import engine_feature
from kvplan.errors import KvplanInputError
from kvplan.model.vocab import VLLM_033_KV_CACHE_DTYPES

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINE_VERSIONS",
    "MODELLED_VLLM_VERSIONS",
    "SUPPORTED_ENGINES",
    "TABLE_VERSIONS",
    "kv_cache_dtypes_for",
    "resolve_engine",
    "tables_exact",
]

MODELLED_VLLM_VERSIONS = ">=0.18,<0.35"
"""vLLM releases kvplan plans for: from 0.18 (the `--calculate-kv-scales` deprecation, one release
before skip layers) to 0.34.x (0.33 is the release the reference was read from; 0.34's differences are
ENGINE_FEATURES rows). `SUPPORTED_ENGINES` (the default and what lint calls the newest) still ends at 0.33
until 0.34's option tables are in."""

_FIRST_MINOR, _LAST_MINOR = 18, 33

SUPPORTED_ENGINES: tuple[str, ...] = tuple(f"vllm==0.{m}.0" for m in range(_LAST_MINOR, _FIRST_MINOR - 1, -1))
"""`--engine` values for every modelled minor release, newest (the default) first. Patch
releases (`vllm==0.19.1`) are accepted too and behave as their minor release."""

ENGINE_VERSIONS = SUPPORTED_ENGINES
"""Alias read by `kvplan explore` (a tuple of `--engine` values, not the row range string)."""

_PTH = ("int4_per_token_head", "int8_per_token_head", "fp8_per_token_head")


def resolve_engine(spec: str | EngineVersion | None) -> EngineVersion:
    """Parse `--engine` and check that kvplan models it; KvplanInputError (one line) otherwise.

    `None` / empty -> vllm==0.33.0. Other engines (sglang, trtllm, lmdeploy) have emitters but no
    planner model, and vLLM releases outside `MODELLED_VLLM_VERSIONS` are refused rather than
    planned with rules that may not hold there.
    """
    engine = spec if isinstance(spec, EngineVersion) else EngineVersion.parse(spec)
    if engine.engine != "vllm":
        raise KvplanInputError(
            f"--engine {spec}: kvplan plans model vLLM only ({engine.engine} is not modelled).",
            f"Pass --engine {DEFAULT_ENGINE} (or vllm==0.{_FIRST_MINOR}.0 .. 0.{_LAST_MINOR}.x); "
            f"`kvplan emit --to {engine.engine}` writes {engine.engine} flags for a vLLM plan.")
    if engine.version is None or not version_in_range(engine.version, MODELLED_VLLM_VERSIONS):
        raise KvplanInputError(
            f"--engine {spec}: vLLM {engine.version_str} is not modelled (kvplan models vLLM "
            f"0.{_FIRST_MINOR}.0 to 0.{_LAST_MINOR + 1}.x).",
            f"Pass --engine {DEFAULT_ENGINE} or another release in that range.")
    return engine


def tables_exact(engine: EngineVersion) -> bool:
    """True if the backend capability rows were read from this very release (vLLM 0.33.x)."""
    return engine.satisfies(TABLE_VERSIONS)


def kv_cache_dtypes_for(engine: EngineVersion) -> tuple[str, ...] | None:
    """The `--kv-cache-dtype` strings the release is known NOT to lack, or None if not modelled.

    vLLM 0.33's 22 values, minus the per-token-head dtypes before PR #38378 (int4 came after int8/fp8,
    so all three are absent before it). Other 0.33 values are assumed present in the modelled range.
    """
    if engine.engine != "vllm" or engine.version is None:
        return None
    if engine_feature("per_token_head_kv_dtypes").holds_for(engine):
        return VLLM_033_KV_CACHE_DTYPES
    return tuple(d for d in VLLM_033_KV_CACHE_DTYPES if d not in _PTH)


def minor(version: Version) -> str:
    """`(0, 19, 1)` -> `0.19`."""
    return f"{version[0]}.{version[1]}"
