"""`kvplan calibrate` writes scales engines and the planner use; `--kv-scales` makes the plan say calibrated."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from typer.testing import CliRunner

from kvplan.cli.main import app
from tests.validate.conftest import ROOT, SMOLLM2_CAPTURE, SMOLLM2_CONFIG, kvplan

jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture(scope="module")
def scales(tmp_path_factory):
    d = tmp_path_factory.mktemp("cal")
    out, st = d / "scales.json", d / "scales.safetensors"
    r = kvplan("calibrate", SMOLLM2_CONFIG, "--kv-source", SMOLLM2_CAPTURE, "--per-head", "--out", out,
               "--safetensors", st)
    assert r.returncode == 0, r.stderr
    return out, st


def test_calibrate_scales_are_amax_over_448(scales) -> None:
    out, _ = scales
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, json.loads((ROOT / "schemas" / "kv-scales.schema.json").read_text()))
    assert [ls["index"] for ls in doc["layers"]] == list(range(30))
    z = np.load(SMOLLM2_CAPTURE)
    for ls in doc["layers"]:
        k = np.abs(z[f"k{ls['index']}"].astype(np.float32))
        v = np.abs(z[f"v{ls['index']}"].astype(np.float32))
        assert ls["k_scale"] == pytest.approx(k.max() / 448.0, rel=1e-6)
        assert ls["v_scale"] == pytest.approx(v.max() / 448.0, rel=1e-6)
        assert ls["k_scale_per_head"] == pytest.approx(list(k.max(axis=(0, 2)) / 448.0), rel=1e-6)
        assert max(ls["k_scale_per_head"]) == pytest.approx(ls["k_scale"])
    assert doc["tensors"]["model.layers.7.self_attn.v_scale"] == doc["layers"][7]["v_scale"]
    assert doc["quantization_config"]["kv_cache_scheme"]["strategy"] == "attn_head"


def test_calibrate_safetensors_is_readable(scales) -> None:
    out, st = scales
    raw = st.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header["model.layers.3.self_attn.k_scale"]
    assert meta["dtype"] == "F32" and meta["shape"] == [3]
    a, b = meta["data_offsets"]
    vals = np.frombuffer(raw[8 + n + a:8 + n + b], dtype="<f4")
    assert list(vals) == pytest.approx(json.loads(out.read_text())["layers"][3]["k_scale_per_head"])


def test_plan_reports_calibrated_scale_source(scales) -> None:
    out, _ = scales
    runner = CliRunner()
    base = ["plan", str(SMOLLM2_CONFIG), "--kv-cache-dtype", "fp8", "--no-policy"]
    plain = json.loads(runner.invoke(app, base).output)
    assert {lp["scale_source"] for lp in plain["layers"]} == {"default_1.0"}
    assert "KV401" in {f["code"] for f in plain["findings"]}
    cal = json.loads(runner.invoke(app, [*base, "--kv-scales", str(out)]).output)
    assert {lp["scale_source"] for lp in cal["layers"]} == {"calibrated"}
    assert "KV401" not in {f["code"] for f in cal["findings"]}
    d = next(d for d in cal["layers"][0]["decisions"] if d["field"] == "scale_source")
    assert d["rule"] == "KV120" and str(out) in d["fact"]
    # per-token-head modes keep their dynamic scales whatever the file says
    pth = json.loads(runner.invoke(app, ["plan", str(SMOLLM2_CONFIG), "--kv-cache-dtype", "int8_per_token_head",
                                         "--no-policy", "--kv-scales", str(out)]).output)
    assert {lp["scale_source"] for lp in pth["layers"]} == {"dynamic_per_token_head"}
