"""The one visible precedence order of decision rules.

Global (config-time) decisions run first, in this order; then, for every layer, the per-layer
decisions run in this order, each seeing what the previous ones set. This mirrors vLLM 0.33:
`create_engine_config` resolves the global dtype (explicit flag, else ModelOpt 'auto'
resolution), then each `Attention.__init__` applies the compressed-tensors override and then
the skip list, and the KV cache spec fixes storage, scales and sizes.
"""
from __future__ import annotations

GLOBAL_ORDER: tuple[str, ...] = (
    "KV100",  # model-dtype: what 'auto' means
    "KV101",  # explicit-dtype-wins: --kv-cache-dtype as given (explicit never rewritten)
    "KV102",  # modelopt-auto-resolution: 'auto' -> checkpoint dtype at config time
    "KV117",  # model-class-kv-cache-dtype: the architecture's verify_and_update_config (GLM-5 on SM100, ...)
    "KV150",  # mistral-large4-kv-cache-dtype: Mistral Large 4's verify_and_update_config (vLLM >= 0.34)
)

LAYER_ORDER: tuple[str, ...] = (
    "KV103",  # compressed-tensors-auto-fp8: per Attention layer, only when still 'auto'
    "KV104",  # skip-layers: after the checkpoint override, back to 'auto'
    "KV111",  # model-class-ignores-kv-cache-dtype: layers built without the cache config stay 'auto'
    "KV114",  # deepseek-v4-fp8-ds-mla: DeepSeek-V4 attention resolves the global dtype to fp8_ds_mla
    "KV121",  # sparse-mla-fp8-ds-mla: the sparse FlashMLA backend serves an fp8 cache as fp8_ds_mla
    "KV110",  # storage-dtype: string -> stored element type + quant mode
    "KV120",  # scale-source: checkpoint / dynamic per-token-head / 1.0
    "KV130",  # kv-bytes-per-token: spec formulas, per TP rank
    "KV140",  # backend-selection: per layer, with the layer's own dtype (needs --gpu)
)

DECISION_ORDER: tuple[str, ...] = GLOBAL_ORDER + LAYER_ORDER
