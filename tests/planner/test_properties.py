"""Plan invariants over the corpus (hypothesis): any skip set, any dtype."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvplan.api
from kvplan.model.plan import Plan
from kvplan.model.vocab import NO_KV_KINDS
from tests.conftest import CORPUS, MODELS

DTYPES = ["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head",
          "int4_per_token_head", "nvfp4", "fp8_ds_mla", "turboquant_k8v4"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(MODELS), dtype=st.sampled_from(DTYPES),
       skip=st.lists(st.one_of(st.integers(0, 120).map(str), st.just("sliding_window")), max_size=6),
       tp=st.sampled_from([1, 2, 8]))
def test_plan_invariants(model: str, dtype: str, skip: list[str], tp: int) -> None:
    flags = ["--kv-cache-dtype", dtype, "--tensor-parallel-size", str(tp)]
    if skip:
        flags += ["--kv-cache-dtype-skip-layers", *skip]
    plan = kvplan.api.compile(CORPUS / model / "config.json", flags)
    # JSON round trip
    assert Plan.model_validate_json(plan.model_dump_json()) == plan
    for lp in plan.layers:
        assert lp.bytes_per_token >= 0
        if lp.kind in NO_KV_KINDS:
            assert lp.bytes_per_token == 0 and lp.kv_cache_dtype is None
        if lp.skipped:
            # skipping never raises a layer above the model's 16-bit cost, and stores the model dtype
            assert lp.kv_cache_dtype == "auto" and lp.dtype == plan.model.dtype
    assert plan.totals.bytes_per_token == sum(lp.bytes_per_token for lp in plan.layers)
    if plan.model.dtype in ("bfloat16", "float16"):
        assert plan.totals.bytes_per_token <= plan.totals.bytes_per_token_bf16 or dtype in ("auto",)
    # findings are sorted errors first
    ranks = [f.severity.rank for f in plan.findings]
    assert ranks == sorted(ranks, reverse=True)


def test_every_model_plans_every_vllm_dtype_without_crashing() -> None:
    """All 22 --kv-cache-dtype values on every corpus model and GPU kinds: a plan (with findings) or one input error."""
    from kvplan.errors import KvplanInputError
    from kvplan.model.vocab import VLLM_033_KV_CACHE_DTYPES

    crashes = []
    for model in MODELS:
        for dtype, gpu in [(d, g) for d in VLLM_033_KV_CACHE_DTYPES for g in (None, "a100-80gb", "b200", "mi300x")]:
            try:
                plan = kvplan.api.compile(CORPUS / model / "config.json", ["--kv-cache-dtype", dtype], gpu)
            except KvplanInputError:
                continue
            except Exception as e:
                crashes.append(f"{model} {dtype} {gpu}: {type(e).__name__}: {e}")
                continue
            assert plan.totals.bytes_per_token == sum(lp.bytes_per_token for lp in plan.layers)
    assert not crashes, "\n".join(crashes)
