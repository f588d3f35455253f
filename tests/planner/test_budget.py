"""The KV memory estimated from --gpu: vLLM's profiling terms, each shown, instead of a flat overhead."""
from __future__ import annotations

import json

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.gpus import gpu_facts
from kvplan.ingest.checkpoint import load_model_inputs
from kvplan.ingest.flags import parse_flags
from kvplan.planner.budget import GIB, ServingDefaults, estimate_budget, serving_defaults
from kvplan.planner.compile import compile_plan
from tests.conftest import ROOT

LLAMA_8B = ROOT / "examples" / "Meta-Llama-3.1-8B"
QWEN36_35B = ROOT / "tests" / "data" / "capacity" / "Qwen3.6-35B-A3B"


# the figures below are vLLM 0.33.0's (0.92 GPU memory by default; 0.34's extensible KV cache takes 1.0)
V033 = EngineVersion.parse("vllm==0.33.0")


def _plan(path, argv: list[str], gpu: str, weight_bytes: int):
    mi = load_model_inputs(path)
    return compile_plan(mi.arch, mi.quant, parse_flags(argv), gpu_facts(gpu), weight_bytes=weight_bytes,
                        engine=V033)


def test_budget_is_the_sum_of_named_terms() -> None:
    p = _plan(LLAMA_8B, ["--max-model-len", "32768"], "h100", weight_bytes=16 * GIB)
    t = p.totals
    assert t.kv_budget_terms is not None and t.kv_budget_bytes is not None
    names = [x.name for x in t.kv_budget_terms]
    assert names == ["requested", "weights", "activation peak", "sampler logits", "CUDA graphs", "non-torch"]
    assert t.kv_budget_bytes == sum(x.bytes for x in t.kv_budget_terms)
    by = {x.name: x.bytes for x in t.kv_budget_terms}
    assert by["requested"] == int(80 * GIB * 0.92) and by["weights"] == -16 * GIB
    # H100 serving defaults: 8192 batched tokens, 1024 sequences; Llama-3.1-8B: hidden 4096, MLP 14336,
    # vocabulary 128256
    assert by["activation peak"] == -8192 * 2 * (4 * 4096 + 3 * 14336)
    assert by["sampler logits"] == -2 * 1024 * 128256 * 4
    assert t.kv_budget_error_bytes == GIB
    # the layout divides that memory into blocks
    assert t.kv_cache_layout is not None and t.kv_cache_layout.num_blocks == t.kv_budget_bytes // (16 * 131072)


def test_flags_change_the_profiling_terms() -> None:
    small = _plan(LLAMA_8B, ["--max-num-batched-tokens", "2048", "--max-num-seqs", "64", "-tp", "2"], "h100",
                  weight_bytes=16 * GIB).totals
    by = {x.name: x.bytes for x in small.kv_budget_terms or []}
    assert by["activation peak"] == -2048 * 2 * (4 * 4096 + 3 * 14336 // 2)
    assert by["sampler logits"] == -2 * 64 * 128256 * 4
    assert by["weights"] == -8 * GIB and by["non-torch"] == -GIB  # NCCL buffers with TP


def test_moe_activation_counts_routed_experts() -> None:
    arch = load_model_inputs(QWEN36_35B).arch
    _, terms = estimate_budget(arch, parse_flags([]), gpu_facts("h100"), 20 * GIB, "bfloat16", EngineVersion())
    act = next(t.bytes for t in terms if t.name == "activation peak")
    # 8 routed experts x (3 x 512 + 2048) per token beats the dense MLP width (absent: 4 x hidden)
    assert act == -8192 * 2 * (4 * 2048 + 8 * (3 * 512 + 2048))


def test_serving_defaults_follow_vllm_by_gpu() -> None:
    assert serving_defaults(gpu_facts("h100")) == ServingDefaults(8192, 1024)
    assert serving_defaults(gpu_facts("a100-80gb")) == ServingDefaults(2048, 256)
    assert serving_defaults(gpu_facts("b200")) == ServingDefaults(16384, 1024)


def test_no_room_for_one_request_reads_like_vllm() -> None:
    p = _plan(LLAMA_8B, ["--max-model-len", "131072"], "l4", weight_bytes=23 * GIB)
    kv502 = [f for f in p.findings if f.code == "KV502"]
    assert p.totals.kv_budget_bytes == 0 and kv502
    assert kv502[0].message.startswith("No available memory for the cache blocks")
    p = _plan(LLAMA_8B, ["--max-model-len", "131072"], "l4", weight_bytes=16 * GIB)
    msg = next(f.message for f in p.findings if f.code == "KV502")
    assert msg.startswith("To serve at least one request with the model's max seq len (131072)")
    assert f"estimated maximum model length is {p.totals.max_model_len_fits}." in msg


def test_plan_json_carries_the_terms() -> None:
    p = _plan(LLAMA_8B, [], "h100", weight_bytes=16 * GIB)
    doc = json.loads(p.model_dump_json())
    assert [t["name"] for t in doc["totals"]["kv_budget_terms"]][:2] == ["requested", "weights"]


def test_release_default_memory_share_and_block_size() -> None:
    """vLLM 0.34 resolves an unset --gpu-memory-utilization to 1.0 with its extensible KV cache (on by default
    on CUDA) and stores 64-token blocks by default; 0.33 keeps 0.92 and 16. A passed share always wins."""
    mi = load_model_inputs(LLAMA_8B)

    def totals(argv: list[str], engine: str):
        return compile_plan(mi.arch, mi.quant, parse_flags(argv), gpu_facts("h100"), weight_bytes=16 * GIB,
                            engine=EngineVersion.parse(engine)).totals

    old, new = totals([], "vllm==0.33.0"), totals([], "vllm==0.34.0")
    share = {t.name: t for t in new.kv_budget_terms or []}["requested"]
    assert share.bytes == 80 * GIB and "1.0 (vLLM 0.34.0's default)" in share.basis
    assert {t.name: t.bytes for t in old.kv_budget_terms or []}["requested"] == int(80 * GIB * 0.92)
    assert new.kv_cache_layout is not None and new.kv_cache_layout.block_size == 64
    assert old.kv_cache_layout is not None and old.kv_cache_layout.block_size == 16
    passed = totals(["--gpu-memory-utilization", "0.8"], "vllm==0.34.0")
    assert {t.name: t.bytes for t in passed.kv_budget_terms or []}["requested"] == int(80 * GIB * 0.8)
