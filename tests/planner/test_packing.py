"""packing.py equals vLLM's grouping and capacity when given vLLM's own caches.

Every capacity answer that records `layer_specs` (tests/data/vllm_oracle_capacity/, the cases run on a GPU's
CUDA platform: vLLM 0.33.0 in answers/, other releases in releases/VERSION/) lists each cache vLLM registered,
in its order, with its spec class, block, page, block-stride alignment and window; packing.py must turn them
into vLLM's groups, pool blocks, concurrency and "GPU KV cache size", whatever builds them.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.planner.cache_specs import CacheSpec
from kvplan.planner.packing import PackingRefused, pack
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "vllm_oracle_capacity"
ANSWERS = sorted(p for p in [*DATA.glob("answers/*.json"), *DATA.glob("releases/*/*.json")]
                 if "layer_specs" in (json.loads(p.read_text()).get("answer") or {}))
BLOCK_OUTERMOST = {"BLHNC": True, "BLNHC": True, "BHLNC": True, "LBHNC": False, "LBNHC": False, "LHBNC": False}


def _index(name: str) -> int:
    return next(int(part) for part in name.split(".") if part.isdigit())


def _spec(rec: dict[str, Any]) -> CacheSpec:
    fixed = {"CircularBufferSpec": 1, "MambaSpec": rec["blocks_per_request"]}.get(rec["spec"])
    return CacheSpec(name=rec["name"], layer=_index(rec["name"]), spec=rec["spec"], block_size=rec["block_size"],
                     page_size_bytes=rec["page_size_bytes"], stride_alignment=rec["stride_alignment"],
                     sliding_window=rec.get("sliding_window"), fixed_blocks=fixed,
                     identity=tuple(rec.get(k) for k in ("num_kv_heads", "head_size", "dtype")))


def test_answers_with_layer_specs_exist() -> None:
    assert len(ANSWERS) >= 40


@pytest.mark.parametrize("path", ANSWERS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_pack_equals_vllm_given_its_caches(path: Path) -> None:
    res = json.loads(path.read_text())
    ans = res["answer"]
    specs = [_spec(r) for r in ans["layer_specs"]]
    try:
        packed = pack(specs, BLOCK_OUTERMOST[ans["kv_cache_layout"]], res["flags"]["max_model_len"], 8192,
                      res["available_bytes"])
    except PackingRefused as e:
        pytest.fail(f"refused: {e.message}")
    got = [{"spec": g[0].spec, "layer_names": [s.name for s in g], "block_size": g[0].block_size,
            "page_size_bytes": g[0].page_size_bytes, "blocks_per_request": n}
           for g, n in zip(packed.groups, packed.blocks_per_request, strict=True)]
    want = [{k: g[k] for k in ("spec", "layer_names", "block_size", "page_size_bytes", "blocks_per_request")}
            for g in ans["groups"]]
    assert got == want
    if ans["startup_error"] is None:
        assert packed.num_blocks == ans["num_blocks"]
        assert packed.max_concurrency == pytest.approx(ans["max_concurrency"], rel=1e-12)
        assert int(packed.max_concurrency * res["flags"]["max_model_len"]) == ans["gpu_kv_cache_tokens"]
    else:
        assert packed.max_model_len_fits is not None
        assert f"the estimated maximum model length is {packed.max_model_len_fits}." in ans["startup_error"] \
            or packed.max_model_len_fits == 0
