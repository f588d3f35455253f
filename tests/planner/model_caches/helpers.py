"""Shared by the cache-builder tests: kvplan's plan of a case and what compile hands the layout for it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import kvplan.api
import kvplan.planner.compile as compile_mod
from kvplan.model.arch import ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import LayerPlan, Plan
from kvplan.planner.cache_specs import ModelCaches, SpecContext, blocks_per_request

Inputs = tuple[list[LayerPlan], ModelArch, ServingFlags, SpecContext]
"""A builder's arguments: the layer plans, the model, the flags and the context."""


def plan_and_inputs(config: Path, argv: list[str], budget: int | None, gpu: str | None,
                    release: str) -> tuple[Plan, Inputs]:
    """`kvplan.api.compile` of the case, and the builder's inputs as compile hands them to plan_capacity (its
    first call: the plan itself, not a reference layout)."""
    seen: list[Inputs] = []
    real = compile_mod.plan_capacity

    def spy(layers: list[LayerPlan], arch: ModelArch, flags: ServingFlags, mml: int | None, bs: int, mbt: int,
            budget: int | None, engine: Any = None, cc: tuple[int, int] | None = None,
            drafts: list[LayerPlan] | None = None, model_dtype: str | None = None) -> Any:
        assert mml is not None
        seen.append((layers, arch, flags, SpecContext(max_model_len=mml, block_size=bs, max_num_batched_tokens=mbt,
                                                      engine=engine, compute_capability=cc)))
        return real(layers, arch, flags, mml, bs, mbt, budget, engine, cc, drafts=drafts, model_dtype=model_dtype)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compile_mod, "plan_capacity", spy)
        plan = kvplan.api.compile(config, argv, kv_budget_bytes=budget, gpu=gpu, engine=f"vllm=={release}")
    assert seen, "compile computed no layout for the case"
    return plan, seen[0]


def assert_caches_equal_vllms(got: ModelCaches, answer: dict[str, Any], case: dict[str, Any]) -> None:
    """A builder's caches are the answer's `layer_specs`: vLLM's names in vLLM's order, each with its spec class,
    block, page, block-stride alignment, window and blocks per request; the block size and layout too."""
    want = answer["answer"]
    assert got.block_size == answer["engine"]["block_size"]
    assert got.layout_name == want["kv_cache_layout"]
    mml = answer["engine"]["max_model_len"]
    mbt = case["flags"].get("max_num_batched_tokens", 8192)
    assert [s.name for s in got.specs] == [w["name"] for w in want["layer_specs"]]
    for s, w in zip(got.specs, want["layer_specs"], strict=True):
        assert (s.spec, s.block_size, s.page_size_bytes, s.stride_alignment, s.sliding_window,
                blocks_per_request(s, mml, mbt)) == \
            (w["spec"], w["block_size"], w["page_size_bytes"], w["stride_alignment"], w.get("sliding_window"),
             w["blocks_per_request"]), s.name
