"""Model-level facts users should know about the KV plan."""
from __future__ import annotations

from kvplan.rules.base import Emit, declare


@declare(code="KV601", name="encoder-decoder-model", severity="warning", family="model",
         summary="Encoder-decoder model: only the decoder's self-attention KV is planned.",
         why="vLLM 0.33 (V1 engine) runs few encoder-decoder architectures; T5-style models may not "
             "load at all, and cross-attention KV is sized by encoder length, not decoded tokens.",
         fix="Check the architecture is in vLLM's supported-models list before deploying.",
         references=("https://docs.vllm.ai/en/latest/models/supported_models.html",))
def enc_dec(ctx):
    if ctx.arch.is_encoder_decoder:
        yield Emit(f"{ctx.arch.architecture or ctx.arch.model_type} is an encoder-decoder model; "
                   f"the plan covers its {ctx.arch.num_layers} decoder layers' self-attention KV.")


@declare(code="KV602", name="state-layers-not-governed", severity="info", family="model",
         summary="Mamba / linear-attention layers keep a fixed-size state, not a per-token KV cache.",
         why="Their state dtype is set by --mamba-ssm-cache-dtype / --mamba-cache-dtype, not "
             "--kv-cache-dtype; it does not grow with context.",
         fix="Use --mamba-ssm-cache-dtype to change the state dtype.",
         references=("vllm/v1/kv_cache_interface.py::MambaSpec",))
def state_layers(ctx):
    layers = tuple(la.index for la in ctx.arch.layers if la.kind in ("mamba", "linear_attention"))
    if layers:
        sd = ctx.arch.mamba_ssm_cache_dtype
        yield Emit(f"{len(layers)} {'/'.join(sorted({la.kind for la in ctx.arch.layers if la.index in layers}))} "
                   f"layer(s) hold a fixed-size state{f' ({sd})' if sd else ''}, untouched by --kv-cache-dtype.", layers)


@declare(code="KV603", name="config-defaults-used", severity="info", family="model",
         summary="The config omits values; kvplan used the model family's defaults (as transformers does).",
         why="Minimal configs (e.g. gemma-3-4b-it) rely on config-class defaults for heads, head size "
             "and the sliding pattern; the engine reads the same defaults.",
         fix="Nothing to do; check the listed defaults match the checkpoint.",
         references=("transformers config classes",))
def defaults_used(ctx):
    used = [n for n in ctx.arch.notes if "absent from the config" in n]
    if used:
        yield Emit("config defaults used: " + "; ".join(used) + ".")
