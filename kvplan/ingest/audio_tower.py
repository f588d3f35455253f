"""KV caches an audio tower registers next to the language model's (Voxtral Realtime).

vLLM 0.33's Voxtral Realtime (voxtral_realtime.py, whisper_causal.py) builds its audio encoder as a
causal Whisper stack whose attention layers are decoder-style `Attention` layers with a KV cache of
their own (WhisperCausalAttentionWithBlockPooling): MHA over `encoder_attention_heads` heads of
`encoder_head_dim`, a sliding window of `sliding_window` encoder frames, in the KV cache dtype of the
run. The cache is block-pooled: one decoder token covers `block_pool_size` (= downsample_factor)
encoder frames, so its spec stores that many K/V states per token (tokens_per_state 1/N) and keeps its
window in pooled units (ceil(window / N) + 1 tokens). vLLM numbers encoder layer j with index j, as
decoder layer j: where both exist the encoder cache is a further cache of that layer
(ExtraCache with kv_heads), past the decoder's last layer it is a layer of its own (states_per_token).
Only the causal encoder (params.json `causal: true`) registers caches; Voxtral's bidirectional one
registers none. vLLM builds Voxtral Realtime only from the Mistral-format params.json: a Hugging
Face-format config.json of it is refused, as vLLM's model class fails on it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.errors import KvplanInputError
from kvplan.model.arch import ExtraCache, LayerArch


def _pos(audio: dict[str, Any], key: str, path: Path) -> int:
    v = audio.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise KvplanInputError(f"{path}: audio_config.{key} must be a positive integer, got {v!r}.",
                               f"Fix {key} of the audio encoder in params.json.")
    return v


def causal_audio_encoder_caches(cfg: dict[str, Any], architecture: str | None, layers: list[LayerArch],
                                path: Path, notes: list[str]) -> list[LayerArch]:
    """The decoder layers with the causal audio encoder's KV caches added (unchanged for other models)."""
    audio = cfg.get("audio_config")
    if architecture != "VoxtralRealtimeGeneration":
        return layers
    if not isinstance(audio, dict) or "block_pool_size" not in audio:
        # A Hugging Face-format config (transformers' voxtral_realtime): vLLM 0.33's model class reads the
        # Whisper keys its Mistral parser writes (max_source_positions, block_pool_size) and a Mistral
        # tokenizer; from config.json it fails to build ('VoxtralRealtimeEncoderConfig' object has no
        # attribute 'max_source_positions', measured on the oracle).
        raise KvplanInputError(f"{path}: vLLM 0.33 builds VoxtralRealtimeGeneration only from the checkpoint's "
                               "Mistral-format params.json (from this config.json its model class fails to build).",
                               "Pass the checkpoint folder (params.json, consolidated.safetensors, tekken.json) "
                               "or its params.json.")
    if not audio.get("is_causal"):
        return layers
    n_enc = _pos(audio, "encoder_layers", path)
    heads = _pos(audio, "encoder_attention_heads", path)
    hd = _pos(audio, "encoder_head_dim", path)
    pool = _pos(audio, "block_pool_size", path)
    window = _pos(audio, "sliding_window", path)
    pooled_window = -(-window // pool) + 1
    what = (f"causal audio encoder layer: {heads} KV heads of {hd}, window {window} frames, "
            f"{pool} frames per token (block-pooled)")
    by_index = {la.index: la for la in layers}
    out = list(layers)
    for j in range(n_enc):
        la = by_index.get(j)
        if la is not None:
            extra = ExtraCache(name=f"audio encoder layer {j} K/V ({pool} frames per token)", elements=pool * 2 * hd,
                               kv_heads=heads, window=pooled_window, unpooled_window=window)
            out[out.index(la)] = la.model_copy(update={"extra_caches": (*la.extra_caches, extra),
                                                       "source": f"{la.source} (+ {what} {j})".strip()})
        else:
            out.append(LayerArch(index=j, kind="sliding_attention", sliding_window=window, num_heads=heads,
                                 num_kv_heads=heads, head_size=hd, head_size_v=hd, states_per_token=pool,
                                 source=f"audio_config: {what} {j} (no decoder layer of that index)"))
    notes.append(f"Voxtral Realtime: the causal audio encoder's {n_enc} layers each register a KV cache "
                 f"({heads} heads of {hd}, window {window} frames, {pool} frames per token), numbered with "
                 "the decoder layers of the same index")
    return out
