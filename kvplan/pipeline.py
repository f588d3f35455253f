"""The one compile pipeline: a model, serving flags, a GPU and an optional policy -> Plan.

    source (path, checkpoint folder, Hub id, config.json object)  -> ingest.checkpoint.model_inputs
    flags  (launch line, argv, dict of vLLM fields, ServingFlags)  -> ingest.flags.flags_from
    engine (vllm==X)                                               -> backends.engines.resolve_engine
    gpu    (name, compute capability, profile)                     -> gpu_facts
    kv_scales (a `kvplan calibrate` file)                          -> ingest.kv_scales.with_kv_scales
    policy (Policy or YAML path)                                   -> policy.apply.plan_with_policy
                                                                      around planner.compile.compile_plan
    strict                                                         -> planner.compile.apply_strict

`kvplan.compile` is `compile` here; the CLI verbs, the service, `kvplan explore`, `kvplan emit` and
`kvplan validate` all call it. `run` is the same pipeline, also returning the checkpoint's
quantization metadata (its scale tensors with the values read from the safetensors).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.engines import release_of, resolve_engine
from kvplan.backends.gpus import GpuFacts, gpu_facts
from kvplan.errors import KvplanInputError
from kvplan.ingest.checkpoint import ModelInputs, model_inputs
from kvplan.ingest.flags import FlagsInput, flags_from
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import LayerPlan, Plan
from kvplan.model.quant import QuantMetadata
from kvplan.planner.compile import apply_strict, compile_plan, config_context
from kvplan.planner.layout import is_mtp, speculative_method, uses_draft_model
from kvplan.rules.base import Rule
from kvplan.rules.dtype import draft_kv_cache_dtype

if TYPE_CHECKING:
    from kvplan.policy.model import Policy

__all__ = ["Compiled", "compile", "gpu_facts", "run"]

ModelSource = str | Path | Mapping[str, Any]


class Compiled(NamedTuple):
    """A plan and the quantization metadata it was compiled from (unpacks as `plan, quant`)."""

    plan: Plan
    quant: QuantMetadata


def compile(source: ModelSource, flags: FlagsInput = None, gpu: Any = None, *,
            policy: Policy | str | Path | None = None, kv_budget_bytes: int | None = None,
            read_safetensors: bool = True, extra_checks: Iterable[Rule] = (), engine: str | None = None,
            kv_scales: str | Path | None = None, offline: bool | None = None, strict: bool = False,
            hf_quant_config: Mapping[str, Any] | None = None, label: str | None = None) -> Plan:
    """Compile the KV plan for a config.json, a checkpoint folder, a Hugging Face model id
    (``org/name``: resolved at the flags' ``--revision`` through the Hugging Face cache and Hub,
    see docs/hub.md; ``offline=True`` reads the cache only, like HF_HUB_OFFLINE=1) or a config.json
    object (``hf_quant_config``: its hf_quant_config.json object) under vLLM serving flags.
    ``--hf-overrides`` in the flags is applied to config.json first, as vLLM does.

    `policy` is a `kvplan.policy.Policy` or a policy YAML path: its settings choose the flags, its
    constraints become check rules (docs/api.md, "Policies").

    `strict=True` (CLI `--strict`) makes finding KV604 an error: an architecture not verified
    against vLLM 0.33.0, or config keys that look like layer geometry but were not used.

    `kv_scales` is a `kvplan calibrate` scales file: per-tensor FP8 layers it covers get
    ``scale_source: calibrated`` (unless the checkpoint's own scales are loaded).
    `engine` is the release to model (`vllm==0.33.0` when None; `kvplan.backends.engines` lists
    the modelled range); another engine or a release outside it raises KvplanInputError.
    `label` is what the plan calls the model (default: the path as given or the Hub id).

    >>> plan = compile("examples/gpt-oss-20b/config.json",
    ...                "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window")
    >>> plan.layers[0].kv_cache_dtype, plan.layers[1].kv_cache_dtype
    ('auto', 'fp8')
    """
    return run(source, flags, gpu, policy=policy, kv_budget_bytes=kv_budget_bytes,
               read_safetensors=read_safetensors, extra_checks=extra_checks, engine=engine, kv_scales=kv_scales,
               offline=offline, strict=strict, hf_quant_config=hf_quant_config, label=label).plan


def _check_quantization_method(method: str | None, engine: EngineVersion) -> None:
    """`--quantization` must name a method of the release (vllm/config/model.py::ModelConfig._verify_quantization:
    "Unknown quantization method"); the parser itself takes any string. Methods come from each release's wheel."""
    rel = release_of(engine)
    if method is None or rel is None or method in rel.quantization_methods:
        return
    raise KvplanInputError(
        f"--quantization {method}: vLLM {rel.version} has no such quantization method (vLLM exits with "
        f"\"Unknown quantization method: {method}\").",
        f"Pass one of vLLM {rel.version}'s methods ({', '.join(sorted(rel.quantization_methods))}), or leave "
        "--quantization out to use the checkpoint's own.")


def run(source: ModelSource, flags: FlagsInput = None, gpu: Any = None, *,
        policy: Policy | str | Path | None = None, kv_budget_bytes: int | None = None,
        read_safetensors: bool = True, extra_checks: Iterable[Rule] = (), engine: str | None = None,
        kv_scales: str | Path | None = None, offline: bool | None = None, strict: bool = False,
        hf_quant_config: Mapping[str, Any] | None = None, label: str | None = None) -> Compiled:
    """`compile`, also returning the quantization metadata the plan was made from."""
    ev = resolve_engine(engine)
    sf = flags_from(flags, ev.version_str)
    _check_quantization_method(sf.quantization, ev)
    inputs = model_inputs(source, sf, hf_quant_config=hf_quant_config, read_safetensors=read_safetensors,
                          offline=offline, label=label,
                          release=ev.version_str if ev.engine == "vllm" else None)
    if kv_scales is not None:  # `kvplan calibrate` output: per-tensor FP8 layers become scale_source calibrated
        from kvplan.ingest.kv_scales import with_kv_scales
        inputs = replace(inputs, quant=with_kv_scales(inputs.quant, kv_scales))
    gf = gpu_facts(gpu)
    def load(model: str, dflags: ServingFlags) -> ModelInputs:
        return model_inputs(model, dflags, read_safetensors=read_safetensors, offline=offline)

    draft = draft_plan_layers(inputs, sf, gf, ev, load)

    def plan_for(f: ServingFlags, checks: Iterable[Rule] = ()) -> Plan:
        d = draft if _same_draft(f, sf) else draft_plan_layers(inputs, f, gf, ev, load)
        return _compile_inputs(inputs, f, gf, kv_budget_bytes=kv_budget_bytes, checks=checks, engine=ev, draft=d)

    if policy is None:
        plan = plan_for(sf, extra_checks)
    else:
        from kvplan.policy.apply import plan_with_policy
        from kvplan.policy.load import as_policy
        plan = plan_with_policy(as_policy(policy), inputs.arch, sf, plan_for, extra_checks)
    if strict:
        plan = apply_strict(plan)
    return Compiled(plan, inputs.quant)


def _compile_inputs(inputs: ModelInputs, flags: ServingFlags, gpu: GpuFacts | None, *, kv_budget_bytes: int | None,
                    checks: Iterable[Rule], engine: EngineVersion, draft: DraftPlan | None = None) -> Plan:
    return compile_plan(inputs.arch, inputs.quant, flags, gpu, source=inputs.source, weight_bytes=inputs.weight_bytes,
                        kv_budget_bytes=kv_budget_bytes, extra_checks=checks, engine=engine, hub=inputs.hub,
                        draft=draft.layers if draft is not None else None,
                        draft_weight_bytes=draft.weight_bytes if draft is not None else None)


_DRAFT_FIELDS = ("speculative_method", "speculative_model", "speculative_kv_cache_dtype", "num_speculative_tokens",
                 "kv_cache_dtype", "tensor_parallel_size", "max_model_len", "dtype")


def _same_draft(a: ServingFlags, b: ServingFlags) -> bool:
    return all(getattr(a, f) == getattr(b, f) for f in _DRAFT_FIELDS)


DraftLoader = Callable[[str, ServingFlags], ModelInputs]
"""Reads the config of the draft model --speculative-config names (a Hub id or a path), under the draft's flags."""


class DraftPlan(NamedTuple):
    """The draft's KV layers, planned, and its checkpoint weights (None: unknown, or MTP layers, which are the
    target checkpoint's own)."""

    layers: list[LayerPlan]
    weight_bytes: int | None


def draft_plan_layers(inputs: ModelInputs, flags: ServingFlags, gpu: GpuFacts | None, engine: EngineVersion,
                      load: DraftLoader) -> DraftPlan | None:
    """The layers of the draft model --speculative-config names (EAGLE / EAGLE3 head, draft_model), planned as
    vLLM's drafter builds it: the target's cache config, whose dtype is the target's as resolved at config time
    unless the speculative config's kv_cache_dtype replaces it or the model class kept the draft at 'auto'
    (SpecDecodeBaseProposer._create_draft_vllm_config; rules.dtype.draft_kv_cache_dtype, KV118), the target's
    model dtype (SpeculativeConfig: the draft model config takes the target's dtype), tensor-parallel size and
    max_model_len. MTP with a kv_cache_dtype of its own: the model's layers at that dtype (the MTP layers copy
    their cache). None otherwise (no draft model, or MTP layers at the model's dtype). `load` reads the draft's
    config (plan/explain: the Hub or a path; lint: also the deployment's model map); its KvplanInputError is
    re-raised naming --speculative-config."""
    mtp_dtype = is_mtp(flags) and flags.speculative_kv_cache_dtype not in (None, flags.kv_cache_dtype)
    if not (mtp_dtype or (uses_draft_model(flags) and flags.speculative_model is not None)):
        return None
    target = config_context(inputs.arch, inputs.quant, flags, gpu, engine=engine)
    kv_cache_dtype, why = draft_kv_cache_dtype(target, speculative_method(flags))
    dflags = ServingFlags(
        kv_cache_dtype=kv_cache_dtype, kv_cache_dtype_explicit=True, tensor_parallel_size=flags.tensor_parallel_size,
        max_model_len=flags.max_model_len or inputs.arch.max_position_embeddings, dtype=target.model_dtype,
        trust_remote_code=flags.trust_remote_code,
        block_size=flags.block_size, max_num_batched_tokens=flags.max_num_batched_tokens)
    if mtp_dtype:
        return DraftPlan(compile_plan(inputs.arch, inputs.quant, dflags, gpu, engine=engine).layers, None)
    assert flags.speculative_model is not None
    try:
        draft = load(flags.speculative_model, dflags)
    except KvplanInputError as e:
        raise KvplanInputError(f"--speculative-config model {flags.speculative_model!r}: {e.problem}",
                               e.fix) from None
    planned = compile_plan(draft.arch, draft.quant, dflags, gpu, engine=engine)
    return DraftPlan([_with_draft_fact(lp, why) for lp in planned.layers], draft.weight_bytes)


def _with_draft_fact(lp: LayerPlan, why: str) -> LayerPlan:
    """The draft layer's kv_cache_dtype decision says where the draft's dtype came from (not 'passed explicitly')."""
    ds = [d.model_copy(update={"fact": why}) if d.field == "kv_cache_dtype" and d.rule == "KV101" else d
          for d in lp.decisions]
    return lp.model_copy(update={"decisions": ds})
