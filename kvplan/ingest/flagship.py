"""Layer maps of vLLM 0.33's newest flagship model classes, read from their own config keys.

Each reader takes the layers the generic reader built (hf_config._layers) and rewrites them the way
vLLM's model class of that module builds its decoder stack: which layers attend and how (GLM-5 Next,
Ling 3.0 and Inkling layer maps, Step 5's per-layer-type heads, Flint's window switch), and which
further KV caches a layer registers next to its main one (sparse-indexer keys and rings, convolution
states). Verified against vLLM's own model classes (scripts/oracle, docs/architectures.md).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanInputError
from kvplan.ingest.architectures import config_defaults
from kvplan.model.arch import ExtraCache, LayerArch, MlaDims

_Reader = Callable[[dict[str, Any], list[LayerArch], Path, list[str]], list[LayerArch]]


def _pos_int(raw: dict[str, Any], key: str, default: int, path: Path) -> int:
    v = raw.get(key, default)
    if v is None:
        v = default
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise KvplanInputError(f"{path}: {key} must be a positive integer, got {v!r}.",
                               f"Fix {key} in config.json.")
    return v


def _list(raw: dict[str, Any], key: str, path: Path, item: type) -> list[Any]:
    """A list-valued key (absent or null: empty) whose entries are all of one type."""
    v = raw.get(key)
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, item) and not isinstance(x, bool) for x in v):
        raise KvplanInputError(f"{path}: {key} must be a list of {item.__name__} values, got {v!r}.",
                               f"Fix {key} in config.json.")
    return v


def _flint(raw: dict[str, Any], layers: list[LayerArch], path: Path, notes: list[str]) -> list[LayerArch]:
    """vLLM's FlintConfig: `use_sliding_window: false` clears sliding_window, so its sliding
    layer_types entries attend over the full context."""
    if raw.get("use_sliding_window") is not False:
        return layers
    notes.append("Flint: use_sliding_window false: sliding_attention layers have no window (full attention)")
    return [la.model_copy(update={"kind": "full_attention", "sliding_window": None,
                                  "source": la.source + " (use_sliding_window false: no window)"})
            if la.kind == "sliding_attention" else la for la in layers]


def _step5_dsa(raw: dict[str, Any], path: Path) -> bool:
    """Whether Step 5's full-attention layers run DSA (step5/nvidia/config.py::get_step5_sparse_config): a
    sparse_config section not disabled. vLLM refuses a checkpoint without the section
    (checkpoint_has_step5_sparse_config), and an enabled one whose region summaries are not 256 elements per
    8 tokens (the sizes its summary and tail-ring caches are built with)."""
    sparse = raw.get("sparse_config")
    fix = "Use the checkpoint's own config.json (sparse_config enabled: false runs every layer on FlashAttention)."
    if sparse is None:
        raise KvplanInputError(f"{path}: vLLM refuses a Step 5 checkpoint without a sparse_config section "
                               "('dense-only checkpoints are not supported').", fix)
    enabled = sparse.get("enabled") if isinstance(sparse, dict) else None
    if not isinstance(sparse, dict) or not isinstance(enabled, (bool, type(None))):
        raise KvplanInputError(f"{path}: sparse_config must be an object whose enabled is a bool, got {sparse!r}.",
                               fix)
    if enabled is False:
        return False
    for key, want in (("proxy_dim", 256), ("region_block_size", 8)):
        got = sparse.get(key)
        if got not in (None, "", want, str(want)):
            raise KvplanInputError(f"{path}: vLLM's Step 5 DSA requires sparse_config.{key}={want}, got {got!r}.",
                                   fix)
    return True


def _step5(raw: dict[str, Any], layers: list[LayerArch], path: Path, notes: list[str]) -> list[LayerArch]:
    """vLLM's Step 5: KV heads are num_attention_groups; a layer whose layer_types entry is
    attention_other_setting's attention_type takes that setting's heads, KV groups and head_dim.
    With a sparse_config section (enabled), each full-attention layer (its DSA layers) also registers
    a CSA tail ring (one page of the layer's own cache) and a uint8 region-summary cache (256 B per
    8-token region). vLLM refuses a checkpoint without the section (an input error)."""
    types = _list(raw, "layer_types_with_mtp", path, str) or _list(raw, "layer_types", path, str)
    aos = raw.get("attention_other_setting")
    other: dict[str, Any] = aos if isinstance(aos, dict) else {}
    groups = _pos_int(raw, "num_attention_groups", 1, path)
    head = _pos_int(raw, "head_dim", 1, path) if raw.get("head_dim") is not None else None
    other_groups = _pos_int(other, "num_attention_groups", 1, path) if other else 1
    other_head = _pos_int(other, "head_dim", 1, path) if other.get("head_dim") is not None else None
    dsa = _step5_dsa(raw, path)
    out = []
    for la in layers:
        if la.kind not in ("full_attention", "sliding_attention"):
            out.append(la)
            continue
        t = types[la.index] if la.index < len(types) else "full_attention"
        mine = bool(other) and t == other.get("attention_type")
        kvh = other_groups if mine else groups
        hd = (other_head if mine else head) or la.head_size
        src = la.source + (f" (attention_other_setting: {kvh} KV groups, head_dim {hd})" if mine
                           else f" (num_attention_groups {kvh}, head_dim {hd})")
        extra: tuple[ExtraCache, ...] = ()
        if dsa and la.kind == "full_attention":
            extra = (ExtraCache(name="CSA tail ring", same_as_layer=True, ring=True),
                     ExtraCache(name="sparse region summaries", elements=256, element_bytes=1, tokens_per_state=8))
            src += " (sparse_config: DSA layer, CSA tail ring + region-summary caches)"
        out.append(la.model_copy(update={"num_kv_heads": kvh, "head_size": hd, "head_size_v": hd,
                                         "extra_caches": extra, "source": src}))
    notes.append("Step 5: KV heads = num_attention_groups (attention_other_setting's for its layer type)"
                 + ("; full-attention layers run sparse attention (sparse_config) with two further caches"
                    if dsa else ""))
    return out


def _minimax_m3(raw: dict[str, Any], layers: list[LayerArch], path: Path, notes: list[str]) -> list[LayerArch]:
    """vLLM's MiniMax-M3: a sparse-attention layer also registers an index-key cache (one head, model dtype).

    The sparse layers: sparse_attention_config.sparse_attention_freq entries that are non-zero, with
    sparse_index_dim elements (the checkpoint's schema, which vLLM 0.33's MiniMaxM3TextConfig and transformers'
    MiniMaxM3VLTextConfig both read); without that section, layer_types entries 'minimax_m3_sparse' with
    index_head_dim elements (transformers' schema: what vLLM 0.34 reads, vllm/models/minimax_m3/nvidia/
    model.py::_sparse_attention_layer_ids; 0.33's class ignores those keys and falls back to its default
    section, layers 3-59 sparse, which equals them for the published checkpoint)."""
    cfg = raw.get("sparse_attention_config")
    if isinstance(cfg, dict) and isinstance(cfg.get("sparse_attention_freq"), list):
        dim = _pos_int(cfg, "sparse_index_dim", 128, path)
        sparse = {i for i, f in enumerate(cfg["sparse_attention_freq"]) if f != 0}
        why = "sparse_attention_freq[{}] != 0"
    elif cfg is None and "minimax_m3_sparse" in (types := _list(raw, "layer_types", path, str)):
        dim = _pos_int(raw, "index_head_dim", 128, path)
        sparse = {i for i, t in enumerate(types) if t == "minimax_m3_sparse"}
        why = "layer_types[{}] = 'minimax_m3_sparse'"
    else:
        return layers
    notes.append(f"MiniMax-M3: sparse layers keep an index-key cache of {dim} elements")
    return [la.model_copy(update={
        "extra_caches": (ExtraCache(name="index keys", elements=dim),),
        "source": la.source + f" ({why.format(la.index)}: index-key cache)"})
        if la.index in sparse and la.kind not in ("none", "mamba", "linear_attention") else la for la in layers]


def _bailing_v3(raw: dict[str, Any], layers: list[LayerArch], path: Path, notes: list[str]) -> list[LayerArch]:
    """vLLM's Ling 3.0 (BailingMoeV3TextConfig): layer i is KDA linear attention when
    (i + 1) % layer_group_size != 0 and i lies within the whole groups; the others are MLA."""
    lgs = _pos_int(raw, "layer_group_size", 5, path)
    n = len(layers)
    grouped = n // lgs * lgs
    notes.append(f"Ling 3.0: layer_group_size {lgs}: every {lgs}th layer is MLA, the rest KDA linear attention")
    return [LayerArch(index=la.index, kind="linear_attention",
                      source=f"layer_group_size {lgs}: ({la.index} + 1) % {lgs} != 0, KDA linear attention")
            if (la.index + 1) % lgs and la.index < grouped else
            la.model_copy(update={"source": f"layer_group_size {lgs}: full attention (MLA)"}) for la in layers]


def _inkling(raw: dict[str, Any], layers: list[LayerArch], path: Path, notes: list[str]) -> list[LayerArch]:
    """vLLM's Inkling: layers in local_layer_ids slide over sliding_window_size tokens with the swa_*
    geometry, the others attend over everything; every layer also keeps its short-convolution state
    as a sliding cache (K, V and two hidden-size streams per KV head, padded to a power of two)."""
    local = _list(raw, "local_layer_ids", path, int)
    hidden = _pos_int(raw, "hidden_size", 1536, path)
    heads = _pos_int(raw, "num_attention_heads", 12, path)
    kvh = _pos_int(raw, "num_key_value_heads", 4, path)
    hd = _pos_int(raw, "head_dim", hidden // heads, path)
    swa_kvh = _pos_int(raw, "swa_num_key_value_heads", kvh, path)
    swa_hd = _pos_int(raw, "swa_head_dim", hd, path)
    window = _pos_int(raw, "sliding_window_size", 512, path)
    kernel = _pos_int(raw, "sconv_kernel_size", raw.get("conv_kernel_size") or 4, path)
    out = []
    for la in layers:
        if la.kind in ("none", "mamba", "linear_attention"):
            out.append(la)
            continue
        is_local = la.index in local
        k, d = (swa_kvh, swa_hd) if is_local else (kvh, hd)
        width = 2 * d + 2 * (hidden // k)
        padded = 1 << (width - 1).bit_length()
        out.append(la.model_copy(update={
            "kind": "sliding_attention" if is_local else "full_attention",
            "sliding_window": window if is_local else None, "num_kv_heads": k, "head_size": d, "head_size_v": d,
            "extra_caches": (ExtraCache(name="short-conv state", elements=k * padded, window=kernel),),
            "source": (f"local_layer_ids contains {la.index}: sliding_window_size {window}, swa geometry"
                       if is_local else f"local_layer_ids lacks {la.index}: full attention")
            + f" (+ conv state {k} x {padded})"}))
    notes.append("Inkling: local_layer_ids slide (sliding_window_size, swa_* heads); every layer keeps a "
                 "short-convolution state cache")
    return out


def _glm5_next_topk(raw: dict[str, Any], kpool: int, path: Path) -> int:
    """index_topk as transformers' Glm5NextTextConfig (a @strict dataclass; vLLM 0.33 and 0.34 load it) gives it:
    its default when absent (2048: config_defaults), so every MLA layer is sparse; it refuses a value that is not
    an integer (null included: 'Field 'index_topk' expected int') or not a multiple of index_kpool
    (validate_architecture), so vLLM loads no config."""
    default = config_defaults("glm5_next_text").get("index_topk")
    topk = raw.get("index_topk", default)
    if not isinstance(topk, int) or isinstance(topk, bool) or topk < 1:
        raise KvplanInputError(f"{path}: GLM-5 Next's index_topk must be a positive integer, got {topk!r} "
                               "(its config class refuses it, so vLLM cannot load the config).",
                               "Set index_topk to the checkpoint's top-k (the config class default is "
                               f"{default}), or leave it out.")
    if topk % kpool:
        raise KvplanInputError(f"{path}: GLM-5 Next's index_topk ({topk}) must be divisible by index_kpool "
                               f"({kpool}); its config class refuses the config.",
                               "Fix index_topk or index_kpool in config.json.")
    return topk


def _glm5_next(raw: dict[str, Any], layers: list[LayerArch], path: Path, notes: list[str]) -> list[LayerArch]:
    """vLLM's GLM-5 Next: layer_types 'linear_attention' layers are KDA linear attention, the others
    sparse MLA (index_topk, 2048 when absent), whose indexer keeps uint8 keys (index_head_dim + fp32 scale
    per 128) pooled over index_kpool tokens, and a bf16 ring of the in-progress pool (K and gate)."""
    types = _list(raw, "layer_types", path, str)
    ihd = _pos_int(raw, "index_head_dim", 128, path)
    kpool = _pos_int(raw, "index_kpool", 16, path)
    topk = _glm5_next_topk(raw, kpool, path)
    extra = (ExtraCache(name="indexer keys", elements=ihd + ihd // 128 * 4, element_bytes=1, tokens_per_state=kpool),
             ExtraCache(name="indexer tail ring", elements=2 * ihd, element_bytes=2, ring=True))
    # transformers' Glm5NextTextConfig (the config class vLLM loads) defaults linear_lower_bound to -5.0; null
    # is an unbounded gate
    bound = raw.get("linear_lower_bound", -5.0)
    if bound is not None and (not isinstance(bound, int | float) or isinstance(bound, bool)):
        raise KvplanInputError(f"{path}: linear_lower_bound must be a number, got {bound!r}.",
                               "Fix linear_lower_bound in config.json.")
    out = []
    for la in layers:
        if la.index < len(types) and types[la.index] == "linear_attention":
            out.append(LayerArch(index=la.index, kind="linear_attention",
                                 kda_gate_lower_bound=None if bound is None else float(bound),
                                 source=f"layer_types[{la.index}] = 'linear_attention': KDA linear attention"))
        elif la.kind == "mla":
            # Sparse MLA (index_topk: vLLM's is_sparse backends); its indexer caches are the extras.
            mla = la.mla.model_copy(update={"index_topk": topk}) if la.mla is not None else None
            out.append(la.model_copy(update={"indexer_bytes_per_token": 0, "extra_caches": extra, "mla": mla}))
        else:
            out.append(la)
    notes.append(f"GLM-5 Next: sparse MLA (index_topk {topk}); MLA layers keep indexer keys pooled over "
                 f"index_kpool {kpool} tokens and a tail ring")
    return out


def _deepseek_v41(raw: dict[str, Any], layers: list[LayerArch], path: Path, notes: list[str]) -> list[LayerArch]:
    """vLLM's DeepSeek-V4.1: every layer keeps a sliding-window fp8_ds_mla cache; compress_ratios[i]
    (0 sliding only, 1 full-length, 2 ratio-2 compressed) applies through the layers that own the caches:
    a kv_source_layer_ids layer stores the compressed latent (one 584 B state per ratio tokens; at ratio 2
    with an fp32 compressor ring), an index_source_layer_ids layer the indexer keys (index_head_dim +
    fp32 scale per 128); the other layers read the nearest source below them and store nothing more."""
    head = _pos_int(raw, "head_dim", 512, path)
    rope = raw.get("qk_rope_head_dim", 64)
    ratios = raw.get("compress_ratios") or []
    kv_src = set(_list(raw, "kv_source_layer_ids", path, int))
    idx_src = set(_list(raw, "index_source_layer_ids", path, int))
    window = _pos_int(raw, "sliding_window", 128, path)
    ihd = _pos_int(raw, "index_head_dim", 128, path)
    if not isinstance(rope, int) or isinstance(rope, bool) or not 0 <= rope < head or not isinstance(ratios, list):
        raise KvplanInputError(f"{path}: DeepSeek-V4.1 needs qk_rope_head_dim < head_dim and compress_ratios "
                               "(one per layer).", "Pass the model's full config.json.")
    record = head - rope + 2 * rope + 8  # fp8_ds_mla: fp8 NoPE + bf16 RoPE + 8 B scales
    mla = MlaDims(kv_lora_rank=head - rope, qk_rope_head_dim=rope, qk_nope_head_dim=head - rope, v_head_dim=head)
    out = []
    for la in layers:
        r = ratios[la.index] if la.index < len(ratios) else 0
        if r not in (0, 1, 2):
            raise KvplanInputError(f"{path}: compress_ratios[{la.index}] is {r!r}; vLLM's DeepSeek-V4.1 takes 0, 1 "
                                   "or 2.", "Fix compress_ratios in config.json.")
        extra: list[ExtraCache] = []
        if r and la.index in kv_src:
            extra.append(ExtraCache(name="compressed latent", elements=record, element_bytes=1, tokens_per_state=r))
            if r == 2:
                extra.append(ExtraCache(name="compressor state (fp32)", elements=2 * head, element_bytes=4, ring=True))
        if r and la.index in idx_src:
            extra.append(ExtraCache(name="indexer keys", elements=ihd + ihd // 128 * 4, element_bytes=1,
                                    tokens_per_state=r))
        role = ("kv and index source" if la.index in kv_src and la.index in idx_src else
                "kv source" if la.index in kv_src else "index source" if la.index in idx_src else "reader")
        out.append(LayerArch(index=la.index, kind="mla", num_heads=la.num_heads, num_kv_heads=1, head_size=head,
                             head_size_v=0, mla=mla, dsv4_compress_ratio=1, dsv4_window=window,
                             extra_caches=tuple(extra) if r else (),
                             source=f"DeepSeek-V4.1 compress_ratios[{la.index}] = {r} ({role if r else 'sliding only'})"
                                    f": sliding-window cache of {window} tokens"))
    notes.append("DeepSeek-V4.1: a sliding-window fp8_ds_mla cache per layer; compressed latent and indexer keys "
                 "only on kv_source_layer_ids / index_source_layer_ids")
    return out


_READERS: tuple[tuple[tuple[str, ...], _Reader], ...] = (
    ((".flint",), _flint), ((".step5",), _step5), ((".minimax_m3",), _minimax_m3),
    ((".bailing_moe_v3", ".bailing_moe_v3_vl"), _bailing_v3), ((".inkling",), _inkling),
    ((".glm5next",), _glm5_next), ((".deepseek_v41",), _deepseek_v41),
)


def flagship_layers(module: str, raw: dict[str, Any], layers: list[LayerArch], path: Path,
                    notes: list[str]) -> list[LayerArch]:
    """The decoder stack as the vLLM module's own model class builds it (unchanged for other modules)."""
    for suffixes, reader in _READERS:
        if module.endswith(suffixes):
            return reader(raw, layers, path, notes)
    return layers

