"""Which vLLM releases kvplan plans for, and what each accepts: the planner's view of `kvplan.releases`.

Every release kvplan has data for (`kvplan.releases.known_releases()`, generated from each wheel by
scripts/gen_vllm_release.py) has its launch lines judged exactly by its own option table. Plans are
made from 0.18 on (`MODELLED_VLLM_VERSIONS`, the `--calculate-kv-scales` deprecation, one release
before skip layers) to the newest release kvplan knows. kvplan's KV rules carry the version ranges in
which they hold (`ENGINE_FEATURES` in :mod:`kvplan.backends.vllm_rows`), so a plan for an older release
reports that release's behaviour for the modelled history: the `--calculate-kv-scales` deprecation and
removal, `--kv-cache-dtype-skip-layers` (PR #33695), the FlashInfer skip-layer crash and its fix (PR
#39002), per-token-head KV dtypes (PR #38378), and explicit `--kv-cache-dtype` over a checkpoint
`kv_cache_scheme` (PR #42782); its `--kv-cache-dtype` choices are the release's own.

The attention-backend capability rows (with their versioned hooks) are verified against the own attention
selector of the releases in `BACKEND_ORACLE_RELEASES` (scripts/oracle/backend_oracle.py); for another release
kvplan selects backends with the 0.33 rows plus the dated differences and says so in the plan (KV009), never
silently.
"""
from __future__ import annotations

from kvplan.backends.capabilities import DEFAULT_ENGINE, EngineVersion, Version, version_in_range
from kvplan.backends.vllm_rows import BACKEND_ORACLE_RELEASES, oracle_verified
from kvplan.backends.vllm_rows import ENGINE_VERSIONS as TABLE_VERSIONS
from kvplan.errors import KvplanInputError
from kvplan.releases import Release, find_release, known_releases

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINE_VERSIONS",
    "MODELLED_VLLM_VERSIONS",
    "PLAN_FIRST",
    "SUPPORTED_ENGINES",
    "TABLE_VERSIONS",
    "backend_rows_status",
    "backends_of",
    "kv_cache_dtypes_for",
    "plan_status",
    "release_of",
    "resolve_engine",
    "tables_exact",
]

PLAN_FIRST: Version = (0, 18, 0)
"""The first release kvplan plans for (older ones: launch lines judged, no KV plan)."""


def _newest_minor() -> Version:
    return known_releases()[-1].version_tuple


MODELLED_VLLM_VERSIONS = f">=0.{PLAN_FIRST[1]},<0.{_newest_minor()[1] + 1}"
"""vLLM releases kvplan plans for: from 0.18 to the newest release kvplan has data for."""

SUPPORTED_ENGINES: tuple[str, ...] = tuple(
    f"vllm=={r.version}" for r in reversed(known_releases()) if r.version_tuple >= PLAN_FIRST)
"""`--engine` values of every release kvplan plans for, newest first. A patch release kvplan stores no
table for (`vllm==0.19.1` when 0.19.1 changed none of vLLM's tables) plans as the patch below it."""

ENGINE_VERSIONS = tuple(s for s in SUPPORTED_ENGINES if s.endswith(".0") and s.count(".") == 2)
"""The minor releases (`vllm==0.19.0`), newest first: `kvplan explore`'s engine control (a patch release is
typed there, as in `--engine`)."""


def release_of(engine: EngineVersion) -> Release | None:
    """The release data of a vLLM engine version (None: not vLLM, or a release kvplan has no data for)."""
    if engine.engine != "vllm" or engine.version is None:
        return None
    return find_release(engine.version)


def plan_status(release: Release) -> str:
    """`exact` (per-layer decisions and backend rows both checked against the release's own code), `verified`
    (per-layer decisions checked: `ORACLE_VERIFIED_RELEASES`; backend rows 0.33's plus the dated differences),
    `modelled` (0.18 on: the release's own options and dtypes, rules with their version ranges, the 0.33 backend
    rows) or `launch-lines-only`."""
    if release.version_tuple < PLAN_FIRST:
        return "launch-lines-only"
    engine = EngineVersion(engine="vllm", version=release.version_tuple)
    layers = version_in_range(release.version_tuple, TABLE_VERSIONS) or oracle_verified(engine) is not None
    if layers and tables_exact(engine):
        return "exact"
    return "verified" if layers else "modelled"


def backend_rows_status(release: Release) -> str:
    """`verified` (the release's own attention selector answered the backend grid and kvplan agrees:
    `BACKEND_ORACLE_RELEASES`), `assumed` (0.33's rows plus the dated differences; KV009) or `none` (no plan)."""
    if release.version_tuple < PLAN_FIRST:
        return "none"
    return "verified" if tables_exact(EngineVersion(engine="vllm", version=release.version_tuple)) else "assumed"


def resolve_engine(spec: str | EngineVersion | None) -> EngineVersion:
    """Parse `--engine` and check that kvplan plans for it; KvplanInputError (one line) otherwise.

    `None` / empty -> the default release. Other engines (sglang, trtllm, lmdeploy) have emitters but no
    planner model; a vLLM release kvplan has no data for, or one older than 0.18, is refused rather than
    planned with rules that may not hold there.
    """
    engine = spec if isinstance(spec, EngineVersion) else EngineVersion.parse(spec)
    rels = known_releases()
    span = f"{'.'.join(map(str, PLAN_FIRST))} to {rels[-1].version}"
    if engine.engine != "vllm":
        raise KvplanInputError(
            f"--engine {spec}: kvplan plans model vLLM only ({engine.engine} is not modelled).",
            f"Pass --engine {DEFAULT_ENGINE} (or a vLLM release from {span}); "
            f"`kvplan emit --to {engine.engine}` writes {engine.engine} flags for a vLLM plan.")
    rel = release_of(engine)
    if rel is None or engine.version is None:
        raise KvplanInputError(
            f"--engine {spec}: kvplan has no data for vLLM {engine.version_str} (it knows {rels[0].version} "
            f"to {rels[-1].version}; plans from {span}).",
            f"Pass --engine {DEFAULT_ENGINE} or another known release (`kvplan engines`); a new release is "
            "added with scripts/add_vllm_release.py VERSION.")
    if engine.version < PLAN_FIRST:
        raise KvplanInputError(
            f"--engine {spec}: kvplan makes KV plans for vLLM {span}; for vLLM {engine.version_str} it judges "
            "launch lines only (`kvplan lint` with that release).",
            f"Pass --engine {DEFAULT_ENGINE} or another release from {span}.")
    return engine


def tables_exact(engine: EngineVersion) -> bool:
    """True if the backend rows are verified against this release's own attention selector (its minor release
    is in `BACKEND_ORACLE_RELEASES`; a patch release stands for its minor release)."""
    if engine.engine != "vllm" or engine.version is None:
        return False
    return any(engine.version[:2] == tuple(int(x) for x in v.split(".")[:2]) for v in BACKEND_ORACLE_RELEASES)


def backends_of(engine: EngineVersion) -> frozenset[str] | None:
    """The names of the release's own AttentionBackendEnum (`vllm/v1/attention/backends/registry.py`, generated
    per release), or None if kvplan has no data for it. A backend kvplan models that the release does not name
    (ULTRAQUANT and FLASH_ATTN_MLA_SPARSE_FA4 before 0.32, ...) is in none of its priority lists."""
    rel = release_of(engine)
    names = rel.attention_backends if rel is not None else ()
    return frozenset(names) if names else None


def kv_cache_dtypes_for(engine: EngineVersion) -> tuple[str, ...] | None:
    """The release's own `--kv-cache-dtype` choices (vLLM's order), or None if kvplan has no data for it."""
    rel = release_of(engine)
    return rel.kv_cache_dtypes if rel is not None else None


def minor(version: Version) -> str:
    """`(0, 19, 1)` -> `0.19`."""
    return f"{version[0]}.{version[1]}"
