"""The service refuses hostile bodies with the CLI's limits and messages (issue 23), never a 500."""
from __future__ import annotations

import json

import httpx

from tests.conftest import EXAMPLES
from tests.ingest.test_limits import alias_bomb

GPT_OSS_CFG = json.loads((EXAMPLES / "gpt-oss-20b" / "config.json").read_text())


def _post(client: httpx.Client, path: str, body: str) -> httpx.Response:
    return client.post(path, content=body.encode(), headers={"content-type": "application/json"})


def test_deeply_nested_config_body_is_a_client_error(client: httpx.Client) -> None:
    deep = '{"config": {"model_type": "llama", "x": ' + "[" * 50_000 + "]" * 50_000 + "}}"
    r = _post(client, "/v1/plan", deep)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "input_error" and err["message"].startswith("request body nests deeper than kvplan's limit")
    shallow_but_deep = {"config": {**GPT_OSS_CFG, "x": json.loads("[" * 100 + "]" * 100)}}
    r2 = client.post("/v1/plan", json=shallow_but_deep)
    assert r2.status_code == 400 and "nests deeper than kvplan's limit of 64 levels" in r2.json()["error"]["message"]
    assert client.get("/healthz").status_code == 200


def test_config_values_are_checked_like_the_cli(client: httpx.Client) -> None:
    for change, words in (({"num_key_value_heads": 0}, "num_key_value_heads is 0; it must be at least 1"),
                          ({"head_dim": -64}, "head_dim is -64; it must be at least 1"),
                          ({"num_hidden_layers": 10**9}, "kvplan plans at most 1024 layers")):
        r = client.post("/v1/plan", json={"config": {**GPT_OSS_CFG, **change}})
        assert r.status_code == 400 and words in r.json()["error"]["message"], r.text


def test_flags_and_plan_limits(client: httpx.Client) -> None:
    r = client.post("/v1/plan", json={"config": GPT_OSS_CFG, "flags": ["--tensor-parallel-size", "100000"]})
    assert r.status_code == 400 and "--tensor-parallel-size is 100000" in r.json()["error"]["message"]
    deep_plan = {"plan": {"kind": "kvplan.plan", "schema_version": "1.0", "x": json.loads("[" * 100 + "]" * 100)}}
    r2 = client.post("/v1/emit", json=deep_plan)
    assert r2.status_code == 400 and "nests deeper" in r2.json()["error"]["message"]


def test_policy_alias_bomb_is_refused(client: httpx.Client) -> None:
    r = client.post("/v1/plan", json={"config": GPT_OSS_CFG, "policy": alias_bomb()})
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("<request policy>:9: YAML aliases expand to more than")


def test_lint_alias_bomb_is_a_finding(client: httpx.Client) -> None:
    r = client.post("/v1/lint", json={"files": {"bomb.yaml": alias_bomb(),
                                                "run.sh": "vllm serve m --kv-cache-dtype fp9\n"}})
    assert r.status_code == 200, r.text
    got = {(f["location"]["path"], f["code"]) for f in r.json()["findings"]}
    assert ("bomb.yaml", "KV821") in got and ("run.sh", "KV803") in got
