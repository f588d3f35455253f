"""Property tests over the ingest boundary (issue 23): whatever comes in, kvplan answers with a
KvplanInputError or a sound plan, never another exception.

- random JSON objects shaped like config.json (known and unknown keys, wrong types, signs, sizes);
- random vLLM flag vectors (modelled, unknown and removed flags with hostile values);
- random Kubernetes manifests and YAML text (aliases included) through `kvplan lint`.

A sound plan: every size is non-negative and the totals are the sums of the layers. Example counts
are bounded so each test runs in a few seconds.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kvplan.errors import KvplanInputError
from kvplan.ingest.flags import MODELLED, parse_flags
from kvplan.ingest.hf_config import parse_hf_config
from kvplan.ingest.quant import parse_quant_metadata
from kvplan.lint.run import lint_paths
from kvplan.model.flags import ServingFlags
from kvplan.model.limits import CONFIG_INT_KEYS
from kvplan.model.plan import Plan
from kvplan.planner.compile import compile_plan
from tests.conftest import EXAMPLES

FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LLAMA = json.loads((EXAMPLES / "Meta-Llama-3.1-8B" / "config.json").read_text())
LLAMA_ARCH = parse_hf_config(LLAMA, Path("llama"))
LLAMA_QUANT = parse_quant_metadata(LLAMA, None)

MODEL_TYPES = ["llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3_text", "gemma3", "cohere2", "gpt_oss",
               "deepseek_v3", "llama4", "llama4_text", "granitemoehybrid", "mllama", "t5", "phi3", "not_a_model"]
SMALL_INTS = st.integers(min_value=-3, max_value=40)
HOSTILE_INTS = st.one_of(SMALL_INTS, st.integers(min_value=-(2**70), max_value=2**70),
                         st.sampled_from([0, 1, 64, 128, 4096, 4097, 2**31, 2**31 + 1, 10**9]))
JSON_SCALARS = st.one_of(st.none(), st.booleans(), HOSTILE_INTS, st.floats(allow_nan=False, allow_infinity=False),
                         st.text(max_size=8))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                           max_leaves=12)
LAYER_WORDS = st.sampled_from(["full_attention", "sliding_attention", "chunked_attention", "linear_attention",
                               "mamba", "attention", "local", "global", "conv", "bogus"])
EXTRA_KEYS: dict[str, Any] = {
    "layer_types": st.one_of(st.lists(LAYER_WORDS, max_size=40), JSON_VALUES),
    "hybrid_override_pattern": st.one_of(st.text(alphabet="M*E-x", max_size=40), JSON_VALUES),
    "use_sliding_window": st.one_of(st.booleans(), JSON_VALUES),
    "cross_attention_layers": st.one_of(st.lists(SMALL_INTS, max_size=6), JSON_VALUES),
    "no_rope_layers": st.one_of(st.lists(st.integers(0, 1), max_size=40), JSON_VALUES),
    "multi_query": st.one_of(st.booleans(), JSON_VALUES),
    "torch_dtype": st.sampled_from(["bfloat16", "float16", "float32", "torch.float16", "int8", ""]),
    "architectures": st.one_of(st.lists(st.text(max_size=10), max_size=2), JSON_VALUES),
    "is_encoder_decoder": st.one_of(st.booleans(), JSON_VALUES),
    "mamba_ssm_cache_dtype": JSON_VALUES,
    "hf_quant_config": st.one_of(st.fixed_dictionaries({"producer": st.fixed_dictionaries({"name": JSON_VALUES})},
                                                       optional={"quantization": JSON_VALUES}), JSON_VALUES),
    "kv_lora_rank": st.one_of(st.sampled_from([512, 0]), JSON_VALUES),
    "qk_rope_head_dim": st.one_of(st.just(64), JSON_VALUES),
    "quantization_config": st.one_of(
        st.fixed_dictionaries(
            {"quant_method": st.sampled_from(["fp8", "modelopt", "compressed-tensors", "awq", "x"])},
            optional={"kv_cache_scheme": JSON_VALUES, "kv_cache_quant_algo": JSON_VALUES,
                      "producer": st.one_of(st.fixed_dictionaries({"name": JSON_VALUES}), JSON_VALUES),
                      "quantization": st.one_of(st.fixed_dictionaries(
                          {}, optional={"quant_algo": JSON_VALUES, "kv_cache_quant_algo": JSON_VALUES}),
                          JSON_VALUES)}),
        JSON_VALUES),
}


@st.composite
def config_like(draw: st.DrawFn) -> dict[str, Any]:
    """A config.json-shaped object: plausible geometry most of the time, hostile values often."""
    cfg: dict[str, Any] = {"model_type": draw(st.sampled_from(MODEL_TYPES))}
    base = {"num_hidden_layers": draw(st.integers(0, 40)), "num_attention_heads": draw(st.sampled_from([1, 8, 32])),
            "num_key_value_heads": draw(st.sampled_from([1, 4, 8])), "head_dim": draw(st.sampled_from([64, 128])),
            "hidden_size": 4096}
    cfg.update(base)
    int_keys = [*sorted(CONFIG_INT_KEYS), "sliding_window"]
    cfg.update(draw(st.dictionaries(st.sampled_from(int_keys), st.one_of(HOSTILE_INTS, JSON_SCALARS), max_size=3)))
    cfg.update(draw(st.fixed_dictionaries({}, optional=EXTRA_KEYS)))
    cfg.update(draw(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=3)))
    if draw(st.booleans()) and cfg["model_type"] in ("gemma3", "llama4", "mllama"):
        inner = {k: v for k, v in cfg.items() if k != "model_type"}
        cfg = {"model_type": cfg["model_type"], "text_config": inner}
    return cfg


def assert_sound(plan: Plan) -> None:
    """All sizes non-negative; the totals are the sums of the layers."""
    for lp in plan.layers:
        assert lp.bytes_per_token >= 0 and lp.num_kv_heads >= 0 and lp.head_size >= 0 and lp.head_size_v >= 0
        assert lp.max_bytes_per_request is None or lp.max_bytes_per_request >= 0
    t = plan.totals
    assert t.bytes_per_token == sum(lp.bytes_per_token for lp in plan.layers)
    assert t.kv_layers == sum(1 for lp in plan.layers if lp.bytes_per_token > 0)
    assert t.bytes_per_token_bf16 >= 0
    if t.bytes_per_request is not None:
        layers_sum = sum(lp.max_bytes_per_request or 0 for lp in plan.layers)
        if t.kv_cache_layout is None:
            assert t.bytes_per_request == layers_sum >= 0
        else:  # vLLM's whole blocks of every group: padding layers and pages only add
            lay = t.kv_cache_layout
            assert t.bytes_per_request == lay.bytes_per_block * lay.blocks_per_request >= layers_sum >= 0
    assert t.tokens_capacity is None or t.tokens_capacity >= 0


@FAST
@given(cfg=config_like())
def test_random_configs_give_an_input_error_or_a_sound_plan(cfg: dict[str, Any]) -> None:
    # (config-class defaults come from generated data: no transformers import, nothing to stub)
    try:
        arch = parse_hf_config(cfg, Path("config.json"))
        hq = cfg.get("hf_quant_config")  # (an hf_quant_config.json object, when it is one)
        quant = parse_quant_metadata(cfg, hq if isinstance(hq, dict) else None)
        plan = compile_plan(arch, quant, ServingFlags(kv_cache_dtype="fp8", kv_cache_dtype_explicit=True), None)
    except KvplanInputError as e:
        assert "\n" not in str(e)
        event("input error")
        return
    event("plan")
    assert plan.model.num_layers == arch.num_layers
    assert_sound(plan)


FLAG_NAMES = [*sorted(MODELLED), "--kv-cache-dtype-skip-layers", "--calculate-kv-scales", "--enforce-eager",
              "--no-such-flag", "--kv_cache_dtype", "-tp", "vllm", "serve"]
FLAG_VALUES = st.one_of(
    st.sampled_from(["fp8", "auto", "bfloat16", "fp8_e5m2", "int8_per_token_head", "nvfp4", "fp9", "sliding_window",
                     "0", "1", "-1", "2", "8", "32k", "1M", "inf", "nan", "1e300", "-0.5", "0.9", "1.5", "",
                     '{"use_prefill_query_quantization": true}', "[1]", "{", "float16", "half"]),
    HOSTILE_INTS.map(str), st.text(max_size=12))


@FAST
@given(argv=st.lists(st.one_of(st.sampled_from(FLAG_NAMES), FLAG_VALUES), max_size=14))
def test_random_flag_vectors_give_an_input_error_or_a_sound_plan(argv: list[str]) -> None:
    try:
        flags = parse_flags(argv)
        plan = compile_plan(LLAMA_ARCH, LLAMA_QUANT, flags, None)
    except KvplanInputError as e:
        assert "\n" not in str(e)
        event("input error")
        return
    event("plan")
    assert_sound(plan)


ARGS = st.lists(st.one_of(st.sampled_from(FLAG_NAMES), FLAG_VALUES), max_size=8)


@st.composite
def manifest_text(draw: st.DrawFn) -> str:
    """A Kubernetes Deployment with random args, sometimes with aliases, sometimes cut or garbled."""
    container = {"name": "vllm", "image": draw(st.sampled_from(["vllm/vllm-openai:v0.33.0", "busybox"])),
                 "args": ["--model", draw(st.sampled_from(["meta-llama/Meta-Llama-3.1-8B", "x/unknown"])), *draw(ARGS)]}
    if draw(st.booleans()):
        container["command"] = ["vllm", "serve"]
    if draw(st.booleans()):
        container["resources"] = {"limits": {"nvidia.com/gpu": draw(st.one_of(SMALL_INTS, st.text(max_size=3)))}}
    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "m"},
           "spec": {"template": {"spec": {"containers": [container]}}}}
    text = yaml.safe_dump(doc, sort_keys=False)
    mode = draw(st.sampled_from(["plain", "aliases", "bomb", "cut", "garble"]))
    if mode == "aliases":
        n = draw(st.integers(1, 6))
        text += "x0: &a0 [" + ", ".join(['"--kv-cache-dtype"'] * n) + "]\n"
        for i in range(1, draw(st.integers(1, 9))):
            text += f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * n) + "]\n"
    elif mode == "bomb":
        levels, width = draw(st.integers(3, 9)), draw(st.integers(5, 9))
        text = text.replace("containers:", "containers: &c")
        text += "x0: &a0 [" + ", ".join(["*c"] * width) + "]\n"
        for i in range(1, levels):
            text += f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]\n"
    elif mode == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif mode == "garble":
        pos = draw(st.integers(0, len(text)))
        text = text[:pos] + draw(st.text(alphabet="&*!|>-:[]{}\"' \n\t#%@`", max_size=10)) + text[pos:]
    return text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=manifest_text())
def test_random_manifests_give_findings_never_an_exception(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "deploy.yaml").write_text(text)
        report = lint_paths(["deploy.yaml"], cwd=Path(tmp), isolated=True)
    assert [f.path for f in report.files] == ["deploy.yaml"]
    event(f"{report.files[0].status}: " + ",".join(sorted({f.code for f in report.findings if f.code >= "KV8"})))
    assert all(f.location.path == "deploy.yaml" and f.location.line >= 1 for f in report.findings)
    for f in report.files:
        for launch in f.launches:
            assert launch is not None


SCALE_NAMES = st.sampled_from(["model.layers.0.self_attn.k_proj.k_scale", "model.layers.1.self_attn.attn.v_scale",
                               "model.layers.99999999.self_attn.k_scale", "model.layers.2.self_attn.kv_scale",
                               "model.layers.3.mixer.q_scale", "lm_head.weight", "__metadata__"])
TENSOR_META = st.one_of(st.fixed_dictionaries({
    "dtype": st.sampled_from(["F32", "BF16", "F16", "F64", "I8", "??"]),
    "shape": st.one_of(st.lists(st.integers(-2, 5), max_size=3), JSON_VALUES),
    "data_offsets": st.one_of(st.lists(st.integers(-8, 64), min_size=2, max_size=2), JSON_VALUES)}), JSON_VALUES)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(header=st.dictionaries(SCALE_NAMES, TENSOR_META, max_size=4), data=st.binary(max_size=64),
       cut=st.integers(0, 12))
def test_random_safetensors_headers_give_an_input_error_or_scales(header: dict, data: bytes, cut: int) -> None:
    import struct

    from kvplan.ingest.safetensors import find_scales
    raw = json.dumps(header).encode()
    blob = struct.pack("<Q", len(raw)) + raw + data
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "model.safetensors").write_bytes(blob[: len(blob) - cut] if cut < 4 else blob)
        try:
            scales, files, total = find_scales(Path(tmp))
        except KvplanInputError as e:
            assert "\n" not in str(e)
            return
    assert files == ("model.safetensors",) and total >= 0
    assert all(s.layer >= 0 and all(d >= 0 for d in s.shape) for s in scales)


ARCH_CONFIGS = sorted((Path(__file__).parents[1] / "data" / "vllm_oracle_arch" / "configs").glob("*.json"))


def _key_paths(d: Any, pre: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key of a config (two levels into sub-configs) and the first entries of its lists."""
    out: list[tuple[Any, ...]] = []
    if isinstance(d, dict):
        for k, v in d.items():
            out.append((*pre, k))
            if len(pre) < 2 and isinstance(v, (dict, list)):
                items = [(*pre, k, i) for i in range(min(len(v), 3))] if isinstance(v, list) else []
                out += _key_paths(v, (*pre, k)) if isinstance(v, dict) else items
    return out


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), cfg_path=st.sampled_from(ARCH_CONFIGS))
def test_published_architecture_configs_with_a_hostile_value_give_an_input_error_or_a_sound_plan(
        data: st.DataObject, cfg_path: Path) -> None:
    """Every architecture vLLM registers (the oracle's configs), one or two values replaced by JSON of
    another type or sign: the readers of each architecture's own keys answer with one input-error line
    or a sound plan, never a traceback."""
    cfg = json.loads(cfg_path.read_text())
    paths = _key_paths(cfg)
    for _ in range(data.draw(st.integers(1, 2))):
        *parents, last = data.draw(st.sampled_from(paths))
        target = cfg
        for k in parents:
            target = target[k]
        target[last] = data.draw(st.one_of(JSON_SCALARS, st.sampled_from([[], {}, [1, "a"], {"a": 1}, -1, 0, "x"])))
        paths = _key_paths(cfg) or [("model_type",)]
    fp8 = ServingFlags(kv_cache_dtype="fp8", kv_cache_dtype_explicit=True)
    flags = data.draw(st.sampled_from([ServingFlags(), fp8]))
    try:
        arch = parse_hf_config(cfg, cfg_path)
        plan = compile_plan(arch, parse_quant_metadata(cfg, None), flags, None)
    except KvplanInputError as e:
        assert "\n" not in str(e)
        return
    for lp in plan.layers:
        assert lp.bytes_per_token >= 0 and lp.num_kv_heads >= 0 and lp.head_size >= 0
    # (fractional per-token bytes are rounded up per layer; the total rounds the exact sum once)
    assert 0 <= plan.totals.bytes_per_token <= sum(lp.bytes_per_token for lp in plan.layers)
