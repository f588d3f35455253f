"""Rules that decide the KV cache dtype: model dtype, explicit flag, checkpoint schemes, storage."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kvplan.ingest.families import DTYPE_ALIASES
from kvplan.model.arch import LayerArch
from kvplan.model.vocab import NO_KV_KINDS, QuantMode, Severity, quant_mode_of
from kvplan.rules.base import Emit, declare
from kvplan.rules.context import KV_CACHE_DTYPE_SET_BY, RuleContext
from kvplan.rules.state import LayerState, Set, decides_global, decides_layer

V = "vllm-0.33: "


@declare(code="KV100", name="model-dtype", kind="decision", scope="global", family="dtype",
         severity="info", summary="The model dtype ('auto' KV) follows --dtype, else the config's dtype.",
         why="'auto' and skipped layers store KV in the model dtype. vLLM runs float32 and dtype-less "
             "configs, and configs naming a dtype it does not run models in (float64, 8-bit types), in "
             "bfloat16 (pooling models in float16), and falls back to float16 on GPUs without bfloat16 "
             "(before SM80). A config dtype that is not a torch dtype at all is an input error (exit 2).",
         fix="Pass --dtype to choose the model dtype explicitly.",
         references=("vllm/config/model.py::_get_and_verify_dtype",))
@decides_global("model_dtype")
def model_dtype(ctx: RuleContext) -> Iterator[Set]:
    f = ctx.flags
    if f.dtype != "auto":
        d = DTYPE_ALIASES[f.dtype]
        yield Set("model_dtype", d, f"--dtype {f.dtype}")
        return
    cd = ctx.arch.config_dtype
    why = ("config has no torch_dtype (read as float32)" if cd is None else f"config dtype {cd}" if cd == "float32"
           else f"config dtype {cd} (not a dtype vLLM runs a model in: it falls back to its preferred one)")
    if cd not in ("bfloat16", "float16") and ctx.arch.pooling:
        d, fact = "float16", f"{why}: vLLM runs a pooling model in float16 with --dtype auto"
    elif cd not in ("bfloat16", "float16"):
        d, fact = "bfloat16", f"{why}: vLLM runs it in bfloat16 with --dtype auto"
    else:
        d, fact = cd, f"config torch_dtype {cd}"
    if d == "bfloat16" and ctx.gpu is not None and not ctx.gpu.supports_bf16:
        d, fact = "float16", fact + f"; {ctx.gpu.name} has no bfloat16, vLLM uses float16"
    yield Set("model_dtype", d, fact)


@declare(code="KV101", name="explicit-dtype-wins", kind="decision", scope="global", family="dtype",
         severity="info", summary="An explicit --kv-cache-dtype always wins over the checkpoint's scheme.",
         why="Since vLLM PR #42782 a user's explicit choice is never rewritten by a checkpoint "
             "kv_cache_scheme; only 'auto' is resolved from the checkpoint.",
         fix="Leave --kv-cache-dtype unset (auto) to use the checkpoint's KV scheme.",
         references=("https://github.com/vllm-project/vllm/pull/42782",
                     "vllm/utils/torch_utils.py::resolve_kv_cache_dtype_string"))
@decides_global("kv_cache_dtype")
def explicit_dtype_wins(ctx: RuleContext) -> Iterator[Set]:
    f = ctx.flags
    if f.kv_cache_dtype != "auto":
        yield Set("kv_cache_dtype", f.kv_cache_dtype,
                  f"--kv-cache-dtype {f.kv_cache_dtype} passed explicitly")
    else:
        yield Set("kv_cache_dtype", "auto",
                  "--kv-cache-dtype auto" if f.kv_cache_dtype_explicit else "--kv-cache-dtype not set (auto)")


_MODELOPT_STR = {"fp8": "fp8_e4m3", "nvfp4": "nvfp4"}


def modelopt_resolution(value: object) -> tuple[str, str]:
    """vLLM `get_kv_cache_quant_algo_string` + MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP: (resolved, how).

    A dict scheme first becomes the algorithm string ('fp8' / 'nvfp4'), which is then mapped like
    the string form (fp8 -> fp8_e4m3), as vLLM 0.33 does (verified against vLLM's own function).
    """
    if isinstance(value, dict):
        if value.get("dynamic") is False and value.get("num_bits") == 8 and value.get("type") == "float":
            return "fp8_e4m3", "kv_cache_scheme {dynamic: false, num_bits: 8, type: float} = 'fp8'"
        if value.get("num_bits") == 4 and value.get("type") == "float":
            return "nvfp4", "kv_cache_scheme {num_bits: 4, type: float} = 'nvfp4'"
        return "auto", f"kv_cache_scheme {value} is not a scheme vLLM maps"
    s = str(value).lower()
    if s in _MODELOPT_STR:
        return _MODELOPT_STR[s], f"kv_cache_quant_algo {value!r}"
    return "auto", f"unknown kv_cache_quant_algo {value!r}"


@declare(code="KV102", name="modelopt-auto-resolution", kind="decision", scope="global", family="dtype",
         severity="warning", summary="'auto' becomes the ModelOpt checkpoint's KV dtype at config time.",
         why="vLLM resolves 'auto' once in create_engine_config from quantization_config (or a "
             "hf_quant_config.json): FP8 -> fp8_e4m3, NVFP4 -> nvfp4; an fp8 dict needs dynamic: false. "
             "Unknown algorithms fall back to 'auto' with only a log warning.",
         fix="Use kv_cache_quant_algo FP8 or NVFP4 (or pass --kv-cache-dtype explicitly).",
         references=("vllm/utils/torch_utils.py::get_kv_cache_quant_algo_string",))
@decides_global("kv_cache_dtype")
def modelopt_auto(ctx: RuleContext) -> Iterator[Set]:
    q = ctx.quant
    if ctx.kv_cache_dtype != "auto" or not (q.quant_method or "").startswith("modelopt"):
        return
    if not q.modelopt_kv_value:
        return
    resolved, how = modelopt_resolution(q.modelopt_kv_value)
    if resolved != "auto":
        yield Set("kv_cache_dtype", resolved,
                  f"ModelOpt checkpoint ({q.source}) {q.modelopt_kv_field}: {how} -> {resolved}")


_MODEL_CONFIG_REF = "vllm/model_executor/models/config.py"
_GLM5_NEXT = ("Glm5NextForCausalLM", "Glm5NextForConditionalGeneration")


def _sm100_family(ctx: RuleContext) -> bool:
    """`current_platform.is_cuda() and is_device_capability_family(100)` for the --gpu given."""
    cc = ctx.gpu.compute_capability if ctx.gpu is not None else None
    return cc is not None and cc[0] == 10


@dataclass(frozen=True)
class ModelClassRewrite:
    """One branch of a model class's verify_and_update_config (vllm/model_executor/models/config.py) that rewrites
    the resolved --kv-cache-dtype: where it applies, the dtype it rewrites, what it makes of it and vLLM's log line
    (the fact kvplan records)."""

    applies: Callable[[RuleContext], bool]
    before: str
    after: Callable[[RuleContext], str]
    fact: Callable[[RuleContext], str]


def _is_arch(*names: str) -> Callable[[RuleContext], bool]:
    return lambda ctx: ctx.arch.architecture in names


def _has_indexer(ctx: RuleContext) -> bool:
    return any(la.mla is not None and la.mla.index_topk is not None for la in ctx.arch.layers)


def _mistral_large4(ctx: RuleContext) -> bool:
    """Mistral Large 4, or Pixtral with a Mistral Large 4 text model (PixtralForConditionalGenerationConfig
    calls the same hook), in a release that has it."""
    return ctx.arch.text_model_type == "mistral_large_4" and ctx.engine_has("mistral_large4_fp8_ds_mla")


def _rocm(ctx: RuleContext) -> bool:
    return ctx.gpu is not None and ctx.gpu.profile is not None and ctx.gpu.profile.vendor == "amd"


def _gpu_name(ctx: RuleContext) -> str:
    return ctx.gpu.name if ctx.gpu is not None else ""


def _const(value: str) -> Callable[[RuleContext], str]:
    return lambda ctx: value


_GLM5_REWRITES: tuple[ModelClassRewrite, ...] = (
    ModelClassRewrite(  # GlmMoeDsaForCausalLM.verify_and_update_config
        applies=lambda ctx: _is_arch("GlmMoeDsaForCausalLM")(ctx) and _sm100_family(ctx), before="auto",
        after=_const("fp8_e4m3"),
        fact=lambda ctx: f"GlmMoeDsaForCausalLM on {_gpu_name(ctx)} (SM100 family): 'Using fp8 kv-cache for "
                         "GlmMoeDsaForCausalLM on SM10x'"),
    ModelClassRewrite(  # Glm5NextModelConfig.verify_and_update_config
        applies=lambda ctx: _is_arch(*_GLM5_NEXT)(ctx) and _sm100_family(ctx) and _has_indexer(ctx), before="auto",
        after=_const("fp8"),
        fact=lambda ctx: f"{ctx.arch.architecture} with an indexer on the SM100 family: 'Using fp8 KV cache for "
                         "GLM-5.3-Flash'"),
    ModelClassRewrite(  # DeepseekV32ForCausalLM.verify_and_update_config
        applies=_is_arch("DeepseekV32ForCausalLM"), before="bfloat16", after=_const("auto"),
        fact=lambda ctx: "DeepseekV32ForCausalLM: 'Using bfloat16 kv-cache for DeepSeekV3.2' (--kv-cache-dtype "
                         "bfloat16 becomes auto)"),
)
"""KV117's rows."""

_MISTRAL_LARGE4_REWRITES: tuple[ModelClassRewrite, ...] = (
    ModelClassRewrite(  # MistralLarge4ForCausalLM.verify_and_update_config (0.34)
        applies=lambda ctx: _mistral_large4(ctx) and ctx.arch.fp8_kv_cache, before="auto",
        after=lambda ctx: "fp8" if _rocm(ctx) else "fp8_ds_mla",
        fact=lambda ctx: f"MistralLarge4ForCausalLM with fp8_kv_cache on {_gpu_name(ctx) or 'CUDA (no --gpu)'}: "
                         "'auto' becomes " + ("fp8 (ROCm sparse MLA has no fp8_ds_mla layout)" if _rocm(ctx)
                                             else "fp8_ds_mla")),
    ModelClassRewrite(
        applies=_mistral_large4, before="bfloat16", after=_const("auto"),
        fact=lambda ctx: "MistralLarge4ForCausalLM: an explicit --kv-cache-dtype bfloat16 becomes auto"),
)
"""KV150's rows."""


def _rewrite(ctx: RuleContext, rows: tuple[ModelClassRewrite, ...]) -> Iterator[Set]:
    """The first row that applies to the resolved --kv-cache-dtype rewrites it."""
    row = next((r for r in rows if r.before == ctx.kv_cache_dtype and r.applies(ctx)), None)
    if row is not None:
        yield Set("kv_cache_dtype", row.after(ctx), row.fact(ctx))


@declare(code="KV117", name="model-class-kv-cache-dtype", kind="decision", scope="global", family="dtype",
         severity="info",
         summary="Some model classes rewrite the KV cache dtype at config time (GLM-5 on SM100: fp8).",
         why="vLLM runs each architecture's verify_and_update_config after resolving --kv-cache-dtype: "
             "GlmMoeDsaForCausalLM (GLM-5) turns 'auto' into fp8_e4m3 on the CUDA SM100 family, Glm5Next "
             "turns 'auto' into fp8 there when the config has an indexer (index_topk), and DeepseekV32ForCausalLM "
             "turns an explicit bfloat16 into 'auto'. These depend on the GPU, so kvplan applies the SM100 ones "
             "only when --gpu names the GPU. (Mistral Large 4's hook, new in 0.34, is KV150: the same table.)",
         fix="Pass --kv-cache-dtype explicitly (e.g. bfloat16) to keep the model dtype on SM100.",
         references=(f"{_MODEL_CONFIG_REF}::GlmMoeDsaForCausalLM.verify_and_update_config",
                     f"{_MODEL_CONFIG_REF}::Glm5NextModelConfig.verify_and_update_config",
                     f"{_MODEL_CONFIG_REF}::DeepseekV32ForCausalLM.verify_and_update_config"))
@decides_global("kv_cache_dtype")
def model_class_kv_cache_dtype(ctx: RuleContext) -> Iterator[Set]:
    yield from _rewrite(ctx, _GLM5_REWRITES)


@declare(code="KV150", name="mistral-large4-kv-cache-dtype", kind="decision", scope="global", family="dtype",
         severity="info",
         summary="Mistral Large 4: 'auto' becomes fp8_ds_mla when the checkpoint declares an FP8 KV cache.",
         why="vLLM 0.34's MistralLarge4ForCausalLM.verify_and_update_config rewrites the resolved "
             "--kv-cache-dtype: with 'auto' and the text config's fp8_kv_cache (params.json dsa.fp8_kv_cache) "
             "the latent cache becomes fp8_ds_mla, DeepSeek's 656-byte FP8 sparse-MLA row ('Using fp8_ds_mla "
             "kv-cache for Mistral Large 4'), or plain fp8 on ROCm, whose sparse MLA has no fp8_ds_mla layout; "
             "an explicit bfloat16 becomes 'auto' (the model dtype). Pixtral with a Mistral Large 4 text model "
             "gets the same (PixtralForConditionalGenerationConfig). Without --gpu kvplan takes the CUDA branch. "
             "The same mechanism as KV117 (one table of model-class rewrites), kept under its own code.",
         fix="Pass --kv-cache-dtype bfloat16 to keep the latent cache in the model dtype; pass --gpu for an AMD "
             "GPU to see the ROCm choice.",
         references=(f"{_MODEL_CONFIG_REF}::MistralLarge4ForCausalLM.verify_and_update_config (vLLM 0.34.0)",
                     "vllm/transformers_utils/configs/mistral.py::_remap_mistral_large_4_args (fp8_kv_cache)"),
         versions=">=0.34")
@decides_global("kv_cache_dtype")
def mistral_large4_kv_cache_dtype(ctx: RuleContext) -> Iterator[Set]:
    yield from _rewrite(ctx, _MISTRAL_LARGE4_REWRITES)


# Model classes whose verify_and_update_config, after defaulting the target's cache to fp8 on SM100, sets a
# separate draft model's speculative kv_cache_dtype to 'auto' (when the speculative config names none): the
# ENGINE_FEATURES row that bounds it (None: every release modelled) and the methods it leaves alone (MTP
# layers share the target's cache; Glm5Next in 0.34 also exempts dspark, a draft kvplan does not plan).
_DRAFT_KEPT_AUTO: dict[str, str | None] = {"GlmMoeDsaForCausalLM": "glm5_draft_forced_auto",
                                           **{a: None for a in _GLM5_NEXT}}
_DRAFT_KEEPS_TARGET = ("mtp", "dspark")


def draft_kept_auto(ctx: RuleContext, method: str) -> bool:
    """True where the target's model class keeps a separate draft model's cache at 'auto' (KV117's SM100
    default rewrote the target's 'auto' and the speculative config names no kv_cache_dtype)."""
    arch = ctx.arch.architecture or ""
    if (arch not in _DRAFT_KEPT_AUTO or ctx.globals.get(KV_CACHE_DTYPE_SET_BY) != "KV117"
            or ctx.flags.speculative_kv_cache_dtype is not None or method in _DRAFT_KEEPS_TARGET):
        return False
    feature = _DRAFT_KEPT_AUTO[arch]
    return feature is None or ctx.engine_has(feature)


def draft_kv_cache_dtype(ctx: RuleContext, method: str) -> tuple[str, str]:
    """(kv_cache_dtype, why) of the draft model --speculative-config names, given the target's config-time
    context: the speculative config's kv_cache_dtype when set (SpecDecodeBaseProposer._create_draft_vllm_config
    replaces the cache config's dtype), else the target's cache_config.cache_dtype as resolved at config time
    (explicit flag, ModelOpt checkpoint, the model class's default: the draft's config shares the target's cache
    config), except where the model class kept the draft at 'auto' (`draft_kept_auto`)."""
    f = ctx.flags
    if f.speculative_kv_cache_dtype is not None:
        return f.speculative_kv_cache_dtype, f"--speculative-config kv_cache_dtype {f.speculative_kv_cache_dtype}"
    target = ctx.kv_cache_dtype
    if draft_kept_auto(ctx, method):
        return "auto", (f"{ctx.arch.architecture}.verify_and_update_config (vLLM {ctx.engine_version}) sets the "
                        f"{method} draft's kv_cache_dtype to 'auto' after defaulting the target's to {target}")
    return target, f"the draft inherits the target's cache dtype {target!r} (the target's cache config)"


@declare(code="KV118", name="draft-kv-cache-dtype", severity="info", family="dtype",
         summary="GLM-5's SM100 fp8 KV default reaches a separate draft's cache from vLLM 0.34 ('auto' before).",
         why="A separate draft model (EAGLE, EAGLE3, DFlash, draft_model) shares the target's cache config, so "
             "its KV cache takes the target's dtype unless --speculative-config sets kv_cache_dtype. GLM-5 "
             "(GlmMoeDsaForCausalLM) defaults 'auto' to fp8_e4m3 on the SM100 family (KV117); up to vLLM 0.33 "
             "it also set the draft's kv_cache_dtype to 'auto' ('a separate draft model must not inherit a "
             "default it was never validated with'), 0.34 drops that and the draft inherits fp8_e4m3. "
             "Glm5Next (fp8 with an indexer) keeps the draft at 'auto' in 0.33 and 0.34 (MTP drafts, and in "
             "0.34 DSpark drafts, share the target's). The draft's dtype changes its page and the layout.",
         fix="Set \"kv_cache_dtype\" in --speculative-config to choose the draft's KV cache dtype explicitly.",
         references=(f"{_MODEL_CONFIG_REF}::GlmMoeDsaForCausalLM.verify_and_update_config",
                     f"{_MODEL_CONFIG_REF}::Glm5NextModelConfig.verify_and_update_config",
                     "vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer._create_draft_vllm_config"))
def draft_cache_dtype(ctx: RuleContext) -> Iterator[Emit]:
    t, arch = ctx.totals, ctx.arch.architecture or ""
    draft = t.draft if t is not None else None
    if (draft is None or not draft.layers or draft.method in _DRAFT_KEEPS_TARGET or arch not in _DRAFT_KEPT_AUTO
            or ctx.globals.get(KV_CACHE_DTYPE_SET_BY) != "KV117" or ctx.flags.speculative_kv_cache_dtype is not None):
        return
    target, gpu = ctx.kv_cache_dtype, ctx.gpu.name if ctx.gpu is not None else "the GPU"
    n, stored = len(draft.layers), ", ".join(sorted({lp.dtype or "" for lp in draft.layers}))
    layers = tuple(lp.index for lp in draft.layers)
    head = (f"{arch} defaults the target's KV cache to {target} on {gpu} (SM100 family) and vLLM "
            f"{ctx.engine_version}")
    if draft_kept_auto(ctx, draft.method):
        yield Emit(f"{head} keeps the separate {draft.method} draft's cache at 'auto': its {n} layer(s) store "
                   f"{stored} ({draft.bytes_per_token} B/token per rank), next to the target's {target}.", layers,
                   fix=f"Add \"kv_cache_dtype\": \"{target}\" to --speculative-config to quantize the draft's "
                       "cache too (a smaller draft page; vLLM 0.34 does this by default).")
    else:
        yield Emit(f"{head} lets the separate {draft.method} draft inherit it (vLLM 0.33 kept the draft at "
                   f"'auto'): its {n} layer(s) store {stored} ({draft.bytes_per_token} B/token per rank).", layers,
                   fix="Add \"kv_cache_dtype\": \"auto\" to --speculative-config to keep the draft's cache in the "
                       "model dtype (as vLLM 0.33 did) if its acceptance rate drops.")


@declare(code="KV106", name="modelopt-kv-algo-ignored", severity="warning", family="dtype",
         summary="The ModelOpt KV algorithm is not one vLLM maps, so 'auto' stays unquantized.",
         why="vLLM only maps FP8 and NVFP4 (an fp8 dict needs dynamic: false); anything else "
             "logs a warning and silently keeps the KV cache in the model dtype.",
         fix="Set kv_cache_quant_algo to FP8 or NVFP4, or pass --kv-cache-dtype fp8 explicitly.",
         references=("vllm/utils/torch_utils.py::get_kv_cache_quant_algo_string",))
def modelopt_ignored(ctx: RuleContext) -> Iterator[Emit]:
    q = ctx.quant
    if ctx.flags.kv_cache_dtype != "auto" or not (q.quant_method or "").startswith("modelopt"):
        return
    if q.modelopt_kv_value:
        resolved, how = modelopt_resolution(q.modelopt_kv_value)
        if resolved == "auto":
            yield Emit(f"The checkpoint asks for KV quantization ({q.modelopt_kv_field}: {how}) but "
                       "vLLM 0.33 cannot map it and keeps the KV cache in the model dtype.")


@declare(code="KV107", name="kv-scheme-without-quant-method", severity="warning", family="dtype",
         summary="The checkpoint declares a KV scheme vLLM never reads (no quant_method).",
         why="vLLM resolves checkpoint KV schemes only through quant_method (modelopt*, "
             "compressed-tensors). A quantization_config without quant_method is not recognised, "
             "and a hf_quant_config.json beside it is not read because config.json already has a "
             "quantization_config: the KV cache silently stays in the model dtype.",
         fix="Add \"quant_method\": \"modelopt\" to quantization_config, or pass --kv-cache-dtype fp8_e4m3.",
         references=("vllm/utils/torch_utils.py::get_kv_cache_quant_algo_string",))
def kv_scheme_without_method(ctx: RuleContext) -> Iterator[Emit]:
    q = ctx.quant
    if q.declares_kv_quant and not q.quant_method and ctx.flags.kv_cache_dtype == "auto":
        yield Emit(f"{q.source} declares KV quantization ({q.modelopt_kv_field}: {q.modelopt_kv_value!r}) "
                   "but has no quant_method, so vLLM 0.33 ignores it and stores KV in "
                   f"{ctx.model_dtype}; kvplan follows vLLM here.")


@declare(code="KV103", name="compressed-tensors-auto-fp8", kind="decision", scope="layer", family="dtype",
         severity="info", summary="A compressed-tensors kv_cache_scheme turns 'auto' into fp8 per attention layer.",
         why="vLLM's Attention.__init__ rewrites 'auto' to 'fp8' when the checkpoint has a "
             "kv_cache_scheme (and rewrites cache_config.cache_dtype for layers built later). "
             "MLAAttention has no such override.",
         fix="Pass --kv-cache-dtype explicitly to choose another dtype.",
         references=("vllm/model_executor/layers/attention/attention.py::Attention.__init__",
                     "https://github.com/vllm-project/vllm/pull/42782"))
@decides_layer("kv_cache_dtype", "cache_config_dtype")
def compressed_tensors_auto(ctx: RuleContext, la: LayerArch, st: LayerState) -> Iterator[Set]:
    if ctx.quant.ct_kv_cache_scheme is None or la.kind in NO_KV_KINDS or st.kv_cache_dtype == "fp8":
        return
    # Before PR #42782 (vLLM < 0.22 by kvplan's mapping) the override ignored the explicit flag.
    predates = f"vLLM {ctx.engine.version_str} predates PR #42782: the compressed-tensors kv_cache_scheme " \
               "overrides the explicit --kv-cache-dtype"
    explicit_kept = ctx.engine_has("explicit_kv_cache_dtype_wins")
    if la.kind == "mla":
        # MLAAttention has no override: it reads cache_config.cache_dtype, which an earlier Attention
        # layer's override may have rewritten to fp8.
        if st.cache_config_dtype != "fp8":
            return
        if st.kv_cache_dtype == "auto":
            yield Set("kv_cache_dtype", "fp8", "an earlier Attention layer rewrote cache_config.cache_dtype "
                                               "to fp8 (compressed-tensors kv_cache_scheme)")
        elif not explicit_kept:
            yield Set("kv_cache_dtype", "fp8",
                      predates + " (cache_config.cache_dtype rewritten by an earlier Attention layer)")
        return
    if st.kv_cache_dtype == "auto":
        yield Set("kv_cache_dtype", "fp8", "compressed-tensors kv_cache_scheme present and the layer's dtype is 'auto'")
    elif not explicit_kept:
        yield Set("kv_cache_dtype", "fp8", predates)
    else:
        return
    # Attention.__init__ also rewrites cache_config.cache_dtype: the layers built after this one read fp8.
    yield Set("cache_config_dtype", "fp8", "Attention.__init__ rewrote cache_config.cache_dtype to fp8")


@declare(code="KV108", name="mla-ignores-kv-scheme", severity="warning", family="dtype",
         summary="MLA layers ignore a compressed-tensors kv_cache_scheme: KV stays unquantized.",
         why="MLAAttention.__init__ has no kv_cache_scheme override and compressed-tensors attaches no "
             "KV method to MLA layers, so the checkpoint's FP8 KV scheme and scales are unused.",
         fix="Pass --kv-cache-dtype fp8 to quantize the MLA latent cache (scales will be 1.0).",
         references=("vllm/model_executor/layers/attention/mla_attention.py::MLAAttention.__init__",))
def mla_ignores_scheme(ctx: RuleContext) -> Iterator[Emit]:
    if ctx.quant.ct_kv_cache_scheme is None or ctx.flags.kv_cache_dtype != "auto":
        return
    mla = [lp.index for lp in ctx.layers if lp.kind == "mla" and lp.quant_mode is QuantMode.none]
    if mla:
        yield Emit("The checkpoint's compressed-tensors kv_cache_scheme is not applied to MLA layers; "
                   f"{len(mla)} MLA layer(s) keep {ctx.model_dtype} KV.", tuple(mla))


@declare(code="KV105", name="explicit-dtype-overrides-checkpoint", severity="warning", family="dtype",
         summary="--kv-cache-dtype overrides the checkpoint's KV scheme; its calibrated scales go unused.",
         why="The explicit flag wins (PR #42782). Unless the flag names the same per-tensor FP8 format "
             "the checkpoint was calibrated for, the checkpoint's k/v scales are ignored.",
         fix="Drop --kv-cache-dtype (auto) to use the checkpoint's scheme, or keep it deliberately.",
         references=("https://github.com/vllm-project/vllm/pull/42782",))
def explicit_overrides(ctx: RuleContext) -> Iterator[Emit]:
    q, f = ctx.quant, ctx.flags
    if f.kv_cache_dtype == "auto":
        return
    ckpt = None
    if q.ct_kv_cache_scheme is not None:
        if not ctx.engine_has("explicit_kv_cache_dtype_wins"):
            return  # before PR #42782 the checkpoint wins instead (KV109)
        ckpt = "fp8"
    elif (q.quant_method or "").startswith("modelopt") and q.modelopt_kv_value:
        ckpt = modelopt_resolution(q.modelopt_kv_value)[0]
        ckpt = None if ckpt == "auto" else ckpt
    if ckpt is None:
        return
    user_mode, ck_mode = quant_mode_of(f.kv_cache_dtype), quant_mode_of(ckpt)
    same = user_mode is ck_mode and f.kv_cache_dtype != "fp8_e5m2"
    src = q.source or "checkpoint"
    if same:
        yield Emit(f"--kv-cache-dtype {f.kv_cache_dtype} matches the checkpoint's KV scheme ({src}: {ckpt}); "
                   "its calibrated scales still load.", severity=Severity.info,
                   fix="Nothing to do; 'auto' would give the same plan.")
    else:
        yield Emit(f"--kv-cache-dtype {f.kv_cache_dtype} overrides the checkpoint's KV scheme ({src}: {ckpt}); "
                   "the checkpoint's calibrated k/v scales will be ignored.")


_STORAGE = {
    "fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "fp8_inc": "float8_e4m3fn",
    "fp8_ds_mla": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2", "int8_per_token_head": "int8",
    "fp8_per_token_head": "float8_e4m3fn", "int4_per_token_head": "int4",
    "nvfp4": "fp4_e2m1", "nvfp4_4over6": "fp4_e2m1", "nvfp4_ds_mla": "fp4_e2m1",
}


@declare(code="KV110", name="storage-dtype", kind="decision", scope="layer", family="dtype",
         severity="info", summary="The layer's kv_cache_dtype string fixes its stored element type and quant mode.",
         why="vLLM maps the string through STR_DTYPE_TO_TORCH_DTYPE and get_kv_quant_mode: 'auto' is "
             "the model dtype, fp8 strings store e4m3 bytes (e4m3fnuz on ROCm MI300), per-token-head "
             "strings store int8/fp8 with inline fp32 scales.",
         fix="Choose another --kv-cache-dtype.",
         references=("vllm/v1/kv_cache_interface.py::get_kv_quant_mode", "vllm/utils/torch_utils.py"))
@decides_layer("dtype", "quant_mode")
def storage_dtype(ctx: RuleContext, la: LayerArch, st: LayerState) -> Iterator[Set]:
    d = st.kv_cache_dtype
    if d is None:
        return
    if d in ("auto", "float16", "bfloat16"):
        stored = ctx.model_dtype if d == "auto" else d
        yield Set("dtype", stored, f"kv_cache_dtype {d!r} stores the {'model dtype' if d == 'auto' else 'dtype named'}")
    else:
        stored = _STORAGE.get(d, "packed")
        if stored == "float8_e4m3fn" and ctx.gpu is not None and ctx.gpu.fp8 == "e4m3fnuz":
            stored = "float8_e4m3fnuz"
        yield Set("dtype", stored, f"kv_cache_dtype {d!r}")
    mode = quant_mode_of(d)
    yield Set("quant_mode", mode, f"get_kv_quant_mode({d!r}) = {mode.value}")


DSV4_REF = "vllm/models/deepseek_v4/attention.py::_resolve_dsv4_kv_cache_dtype"


def _dsv4_accepts(kv_cache_dtype: str) -> bool:
    """DeepSeek-V4's fp8_ds_mla layout takes `auto` and every fp8 spelling; vLLM refuses the rest."""
    return kv_cache_dtype == "auto" or kv_cache_dtype.startswith("fp8")


@declare(code="KV114", name="deepseek-v4-fp8-ds-mla", kind="decision", scope="layer", family="dtype",
         severity="info",
         summary="DeepSeek-V4 layers store their KV in DeepSeek's fp8_ds_mla format whatever fp8 spelling is asked.",
         why="vLLM 0.33's DeepseekV4Attention (FlashMLA layout, the CUDA default) resolves the global "
             "--kv-cache-dtype itself: 'auto' becomes fp8, any fp8 becomes fp8_ds_mla (UE8M0 block-scaled fp8 "
             "packed as uint8: 448 fp8 NoPE + 64 bf16 RoPE + 8 B scales = 584 B per stored state); it reads the "
             "cache config, not --kv-cache-dtype-skip-layers (measured with vLLM's own model class).",
         fix="Nothing to do: budget the fp8_ds_mla sizes; --kv-cache-dtype-skip-layers does not change them.",
         references=(DSV4_REF,))
@decides_layer("kv_cache_dtype")
def dsv4_fp8_ds_mla(ctx: RuleContext, la: LayerArch, st: LayerState) -> Iterator[Set]:
    g = ctx.kv_cache_dtype
    if la.dsv4_compress_ratio is not None and _dsv4_accepts(g) and st.kv_cache_dtype != "fp8_ds_mla":
        yield Set("kv_cache_dtype", "fp8_ds_mla", f"DeepSeek-V4 attention resolves cache dtype {g!r} to fp8_ds_mla")


SPARSE_MLA_REF = "vllm/model_executor/layers/attention/mla_attention.py::_canonicalize_sparse_mla_kv_cache_dtype"


@declare(code="KV121", name="sparse-mla-fp8-ds-mla", kind="decision", scope="layer", family="dtype",
         severity="info",
         summary="On the sparse FlashMLA backend a sparse-MLA layer stores an fp8 KV cache as fp8_ds_mla.",
         why="vLLM's MLAAttention selects the layer's backend, then rewrites its cache dtype for it: on "
             "FLASHMLA_SPARSE any quantized dtype but nvfp4_ds_mla becomes fp8_ds_mla (512 fp8 NoPE + 16 B scales + "
             "64 bf16 RoPE: 656 B per token instead of the 576 B fp8 latent), on FLASHINFER_MLA_SPARSE_SM120 "
             "'auto', 'fp8' and 'fp8_e4m3' do (vLLM 0.33.0 and 0.34.0; "
             "measured with the capacity oracle on the CUDA platform, cases_gpu_backends.json). Other sparse "
             "backends keep the dtype (FlashInfer's SM100 sparse backend: the 576 B fp8 latent). Needs --gpu.",
         fix="Nothing to do: budget the fp8_ds_mla size, or pass --attention-backend to pick another sparse backend.",
         references=(SPARSE_MLA_REF,))
@decides_layer("kv_cache_dtype")
def sparse_mla_fp8_ds_mla(ctx: RuleContext, la: LayerArch, st: LayerState) -> Iterator[Set]:
    d = st.kv_cache_dtype
    if (ctx.gpu is None or ctx.gpu.profile is None or la.kind != "mla" or la.mla is None or not la.mla.index_topk
            or la.dsv4_compress_ratio is not None or d is None):
        return
    from kvplan.rules.backend import backend_choice

    ch = backend_choice(ctx, la, d)  # the backend's _canonicalize_sparse_mla_kv_cache_dtype (kvplan.backends)
    to = ch.effective_kv_cache_dtype
    if ch.backend and to and to != d:
        yield Set("kv_cache_dtype", to, f"{ch.backend} serves cache dtype {d!r} as {to}")


@declare(code="KV115", name="deepseek-v4-needs-fp8", severity="error", family="dtype",
         summary="DeepSeek-V4's fp8_ds_mla layout only supports an fp8 KV cache: vLLM refuses other dtypes.",
         why="vLLM 0.33's DeepseekV4Attention raises 'DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache' "
             "while building the model when --kv-cache-dtype is neither auto nor an fp8 spelling.",
         fix="Use --kv-cache-dtype fp8 (or auto), or a backend that supports a bfloat16 KV cache.",
         references=(DSV4_REF,))
def dsv4_needs_fp8(ctx: RuleContext) -> Iterator[Emit]:
    g = ctx.kv_cache_dtype
    layers = tuple(la.index for la in ctx.arch.layers if la.dsv4_compress_ratio is not None)
    if layers and not _dsv4_accepts(g):
        yield Emit(f"DeepSeek-V4 fp8_ds_mla layout only supports fp8 kv-cache, got {g}: vLLM stops while "
                   "building the model.", layers)


# Model classes of vLLM 0.33 that build only with some --kv-cache-dtype values (module suffix -> the
# values, whether vLLM checks each layer's (after skip layers) or the global one, what it asserts, and
# which layers' attention class asserts it: all, or only the full-attention (windowless) ones).
@dataclass(frozen=True)
class _ClassDtypes:
    accepted: tuple[str, ...]
    per_layer: bool
    why: str
    full_layers_only: bool = False


_ACCEPTED_BY_CLASS: dict[str, _ClassDtypes] = {
    ".flint": _ClassDtypes(("auto", "bfloat16"), True, "Flint's decoder asserts its attention's kv_cache_dtype is "
                           "auto or bfloat16 (its fused kernels write the cache in FlashInfer's bfloat16 layout)"),
    ".deepseek_v41": _ClassDtypes(("auto", "fp8"), False, "DeepSeek-V4.1's packed FlashMLA KV layout (the CUDA "
                                  "default) takes --kv-cache-dtype auto or fp8 only"),
    ".dots3_note": _ClassDtypes(("auto", "bfloat16", "float16"), True, "dots3-note's full-attention layers run "
                                "sparse MLA on FlashAttention's sparse MLA kernel, which takes only a 16-bit KV "
                                "cache (its sliding-window layers take fp8)", full_layers_only=True),
}


@declare(code="KV119", name="model-class-refuses-kv-cache-dtype", severity="error", family="dtype",
         summary="The model class refuses this --kv-cache-dtype: vLLM stops while building the model.",
         why="Some vLLM 0.33 model classes accept only some KV cache dtypes and fail model construction "
             "otherwise (measured with vLLM's own model classes on the architecture oracle): Flint's decoder "
             "asserts every attention layer's kv_cache_dtype is 'auto' or 'bfloat16' (its fused kernels write "
             "the cache in FlashInfer's bfloat16 layout); DeepSeek-V4.1's packed FlashMLA layout raises for "
             "anything but 'auto' or 'fp8' (fp8_e4m3 included; 16-bit dtypes are KV115); dots3-note's full-attention "
             "layers build FlashAttention's sparse MLA impl, which raises for any 8-bit KV cache (its "
             "sliding-window layers take one).",
         fix="Use a --kv-cache-dtype the model class takes (Flint: auto or bfloat16, or skip every layer; "
             "DeepSeek-V4.1: auto or fp8; dots3-note: auto / bfloat16, or skip its full-attention layers).",
         references=("vllm/models/flint/model.py::FlintAttention.__init__",
                     "vllm/models/deepseek_v41/attention.py::_resolve_dsv4_kv_cache_dtype",
                     "vllm/v1/attention/backends/mla/flashattn_mla_sparse.py::FlashAttnMLASparseImpl.__init__"))
def refused_by_model_class(ctx: RuleContext) -> Iterator[Emit]:
    from kvplan.ingest.architectures import registry

    module = (registry()["architectures"].get(ctx.arch.architecture or "") or {}).get("vllm_module", "")
    entry = next((e for suffix, e in _ACCEPTED_BY_CLASS.items() if module.endswith(suffix)), None)
    if entry is None:
        return
    accepted, per_layer, why = entry.accepted, entry.per_layer, entry.why
    g = ctx.kv_cache_dtype
    if per_layer:
        checked = [lp for lp in ctx.layers if not (entry.full_layers_only and lp.sliding_window is not None)]
        bad = tuple(lp.index for lp in checked if lp.kv_cache_dtype not in (None, *accepted))
        dtypes = ", ".join(sorted({lp.kv_cache_dtype or "" for lp in ctx.layers if lp.index in bad}))
    else:  # the global cache dtype; one KV115 already refuses (16-bit dtypes on the packed layout)
        refused = g not in accepted and _dsv4_accepts(g)
        bad = tuple(la.index for la in ctx.arch.layers if la.kind not in NO_KV_KINDS) if refused else ()
        dtypes = g
    if bad:
        yield Emit(f"{ctx.arch.architecture}: {why}; kv_cache_dtype {dtypes} makes vLLM stop while building "
                   "the model.", bad)
