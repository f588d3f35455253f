"""Model-level facts users should know about the KV plan."""
from __future__ import annotations

from collections.abc import Iterator

from kvplan.rules.base import Emit, declare
from kvplan.rules.context import RuleContext


@declare(code="KV601", name="encoder-decoder-model", severity="warning", family="model",
         summary="Encoder-decoder model: the decoder's KV is planned; cross-attention KV is per encoder token.",
         why="vLLM 0.33 (V1 engine) runs few encoder-decoder architectures; T5-style models may not "
             "load at all, and cross-attention KV is sized by encoder length, not decoded tokens: Whisper's "
             "decoder layers each hold a CrossAttentionSpec cache for the request's encoder tokens "
             "(max_source_positions), planned as cross_attention_bytes_per_token and counted in "
             "bytes_per_request, not in bytes_per_token.",
         fix="Check the architecture is in vLLM's supported-models list before deploying.",
         references=("https://docs.vllm.ai/en/latest/models/supported_models.html",))
def enc_dec(ctx: RuleContext) -> Iterator[Emit]:
    if ctx.arch.is_encoder_decoder:
        enc = next((la.cross_attention_tokens for la in ctx.arch.layers if la.cross_attention_tokens), None)
        covers = (f"self-attention KV per decoded token, and their cross-attention KV for {enc} encoder tokens "
                  "per request (cross_attention_bytes_per_token; bytes_per_request reserves "
                  "--max-num-batched-tokens of them, as vLLM's capacity check does)") if enc else \
            "self-attention KV"
        yield Emit(f"{ctx.arch.architecture or ctx.arch.model_type} is an encoder-decoder model; "
                   f"the plan covers its {ctx.arch.num_layers} decoder layers' {covers}.")


@declare(code="KV602", name="state-layers-not-governed", severity="info", family="model",
         summary="Mamba / linear-attention layers keep a fixed-size state, not a per-token KV cache.",
         why="Their state dtype is set by --mamba-ssm-cache-dtype / --mamba-cache-dtype, not "
             "--kv-cache-dtype; it does not grow with context.",
         fix="Use --mamba-ssm-cache-dtype to change the state dtype.",
         references=("vllm/v1/kv_cache_interface.py::MambaSpec",))
def state_layers(ctx: RuleContext) -> Iterator[Emit]:
    layers = tuple(la.index for la in ctx.arch.layers if la.kind in ("mamba", "linear_attention"))
    if layers:
        sd = ctx.arch.mamba_ssm_cache_dtype
        kinds = "/".join(sorted({la.kind for la in ctx.arch.layers if la.index in layers}))
        sized = {(lp.state_bytes, tuple(lp.state_dtypes or ())) for lp in ctx.layers if lp.state_bytes is not None}
        if len(sized) == 1:
            size, dts = next(iter(sized))
            what = f" of {size:,} B per request each ({' + '.join(dts)})"
        else:
            what = f" ({sd})" if sd else ""
        yield Emit(f"{len(layers)} {kinds} layer(s) hold a fixed-size state{what}, "
                   "untouched by --kv-cache-dtype.", layers)


@declare(code="KV603", name="config-defaults-used", severity="info", family="model",
         summary="The config omits values; kvplan used the model family's defaults (as transformers does).",
         why="Minimal configs (e.g. gemma-3-4b-it) rely on config-class defaults for heads, head size "
             "and the sliding pattern; the engine reads the same defaults.",
         fix="Nothing to do; check the listed defaults match the checkpoint.",
         references=("transformers config classes",))
def defaults_used(ctx: RuleContext) -> Iterator[Emit]:
    used = [n for n in ctx.arch.notes if "absent from the config" in n]
    if used:
        yield Emit("config defaults used: " + "; ".join(used) + ".")


@declare(code="KV604", name="architecture-not-verified", severity="warning", family="model",
         summary="The architecture's layer geometry is not verified against vLLM, or config keys were not used.",
         why="kvplan reads each architecture's layers (kinds, windows, KV heads, head sizes, extra caches) "
             "from config keys; vLLM's model class for the architecture may read other keys. kvplan's "
             "coverage (docs/architectures.md) lists the architectures whose plans were checked exact "
             "against vLLM 0.33.0's own model classes (scripts/oracle/arch_oracle.py). For any other "
             "architecture, and for config keys that look like layer geometry but that kvplan did not "
             "read, the plan may be wrong without another sign. --strict makes this an error.",
         fix="Check the planned kinds, KV heads and head sizes against the model card; keys listed as "
             "unused may change the layers. Pass --strict to refuse unverified plans.",
         references=("docs/architectures.md", "scripts/oracle/arch_oracle.py",
                     "vllm/model_executor/models/registry.py"))
def not_verified(ctx: RuleContext) -> Iterator[Emit]:
    a = ctx.arch
    if a.architecture_status == "verified" and not a.unused_geometry_keys and not a.unknown_layer_types:
        return
    name = a.architecture or a.model_type
    if a.architecture_status == "verified":
        head = f"{name} is verified against vLLM, but this config differs from the verified ones"
    elif a.architecture_status == "unregistered":
        head = (f"{name} is not in vLLM 0.33.0's model registry (vLLM runs it only through its "
                "Transformers backend or remote code); its geometry is kvplan's reading, unverified")
    else:
        head = (f"{name} is not verified against vLLM 0.33.0 ({a.architecture_status}; docs/architectures.md "
                "says why); its geometry is kvplan's reading")
    parts = [head]
    if a.keys_read:
        parts.append("keys read: " + ", ".join(a.keys_read))
    if a.unused_geometry_keys:
        parts.append("config keys that look like layer geometry and were NOT used: "
                     + ", ".join(a.unused_geometry_keys))
    if a.unknown_layer_types:
        parts.append("layer types kvplan does not know (planned as full attention): "
                     + ", ".join(a.unknown_layer_types[:8]) + (" ..." if len(a.unknown_layer_types) > 8 else ""))
    yield Emit("; ".join(parts) + ".")


KDA_SSM_DTYPES = ("auto", "float32", "bfloat16")
"""--mamba-ssm-cache-dtype values MambaStateDtypeCalculator.kda_state_dtype takes (vLLM 0.33.0 / 0.34.0)."""


@declare(code="KV605", name="kda-recurrent-state-dtype-refused", severity="error", family="model",
         summary="--mamba-ssm-cache-dtype float16 on a KDA model that passes it on: vLLM refuses to start.",
         why="MambaStateDtypeCalculator.kda_state_dtype keeps the KDA recurrent state in auto (float32), float32 "
             "or bfloat16 and raises 'KDA recurrent state supports only auto, float32, and bfloat16' otherwise. "
             "The flag is a valid config value (MambaDType), so vLLM accepts it and raises while the engine "
             "starts: the model class's get_mamba_state_dtype_from_config, which "
             "Platform.update_block_size_for_backend calls after the model loads (Kimi-Linear / Kimi-K3, "
             "GLM-5 Next), and those layers' get_state_dtype. Ling 3.0 (BailingMoeV3) and AliceAI never pass "
             "the flag: their recurrent state stays float32 whatever it says.",
         fix="Pass --mamba-ssm-cache-dtype auto (float32), float32 or bfloat16.",
         references=("vllm/model_executor/layers/mamba/mamba_utils.py::MambaStateDtypeCalculator.kda_state_dtype",
                     "vllm/platforms/interface.py::Platform._align_hybrid_block_size",
                     "vllm/models/glm5next/common/model.py::Glm5NextForCausalLM.get_mamba_state_dtype_from_config",
                     "vllm/models/kimi_k3/nvidia/model.py::KimiLinearForCausalLM.get_mamba_state_dtype_from_config"))
def kda_state_dtype_refused(ctx: RuleContext) -> Iterator[Emit]:
    d = ctx.flags.mamba_ssm_cache_dtype
    if d in KDA_SSM_DTYPES:
        return
    layers = tuple(la.index for la in ctx.arch.layers
                   if la.state is not None and la.state.family == "kda" and la.state.ssm_dtype_flag != "ignored")
    if layers:
        yield Emit(f"--mamba-ssm-cache-dtype {d}: {ctx.arch.architecture or ctx.arch.model_type} keeps its KDA "
                   "recurrent state in auto / float32 / bfloat16 only; vLLM raises 'KDA recurrent state supports "
                   f"only auto, float32, and bfloat16; got {d}' and refuses to start.", layers)


_INKLING = ("InklingForCausalLM", "InklingForConditionalGeneration")
_SCONV = "vllm/models/inkling/nvidia/sconv_swa_attn.py::InklingConvState.__init__"


@declare(code="KV606", name="inkling-conv-state-refused", severity="error", family="model",
         summary="Inkling's short-convolution state cache takes TP <= the layer's KV heads and a bfloat16 model.",
         why="Every Inkling decoder layer builds an InklingConvState, which keeps whole KV heads on each rank and "
             "writes bfloat16 only: it asserts 'sconv SWA cache supports tp_size <= num_kv_heads (N), got T' and "
             "'sconv SWA cache supports bfloat16 only'. The flags pass vLLM's config checks; the assertion stops "
             "the engine while it builds the model (vLLM 0.33.0 and 0.34.0).",
         fix="Use a --tensor-parallel-size no larger than the layers' KV heads (with data or expert parallelism "
             "for more GPUs), and --dtype bfloat16 (or auto on a bfloat16 checkpoint).",
         references=(_SCONV,))
def inkling_conv_state_refused(ctx: RuleContext) -> Iterator[Emit]:
    if ctx.arch.architecture not in _INKLING:
        return
    conv = [la for la in ctx.arch.layers if la.num_kv_heads and any(x.window is not None for x in la.extra_caches)]
    tp = ctx.flags.tensor_parallel_size
    over = [la for la in conv if tp > (la.num_kv_heads or 0)]
    if over:
        heads = min(over, key=lambda la: la.index).num_kv_heads  # vLLM builds the layers in order
        yield Emit(f"--tensor-parallel-size {tp} is above the KV heads of {len(over)} Inkling layer(s): "
                   f"vLLM asserts 'sconv SWA cache supports tp_size <= num_kv_heads ({heads}), got {tp}' while "
                   "building the model and refuses to start.", tuple(la.index for la in over))
    if conv and ctx.model_dtype != "bfloat16":
        yield Emit(f"model dtype {ctx.model_dtype}: vLLM asserts 'sconv SWA cache supports bfloat16 only' while "
                   "building Inkling's conv-state layers and refuses to start.", tuple(la.index for la in conv),
                   fix="Pass --dtype bfloat16 (or auto on a bfloat16 checkpoint).")
