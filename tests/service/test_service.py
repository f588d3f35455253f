"""The HTTP service over real HTTP (uvicorn on loopback, httpx client)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import jsonschema
import pytest

from kvplan.api import compile as compile_plan
from kvplan.emit import emit
from kvplan.releases import DEFAULT_ENGINE_VERSION
from kvplan.schemas import schema_dict
from kvplan.service import ServiceSettings
from tests.emit.helpers import CORPUS, EXAMPLES, ROOT, load_config, per_layer
from tests.service.conftest import running_server

GPT_OSS_CFG = json.loads((EXAMPLES / "gpt-oss-20b" / "config.json").read_text())
FP8_SW = "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window"


def _plan_layers(doc: dict) -> list[tuple]:
    from kvplan.model.plan import Plan
    return per_layer(Plan.model_validate_json(json.dumps(doc), strict=True))


def test_healthz(client: httpx.Client) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"engine": {"name": "vllm", "version": DEFAULT_ENGINE_VERSION}, "kvplan_version": "0.1.0",
                        "schema_version": "1.0", "status": "ok"}


def test_openapi_is_generated_from_the_models(client: httpx.Client) -> None:
    doc = client.get("/openapi.json").json()
    assert set(doc["paths"]) == {"/healthz", "/v1/plan", "/v1/emit", "/v1/lint", "/v1/rules", "/v1/backends"}
    schemas = doc["components"]["schemas"]
    expected = {"Plan", "LayerPlan", "EmitResult", "PlanRequest", "EmitRequest", "LintRequest", "ErrorResponse"}
    assert expected <= set(schemas)
    assert schemas["PlanRequest"]["properties"]["flags"]["description"].startswith("vLLM serving flags")
    plan_ok = doc["paths"]["/v1/plan"]["post"]["responses"]
    assert plan_ok["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Plan"}
    assert {"400", "413", "422"} <= set(plan_ok)


def test_plan_inline_config_equals_the_library(client: httpx.Client) -> None:
    r = client.post("/v1/plan", json={"config": GPT_OSS_CFG, "flags": FP8_SW})
    assert r.status_code == 200, r.text
    doc = r.json()
    jsonschema.validate(doc, schema_dict("plan"))
    assert list(doc) == sorted(doc) and doc["model"]["source"] is None
    want = compile_plan(EXAMPLES / "gpt-oss-20b", FP8_SW)
    assert _plan_layers(doc) == per_layer(want)
    assert doc["totals"] == want.totals.model_dump(mode="json")


def test_plan_flags_read_as_vllm_parser_reads_them(client: httpx.Client) -> None:
    r = client.post("/v1/plan", json={"config": GPT_OSS_CFG,
                                      "flags": "--kv-cache-dtype fp8 --kv-cache-dtype-s sliding_window --kv-cache-mem "
                                               "1G "
                                               "--config /etc/serve.yaml"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["layers"][0]["kv_cache_dtype"] == "auto" and doc["layers"][1]["kv_cache_dtype"] == "fp8"
    # --kv-cache-mem (an abbreviation vLLM's parser takes) is --kv-cache-memory-bytes: a 1 GiB KV cache, too
    # small for one 131072-token request (KV502, as vLLM refuses); --config is not opened (no input error)
    assert doc["totals"]["kv_budget_bytes"] == 2**30
    assert [f["code"] for f in doc["findings"] if f["severity"] == "error"] == ["KV502"]
    bad = client.post("/v1/plan", json={"config": GPT_OSS_CFG, "flags": ["--kv-cache", "fp8"]}).json()
    assert [(f["code"], f["severity"]) for f in bad["findings"] if f["code"] == "KV006"] == [("KV006", "error")]


def test_plan_flags_as_argv_list_and_hf_quant_config(client: httpx.Client) -> None:
    model = "nvidia-Llama-3.1-70B-Instruct-FP8"
    hq = json.loads((CORPUS / model / "hf_quant_config.json").read_text())
    r = client.post("/v1/plan", json={"config": load_config(model), "hf_quant_config": hq,
                                      "flags": ["--kv-cache-dtype-skip-layers", "0"], "gpu": "h100",
                                      "kv_budget_gib": 20})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["kv_cache_dtype"] == "fp8_e4m3" and doc["gpu"]["name"] == "h100-sxm"
    assert doc["totals"]["kv_budget_bytes"] == 20 * 2**30
    assert [lp["kv_cache_dtype"] for lp in doc["layers"][:2]] == ["auto", "fp8_e4m3"]


def test_plan_for_an_older_engine_release(client: httpx.Client) -> None:
    r = client.post("/v1/plan", json={"config": GPT_OSS_CFG, "flags": FP8_SW, "engine": "vllm==0.18.0"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["engine"] == {"name": "vllm", "version": "0.18.0"}
    assert "KV004" in {f["code"] for f in doc["findings"]}  # skip layers did not exist before 0.19
    bad = client.post("/v1/plan", json={"config": GPT_OSS_CFG, "engine": "sglang==0.5"})
    assert bad.status_code == 400 and "vLLM only" in bad.json()["error"]["message"]


def test_plan_with_inline_policy(client: httpx.Client) -> None:
    policy = ("version: 1\nrules:\n  - {code: KV901, name: fp8, reason: halve it, set: {kv_cache_dtype: fp8}}\n"
              "  - {code: KV902, name: sw, reason: small, select: {kind: sliding_attention}, set: {kv_cache_dtype: "
              "model}}\n")
    r = client.post("/v1/plan", json={"config": GPT_OSS_CFG, "policy": policy})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["flags"]["kv_cache_dtype_skip_layers"] == ["sliding_window"]
    assert doc["layers"][0]["decided_by"][0] == "KV902"
    bad = client.post("/v1/plan", json={"config": GPT_OSS_CFG, "policy": policy.replace("fp8}", "fp9}")})
    assert bad.status_code == 400
    assert bad.json()["error"]["message"].startswith(
        "<request policy>:3: rules[0].set.kv_cache_dtype: invalid kv_cache_dtype 'fp9'")


def test_emit_from_config_and_from_plan(client: httpx.Client) -> None:
    r = client.post("/v1/emit", json={"config": GPT_OSS_CFG, "flags": FP8_SW, "to": "vllm"})
    assert r.status_code == 200, r.text
    assert r.json()["command"] == "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window"
    plan = client.post("/v1/plan", json={"config": GPT_OSS_CFG, "flags": FP8_SW}).json()
    r2 = client.post("/v1/emit", json={"plan": plan, "to": "sglang", "per_layer": True})
    assert r2.status_code == 200, r2.text
    body = r2.json()
    assert body == emit(compile_plan(EXAMPLES / "gpt-oss-20b", FP8_SW).model_copy(
        update={"model": compile_plan(EXAMPLES / "gpt-oss-20b").model.model_copy(update={"source": None})}),
        "sglang", per_layer=True).model_dump(mode="json")
    both = client.post("/v1/emit", json={"plan": plan, "flags": "--kv-cache-dtype fp8"})
    assert both.status_code == 400 and "a plan was sent together with flags" in both.json()["error"]["message"]
    broken = dict(plan, layers=[dict(plan["layers"][0], quant_mode="fp9")])
    r3 = client.post("/v1/emit", json={"plan": broken})
    assert r3.status_code == 400
    assert r3.json()["error"]["message"].startswith("<request plan> does not match the plan schema: "
                                                    "layers[0].quant_mode")


def test_input_errors_carry_the_cli_message(client: httpx.Client) -> None:
    r = client.post("/v1/plan", json={"config": GPT_OSS_CFG, "flags": "--kv-cache-dtype fp9"})
    assert r.status_code == 400
    err = r.json()["error"]
    cli = subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", "plan",
                          str(EXAMPLES / "gpt-oss-20b"), "--kv-cache-dtype", "fp9"],
                         capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "NO_COLOR": "1", "COLUMNS": "10000"})
    assert cli.returncode == 2
    assert cli.stderr.strip() == f"kvplan: error: {err['message']}"
    assert err["type"] == "input_error" and err["problem"] == "invalid --kv-cache-dtype 'fp9'. Did you mean 'fp8'?"
    no_model = client.post("/v1/plan", json={"config": {"num_hidden_layers": 2}})
    assert no_model.status_code == 400 and no_model.json()["error"]["message"].startswith("<request> has no model_type")
    empty = client.post("/v1/plan", json={})
    assert empty.status_code == 400 and "neither config nor config_path" in empty.json()["error"]["message"]
    auto = client.post("/v1/plan", json={"config": GPT_OSS_CFG, "gpu": "auto"})
    assert auto.status_code == 400 and "gpu 'auto' would detect the server's own GPU" in auto.json()["error"]["message"]
    huge = client.post("/v1/plan", json={"config": {**GPT_OSS_CFG, "num_hidden_layers": 10**7}})
    assert huge.status_code == 400 and "at most 1024 layers" in huge.json()["error"]["message"]


def test_malformed_requests_are_422_json(client: httpx.Client) -> None:
    r = client.post("/v1/plan", json={"config": GPT_OSS_CFG, "flagz": []})
    assert r.status_code == 422
    assert r.json()["error"] == {"type": "request_invalid", "message": "body.flagz: Extra inputs are not permitted.",
                                 "problem": None, "fix": "See /openapi.json for the request shape."}
    r = client.post("/v1/emit", json={"config": GPT_OSS_CFG, "to": "lmdeploy"})
    assert r.status_code == 422 and r.json()["error"]["message"].startswith("body.to:")
    r = client.post("/v1/plan", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["type"] == "request_invalid"


def test_request_size_limit_413(client: httpx.Client) -> None:
    big = {"config": {**GPT_OSS_CFG, "padding": "x" * (300 * 1024)}}
    r = client.post("/v1/plan", json=big)
    assert r.status_code == 413
    assert r.json()["error"]["type"] == "request_too_large" and "limit of 262,144" in r.json()["error"]["message"]

    def chunks():  # no Content-Length: the server counts while reading
        for _ in range(40):
            yield b" " * 8192
    r2 = client.post("/v1/plan", content=chunks(), headers={"content-type": "application/json"})
    assert r2.status_code == 413
    assert client.get("/healthz").status_code == 200


def test_config_path_needs_allow_path(client: httpx.Client) -> None:
    r = client.post("/v1/plan", json={"config_path": str(EXAMPLES / "gpt-oss-20b")})
    assert r.status_code == 403 and r.json()["error"]["type"] == "path_not_allowed"


def test_config_path_under_allow_path() -> None:
    with running_server(ServiceSettings(allow_paths=(CORPUS,))) as url, httpx.Client(base_url=url, timeout=30) as c:
        ok = c.post("/v1/plan", json={"config_path": "gpt-oss-20b", "flags": FP8_SW})
        assert ok.status_code == 200, ok.text
        assert ok.json()["model"]["source"] == "gpt-oss-20b"
        for escape in ("../../pyproject.toml", str(ROOT / "pyproject.toml"), "/etc"):
            r = c.post("/v1/plan", json={"config_path": escape})
            assert r.status_code == 403, escape
        missing = c.post("/v1/plan", json={"config_path": "no-such-model"})
        assert missing.status_code == 400 and "path not found" in missing.json()["error"]["message"]


def test_rules_and_backends(client: httpx.Client) -> None:
    rules = client.get("/v1/rules").json()
    codes = {r["code"] for r in rules["rules"]}
    assert {"KV101", "KV104", "KV401"} <= codes
    assert {"KV980", "KV990"} <= {r["code"] for r in rules["emit_and_policy_rules"]}
    assert rules["decision_order"][:2] == ["KV100", "KV101"]
    b = client.get("/v1/backends", params={"gpu": "h100"})
    assert b.status_code == 200 and b.json()["gpu"]["name"] == "h100-sxm" and b.json()["backends"]
    bad = client.get("/v1/backends", params={"gpu": "no-such-gpu"})
    assert bad.status_code == 400 and "unknown GPU 'no-such-gpu'" in bad.json()["error"]["message"]


def test_lint_inline_files(client: httpx.Client) -> None:
    pytest.importorskip("kvplan.lint.run")
    script = "vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers full_attention\n"
    r = client.post("/v1/lint", json={"files": {"deploy/run.sh": script}})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["kind"] == "kvplan.lint-report"
    assert [f["path"] for f in doc["files"]] == ["deploy/run.sh"]
    assert "kvplan-lint-" not in r.text  # the scratch folder never leaks
    bad = client.post("/v1/lint", json={"files": {"../etc/passwd": "x"}})
    assert bad.status_code == 400 and "must be a relative path" in bad.json()["error"]["message"]


def test_lint_unavailable_is_501(client: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kvplan.lint", None)  # import kvplan.lint now raises ImportError
    r = client.post("/v1/lint", json={"files": {"run.sh": "vllm serve m\n"}})
    assert r.status_code == 501
    assert r.json()["error"] == {"type": "not_implemented", "problem": None, "fix": None,
                                 "message": "linting is not available in this kvplan build (kvplan.lint is not "
                                            "importable)."}


def test_concurrent_requests_are_correct_and_bounded(base_url: str) -> None:
    """A bounded load test: 16 clients x 12 mixed requests; every answer right, healthz stays fast."""
    models = ["gpt-oss-20b", "Meta-Llama-3.1-8B", "DeepSeek-V3", "gemma-3-27b-it", "Qwen3.5-27B"]
    flags = ["", "--kv-cache-dtype fp8", "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 0 1", FP8_SW]
    expected = {(m, f): per_layer(compile_plan(CORPUS / m / "config.json", f)) for m in models for f in flags}
    configs = {m: load_config(m) for m in models}
    jobs = [(models[i % len(models)], flags[(i // len(models)) % len(flags)], i % 3) for i in range(16 * 12)]

    def one(job: tuple[str, str, int]) -> tuple[int, bool]:
        m, f, kind = job
        with httpx.Client(base_url=base_url, timeout=60) as c:
            if kind < 2:
                r = c.post("/v1/plan", json={"config": configs[m], "flags": f})
                return r.status_code, r.status_code == 200 and _plan_layers(r.json()) == expected[(m, f)]
            r = c.post("/v1/emit", json={"config": configs[m], "flags": f, "to": "vllm"})
            return r.status_code, r.status_code == 200 and r.json()["exact"]

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=16) as pool:
        futures = [pool.submit(one, j) for j in jobs]
        with httpx.Client(base_url=base_url, timeout=10) as c:
            health = []
            for _ in range(5):
                t = time.monotonic()
                assert c.get("/healthz").status_code == 200
                health.append(time.monotonic() - t)
        results = [f.result() for f in futures]
    elapsed = time.monotonic() - start
    assert all(code == 200 for code, _ in results), [c for c, _ in results if c != 200]
    assert all(ok for _, ok in results)
    assert elapsed < 120, elapsed
    assert max(health) < 5.0, health  # the event loop is not blocked by planner work


def test_kvplan_serve_cli_starts_a_real_server(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", "from kvplan.cli.main import main; main()", "serve", "--port",
                             str(port), "--log-level", "warning", "--max-body-bytes", "2048"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    why = proc.stderr.read().decode() if proc.poll() is not None else "timeout"
                    raise AssertionError(why) from None
                time.sleep(0.1)
        assert r.status_code == 200
        small = httpx.post(f"http://127.0.0.1:{port}/v1/plan", json={"config": GPT_OSS_CFG}, timeout=10)
        assert small.status_code == 200
        big = httpx.post(f"http://127.0.0.1:{port}/v1/plan", json={"config": {**GPT_OSS_CFG, "pad": "x" * 4096}},
                         timeout=10)
        assert big.status_code == 413  # --max-body-bytes 2048 reached the server
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_cli_import_does_not_load_fastapi() -> None:
    code = ("import sys, kvplan.cli.main, kvplan.emit, kvplan.policy; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'uvicorn', 'starlette')); "
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
