"""State layers (Mamba, gated delta net, KDA, short conv, linear attention) carry the state vLLM 0.33 keeps.

tests/data/vllm_oracle_arch/answers hold, for every layer vLLM's own model class built, the MambaSpec it
registered (scripts/oracle/arch_oracle.py): state shapes, dtypes and page bytes. kvplan's plan of the same
config must give every state layer the same shapes, dtypes and bytes.
"""
from __future__ import annotations

from math import prod
from pathlib import Path

import pytest

import kvplan.api
from kvplan.model.arch import StateCache
from kvplan.model.flags import ServingFlags
from kvplan.planner.state_cache import state_tensors
from tests.planner.arch_parity import ARCH_DATA, case_input, flags_of, load_answer, load_cases

_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def _mamba_cases() -> list[dict]:
    out = []
    for case in load_cases():
        answer = load_answer(case["name"])
        if answer is None or answer.get("error"):
            continue
        if any(s["type"] == "MambaSpec" for la in answer.get("layers", []) for s in la["specs"]):
            out.append(case)
    return out


MAMBA_CASES = _mamba_cases()


def test_the_oracle_covers_every_state_family() -> None:
    names = " ".join(c["name"] for c in MAMBA_CASES)
    for arch in ("Qwen3Next", "Qwen3_5", "NemotronH", "Jamba", "FalconH1", "GraniteMoeHybrid", "Zamba2",
                 "Lfm2Moe", "KimiLinear", "Mamba2", "MambaFor", "BailingMoeV2_5", "OlmoHybrid", "BailingMoeV3",
                 "Glm5Next"):
        assert arch in names


@pytest.mark.parametrize("case", MAMBA_CASES, ids=[c["name"] for c in MAMBA_CASES])
def test_state_layers_match_vllm_mamba_spec(case: dict, tmp_path: Path) -> None:
    answer = load_answer(case["name"])
    assert answer is not None
    # as the oracle ran it, for the release that answered
    plan = kvplan.api.compile(case_input(case, ARCH_DATA, tmp_path), flags_of(case),
                              engine=f"vllm=={answer['vllm_version']}")
    by_index = {lp.index: lp for lp in plan.layers}
    checked = 0
    for la in answer["layers"]:
        spec = next((s for s in la["specs"] if s["type"] == "MambaSpec"), None)
        if spec is None:
            continue
        lp = by_index[la["index"]]
        assert lp.kind in ("mamba", "linear_attention"), la["prefix"]
        assert lp.state_shapes == spec["shapes"], la["prefix"]
        assert lp.state_dtypes == spec["dtypes"], la["prefix"]
        assert lp.state_bytes == spec["page_size_bytes"], la["prefix"]
        checked += 1
    assert checked


def test_state_bytes_are_the_sum_of_the_tensors() -> None:
    sc = StateCache(family="gated_delta_net", num_heads=32, head_dim=128, num_k_heads=16, head_k_dim=128,
                    conv_kernel=4, ssm_dtype_from_config="float32")
    st = state_tensors(sc, ServingFlags(), "bfloat16")
    assert st.page_bytes == sum(prod(s) * _BYTES[d] for s, d in zip(st.shapes, st.dtypes, strict=True))
    assert st.shapes == ((3, 8192), (32, 128, 128)) and st.dtypes == ("bfloat16", "float32")


def test_tensor_parallel_splits_the_state() -> None:
    """Qwen3.6-27B at TP 2: conv channels and value heads split over the ranks (vLLM logged 1568-token blocks
    for it: 1,603,584 state bytes over 1,024 fp8 attention bytes per token, rounded up to 16)."""
    sc = StateCache(family="gated_delta_net", num_heads=48, head_dim=128, num_k_heads=16, head_k_dim=128,
                    conv_kernel=4, ssm_dtype_from_config="float32")
    st = state_tensors(sc, ServingFlags(tensor_parallel_size=2), "bfloat16")
    assert st.shapes == ((3, 5120), (24, 128, 128))
    assert st.page_bytes == 1_603_584


def test_mamba2_groups_are_replicated_for_head_shards() -> None:
    """n_groups 1 at TP 4: vLLM replicates the group on every rank (extra_groups_for_head_shards)."""
    sc = StateCache(family="mamba2", intermediate_size=8192, n_groups=1, num_heads=128, head_dim=64,
                    state_size=128, conv_kernel=4)
    st = state_tensors(sc, ServingFlags(tensor_parallel_size=4), "bfloat16")
    assert st.shapes == ((3, (8192 + 2 * 4 * 128) // 4), (32, 64, 128))


def test_ssm_dtype_flags() -> None:
    """--mamba-ssm-cache-dtype wins over the config hook; --mamba-cache-dtype sets the conv state; speculative
    tokens widen the conv state (not Mamba1's)."""
    sc = StateCache(family="mamba2", intermediate_size=4096, n_groups=8, num_heads=64, head_dim=64,
                    state_size=128, conv_kernel=4, ssm_dtype_from_config="float32")
    assert state_tensors(sc, ServingFlags(), "bfloat16").dtypes == ("bfloat16", "float32")
    f = ServingFlags(mamba_ssm_cache_dtype="bfloat16", mamba_cache_dtype="float32", num_speculative_tokens=2)
    st = state_tensors(sc, f, "bfloat16")
    assert st.dtypes == ("float32", "bfloat16") and st.shapes[0][0] == 3 + 2
    m1 = StateCache(family="mamba1", intermediate_size=1536, state_size=16, conv_kernel=4)
    assert state_tensors(m1, f, "bfloat16").shapes[0][0] == 3
    kda = StateCache(family="kda", num_heads=32, head_dim=128, conv_kernel=4)
    assert state_tensors(kda, ServingFlags(), "bfloat16").dtypes == ("bfloat16", "float32")


def test_kda_recurrent_dtype_follows_the_layer_class() -> None:
    """kda_state_dtype gets --mamba-ssm-cache-dtype only where the layer class passes it (GLM-5 Next, Kimi-K3's
    full-rank-gate layers); Kimi-Linear's, Ling 3.0's and AliceAI's layers keep a float32 recurrent state."""
    f = ServingFlags(mamba_ssm_cache_dtype="bfloat16")
    for flag, recurrent in (("layer", "bfloat16"), ("hook", "float32"), ("ignored", "float32")):
        kda = StateCache(family="kda", num_heads=32, head_dim=128, conv_kernel=4, ssm_dtype_flag=flag)
        assert state_tensors(kda, f, "bfloat16").dtypes == ("bfloat16", recurrent)


def test_kimi_linear_hook_dtype_is_not_laid_out(tmp_path: Path) -> None:
    """Kimi-Linear at --mamba-ssm-cache-dtype bfloat16: its layers keep a float32 recurrent state (the oracle's
    MambaSpec dtypes) while the model class hook that sizes the hybrid block reads bfloat16; kvplan plans the
    layers' state but gives no layout (not modelled) rather than one sized from either page."""
    cfg = ARCH_DATA / "configs" / "KimiLinearForCausalLM__default.json"
    args = ["--max-model-len", "4096", "--mamba-ssm-cache-dtype"]
    auto = kvplan.api.compile(cfg, [*args, "auto"], gpu="h100", kv_budget_bytes=2**30)
    bf16 = kvplan.api.compile(cfg, [*args, "bfloat16"], gpu="h100", kv_budget_bytes=2**30)
    kda = next(lp for lp in bf16.layers if lp.state_dtypes)
    assert kda.state_dtypes == ["bfloat16", "float32"] and kda.state_bytes == next(
        lp.state_bytes for lp in auto.layers if lp.state_dtypes)
    assert auto.totals.kv_cache_layout is not None and bf16.totals.kv_cache_layout is None
