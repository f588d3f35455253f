"""End to end on the plan's own model: the model run with a KV configuration applied inside every
attention layer, against the reference run (K/V in the model dtype, as the model computes them:
what vLLM's ``--kv-cache-dtype auto`` stores; fp32 attention math).

K/V are stored the way the cache stores them (post-RoPE) and attention reads them back, prefill
and every later position attending over the cache (kvplan.runtime.causal_lm). Scores per
configuration: mean/max KL(p_ref || p) of the next-token distribution, top-1 agreement with the
reference, and perplexity of the eval text. Calibrated scales come from the *calibration* text,
never the eval text. The model is loaded once; configurations run one after another on the same
weights.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.errors import KvplanInputError
from kvplan.runtime.causal_lm import CausalLM, LayerKVMode, WeightsRef, fake_quant

if TYPE_CHECKING:  # pydantic: the report types are built only where a plan is (GPU boxes may lack pydantic)
    from kvplan.runtime.validate_model import EvalRow, ModelEval, Sensitivity, UnquantizedLayer

__all__ = [
    "EVAL_TOKENS",
    "AttnLayer",
    "Evaluator",
    "KVConfig",
    "LayerKVMode",
    "comparison_configs",
    "evaluate_plan",
    "fake_quant",
    "layers_from_config",
    "load_text",
    "locate_model",
    "open_model",
    "plan_config",
]

EVAL_TOKENS = 256
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class AttnLayer:
    """An attention layer the runtime executes, with its cache geometry from the plan."""

    index: int
    kind: str
    num_kv_heads: int
    head_size: int
    sliding_window: int | None


@dataclass(frozen=True)
class KVConfig:
    """A KV configuration: storage per executed attention layer (absent layers: unquantized)."""

    name: str
    description: str
    modes: dict[int, LayerKVMode]

    @property
    def skip_layers(self) -> list[int]:
        return sorted(i for i, m in self.modes.items() if m.quant_mode == "none")

    def quantized_layers(self) -> int:
        return sum(m.quant_mode != "none" for m in self.modes.values())

    def bytes_per_token(self, layers: list[AttnLayer], model_dtype: str, fixed: int = 0) -> int:
        """Sum over executed layers of the configuration's page bytes, plus ``fixed`` (the layers the
        runtime does not execute, as planned)."""
        return fixed + sum(self.modes.get(lay.index, LayerKVMode("none")).layout(
            lay.num_kv_heads, lay.head_size, model_dtype).bytes_per_token for lay in layers)


def uniform(name: str, description: str, layers: list[AttnLayer], make: Callable[[AttnLayer], LayerKVMode],
            skip: tuple[int, ...] = ()) -> KVConfig:
    return KVConfig(name, description, {lay.index: LayerKVMode("none", sliding_window=lay.sliding_window)
                                        if lay.index in skip else make(lay) for lay in layers})


def comparison_configs(layers: list[AttnLayer], calibrated: dict[int, tuple[float, float]],
                       skip: tuple[int, ...]) -> list[KVConfig]:
    """bf16, FP8 per-tensor scale 1.0 / calibrated, INT8 and FP8 per-token-head, INT4, and the
    quantized ones again with ``skip`` layers kept in bf16."""
    skip_txt = ",".join(map(str, skip))
    w: Callable[[AttnLayer], int | None] = lambda lay: lay.sliding_window  # noqa: E731
    quant: list[tuple[str, str, Callable[[AttnLayer], LayerKVMode]]] = [
        ("fp8-scale-1.0", "FP8 e4m3 per-tensor, k_scale = v_scale = 1.0 (vLLM's uncalibrated default)",
         lambda lay: LayerKVMode("fp8_per_tensor", 1.0, 1.0, sliding_window=w(lay))),
        ("fp8-calibrated", "FP8 e4m3 per-tensor, scales = amax/448 from the calibration text",
         lambda lay: LayerKVMode("fp8_per_tensor", *calibrated[lay.index], sliding_window=w(lay))),
        ("int8-pth", "INT8 per-token-head (dynamic scales stored inline)",
         lambda lay: LayerKVMode("int8_per_token_head", sliding_window=w(lay))),
        ("fp8-pth", "FP8 e4m3 per-token-head (dynamic scales stored inline)",
         lambda lay: LayerKVMode("fp8_per_token_head", sliding_window=w(lay))),
        ("int4-pth", "INT4 per-token-head, Hadamard-rotated",
         lambda lay: LayerKVMode("int4_per_token_head", sliding_window=w(lay))),
    ]
    out = [uniform("bf16", "every layer bf16 through kvplan's path (the control: near-zero KL)", layers,
                   lambda lay: LayerKVMode("none", sliding_window=w(lay)))]
    out += [uniform(name, desc, layers, make) for name, desc, make in quant]
    out += [uniform(f"{name}+skip", f"{desc}; layers {skip_txt} kept in bf16", layers, make, skip)
            for name, desc, make in quant[:4]]
    return out


def mode_for(kv_cache_dtype: str, lay: AttnLayer, scales: tuple[float, float] = (1.0, 1.0)) -> LayerKVMode:
    """The storage of one layer under a global --kv-cache-dtype."""
    from kvplan.model.vocab import quant_mode_of
    mode = quant_mode_of(kv_cache_dtype).value
    fmt = "e5m2" if "e5m2" in kv_cache_dtype else "e4m3fn"
    if mode == "fp8_per_tensor":
        return LayerKVMode(mode, *scales, fp8_format=fmt, sliding_window=lay.sliding_window)
    return LayerKVMode(mode, fp8_format=fmt, sliding_window=lay.sliding_window)


def plan_config(plan: Any, layers: list[AttnLayer], kv_scales: Any, ckpt_quant: Any,
                calibrated: dict[int, tuple[float, float]]) -> KVConfig:
    """The plan's own per-layer storage; FP8 per-tensor layers use the --kv-scales file's scales, the
    checkpoint's (the values vLLM loads), else 1.0 (default_1.0); checkpoint scales kvplan cannot read
    fall back to the calibration text's, said in the description."""
    from kvplan.runtime.validate import _plan_dict, _scales_for
    by = {lp.index: lp for lp in plan.layers}
    modes: dict[int, LayerKVMode] = {}
    fallback: list[int] = []
    for lay in layers:
        d = _plan_dict(by[lay.index])
        mode = str(d.get("quant_mode") or "none")
        fmt = "e5m2" if "e5m2" in str(d.get("kv_cache_dtype")) else "e4m3fn"
        if mode == "fp8_per_tensor":
            ks, vs, why = _scales_for(d, kv_scales, ckpt_quant)
            if why is not None or ks is None or vs is None:
                ks, vs = calibrated[lay.index]
                fallback.append(lay.index)
            modes[lay.index] = LayerKVMode(mode, ks, vs, fmt, lay.sliding_window)
        else:
            modes[lay.index] = LayerKVMode(mode, fp8_format=fmt, sliding_window=lay.sliding_window)
    note = (f"; checkpoint scales of layers {','.join(map(str, fallback))} not readable: calibration-text scales"
            if fallback else "")
    return KVConfig("plan", f"the plan given ({plan.kv_cache_dtype}){note}", modes)


# ----------------------------------------------------------------------------------- text
def load_text(path: str | Path | None, default: Path) -> tuple[str, str]:
    """(name, text) of --text: plain text, or JSONL whose lines are objects with a ``text`` field."""
    if path is None:
        return default.name, default.read_text(encoding="utf-8")
    p = Path(path)
    if not p.is_file():
        raise KvplanInputError(f"--text {path}: no such file.", "Pass a plain-text file or JSONL with a 'text' field.")
    try:
        raw = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise KvplanInputError(f"--text {path}: cannot read it as UTF-8 text ({type(e).__name__}).",
                               "Pass a UTF-8 plain-text file or JSONL.") from None
    if p.suffix.lower() in (".jsonl", ".ndjson"):
        parts = []
        for n, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as e:
                raise KvplanInputError(f"--text {path}: line {n} is not JSON ({e.msg}).",
                                       "Give one JSON object per line, each with a 'text' string.") from None
            if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
                raise KvplanInputError(f"--text {path}: line {n} has no 'text' string.",
                                       "Give one JSON object per line, each with a 'text' string.")
            parts.append(doc["text"])
        raw = "\n\n".join(parts)
    if not raw.strip():
        raise KvplanInputError(f"--text {path}: the file holds no text.", "Pass a file with the text to evaluate.")
    return p.name, raw


# ----------------------------------------------------------------------------------- layers
def attention_layers(plan: Any) -> tuple[list[AttnLayer], list[UnquantizedLayer]]:
    """The plan's layers the runtime executes, and those it runs unquantized (named with why)."""
    from kvplan.runtime.validate import _plan_dict, executable
    from kvplan.runtime.validate_model import UnquantizedLayer
    run, other = [], []
    for lp in plan.layers:
        d = _plan_dict(lp)
        why = executable(d)
        if why is None:
            run.append(AttnLayer(int(d["index"]), str(d["kind"]), int(d["num_kv_heads"]), int(d["head_size"]),
                                 int(d["sliding_window"]) if d.get("sliding_window") else None))
        elif d.get("kind") != "none" and (d.get("kv_cache_dtype") or d.get("kind") in ("mamba", "linear_attention")):
            other.append(UnquantizedLayer(index=int(d["index"]), kind=str(d["kind"]), reason=why))
    return run, other


def layers_from_config(config: dict[str, Any]) -> list[AttnLayer]:
    """The attention layers of a plain decoder config.json without the planner (benchmarks and GPU
    tests on machines without pydantic): full or sliding by ``layer_types`` (else every layer
    sliding when ``sliding_window`` is set, as vLLM reads such configs)."""
    c = config.get("text_config", config)
    n, hq = int(c["num_hidden_layers"]), int(c["num_attention_heads"])
    hkv = int(c.get("num_key_value_heads") or hq)
    d = int(c.get("head_dim") or int(c["hidden_size"]) // hq)
    window = c.get("sliding_window")
    types = c.get("layer_types") or (["sliding_attention" if window else "full_attention"] * n)
    return [AttnLayer(i, t, hkv, d, int(window) if t == "sliding_attention" and window else None)
            for i, t in enumerate(types)]


def check_model_matches(plan: Any, ref: WeightsRef) -> None:
    """The plan's layers against the model's config.json (before any weight is loaded): same layer
    count, kinds and head sizes (kv heads too unless the plan is per tensor-parallel rank)."""
    from kvplan.pipeline import compile as compile_plan
    mine = compile_plan(dict(ref.config), [])
    tp = int(plan.flags.get("tensor_parallel_size") or 1)
    fix = "Plan the model you run (`kvplan validate MODEL --e2e`), or pass --model with the plan's model."
    if len(mine.layers) != len(plan.layers):
        raise KvplanInputError(f"--e2e: the plan has {len(plan.layers)} layers ({plan.model.model_type}), the model "
                               f"{ref.label} has {len(mine.layers)} ({mine.model.model_type}).", fix)
    for a, b in zip(plan.layers, mine.layers, strict=True):
        if a.kind != b.kind or a.head_size != b.head_size or (tp == 1 and a.num_kv_heads != b.num_kv_heads):
            raise KvplanInputError(f"--e2e: plan layer {a.index} is {a.kind} with {a.num_kv_heads} kv heads x "
                                   f"{a.head_size}; the model {ref.label} has {b.kind} with {b.num_kv_heads} x "
                                   f"{b.head_size}.", fix)


# ----------------------------------------------------------------------------------- scoring
def scores(ref_logits, logits, ids, chunk: int = 256) -> tuple[float, float, float, float]:
    """(mean KL, max KL, top-1 agreement, perplexity), in float64 over chunks of positions."""
    import torch
    t = ref_logits.shape[0]
    kl_sum, kl_max, agree, nll = 0.0, 0.0, 0.0, 0.0
    tgt = ids[0].to(logits.device)
    for a in range(0, t, chunk):
        b = min(t, a + chunk)
        lr = torch.log_softmax(ref_logits[a:b].double(), -1)
        lq = torch.log_softmax(logits[a:b].double(), -1)
        kl = (lr.exp() * (lr - lq)).sum(-1)
        kl_sum += float(kl.sum())
        kl_max = max(kl_max, float(kl.max()))
        agree += float((ref_logits[a:b].argmax(-1) == logits[a:b].argmax(-1)).sum())
        e = min(b, t - 1)
        if e > a:
            nll += float(-lq[: e - a].gather(-1, tgt[a + 1:e + 1, None]).sum())
    return kl_sum / t, kl_max, agree / t, float(torch.exp(torch.tensor(nll / max(1, t - 1))))


@dataclass
class Measured:
    """What one configuration's run measured."""

    name: str
    description: str
    quantized_layers: int
    kl_mean: float
    kl_max: float
    top1_agreement: float
    perplexity: float
    bytes_per_token: int
    skip_layers: list[int]
    seconds: float
    kernel_seconds: float = 0.0
    torch_layers: list[int] = field(default_factory=list)


class Evaluator:
    """One model and one token sequence: the reference run once, then any number of configurations."""

    def __init__(self, model: CausalLM, ids, layers: list[AttnLayer], *, fixed_bytes: int = 0):
        self.model, self.ids, self.layers, self.fixed_bytes = model, ids, layers, fixed_bytes
        self.ref = model.logits(ids, model.reference_run())
        self.ref_ppl = scores(self.ref, self.ref, ids)[3]
        self.torch_layers: set[int] = set()
        self.kernel_seconds = 0.0

    def measure(self, cfg: KVConfig, *, timed: bool = False) -> Measured:
        """One configuration end to end (plain data: no pydantic needed, as on a GPU box)."""
        run = self.model.new_run(cfg.modes, timed=timed)
        t0 = time.perf_counter()
        logits = self.model.logits(self.ids, run)
        if timed:
            import torch
            torch.cuda.synchronize()
        secs = time.perf_counter() - t0
        self.kernel_seconds += run.kernel_seconds
        self.torch_layers |= run.torch_layers
        _check_seen(run.seen, self.layers)
        kl, kl_max, top1, ppl = scores(self.ref, logits, self.ids)
        del logits
        return Measured(cfg.name, cfg.description, cfg.quantized_layers(), kl, kl_max, top1, ppl,
                        cfg.bytes_per_token(self.layers, self.model.model_dtype, self.fixed_bytes), cfg.skip_layers,
                        secs, run.kernel_seconds, sorted(run.torch_layers))

    def run(self, cfg: KVConfig, *, timed: bool = False) -> EvalRow:
        from kvplan.runtime.validate_model import EvalRow
        m = self.measure(cfg, timed=timed)
        return EvalRow(name=m.name, description=m.description, quantized_layers=m.quantized_layers,
                       kl_mean=m.kl_mean, kl_max=m.kl_max, top1_agreement=m.top1_agreement, perplexity=m.perplexity,
                       bytes_per_token=m.bytes_per_token, skip_layers=m.skip_layers, seconds=round(m.seconds, 4))

    def sensitivity(self, kv_cache_dtype: str, calibrated: dict[int, tuple[float, float]] | None = None,
                    progress: Progress = lambda *a: None) -> Sensitivity:
        """Each executed layer quantized alone to ``kv_cache_dtype`` (per-tensor FP8 at scale 1.0 unless
        ``calibrated`` scales are given), sorted by KL, largest first."""
        from kvplan.model.vocab import quant_mode_of
        from kvplan.runtime.validate_model import LayerSensitivity, Sensitivity
        rows = []
        for n, lay in enumerate(self.layers):
            progress(f"sensitivity layer {lay.index}", n, len(self.layers))
            only = {lay.index: mode_for(kv_cache_dtype, lay, (calibrated or {}).get(lay.index, (1.0, 1.0)))}
            row = self.run(KVConfig(f"layer {lay.index}", "", only))
            rows.append((lay, row))
        progress("sensitivity", len(self.layers), len(self.layers))
        total = sum(r.kl_mean for _, r in rows) or 1.0
        out = [LayerSensitivity(index=lay.index, kind=lay.kind, kl_mean=r.kl_mean, kl_max=r.kl_max,
                                top1_agreement=r.top1_agreement, share=r.kl_mean / total) for lay, r in rows]
        out.sort(key=lambda s: (-s.kl_mean, s.index))
        return Sensitivity(kv_cache_dtype=kv_cache_dtype, quant_mode=quant_mode_of(kv_cache_dtype).value, layers=out)


def _check_seen(seen: dict[int, tuple[int, int]], layers: list[AttnLayer]) -> None:
    """Every executed plan layer went through the attention interface with the plan's K/V shape."""
    for lay in layers:
        got = seen.get(lay.index)
        if got is None:
            raise KvplanInputError(f"--e2e: layer {lay.index}'s attention never called transformers' attention "
                                   "interface, so kvplan cannot set its KV storage.",
                                   "This architecture's attention is not pluggable in transformers; validate "
                                   "without --e2e.")
        if got != (lay.num_kv_heads, lay.head_size):
            raise KvplanInputError(f"--e2e: layer {lay.index} computes K/V of {got[0]} kv heads x {got[1]}, the plan "
                                   f"says {lay.num_kv_heads} x {lay.head_size}.",
                                   "Plan the model you run (no --tensor-parallel-size for --e2e).")


# ----------------------------------------------------------------------------------- the run
@dataclass
class OpenModel:
    """A loaded model with its tokenized eval text and calibration scales."""

    model: CausalLM
    ref: WeightsRef
    ids: Any
    text_name: str
    calibrated: dict[int, tuple[float, float]]
    layers: list[AttnLayer]
    unquantized: list[UnquantizedLayer]
    fixed_bytes: int


def locate_model(plan: Any, source: str | None = None, *, revision: str | None = None,
                 offline: bool | None = None, random_weights: bool = False) -> WeightsRef:
    """Where the plan's model weights are (``source``: a folder / Hub id / config; default the plan's
    source), checked against the plan before anything is loaded or downloaded."""
    from kvplan.runtime.causal_lm import find_weights
    layers, _ = attention_layers(plan)
    if not layers:
        raise KvplanInputError(f"--e2e: {plan.model.model_type} has no attention layer the kvplan runtime executes.",
                               "Validate without --e2e.")
    src = source or plan.model.source or ""
    rev = revision or (plan.model.hub.revision if plan.model.hub is not None else None) or plan.flags.get("revision")
    ref = find_weights(str(src), revision=rev, offline=offline, random_weights=random_weights)
    check_model_matches(plan, ref)
    return ref


def open_model(plan: Any, ref: WeightsRef, *, device: str = "cpu", text: str | Path | None = None,
               tokens: int = EVAL_TOKENS, seed: int = 0, log: Callable[[str], None] = lambda s: None) -> OpenModel:
    """Load the model once (plan's model dtype), tokenize the eval text, calibrate on the calibration text."""
    from kvplan.runtime.kvsource import CALIBRATION_TEXT, EVAL_TEXT
    layers, unquantized = attention_layers(plan)
    text_name, body = load_text(text, EVAL_TEXT)
    model = CausalLM.load(ref, model_dtype=plan.model.dtype, device=device, seed=seed, log=log)
    ids = model.encode(body, tokens)
    if ids.shape[1] < 2:
        raise KvplanInputError(f"--text {text_name}: fewer than 2 tokens.", "Pass a longer text.")
    if ids.shape[1] < tokens:
        log(f"kvplan: {text_name} has {ids.shape[1]} tokens (fewer than --tokens {tokens}); evaluating those")
    calib = model.encode(CALIBRATION_TEXT.read_text(encoding="utf-8"), max(tokens, 192))
    amax, seen = model.kv_amax(calib)
    _check_seen(seen, layers)
    calibrated = {i: (max(k / 448.0, 1e-6), max(v / 448.0, 1e-6)) for i, (k, v) in amax.items()}
    by = {lp.index: lp for lp in plan.layers}
    fixed = sum(int(by[u.index].bytes_per_token or 0) for u in unquantized)
    return OpenModel(model, ref, ids, text_name, calibrated, layers, unquantized, fixed)


def evaluate_plan(plan: Any, *, model: str | None = None, device: str = "cpu", kv_scales: Any = None,
                  ckpt_quant: Any = None, skip_layers: list[int] | None = None, tokens: int = EVAL_TOKENS,
                  text: str | Path | None = None, sensitivity: bool = False, revision: str | None = None,
                  offline: bool | None = None, random_weights: bool = False, opened: OpenModel | None = None,
                  cache_dir: str | Path | None = None, progress: Progress = lambda *a: None,
                  log: Callable[[str], None] = lambda s: None) -> ModelEval:
    """Run the plan's model (``model``: a folder / Hub id / config; default the plan's source) with the
    plan's KV storage and the comparison configurations (and per-layer sensitivity)."""
    del cache_dir  # calibration scales are computed on the model itself now
    from kvplan.runtime.validate_model import ModelEval
    t0 = time.perf_counter()
    if opened is None:
        ref = locate_model(plan, model, revision=revision, offline=offline, random_weights=random_weights)
        opened = open_model(plan, ref, device=device, text=text, tokens=tokens, log=log)
    om = opened
    idx = [lay.index for lay in om.layers]
    skip = tuple(sorted(set(skip_layers) if skip_layers else {idx[0], idx[-1]}))
    configs = [plan_config(plan, om.layers, kv_scales, ckpt_quant, om.calibrated),
               *comparison_configs(om.layers, om.calibrated, skip)]
    ev = Evaluator(om.model, om.ids, om.layers, fixed_bytes=om.fixed_bytes)
    configs = [c for c in configs if _executable(c, om.layers, om.model.model_dtype, log)]
    rows = []
    for n, cfg in enumerate(configs):
        progress(f"e2e {cfg.name}", n, len(configs))
        rows.append(ev.run(cfg))
    progress("e2e", len(configs), len(configs))
    sens = None
    if sensitivity:
        kv = plan.kv_cache_dtype if plan.kv_cache_dtype not in ("auto", "bfloat16", "float16", "float32") else "fp8"
        sens = ev.sensitivity(kv, progress=progress)
    kernels = om.model.new_run({}).kernels
    return ModelEval(model=om.ref.label, weights=_weights_kind(om.ref), model_dtype=om.model.model_dtype,
                     text=om.text_name, tokens=int(om.ids.shape[1]),
                     quantizer="triton kernels (write_kv_cache + paged prefill attention)" if kernels
                     else "torch reference quantizers (bit-exact to the write kernel), fp32 torch attention",
                     reference_perplexity=ev.ref_ppl, skipped_layers=list(skip), unquantized_layers=om.unquantized,
                     torch_attention_layers=sorted(ev.torch_layers) if kernels else [], rows=rows,
                     sensitivity=sens, seconds=round(time.perf_counter() - t0, 3))


def _executable(cfg: KVConfig, layers: list[AttnLayer], model_dtype: str, log: Callable[[str], None]) -> bool:
    """False (logged) when the runtime cannot store some layer as ``cfg`` says (e.g. INT4 needs a
    power-of-two head size)."""
    try:
        cfg.bytes_per_token(layers, model_dtype)
    except ValueError as e:
        log(f"kvplan: --e2e row {cfg.name} left out: {str(e).split(': ', 1)[-1]}")
        return False
    return True


def _weights_kind(ref: WeightsRef) -> str:
    return {"gguf": "gguf", "random": "random"}.get(ref.kind, "checkpoint")
