"""--kv-cache-dtype-skip-layers: which layers keep the model dtype, and tokens that match nothing."""
from __future__ import annotations

from collections.abc import Iterator

from kvplan.model.arch import LayerArch
from kvplan.model.vocab import NO_KV_KINDS, quant_mode_of
from kvplan.rules.base import Emit, Subject, declare
from kvplan.rules.context import FlagsContext, RuleContext
from kvplan.rules.state import LayerState, Set, decides_layer

SKIP_REF = "https://github.com/vllm-project/vllm/pull/33695"


def is_index_token(tok: str) -> bool:
    """vLLM compares str(layer_idx) with the token: only plain decimal spellings can match."""
    return tok.isdigit() and str(int(tok)) == tok


@declare(code="KV104", name="skip-layers", kind="decision", scope="layer", family="skip",
         severity="info", summary="Layers named by --kv-cache-dtype-skip-layers keep the model dtype ('auto').",
         why="Skip runs after the checkpoint override, so a skipped layer is 'auto' even when the "
             "checkpoint asked for fp8. 'sliding_window' matches layers with a sliding window (not "
             "MLA layers, not chunked-local layers); decimal tokens match the layer index.",
         fix="Remove the layer from --kv-cache-dtype-skip-layers to quantize it.",
         references=(SKIP_REF, "vllm/model_executor/layers/attention/attention.py::Attention.__init__"),
         versions=">=0.19")
@decides_layer("kv_cache_dtype", "skipped")
def skip_layers(ctx: RuleContext, la: LayerArch, st: LayerState) -> Iterator[Set]:
    toks = ctx.flags.kv_cache_dtype_skip_layers
    if not toks or la.kind in NO_KV_KINDS or st.kv_cache_dtype is None:
        return
    if la.kind == "mla" and not ctx.engine_has("mla_kv_cache_dtype_skip_layers"):
        return  # MLAAttention reads the skip list from 0.28 (ENGINE_FEATURES mla_kv_cache_dtype_skip_layers)
    reasons: list[str] = []
    if la.kind != "mla" and la.sliding_window is not None and "sliding_window" in toks:
        reasons.append(f"'sliding_window' listed and the layer slides (window {la.sliding_window})")
    if str(la.index) in toks:
        reasons.append(f"index {la.index} listed")
    if reasons:
        yield Set("kv_cache_dtype", "auto", "--kv-cache-dtype-skip-layers: " + "; ".join(reasons))
        yield Set("skipped", True, "; ".join(reasons))


def _skip_token(tok: str) -> Subject:
    return Subject(flag="--kv-cache-dtype-skip-layers", value=tok)


@declare(code="KV301", name="skip-token-unknown", severity="warning", family="skip",
         summary="A --kv-cache-dtype-skip-layers token is neither 'sliding_window' nor a layer index.",
         why="vLLM accepts only 'sliding_window' and plain decimal indices and silently ignores "
             "anything else ('full_attention', '-1', '0-3', '03', 'sliding').",
         fix="Use 'sliding_window' or decimal layer indices separated by spaces.",
         references=(SKIP_REF,), versions=">=0.19")
def skip_unknown(ctx: FlagsContext) -> Iterator[Emit]:
    for tok in ctx.flags.kv_cache_dtype_skip_layers:
        if tok != "sliding_window" and not is_index_token(tok):
            parts = [p.strip() for p in tok.split(",") if p.strip()]
            if len(parts) > 1:  # nargs='+': vLLM 0.33 does not split on commas
                yield Emit(f"--kv-cache-dtype-skip-layers token {tok!r} matches nothing in vLLM; did you mean "
                           f"`{' '.join(parts)}`? (vLLM takes space-separated tokens and ignores this one silently.)",
                           fix=f"Pass the tokens separated by spaces: --kv-cache-dtype-skip-layers {' '.join(parts)}.",
                           subject=_skip_token(tok))
            else:
                yield Emit(f"--kv-cache-dtype-skip-layers token {tok!r} matches nothing; vLLM ignores it silently.",
                           subject=_skip_token(tok))


@declare(code="KV302", name="skip-index-out-of-range", severity="warning", family="skip",
         summary="A skip-layer index is beyond the model's layers.",
         why="vLLM ignores indices that name no layer, so the layer you meant stays quantized.",
         fix="Use indices from 0 to num_layers - 1 (see `kvplan explain`).", references=(SKIP_REF,), versions=">=0.19")
def skip_out_of_range(ctx: RuleContext) -> Iterator[Emit]:
    n = ctx.arch.num_layers
    for tok in ctx.flags.kv_cache_dtype_skip_layers:
        if is_index_token(tok) and int(tok) >= n:
            yield Emit(f"skip-layer index {tok} is out of range: the model has layers 0..{n - 1}.",
                       subject=_skip_token(tok))


@declare(code="KV303", name="skip-index-without-kv", severity="warning", family="skip",
         summary="A skip-layer index names a layer that holds no KV cache (Mamba, linear attention, MLP).",
         why="Hybrid models number every block; only attention layers have a KV cache, so the skip "
             "does nothing.",
         fix="Pick attention layer indices (`kvplan explain` lists them).", references=(SKIP_REF,), versions=">=0.19")
def skip_without_kv(ctx: RuleContext) -> Iterator[Emit]:
    by_index = {la.index: la for la in ctx.arch.layers}
    for tok in ctx.flags.kv_cache_dtype_skip_layers:
        if is_index_token(tok) and int(tok) in by_index and by_index[int(tok)].kind in NO_KV_KINDS:
            la = by_index[int(tok)]
            yield Emit(f"skip-layer index {tok} names a {la.kind} layer, which has no KV cache.", (la.index,),
                       subject=_skip_token(tok))


@declare(code="KV304", name="skip-sliding-window-matches-nothing", severity="warning", family="skip",
         summary="'sliding_window' is in the skip list but no layer of this model slides.",
         why="Chunked-local layers (Llama 4) and MLA layers have no sliding window, and configs with "
             "use_sliding_window: false have none either, so the token skips nothing.",
         fix="Drop 'sliding_window' or list the layer indices you want in 16-bit.", references=(SKIP_REF,),
         versions=">=0.19")
def skip_sw_nothing(ctx: RuleContext) -> Iterator[Emit]:
    if "sliding_window" in ctx.flags.kv_cache_dtype_skip_layers and not any(
            la.sliding_window is not None and la.kind != "mla" for la in ctx.arch.layers):
        yield Emit("'sliding_window' is in --kv-cache-dtype-skip-layers but this model has no sliding-window layers.")


@declare(code="KV305", name="skip-removes-all-quantization", severity="warning", family="skip",
         summary="The skip list covers every KV layer, so nothing is quantized.",
         why="A config with sliding_window and no layer_types makes every layer sliding in vLLM, so "
             "'sliding_window' skips all of them; the FP8 memory saving is gone.",
         fix="List only the layer indices you want in 16-bit.", references=(SKIP_REF,), versions=">=0.19")
def skip_all(ctx: RuleContext) -> Iterator[Emit]:
    if not ctx.flags.kv_cache_dtype_skip_layers or not quant_mode_of(ctx.kv_cache_dtype).is_quantized:
        return
    kv = [lp for lp in ctx.layers if lp.kind not in NO_KV_KINDS and lp.kv_cache_dtype is not None]
    if kv and all(lp.skipped for lp in kv):
        yield Emit(f"--kv-cache-dtype {ctx.kv_cache_dtype} has no effect: the skip list covers all "
                   f"{len(kv)} KV layers.")


@declare(code="KV306", name="skip-without-quantization", severity="info", family="skip",
         summary="A skip list is given but the KV cache is not quantized, so it changes nothing.",
         why="Skipping keeps a layer in the model dtype, which every layer already has.",
         fix="Drop --kv-cache-dtype-skip-layers or quantize the KV cache.", references=(SKIP_REF,), versions=">=0.19")
def skip_noop(ctx: RuleContext) -> Iterator[Emit]:
    if ctx.flags.kv_cache_dtype_skip_layers and not any(lp.quant_mode.is_quantized for lp in ctx.layers) \
            and not any(lp.skipped for lp in ctx.layers if lp.kind in NO_KV_KINDS) \
            and not quant_mode_of(ctx.kv_cache_dtype).is_quantized and not ctx.quant.ct_kv_cache_scheme:
        yield Emit("--kv-cache-dtype-skip-layers has no effect: no layer's KV cache is quantized.")


@declare(code="KV111", name="model-class-ignores-kv-cache-dtype", kind="decision", scope="layer",
         family="dtype", severity="warning",
         summary="The model class builds this layer without the cache config: its KV stays in the model dtype.",
         why="vLLM 0.33's Falcon attention (rotary and ALiBi variants) constructs Attention without "
             "cache_config, so the layer's kv_cache_dtype is 'auto' whatever --kv-cache-dtype says "
             "(measured with vLLM's own FalconForCausalLM on the meta device).",
         fix="Expect model-dtype KV memory for this architecture; --kv-cache-dtype does not change it.",
         references=("vllm/model_executor/models/falcon.py::FalconAttention",))
@decides_layer("kv_cache_dtype")
def model_ignores_dtype(ctx: RuleContext, la: LayerArch, st: LayerState) -> Iterator[Set]:
    if la.kv_cache_dtype_ignored and st.kv_cache_dtype not in (None, "auto"):
        yield Set("kv_cache_dtype", "auto", f"{ctx.arch.architecture}: vLLM builds this layer's attention "
                                            "without the cache config")


@declare(code="KV112", name="kv-cache-dtype-has-no-effect", severity="warning", family="dtype",
         summary="--kv-cache-dtype has no effect on this architecture's layers in vLLM.",
         why="The model class builds its attention without the cache config (KV111); vLLM starts "
             "and silently keeps the KV cache in the model dtype.",
         fix="Budget KV memory at the model dtype, or serve a model whose vLLM class honours --kv-cache-dtype.",
         references=("vllm/model_executor/models/falcon.py::FalconAttention",))
def dtype_no_effect(ctx: RuleContext) -> Iterator[Emit]:
    hit = tuple(lp.index for lp in ctx.layers if "KV111" in lp.decided_by)
    if hit:
        yield Emit(f"--kv-cache-dtype {ctx.kv_cache_dtype} has no effect on {ctx.arch.architecture}: vLLM "
                   f"keeps these {len(hit)} layers' KV in the model dtype.", hit)


@declare(code="KV116", name="kv-shared-dtype-mismatch", severity="warning", family="skip",
         summary="A KV-sharing layer and the layer whose cache it reads end with different KV cache dtypes.",
         why="Gemma 3n / Gemma 4's last num_kv_shared_layers layers read an earlier layer's KV cache "
             "(kv_sharing_target_layer_name). vLLM 0.33 checks only that both layers have the same attention "
             "type, not the same kv_cache_dtype: when --kv-cache-dtype-skip-layers lists one of them and not "
             "the other, the sharing layer's attention is built for one dtype and reads a cache stored in "
             "another.",
         fix="List a KV-sharing layer and the layer whose cache it reads together in "
             "--kv-cache-dtype-skip-layers, or neither ('sliding_window' keeps same-type layers together).",
         references=("vllm/model_executor/layers/attention/attention.py::validate_kv_sharing_target",))
def kv_shared_dtype_mismatch(ctx: RuleContext) -> Iterator[Emit]:
    by_index = {lp.index: lp for lp in ctx.layers}
    pairs: dict[tuple[int, str, str], list[int]] = {}
    for lp in ctx.layers:
        target = by_index.get(lp.kv_shared_with) if lp.kv_shared_with is not None else None
        if target is not None and target.kv_cache_dtype and lp.kv_cache_dtype != target.kv_cache_dtype:
            pairs.setdefault((target.index, target.kv_cache_dtype, lp.kv_cache_dtype or "-"), []).append(lp.index)
    for (t, stored, built), readers in sorted(pairs.items()):
        yield Emit(f"layers {', '.join(map(str, readers))} read layer {t}'s KV cache, stored as {stored}, but are "
                   f"built for {built}: vLLM does not check it.", (t, *readers))
