"""The validate --e2e / tune command lines: one-line input errors before any work (a missing extra,
a plan for another model, bad budgets or text), JSON against its schema, the policy file."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.validate.conftest import SMOLLM2_CONFIG, kvplan
from tests.validate.test_errors import _one_line_exit_2
from tests.validate.tiny_models import build


def _hide(*modules: str) -> str:
    """Python prelude that makes ``modules`` look uninstalled (a base install without the extra)."""
    names = repr(set(modules))
    return ("import importlib.util as u; _f = u.find_spec; "
            f"u.find_spec = lambda n, *a, **k: None if n.split('.')[0] in {names} else _f(n, *a, **k); ")


@pytest.mark.parametrize(("argv", "hidden", "extra"), [
    (("validate", SMOLLM2_CONFIG), ("torch", "triton", "numpy"), "kvplan[runtime]"),
    (("validate", SMOLLM2_CONFIG, "--e2e"), ("transformers",), "kvplan[real]"),
    (("validate", SMOLLM2_CONFIG, "--chart", "x.png"), ("matplotlib",), "kvplan[runtime]"),
    (("calibrate", SMOLLM2_CONFIG, "--kv-source", "synthetic"), ("numpy",), "kvplan[runtime]"),
    (("tune", SMOLLM2_CONFIG, "--kv-cache-dtype", "fp8", "--max-kl", "0.01"), ("transformers", "torch"),
     "kvplan[real,runtime]"),
])
def test_missing_extra_is_one_line_before_any_work(argv, hidden, extra, tmp_path) -> None:
    r = kvplan(*argv, "--device", "cpu", pre=_hide(*hidden)) if argv[0] != "calibrate" else \
        kvplan(*argv, pre=_hide(*hidden))
    _one_line_exit_2(r, "needs", f"pip install '{extra}'")
    assert "loading" not in r.stderr


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("tiny-cli")
    return {f: build(f, root / f) for f in ("llama", "gemma3")}


def test_plan_for_another_model_is_refused_before_loading(tiny, tmp_path) -> None:
    plan = tmp_path / "plan.json"
    r = kvplan("plan", tiny["llama"], "--kv-cache-dtype", "fp8", "--out", plan)
    assert r.returncode == 0, r.stderr
    r = kvplan("validate", plan, "--e2e", "--model", tiny["gemma3"], "--device", "cpu", "--layers", "0")
    _one_line_exit_2(r, "--e2e", "layers", str(tiny["gemma3"]))
    assert "loading" not in r.stderr
    r = kvplan("validate", tiny["llama"].parent / "nothing-here", "--e2e", "--device", "cpu")
    _one_line_exit_2(r, "no such file")
    # a config without weights (that is not the SmolLM2 example): one line, nothing loaded
    r = kvplan("validate", SMOLLM2_CONFIG.parents[1] / "Meta-Llama-3.1-8B" / "config.json", "--e2e", "--device",
               "cpu", "--layers", "0")
    _one_line_exit_2(r, "holds no weights", "--random-weights")


@pytest.mark.parametrize(("args", "needle"), [
    (("--sensitivity",), "--sensitivity needs --e2e"),
    (("--e2e", "--text", "missing.txt"), "no such file"),
    (("--e2e", "--plot", "x.jpg"), "PNG"),
])
def test_validate_e2e_flag_errors(tiny, args, needle) -> None:
    _one_line_exit_2(kvplan("validate", tiny["llama"], *args, "--device", "cpu"), needle)


def test_bad_jsonl_text(tiny, tmp_path) -> None:
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"text": "fine"}\n{"nope": 1}\n')
    r = kvplan("validate", tiny["llama"], "--e2e", "--text", bad, "--device", "cpu", "--layers", "0")
    _one_line_exit_2(r, "line 2", "'text'")


@pytest.mark.parametrize(("args", "needle"), [
    (("--kv-cache-dtype", "fp8"), "exactly one budget"),
    (("--kv-cache-dtype", "fp8", "--max-kl", "0.1", "--min-top1", "0.9"), "exactly one budget"),
    (("--kv-cache-dtype", "fp8", "--min-top1", "2"), "--min-top1"),
    (("--max-kl", "0.1"), "quantized --kv-cache-dtype"),
    (("--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "0", "--max-kl", "0.1"), "chooses"),
])
def test_tune_input_errors(tiny, args, needle) -> None:
    _one_line_exit_2(kvplan("tune", tiny["llama"], *args, "--device", "cpu"), needle)


def test_tune_json_schema_policy_and_emit(tiny, tmp_path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    out, pol, plan, png = tmp_path / "t.json", tmp_path / "p.yaml", tmp_path / "plan.json", tmp_path / "s.png"
    r = kvplan("tune", tiny["gemma3"], "--kv-cache-dtype", "fp8", "--max-kl", "0.00005", "--tokens", "32",
               "--device", "cpu", "--format", "json", "--out", out, "--policy-out", pol, "--out-plan", plan,
               "--plot", png)
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(out.read_text())
    schema = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "tune-report.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert doc["kind"] == "kvplan.tune-report" and doc["met"] is (r.returncode == 0)
    assert png.read_bytes()[:4] == b"\x89PNG"
    emitted = kvplan("emit", plan, "--to", "vllm")
    assert emitted.returncode == 0 and emitted.stdout.split() == doc["vllm_args"]
    via_policy = kvplan("emit", tiny["gemma3"], "--to", "vllm", "--policy", pol)
    assert via_policy.returncode == 0, via_policy.stderr
    assert via_policy.stdout.split() == doc["vllm_args"]


def test_validate_e2e_text_output_names_rows_and_sensitivity(tiny, tmp_path) -> None:
    png = tmp_path / "e.png"
    r = kvplan("validate", tiny["gemma3"], "--kv-cache-dtype", "int8_per_token_head", "--e2e", "--sensitivity",
               "--tokens", "32", "--layers", "0", "--device", "cpu", "--plot", png)
    assert r.returncode == 0, r.stderr
    assert "per-layer sensitivity" in r.stdout and "int8-pth+skip" in r.stdout
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_unloadable_weights_are_one_line(tiny, tmp_path) -> None:
    import shutil
    bad = tmp_path / "broken"
    shutil.copytree(tiny["llama"], bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["intermediate_size"] *= 2  # the MLP weights no longer fit the config: transformers refuses them
    (bad / "config.json").write_text(json.dumps(cfg))
    r = kvplan("validate", bad, "--e2e", "--device", "cpu", "--layers", "0", "--tokens", "16")
    _one_line_exit_2(r, "could not load", "causal LM")
