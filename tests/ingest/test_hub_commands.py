"""Every command that takes a config path takes a Hub id too: emit, calibrate, explore, serve (`model`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from kvplan.explore.state import ExploreSession
from kvplan.service import ServiceSettings
from tests.conftest import EXAMPLES, ROOT
from tests.hubserver import FakeHub, fake_hub_fixture  # noqa: F401 - fixture
from tests.service.conftest import running_server


def _repo(hub: FakeHub, tmp: Path, rid: str = "org/llama") -> str:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "config.json").write_text((EXAMPLES / "Meta-Llama-3.1-8B" / "config.json").read_text())
    return hub.add(rid, tmp)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", *args],
                          capture_output=True, text=True, cwd=ROOT, env=env)


def test_emit_and_calibrate_take_an_id(fake_hub: FakeHub, tmp_path: Path) -> None:
    _repo(fake_hub, tmp_path / "repo")
    r = _cli("emit", "org/llama", "--to", "vllm", "--kv-cache-dtype", "fp8")
    assert r.returncode == 0, r.stderr
    assert "--kv-cache-dtype fp8" in r.stdout
    r = _cli("calibrate", "org/llama", "--kv-source", "synthetic", "--tokens", "8")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["layers"]) == 32


def test_explore_session_resolves_once(fake_hub: FakeHub, tmp_path: Path) -> None:
    _repo(fake_hub, tmp_path / "repo")
    s = ExploreSession("org/llama", ["--kv-cache-dtype", "fp8"])
    assert s.apply(kv_cache_dtype="auto") is None and s.apply(tensor_parallel_size=2) is None
    assert s.plan.model.hub is not None and s.compiles == 3
    assert fake_hub.count("GET", "/api/models/org/llama") == 1


def test_service_model_field(fake_hub: FakeHub, tmp_path: Path) -> None:
    sha = _repo(fake_hub, tmp_path / "repo")
    with running_server(ServiceSettings()) as url, httpx.Client(base_url=url, timeout=30) as c:
        ok = c.post("/v1/plan", json={"model": "org/llama", "flags": ["--kv-cache-dtype", "fp8"]})
        assert ok.status_code == 200, ok.text
        assert ok.json()["model"]["hub"]["commit"] == sha and ok.json()["model"]["source"] == "org/llama"
        for body in ({"model": "../etc/passwd"}, {"model": "/models/llama"}, {"model": "org/llama", "config": {}}):
            bad = c.post("/v1/plan", json=body)
            assert bad.status_code == 400, (body, bad.text)
        missing = c.post("/v1/plan", json={"model": "org/none"})
        assert missing.status_code == 400 and "'org/none' was not found" in missing.json()["error"]["message"]
    with running_server(ServiceSettings(hub=False)) as url, httpx.Client(base_url=url, timeout=30) as c:
        off = c.post("/v1/plan", json={"model": "org/llama"})
        assert off.status_code == 403 and off.json()["error"]["type"] == "hub_disabled"


def test_validate_takes_an_id(fake_hub: FakeHub, tmp_path: Path) -> None:
    from kvplan.runtime.validate import load_plan_input
    sha = _repo(fake_hub, tmp_path / "repo")
    plan, source, quant = load_plan_input("org/llama", ["--kv-cache-dtype", "fp8"])
    assert source == "org/llama" and plan.model.hub.commit == sha and quant is not None
    assert plan.kv_cache_dtype == "fp8"
