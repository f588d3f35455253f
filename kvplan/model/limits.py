"""Plausibility limits for every fact kvplan reads from outside (docs/limits.md lists them).

The model types carry these as pydantic constraints, and `kvplan.ingest.limits` checks raw
config values against the same numbers where the planner reads them, so no rule ever sees a negative head
size, a zero head count or a billion layers. The bounds are far above any released model
(the largest in the corpus: 128 heads, head size 576 for MLA latents, 10M-token context, 126
layers) and far below what would make planning slow or its numbers overflow.
"""
from __future__ import annotations

from typing import Any

MAX_LAYERS = 4096
"""Decoder layers of one model (num_hidden_layers and its spellings; `kvplan serve --max-layers` may lower it)."""
MAX_HEADS = 4096
"""Query or KV heads of one layer."""
MAX_HEAD_SIZE = 16384
"""Head size in elements (head_dim; MLA kv_lora_rank + qk_rope_head_dim)."""
MAX_HIDDEN_SIZE = 1 << 20
"""hidden_size (d_model)."""
MAX_TOKENS = 1 << 31
"""Token counts: max_position_embeddings, sliding_window, attention_chunk_size, --max-model-len,
--max-num-batched-tokens (vLLM keeps them in 32-bit integers)."""
MAX_PARALLEL = 4096
"""--tensor-parallel-size, --pipeline-parallel-size."""
MAX_BLOCK_SIZE = 1 << 16
"""--block-size in tokens."""
MAX_SEQS = 1 << 24
"""--max-num-seqs."""

# Config keys that hold an integer, with their inclusive range. A key may also be null (absent).
# (lo, hi) per key; a key is checked when the planner reads it, in whichever object it reads it from.
CONFIG_INT_KEYS: dict[str, tuple[int, int]] = {
    **{k: (0, MAX_LAYERS) for k in ("num_hidden_layers", "n_layer", "num_layers", "n_layers",
                                    "num_decoder_layers", "decoder_layers")},
    **{k: (1, MAX_HEADS) for k in ("num_attention_heads", "n_head", "num_heads", "n_heads",
                                   "decoder_attention_heads", "num_key_value_heads", "n_head_kv",
                                   "num_kv_heads", "multi_query_group_num", "num_global_key_value_heads")},
    **{k: (1, MAX_HEAD_SIZE) for k in ("head_dim", "d_kv", "kv_channels", "attention_head_dim",
                                       "global_head_dim")},
    # kv_lora_rank 0 means "not MLA" (as null does); the MLA parts may be 0.
    **{k: (0, MAX_HEAD_SIZE) for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")},
    **{k: (1, MAX_HIDDEN_SIZE) for k in ("hidden_size", "n_embd", "d_model", "dim")},
    **{k: (1, MAX_TOKENS) for k in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")},
    # 0 reads as "not set" for these (kvplan then uses the family default, as transformers does).
    **{k: (0, MAX_TOKENS) for k in ("attention_chunk_size", "index_topk")},
    **{k: (0, MAX_LAYERS) for k in ("sliding_window_pattern", "_sliding_window_pattern", "no_rope_layer_interval",
                                    "max_window_layers")},
}
"""Integer config.json keys kvplan reads, and the range it accepts for each."""

# sliding_window: vLLM/transformers configs use null or a positive size; some write 0 or -1 for
# "none" (kvplan reads those as no window), so only the type and the upper bound are checked.
CONFIG_WINDOW_KEYS: dict[str, int] = {"sliding_window": MAX_TOKENS}
"""Integer-or-null keys where values below 1 mean "not set"."""

MAX_CONFIG_BYTES = 16 << 20
"""config.json, hf_quant_config.json, safetensors index, PLAN.json, scales files (a config is a few KiB)."""
MAX_JSON_DEPTH = 64
"""Nesting of JSON objects/arrays (a config.json nests 4-6 levels)."""
MAX_LINT_FILE_BYTES = 8 << 20
"""One file given to `kvplan lint` (a rendered Helm chart is well under 1 MiB)."""
MAX_YAML_DEPTH = 128
"""Nesting of YAML collections in a manifest, compose file, vLLM --config or policy."""
MAX_YAML_NODES = 1_000_000
"""YAML nodes in one file, aliases counted as the nodes they expand to."""
MAX_YAML_ALIAS_NODES = 100_000
"""Nodes YAML aliases may expand to in one file (the alias-bomb budget)."""
MAX_TEXT_LINES = 200_000
"""Lines of a shell script / launch-line file."""
MAX_TEXT_TOKENS = 1_000_000
"""Whitespace-separated words of a shell script / launch-line file."""
MAX_ARGV_TOKENS = 10_000
"""Arguments of one launch line (--flags plus values)."""
MAX_ARG_BYTES = 64 << 10
"""Bytes of one argument (e.g. an --attention-config JSON)."""
MAX_LAUNCH_LINE_BYTES = 1 << 20
"""Bytes of a pasted launch line."""
LINT_FILE_TIMEOUT_S = 5.0
"""Default per-file time budget of `kvplan lint` (`--file-timeout`, `file-timeout` in [tool.kvplan.lint])."""


def json_depth(value: Any) -> int:
    """Nesting depth of parsed JSON (a scalar is 0, [] or {} is 1), without recursion."""
    depth = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            depth = max(depth, d)
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, (list, tuple)):
            depth = max(depth, d)
            stack.extend((x, d + 1) for x in v)
    return depth
