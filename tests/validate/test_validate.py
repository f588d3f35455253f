"""`kvplan validate` on synthetic and captured K/V: allocation bytes, error ordering, verdicts, outputs."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.validate.conftest import ROOT, SMOLLM2_CAPTURE, SMOLLM2_CONFIG, kvplan, report

jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("torch")
pytest.importorskip("triton")

SCHEMA = json.loads((ROOT / "schemas" / "validate-report.schema.json").read_text())


def _run(tmp_path, *flags, layers="0-2", source="synthetic", extra=()):
    out = tmp_path / "r.json"
    r = kvplan("validate", SMOLLM2_CONFIG, *flags, "--kv-source", source, "--device", "cpu", "--layers", layers,
               "--format", "json", "--out", out, *extra)
    return r, out


def test_validate_synthetic_mixed_plan_passes_with_exact_bytes(tmp_path) -> None:
    chart = tmp_path / "err.png"
    r, out = _run(tmp_path, "--kv-cache-dtype", "int8_per_token_head", "--kv-cache-dtype-skip-layers", "0",
                  extra=("--chart", chart))
    assert r.returncode == 0, r.stderr
    doc = report(out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["schema_version"] == "1.1" and doc["passed"] and doc["triton_interpret"]
    executed = [x for x in doc["layers"] if x["status"] != "skipped"]
    assert [x["index"] for x in executed] == [0, 1, 2]
    assert [x["quant_mode"] for x in executed] == ["none", "int8_per_token_head", "int8_per_token_head"]
    for x in executed:  # the allocation is exactly what the plan promises
        assert x["bytes_equal"] and x["bytes_allocated"] == x["bytes_per_token_plan"] * x["tokens_allocated"]
    assert executed[0]["bytes_per_token_plan"] == 3 * 64 * 2 * 2          # bf16 K+V
    assert executed[1]["bytes_per_token_plan"] == 3 * (2 * 64 + 8)        # int8 + inline fp32 scales
    assert {x["reason"] for x in doc["layers"][3:]} == {"not selected (--layers)"}
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_validate_error_ordering_bf16_int8_fp8(tmp_path) -> None:
    mean = {}
    for dtype in ("bfloat16", "int8_per_token_head", "fp8_per_token_head", "fp8"):
        r, out = _run(tmp_path, "--kv-cache-dtype", dtype, layers="1-3")
        assert r.returncode == 0, r.stderr
        (mode,) = report(out)["modes"]
        mean[dtype] = mode["mean_rel_l2"]
    # bf16 is the control (rounding only); per-token-head INT8 beats FP8; per-tensor FP8 is worst.
    assert mean["bfloat16"] < mean["int8_per_token_head"] < mean["fp8_per_token_head"] < mean["fp8"]
    assert mean["bfloat16"] < 0.01


def _tiny_capture(path, scale: float, layers: int = 2, tokens: int = 48) -> None:
    from kvplan.runtime.kvsource import save_capture, synthetic_layer
    out = []
    for i in range(layers):
        lk = synthetic_layer(i, 3, 64, num_tokens=tokens, query_tokens=16, seed=7)
        lk.key = (lk.key.astype(np.float32) * scale).astype(np.float16)
        lk.value = (lk.value.astype(np.float32) * scale).astype(np.float16)
        out.append(lk)
    save_capture(path, out, {"model": f"synthetic x{scale}", "text_name": "none", "num_tokens": tokens})


def test_uncalibrated_fp8_fails_names_cause_then_calibrate_fixes_it(tmp_path) -> None:
    cap = tmp_path / "tiny.npz"
    _tiny_capture(cap, 5e-4)  # |V| ~ 1e-3: far below the FP8 range with scale 1.0 (mostly subnormal)
    r = kvplan("validate", SMOLLM2_CONFIG, "--kv-cache-dtype", "fp8", "--kv-source", cap, "--device", "cpu",
               "--layers", "0-1")
    assert r.returncode == 1, r.stdout
    assert "FAILED" in r.stdout and "layer 0 (fp8_per_tensor)" in r.stdout
    assert "uncalibrated per-tensor scale 1.0" in r.stdout and "kvplan calibrate" in r.stdout
    scales = tmp_path / "scales.json"
    c = kvplan("calibrate", SMOLLM2_CONFIG, "--kv-source", cap, "--out", scales)
    assert c.returncode == 0, c.stderr
    doc = json.loads(scales.read_text())
    k = np.load(cap)["k0"].astype(np.float32)
    assert doc["layers"][0]["k_scale"] == pytest.approx(np.abs(k).max() / 448.0, rel=1e-6)
    r2, out2 = _run(tmp_path, "--kv-cache-dtype", "fp8", layers="0-1", source=cap, extra=("--kv-scales", scales))
    assert r2.returncode == 0, r2.stdout + r2.stderr
    rep = report(out2)
    assert [x["scale_source"] for x in rep["layers"][:2]] == ["calibrated", "calibrated"]
    assert rep["layers"][0]["k_scale"] == doc["layers"][0]["k_scale"]


def test_saturating_fp8_names_saturation(tmp_path) -> None:
    cap = tmp_path / "big.npz"
    _tiny_capture(cap, 60.0, layers=1)  # |K| ~ 900 > 448
    r = kvplan("validate", SMOLLM2_CONFIG, "--kv-cache-dtype", "fp8", "--kv-source", cap, "--device", "cpu",
               "--layers", "0")
    assert r.returncode == 1 and "K saturates" in r.stdout, r.stdout


def test_validate_smollm2_plans_on_captured_activations(tmp_path) -> None:
    """The SmolLM2 plans on the real captured activations (bundled file, no model needed)."""
    means = {}
    for dtype in ("int8_per_token_head", "fp8"):
        r, out = _run(tmp_path, "--kv-cache-dtype", dtype, layers="0,29", source=SMOLLM2_CAPTURE)
        assert r.returncode == 0, r.stderr
        doc = report(out)
        jsonschema.validate(doc, SCHEMA)
        assert doc["kv_source"]["kind"] == "captured" and doc["kv_source"]["num_tokens"] == 192
        means[dtype] = doc["modes"][0]["mean_rel_l2"]
        assert all(x["bytes_equal"] for x in doc["layers"] if x["status"] != "skipped")
    assert means["int8_per_token_head"] < means["fp8"]


def _fp8_checkpoint(folder, cap, value=None):
    """SmolLM2's config with a compressed-tensors FP8 KV scheme and per-layer k/v scales: amax/448
    of the capture (calibrated), or ``value`` everywhere (e.g. the 1.0 placeholder)."""
    from tests.ingest.test_safetensors import write_safetensors
    cfg = json.loads((ROOT / SMOLLM2_CONFIG).read_text())
    cfg["quantization_config"] = {"quant_method": "compressed-tensors", "kv_cache_scheme": {
        "type": "float", "num_bits": 8, "strategy": "tensor", "symmetric": True, "dynamic": False}}
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    data = np.load(cap)
    tensors = {}
    for i in range(2):
        for side in ("k", "v"):
            amax = float(np.abs(data[f"{side}{i}"].astype(np.float32)).max())
            tensors[f"model.layers.{i}.self_attn.{side}_scale"] = ("F32", [], value or amax / 448.0)
    write_safetensors(folder / "model.safetensors", tensors)
    return folder


def test_checkpoint_scale_values_are_what_validate_runs(tmp_path) -> None:
    """A checkpoint folder's own k/v scale values (read from its safetensors) drive the FP8 layers:
    calibrated values pass; placeholder 1.0 values fail for the reason KV409 gives; a PLAN.json
    carries no values and says how to validate them."""
    cap = tmp_path / "tiny.npz"
    _tiny_capture(cap, 5e-4)
    good = _fp8_checkpoint(tmp_path / "good", cap)
    out = tmp_path / "good.json"
    r = kvplan("validate", good, "--kv-source", cap, "--device", "cpu", "--layers", "0-1",
               "--format", "json", "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = report(out)
    run = rep["layers"][:2]
    assert [x["scale_source"] for x in run] == ["checkpoint_per_tensor"] * 2
    k0 = float(np.abs(np.load(cap)["k0"].astype(np.float32)).max()) / 448.0
    assert run[0]["k_scale"] == pytest.approx(k0, rel=1e-6) and all(x["status"] == "pass" for x in run)

    ones = _fp8_checkpoint(tmp_path / "ones", cap, value=1.0)
    r = kvplan("validate", ones, "--kv-source", cap, "--device", "cpu", "--layers", "0-1")
    assert r.returncode == 1 and "uncalibrated per-tensor scale 1.0" in r.stdout, r.stdout
    plan = kvplan("plan", ones, "--format", "json")
    assert "KV409" in plan.stdout

    pj = tmp_path / "PLAN.json"
    pj.write_text(kvplan("plan", good, "--format", "json").stdout)
    out = tmp_path / "pj.json"
    r = kvplan("validate", pj, "--kv-source", cap, "--device", "cpu", "--layers", "0-1",
               "--format", "json", "--out", out)
    reasons = {x["reason"] for x in report(out)["layers"][:2]}
    assert reasons == {"a PLAN.json carries no k/v scale values: validate the checkpoint folder itself, "
                       "or pass the scales with --kv-scales"}, reasons
