"""Rules that depend on the engine release modelled (`--engine vllm==X.Y.Z`).

Each rule reads the version ranges in `kvplan.backends.vllm_rows.ENGINE_FEATURES` (PR merge dates
mapped to releases, assumptions stated there); none of them fires for the default vllm==0.33.0
except where 0.33 itself behaves so (KV002 lives in `kvplan.rules.flags`).
"""
from __future__ import annotations

from collections.abc import Iterator

from kvplan.model.vocab import NO_KV_KINDS, QuantMode
from kvplan.rules.base import Emit, Subject, declare
from kvplan.rules.context import FlagsContext, RuleContext

_PR = "https://github.com/vllm-project/vllm/pull/"


def _release(ctx: FlagsContext) -> str:
    return f"vLLM {ctx.engine.version_str}"


@declare(code="KV003", name="deprecated-flag", severity="warning", family="flags",
         summary="A flag the modelled release still accepts but has deprecated (--calculate-kv-scales).",
         why="From PR #37201 until its removal (PR #49389) vLLM logged a DeprecationWarning for "
             "--calculate-kv-scales: it computes k/v/q scales from the first forward pass only "
             "(amax/200 for q and k, amax/100 for v), then freezes them; that first step runs "
             "without CUDA graphs, and a checkpoint q_scale disables it for the layer. Upgrading "
             "past the removal turns the launch line into a startup error.",
         fix="Drop the flag: use a checkpoint with calibrated k/v scales (ModelOpt, llm-compressor, "
             "`kvplan calibrate`) or a per-token-head KV dtype with dynamic scales.",
         references=(_PR + "37201", _PR + "49389", _PR + "37565"), versions=">=0.18,<0.28")
def deprecated_flag(ctx: FlagsContext) -> Iterator[Emit]:
    if not ctx.flags.calculate_kv_scales or not ctx.engine_has("calculate_kv_scales"):
        return
    if ctx.engine_has("calculate_kv_scales_deprecated"):
        yield Emit(f"--calculate-kv-scales is deprecated in {_release(ctx)} (PR #37201) and removed "
                   "in 0.28 (PR #49389): scales come from the first forward pass only, then stay "
                   "frozen; newer releases reject the flag at startup.")


# Flags added in a later release than the oldest one kvplan models: flag -> ENGINE_FEATURES name.
_VERSIONED_FLAGS = {"--kv-cache-dtype-skip-layers": "kv_cache_dtype_skip_layers"}


@declare(code="KV004", name="flag-not-in-release", severity="error", family="flags",
         summary="A flag a later vLLM release added (e.g. --kv-cache-dtype-skip-layers before 0.19): vLLM exits.",
         why="vLLM's argument parser rejects flags it does not know ('unrecognized arguments'), so "
             "the launch fails; the behaviour the flag selects (bf16 skip layers) does not exist in "
             "that release, and kvplan does not apply it to the plan.",
         fix="Upgrade vLLM to the release named in the message, or drop the flag.",
         references=(_PR + "33695", "kvplan/data/vllm/history.json (each release's own option table)"))
def flag_not_in_release(ctx: RuleContext) -> Iterator[Emit]:
    from kvplan.backends.vllm_rows import engine_feature
    for e in ctx.flags.flag_errors:  # the release's own parser: a flag only later releases have
        if e.kind == "unknown" and e.added_in is not None:
            yield Emit(f"{e.flag} does not exist in {_release(ctx)}: vLLM {e.added_in} added it, so vLLM exits "
                       f"with \"{e.message}\".", fix=f"Upgrade to vLLM >= {e.added_in}, or drop {e.flag}.",
                       subject=Subject(flag=e.flag))
    if ctx.flags.kv_cache_dtype_skip_layers and not ctx.engine_has("kv_cache_dtype_skip_layers"):
        feat = engine_feature(_VERSIONED_FLAGS["--kv-cache-dtype-skip-layers"])
        first = feat.versions.lstrip(">=")
        yield Emit(f"--kv-cache-dtype-skip-layers does not exist in {_release(ctx)}: it came with PR "
                   f"#33695 (first in {first} by kvplan's mapping), so vLLM exits with "
                   "'unrecognized arguments' and no layer is skipped.",
                   fix=f"Upgrade to vLLM >= {first}, or drop --kv-cache-dtype-skip-layers.")
    if ctx.flags.speculative_kv_cache_dtype is not None and not ctx.engine_has("speculative_config_kv_cache_dtype"):
        first = engine_feature("speculative_config_kv_cache_dtype").versions.lstrip(">=")
        yield Emit(f"--speculative-config kv_cache_dtype does not exist in {_release(ctx)}: SpeculativeConfig "
                   "rejects the key ('Unexpected keyword argument'), so vLLM exits; it came with PR #48787 (first "
                   f"in {first} by kvplan's reading of the release wheels).",
                   fix=f"Upgrade to vLLM >= {first}, or drop kv_cache_dtype from --speculative-config (the draft "
                       "then takes --kv-cache-dtype).", subject=Subject(flag="--speculative-config"))


@declare(code="KV005", name="kv-dtype-not-in-release", severity="error", family="dtype",
         summary="The --kv-cache-dtype value does not exist in the modelled release.",
         why="CacheConfig validates the dtype string against the release's own list and raises "
             "'Invalid kv_cache_dtype' at startup; per-token-head INT8/FP8 KV (PR #38378) came in 0.20.",
         fix="Upgrade vLLM, or pick a dtype the release has (fp8, fp8_e4m3, fp8_e5m2, auto, ...).",
         references=(_PR + "38378", "vllm/config/cache.py::CacheConfig._validate_cache_dtype"))
def kv_dtype_not_in_release(ctx: RuleContext) -> Iterator[Emit]:
    from kvplan.backends.engines import kv_cache_dtypes_for
    valid = kv_cache_dtypes_for(ctx.engine)
    kv = ctx.flags.kv_cache_dtype
    if valid is not None and kv not in valid:
        from kvplan.releases import known_releases
        layers = tuple(lp.index for lp in ctx.layers if lp.kv_cache_dtype == kv)
        key = ctx.engine.version or (0, 0, 0)
        added = next((r.version for r in known_releases() if r.version_tuple > key and kv in r.kv_cache_dtypes), None)
        since = f"vLLM {added} added it" if added else "no release kvplan knows has it"
        yield Emit(f"Invalid kv_cache_dtype: {kv!r} in {_release(ctx)} ({since}; its values: {', '.join(valid)}); "
                   "vLLM rejects the value at startup.", layers)


@declare(code="KV009", name="engine-tables-from-0-33", severity="info", family="engine",
         summary="A release without oracle-verified backend rows is planned with 0.33's rows plus dated differences.",
         why="kvplan's attention-backend rows and their versioned differences are checked against the own "
             "attention selector of the releases in BACKEND_ORACLE_RELEASES (scripts/oracle/backend_oracle.py: "
             "the backend vLLM picks and the reasons it refuses the others, for a grid of head sizes, dtypes, "
             "block sizes, windows, sinks and MLA on CUDA SM80 to SM120 and ROCm gfx90a to gfx950). For "
             "another release kvplan applies the differences it has dated (flag removals, skip layers, "
             "per-token-head dtypes, the FlashInfer skip-layer crash, explicit-dtype-wins) and assumes the "
             "backend rows held as in 0.33. The per-layer decisions (KV dtype, quant mode, window, geometry) of "
             "the releases in ORACLE_VERIFIED_RELEASES were checked against that release's own code on "
             "kvplan's corpus; other releases are approximated.",
         fix="Plan for a release whose backend rows are verified (`kvplan engines`, column 'backend rows'), or "
             "check the listed differences.",
         references=("kvplan/backends/vllm_rows.py::BACKEND_ORACLE_RELEASES",
                     "kvplan/backends/vllm_rows.py::ENGINE_FEATURES",
                     "kvplan/backends/vllm_rows.py::ORACLE_VERIFIED_RELEASES"))
def tables_from_033(ctx: RuleContext) -> Iterator[Emit]:
    from kvplan.backends.engines import tables_exact
    from kvplan.backends.vllm_rows import oracle_verified
    if tables_exact(ctx.engine):
        return
    verified = oracle_verified(ctx.engine)
    if verified:
        yield Emit(f"{_release(ctx)}: per-layer KV decisions checked against vLLM {verified}'s own code on "
                   "kvplan's corpus; the attention-backend rows (--gpu) are 0.33's plus the dated "
                   "differences, not checked against this release's selector (see `kvplan rule KV009`).")
    else:
        yield Emit(f"{_release(ctx)} is planned with vLLM 0.33.0's backend tables and dtype rules plus "
                   "the dated differences kvplan models (see `kvplan rule KV009`); other changes "
                   "between the releases are not modelled.")


@declare(code="KV109", name="checkpoint-overrides-explicit-dtype", severity="warning", family="dtype",
         summary="Before PR #42782 a compressed-tensors kv_cache_scheme overrode an explicit --kv-cache-dtype.",
         why="Until PR #42782 Attention.__init__ set every layer to 'fp8' whenever the checkpoint had a "
             "kv_cache_scheme, whatever --kv-cache-dtype said, and rewrote cache_config.cache_dtype; "
             "an explicit bfloat16 (e.g. for a draft model without an FP8 backend) was silently lost.",
         fix="Upgrade to vLLM >= 0.22 (PR #42782) to keep the explicit dtype, or accept fp8.",
         references=(_PR + "42782",), versions="<0.22")
def checkpoint_overrides_explicit(ctx: RuleContext) -> Iterator[Emit]:
    f = ctx.flags
    if ctx.quant.ct_kv_cache_scheme is None or f.kv_cache_dtype in ("auto", "fp8") \
            or ctx.engine_has("explicit_kv_cache_dtype_wins"):
        return
    hit = tuple(lp.index for lp in ctx.layers if lp.kv_cache_dtype == "fp8" and lp.kind not in NO_KV_KINDS)
    if hit:
        yield Emit(f"{_release(ctx)} predates PR #42782: the checkpoint's compressed-tensors "
                   f"kv_cache_scheme forces 'fp8' on {len(hit)} layer(s) although --kv-cache-dtype "
                   f"{f.kv_cache_dtype} was passed.", hit)


@declare(code="KV704", name="flashinfer-skip-layer-crash", severity="error", family="backend",
         summary="FP8 KV + skip layers on FlashInfer crashes at the first forward before PR #39002.",
         why="Before PR #39002 the FlashInfer metadata builder read the global cache dtype, so a KV "
             "group of skipped (model-dtype) layers got FP8 queries where FlashInfer quantizes the "
             "query (SM100 family) and the first forward failed with 'Query dtype mismatch'. The "
             "fix picks the query dtype per group from kv_cache_spec.kv_quant_mode.",
         fix="Upgrade to vLLM >= 0.20 (PR #39002), drop --kv-cache-dtype-skip-layers, or force "
             "another backend with --attention-backend.",
         references=(_PR + "39002", _PR + "33695"), versions=">=0.19,<0.20")
def flashinfer_skip_crash(ctx: RuleContext) -> Iterator[Emit]:
    if ctx.gpu is None or ctx.gpu.profile is None or not ctx.engine_has("flashinfer_skip_layer_query_dtype_crash"):
        return
    from kvplan.backends.impl import hooks_for
    from kvplan.backends.select import flashinfer_group_query_dtype_crash
    fi = [lp for lp in ctx.layers if lp.kind not in NO_KV_KINDS and lp.backend is not None
          and hooks_for(lp.backend).global_dtype_queries_before_39002]
    msg = flashinfer_group_query_dtype_crash(
        ctx.engine, {lp.quant_mode for lp in fi}, ctx.kv_cache_dtype, ctx.gpu.profile,
        model_dtype=ctx.model_dtype, flashinfer_in_use=bool(fi), attention_config=ctx.flags.attention_config)
    if msg:
        skipped = tuple(lp.index for lp in fi if lp.quant_mode is QuantMode.none)
        yield Emit(f"{msg}: {_release(ctx)} gives the {len(skipped)} skipped FlashInfer layer(s) the "
                   f"global FP8 query dtype on {ctx.gpu.name} (fixed by PR #39002 in 0.20).", skipped)
