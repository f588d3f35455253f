"""Errors vLLM raises at config time (0.33, and later releases where a rule says so), reported before launch."""
from __future__ import annotations

from collections.abc import Iterator

from kvplan.model.vocab import QuantMode, quant_mode_of
from kvplan.rules.base import Emit, declare
from kvplan.rules.context import RuleContext


@declare(code="KV201", name="float-kv-dtype-mismatch", severity="error", family="config",
         summary="--kv-cache-dtype float16/bfloat16 differs from the model dtype: vLLM refuses to start.",
         why="vLLM 0.33 rejects an explicit 16-bit KV dtype that is not the model dtype "
             "(VllmConfig._reject_mismatched_float_kv_cache); it does not convert.",
         fix="Pass --kv-cache-dtype auto, or the model dtype, or change --dtype.",
         references=("vllm/config/vllm.py::VllmConfig._reject_mismatched_float_kv_cache",))
def float_mismatch(ctx: RuleContext) -> Iterator[Emit]:
    d, md = ctx.flags.kv_cache_dtype, ctx.model_dtype
    if d in ("float16", "bfloat16") and d != md:
        alt = "`auto`" if md == "float32" else f"`auto` or `{md}`"
        yield Emit(f'kv_cache_dtype="{d}" is incompatible with dtype="{md}"; vLLM refuses to start.',
                   fix=f"Set --kv-cache-dtype to {alt}.")


@declare(code="KV202", name="nvfp4-with-mla", severity="error", family="config",
         summary="nvfp4 KV cache on an MLA model: vLLM refuses to start.",
         why="Dense NVFP4 KV packing assumes separate K and V heads; MLA stores one latent "
             "(validate_nvfp4_kv_cache_with_mla).",
         fix="Use fp8 / auto, or nvfp4_ds_mla with a sparse MLA backend (SM100).",
         references=("vllm/config/vllm.py::VllmConfig.validate_nvfp4_kv_cache_with_mla",))
def nvfp4_mla(ctx: RuleContext) -> Iterator[Emit]:
    d = ctx.kv_cache_dtype
    if d.startswith("nvfp4") and not d.endswith("_ds_mla") and ctx.arch.uses_mla:
        yield Emit(f"--kv-cache-dtype {d} is not supported with MLA ({ctx.arch.architecture}).")


@declare(code="KV207", name="ds-mla-format-without-mla", severity="error", family="config",
         summary="fp8_ds_mla / nvfp4_ds_mla on a model without MLA layers: no attention backend can read it.",
         why="These are DeepSeek's sparse-MLA record layouts (656 B / 352 B per token); only the sparse "
             "MLA backends list them, so vLLM finds no valid backend for the model's dense attention layers.",
         fix="Use --kv-cache-dtype fp8 (or nvfp4 on Blackwell) for dense attention models.",
         references=("vllm/v1/attention/backends/mla/flashmla_sparse.py::FlashMLASparseBackend.supported_kv_cache_dtypes",
                     "vllm/v1/attention/selector.py::get_attn_backend"))
def ds_mla_without_mla(ctx: RuleContext) -> Iterator[Emit]:
    d = ctx.kv_cache_dtype
    if d in ("fp8_ds_mla", "nvfp4_ds_mla") and not ctx.arch.uses_mla:
        layers = tuple(lp.index for lp in ctx.layers if lp.kv_cache_dtype == d)
        if layers:
            yield Emit(f"--kv-cache-dtype {d} is DeepSeek's sparse-MLA KV format, but {ctx.arch.architecture} has no "
                       f"MLA layers: no attention backend reads it for its dense attention layers.", layers=layers)


@declare(code="KV203", name="e5m2-with-fp8-checkpoint", severity="error", family="config",
         summary="fp8_e5m2 KV with a checkpoint that carries FP8 KV scales: vLLM refuses to load.",
         why="Checkpoint scales are calibrated for e4m3; vLLM raises 'fp8_e5m2 kv-cache is not "
             "supported with fp8 checkpoints' when a KV-cache quant method is attached to the layer "
             "(fp8, ModelOpt, compressed-tensors with a kv scheme, quark, or --quantization fp8).",
         fix="Use --kv-cache-dtype fp8 (e4m3) or auto.",
         references=("vllm/model_executor/layers/attention/attention.py::_init_kv_cache_quant",))
def e5m2_ckpt(ctx: RuleContext) -> Iterator[Emit]:
    layers = tuple(lp.index for lp in ctx.layers if lp.kv_cache_dtype == "fp8_e5m2")
    q = ctx.quant
    if not layers or not q.weight_quant_supplies_kv_method:
        return
    if not q.modelopt_mla_kv_method:
        layers = tuple(i for i in layers if (la := ctx.arch_layer(i)) is not None and la.kind != "mla")
    if layers:
        yield Emit(f"fp8_e5m2 kv-cache is not supported with fp8 checkpoints ({q.quant_method}); "
                   f"vLLM fails at model construction.", layers)


@declare(code="KV204", name="invalid-compressed-tensors-kv-scheme", severity="error", family="config",
         summary="The compressed-tensors kv_cache_scheme is one vLLM cannot run.",
         why="vLLM requires type float, num_bits 8, strategy tensor or attn_head, symmetric true, and "
             "raises NotImplementedError otherwise (validate_kv_cache_scheme).",
         fix="Re-export with an 8-bit float symmetric tensor/attn_head scheme, or pass --kv-cache-dtype explicitly.",
         references=("vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py",))
def invalid_ct(ctx: RuleContext) -> Iterator[Emit]:
    s = ctx.quant.ct_kv_cache_scheme
    if s is None:
        return
    problems = []
    if s.get("type") != "float":
        problems.append(f"type {s.get('type')!r} (needs 'float')")
    if s.get("num_bits") != 8:
        problems.append(f"num_bits {s.get('num_bits')!r} (needs 8)")
    if s.get("strategy") not in ("tensor", "attn_head"):
        problems.append(f"strategy {s.get('strategy')!r} (needs 'tensor' or 'attn_head')")
    if not s.get("symmetric"):
        problems.append("symmetric is not true")
    if problems:
        yield Emit("compressed-tensors kv_cache_scheme is not supported by vLLM 0.33: " + "; ".join(problems) + ".")


@declare(code="KV205", name="quantized-cross-attention", severity="warning", family="config",
         summary="Cross-attention layers get the quantized KV dtype too.",
         why="CrossAttention inherits Attention.__init__, so the KV dtype and skip list apply; "
             "encoder and cross attention backends often reject quantized caches.",
         fix="Skip the cross-attention layer indices with --kv-cache-dtype-skip-layers.",
         references=("vllm/model_executor/layers/attention/cross_attention.py",))
def quantized_cross(ctx: RuleContext) -> Iterator[Emit]:
    layers = tuple(lp.index for lp in ctx.layers if lp.quant_mode.is_quantized
                   and (lp.kind == "cross_attention" or lp.cross_attention_bytes_per_token))
    if layers:
        yield Emit(f"{len(layers)} cross-attention layer(s) would store {ctx.kv_cache_dtype} KV.", layers,
                   fix="Add them to the skip list: --kv-cache-dtype-skip-layers " + " ".join(map(str, layers)))


@declare(code="KV206", name="per-token-head-on-mla", severity="error", family="config",
         summary="Per-token-head KV dtypes on MLA layers: no vLLM 0.33 MLA backend can read them.",
         why="Per-token-head layouts exist only in the Triton dense-attention backend; no MLA backend "
             "lists int8/fp8/int4_per_token_head, so backend selection fails at startup.",
         fix="Use --kv-cache-dtype fp8 (or fp8_ds_mla / nvfp4_ds_mla with a sparse MLA backend) for MLA models.",
         references=("vllm/v1/attention/backends/mla/", "https://github.com/vllm-project/vllm/pull/38378"))
def pth_on_mla(ctx: RuleContext) -> Iterator[Emit]:
    layers = tuple(lp.index for lp in ctx.layers if lp.kind == "mla" and lp.quant_mode.is_per_token_head)
    if layers:
        yield Emit(f"{len(layers)} MLA layer(s) would use {ctx.kv_cache_dtype}, which no MLA attention backend "
                   "supports; vLLM fails to select a backend.", layers)


_MINIMAX_M3 = ("MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration")


@declare(code="KV208", name="minimax-m3-nvfp4-heads-per-rank", severity="error", family="config",
         summary="MiniMax-M3 with an NVFP4 KV cache needs 16 query heads per KV head on each rank (vLLM >= 0.34).",
         why="vLLM 0.34's NVFP4 KV attention kernels for MiniMax-M3 (MSA's CUTLASS Q8KV4 prefill) take exactly 16 "
             "query heads per KV head; its config hook refuses other tensor-parallel splits before the workers "
             "start ('MiniMax-M3 does not support an NVFP4 KV cache with tensor_parallel_size=N yet').",
         fix="Use a smaller --tensor-parallel-size (with data/expert parallelism) or another --kv-cache-dtype.",
         references=("vllm/model_executor/models/config.py::MiniMaxM3SparseConfig.verify_and_update_config",),
         versions=">=0.34")
def minimax_m3_nvfp4_heads(ctx: RuleContext) -> Iterator[Emit]:
    if ctx.arch.architecture not in _MINIMAX_M3 or not ctx.engine_has("minimax_m3_nvfp4_heads_per_rank") \
            or quant_mode_of(ctx.kv_cache_dtype) not in (QuantMode.nvfp4, QuantMode.nvfp4_ds_mla):
        return
    attn = [la for la in ctx.arch.layers if la.num_heads and la.num_kv_heads]
    if not attn:
        return
    top = max(attn, key=lambda la: la.num_heads or 0)
    tp = ctx.flags.tensor_parallel_size
    heads, kv_heads = (top.num_heads or 0) // tp, max(1, (top.num_kv_heads or 0) // tp)
    if heads != 16 * kv_heads:
        yield Emit(f"MiniMax-M3 does not support an NVFP4 KV cache with tensor_parallel_size={tp} in vLLM "
                   f"{ctx.engine.version_str}: each rank holds {heads} query heads over {kv_heads} KV head(s), "
                   "and the NVFP4 attention kernels need 16 per KV head.")
