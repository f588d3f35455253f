"""Plan -> vLLM 0.33 launch flags: one global --kv-cache-dtype plus --kv-cache-dtype-skip-layers.

vLLM 0.33 can only express: one global dtype, and a skip list (decimal layer indices and/or the
keyword 'sliding_window') whose layers keep the model dtype ('auto'); skip runs after the
checkpoint's 'auto' resolution (vllm-0.33-kv-rules.md §2.2,
`vllm/model_executor/layers/attention/attention.py::Attention.__init__`). MLA layers honour indices
only (§2.3). So a per-layer plan is realised by choosing the global dtype and the skip set; what
cannot be expressed (two quantized dtypes, a 16-bit dtype other than the model's) is emitted in
the closest form that loses no precision, and named in a finding.

`realise` is shared with `kvplan.policy`, which uses it to turn policy settings into flags.
"""
from __future__ import annotations

import json
import shlex
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvplan import __version__
from kvplan.emit._common import compact, has_kv
from kvplan.emit.codes import finding, sort_findings
from kvplan.emit.model import EmitResult, LayerDifference
from kvplan.model.plan import EngineRef, Finding, Plan
from kvplan.model.vocab import Severity, quant_mode_of
from kvplan.releases import DEFAULT_ENGINE_VERSION

UNQUANTIZED = frozenset({"auto", "float16", "bfloat16"})
# Rules whose kv_cache_dtype decision is what `--kv-cache-dtype auto` alone gives a layer
# (explicit flag / ModelOpt resolution / compressed-tensors per-layer override); KV104 is the skip.
_AUTO_RULES = frozenset({"KV101", "KV102", "KV103"})
_BITS_PACKED = {"turboquant_k8v4": 6.0, "turboquant_4bit_nc": 4.0, "turboquant_k3v4_nc": 3.5,
                "turboquant_3bit_nc": 3.0, "octave_k3v4": 3.5, "octave_k3v3": 3.0,
                "octave_k3v3_compact": 3.0, "ultraquant_4bit": 4.0}


def kv_bits(kv_cache_dtype: str) -> float:
    """Nominal bits per stored K/V element (precision order for 'closest without losing precision')."""
    d = kv_cache_dtype
    if d in UNQUANTIZED:
        return 16.0
    if d in _BITS_PACKED:
        return _BITS_PACKED[d]
    if d.startswith("nvfp4") or d == "int4_per_token_head":
        return 4.0
    return 8.0  # fp8 family, int8/fp8 per-token-head, fp8_ds_mla


def is_quantized(kv_cache_dtype: str) -> bool:
    return quant_mode_of(kv_cache_dtype).is_quantized


@dataclass(frozen=True)
class LayerTarget:
    """One KV layer to realise: its facts, the wanted kv_cache_dtype, and what 'auto' gives it."""

    index: int
    kind: str
    sliding_window: int | None
    target: str
    auto_value: str | None = None
    """kv_cache_dtype this layer ends with under `--kv-cache-dtype auto` and no skips (None: unknown)."""

    @property
    def matches_sliding_keyword(self) -> bool:
        # vLLM: 'sliding_window' skips Attention layers that have a window; never MLA (§2.3).
        return self.kind != "mla" and self.sliding_window is not None


@dataclass(frozen=True)
class Realisation:
    """The global dtype and skip list chosen for a set of layer targets, and what each layer gets."""

    kv_cache_dtype: str
    """Value for --kv-cache-dtype."""
    auto_mode: bool
    """The global value is 'auto' because the checkpoint's own resolution gives the planned dtypes."""
    skip_layers: tuple[int, ...]
    """Indices that must be skipped."""
    skip_tokens: tuple[str, ...]
    """--kv-cache-dtype-skip-layers tokens (compact: 'sliding_window' where it fits)."""
    emitted: dict[int, str] = field(default_factory=dict)
    """Per layer index: the kv_cache_dtype vLLM will give it."""
    differences: tuple[tuple[int, str, str, str], ...] = ()
    """(index, planned, emitted, reason) for layers that do not get their target."""
    mixed_quantized: tuple[str, ...] = ()
    """The distinct quantized targets, when there is more than one."""


def _closest(target: str, base: str) -> str:
    """What a layer that cannot get `target` should get under global `base`: never fewer bits."""
    if is_quantized(target) and is_quantized(base):
        return base if kv_bits(base) >= kv_bits(target) else "auto"
    if is_quantized(target):
        return base  # base is 16-bit: more precision than asked
    return "auto" if is_quantized(base) or base != target else base


def _score(layers: Sequence[LayerTarget], base_of: Callable[[LayerTarget], str],
           ) -> tuple[int, dict[int, str], set[int], list[tuple[int, str, str]]]:
    emitted: dict[int, str] = {}
    skip: set[int] = set()
    inexact: list[tuple[int, str, str]] = []
    for lt in layers:
        base = base_of(lt)
        if lt.target == base:
            emitted[lt.index] = base
        elif lt.target == "auto":
            emitted[lt.index] = "auto"
            skip.add(lt.index)
        else:
            got = _closest(lt.target, base)
            emitted[lt.index] = got
            if got == "auto" and base != "auto":
                skip.add(lt.index)
            inexact.append((lt.index, lt.target, got))
    return len(inexact), emitted, skip, inexact


def _skip_tokens(layers: Sequence[LayerTarget], skip: set[int], emitted: dict[int, str]) -> tuple[str, ...]:
    by_index = [str(i) for i in sorted(skip)]
    sliding = {lt.index for lt in layers if lt.matches_sliding_keyword}
    # The keyword may only be used when every layer it matches ends as 'auto' anyway.
    if not sliding or not sliding & skip or any(emitted[i] != "auto" for i in sliding):
        return tuple(by_index)
    keyword = ("sliding_window", *tuple(str(i) for i in sorted(skip - sliding)))
    if sliding <= skip and len(keyword) <= len(by_index):
        return keyword
    return keyword if len(keyword) < len(by_index) else tuple(by_index)


def realise(layers: Sequence[LayerTarget], candidates: Iterable[str] = ()) -> Realisation:
    """Choose --kv-cache-dtype and the skip list that give each layer its target, or the closest.

    Modes tried: 'auto' (only when every layer's auto_value is known) and each explicit global
    dtype among the targets and `candidates`. The mode with the fewest inexact layers wins; ties
    prefer 'auto' (a checkpoint-resolved dtype is not hard-coded), then the dtype most layers ask
    for, then the one the lowest layer asks for.
    """
    layers = list(layers)
    best = None
    for tiebreak, g, auto in _modes(layers, candidates):
        n, emitted, skip, inexact = _score(layers, _auto_value if auto else _fixed(g))
        key = (n, *tiebreak)
        if best is None or key < best[0]:
            best = (key, g, auto, emitted, skip, inexact)
    if best is None:  # no KV layers at all
        return Realisation(kv_cache_dtype="auto", auto_mode=False, skip_layers=(), skip_tokens=())
    _, g, auto, emitted, skip, inexact = best
    distinct_q = tuple(sorted({lt.target for lt in layers if is_quantized(lt.target)}))
    diffs = [(idx, planned, got, _why_inexact(planned, got, g, auto, mixed=len(distinct_q) > 1))
             for idx, planned, got in inexact]
    return Realisation(kv_cache_dtype="auto" if auto else g, auto_mode=auto,
                       skip_layers=tuple(sorted(skip)), skip_tokens=_skip_tokens(layers, skip, emitted),
                       emitted=emitted, differences=tuple(diffs),
                       mixed_quantized=distinct_q if len(distinct_q) > 1 else ())


def _auto_value(lt: LayerTarget) -> str:
    assert lt.auto_value is not None  # 'auto' mode is tried only when every layer's auto value is known
    return lt.auto_value


def _fixed(g: str) -> Callable[[LayerTarget], str]:
    return lambda lt: g


def _modes(layers: list[LayerTarget], candidates: Iterable[str]) -> list[tuple[tuple[Any, ...], str, bool]]:
    """The modes `realise` tries, each as (tie-break key, global dtype, auto mode)."""
    counts = Counter(lt.target for lt in layers)
    first: dict[str, int] = {}
    for lt in layers:
        first.setdefault(lt.target, lt.index)
    options: list[tuple[tuple[Any, ...], str, bool]] = []
    if layers and all(lt.auto_value is not None for lt in layers):
        options.append(((0,), "auto", True))
    explicit = {lt.target for lt in layers if lt.target != "auto"} | {c for c in candidates if c and c != "auto"}
    if not explicit and not options:
        explicit = {"auto"}
    for g in sorted(explicit):
        options.append(((1, -counts.get(g, 0), first.get(g, 1 << 30), g), g, False))
    return options


def _why_inexact(planned: str, got: str, g: str, auto: bool, *, mixed: bool) -> str:
    """Why a layer planned as `planned` gets `got` under global dtype `g` (or 'auto' mode)."""
    if is_quantized(planned) and mixed and not auto and is_quantized(g):
        return (f"vLLM 0.33 has one global --kv-cache-dtype ({g}); a layer cannot hold {planned} beside it"
                + (" (kept in the model dtype: fewer bits would lose precision)" if got == "auto"
                   else f" ({g} has at least as many bits)"))
    if is_quantized(planned) and not is_quantized(g if not auto else got):
        return ("the checkpoint's 'auto' resolution leaves this layer unquantized and vLLM 0.33 "
                "cannot quantize one layer alone" if auto else
                f"the global --kv-cache-dtype {g} is 16-bit; skip lists only remove quantization")
    if not is_quantized(planned):
        return (f"{planned} is a 16-bit dtype other than the global one; skipped layers always store "
                "the model dtype ('auto')")
    return f"vLLM 0.33 has one global --kv-cache-dtype ({g})"


def auto_values(plan: Plan) -> dict[int, str] | None:
    """Per layer, what `--kv-cache-dtype auto` (no skips) gives, if the plan was made under 'auto'."""
    if plan.flags.get("kv_cache_dtype", "auto") != "auto":
        return None
    out: dict[int, str] = {}
    for lp in plan.layers:
        if not has_kv(lp):
            continue
        vals = [d.value for d in lp.decisions if d.field == "kv_cache_dtype" and d.rule in _AUTO_RULES]
        out[lp.index] = vals[-1] if vals else plan.kv_cache_dtype
    return out


def layer_targets(plan: Plan) -> list[LayerTarget]:
    """The plan's KV layers as realisation targets (their own kv_cache_dtype)."""
    av = auto_values(plan)
    return [LayerTarget(index=lp.index, kind=lp.kind, sliding_window=lp.sliding_window,
                        target=lp.kv_cache_dtype or "auto", auto_value=av.get(lp.index) if av else None)
            for lp in plan.layers if has_kv(lp)]


# Plan flag -> vLLM flag, in emission order (kv flags come first).
_FLAG_ORDER: tuple[tuple[str, str], ...] = (
    ("dtype", "--dtype"), ("tensor_parallel_size", "--tensor-parallel-size"),
    ("max_model_len", "--max-model-len"), ("block_size", "--block-size"),
    ("gpu_memory_utilization", "--gpu-memory-utilization"),
    ("max_num_batched_tokens", "--max-num-batched-tokens"), ("attention_backend", "--attention-backend"),
    ("quantization", "--quantization"), ("attention_config", "--attention-config"),
)


def _flag_value(v: Any) -> str:
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    return str(v)


def flags_for(r: Realisation, other_flags: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """(argv, --config YAML mapping) for a realisation plus the plan's other serving flags."""
    argv = ["--kv-cache-dtype", r.kv_cache_dtype]
    cfg: dict[str, Any] = {"kv-cache-dtype": r.kv_cache_dtype}
    if r.skip_tokens:
        argv += ["--kv-cache-dtype-skip-layers", *r.skip_tokens]
        cfg["kv-cache-dtype-skip-layers"] = list(r.skip_tokens)
    for name, flag in _FLAG_ORDER:
        if name in other_flags and other_flags[name] not in (None, {}, ""):
            v = other_flags[name]
            argv += [flag, _flag_value(v)]
            # vLLM's --config loader passes dicts on as JSON and lists as repeated values
            # (vllm/utils/argparse_utils.py::FlexibleArgumentParser.load_config_file).
            cfg[flag[2:]] = dict(sorted(v.items())) if isinstance(v, dict) else v
    return argv, cfg


def plan_error_findings(plan: Plan) -> list[Finding]:
    errs = [f for f in plan.findings if f.severity is Severity.error]
    if not errs:
        return []
    codes = ", ".join(sorted({f.code for f in errs}))
    layers = sorted({i for f in errs for i in f.layers})
    return [finding("KV986", f"the plan has {len(errs)} error finding(s) ({codes}); vLLM 0.33 would refuse "
                             "or crash on this launch as the plan predicts.", layers)]


def group_differences(diffs: Iterable[tuple[int, str, str, str]], who=lambda i: "") -> str:
    """'layers 0-1,31: fp8 -> auto (why)' groups, in first-layer order."""
    groups: dict[tuple[str, str, str, str], list[int]] = {}
    for i, planned, got, why in diffs:
        groups.setdefault((who(i), planned, got, why), []).append(i)
    parts = []
    for (w, planned, got, why), idx in sorted(groups.items(), key=lambda kv: kv[1][0]):
        label = ("layer " if len(idx) == 1 else "layers ") + compact(idx)
        parts.append(f"{label}: {w + ' ' if w else ''}{planned} -> {got} ({why})")
    return "; ".join(parts)


def difference_findings(r: Realisation, engine: str = "vLLM 0.33") -> list[Finding]:
    out: list[Finding] = []
    mixed = [d for d in r.differences if is_quantized(d[1]) and r.mixed_quantized and is_quantized(r.kv_cache_dtype)]
    other = [d for d in r.differences if d not in mixed]
    if mixed:
        out.append(finding("KV980", f"the plan uses {len(r.mixed_quantized)} quantized KV dtypes "
                                    f"({', '.join(r.mixed_quantized)}) but {engine} has one global "
                                    f"--kv-cache-dtype; {group_differences(mixed)}.",
                           [d[0] for d in mixed]))
    if other:
        out.append(finding("KV981", f"{len(other)} layer(s) cannot get their planned dtype in {engine}: "
                                    f"{group_differences(other)}.", [d[0] for d in other]))
    return out


def emit_vllm(plan: Plan, *, per_layer: bool = False) -> EmitResult:
    """Realise a plan as vLLM 0.33 flags and `--config` YAML."""
    r = realise(layer_targets(plan), candidates=(plan.kv_cache_dtype, plan.flags.get("kv_cache_dtype", "")))
    others = {k: v for k, v in plan.flags.items() if k not in ("kv_cache_dtype", "kv_cache_dtype_skip_layers")}
    argv, cfg = flags_for(r, others)
    findings = difference_findings(r) + plan_error_findings(plan)
    diffs = [LayerDifference(index=i, planned=p, emitted=e, reason=why) for i, p, e, why in r.differences]
    return EmitResult(
        kvplan_version=__version__, target=EngineRef(name="vllm", version=DEFAULT_ENGINE_VERSION),
        plan_engine=plan.engine, model_source=plan.model.source, args=argv, command=shlex.join(argv),
        config=cfg, config_usage="vllm serve MODEL --config kvplan-vllm.yaml",
        exact=not diffs, differences=diffs, findings=sort_findings(findings))
