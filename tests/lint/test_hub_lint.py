"""`kvplan lint` resolves Hugging Face ids in manifests through the loopback Hub: model rules run,
each repo is fetched once per run, the `models` mapping wins, --offline / hub = false say why."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kvplan.lint import lint_paths
from tests.conftest import EXAMPLES, ROOT
from tests.hubserver import FakeHub, fake_hub_fixture, fp8_checkpoint  # noqa: F401 - fixture

FP8 = EXAMPLES / "nvidia-Llama-3.1-70B-Instruct-FP8"

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.33.0
      args: ["--model", "{model}", "--kv-cache-dtype", "{dtype}"{extra}]
"""


def _manifest(folder: Path, name: str, model: str, dtype: str = "fp8", extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / f"{name}.yaml"
    p.write_text(POD.format(name=name, model=model, dtype=dtype, extra=extra))
    return p


def _codes(report, path_contains: str = "") -> list[str]:
    return [f.code for f in report.findings if path_contains in f.location.path]


def test_manifest_naming_an_id_runs_the_model_rules(fake_hub: FakeHub, tmp_path: Path) -> None:
    sha = fake_hub.add("acme/Llama-FP8", fp8_checkpoint(tmp_path / "ck", FP8, layers=4, weight_bytes=1 << 30))
    deploy = tmp_path / "deploy"
    _manifest(deploy, "e5m2", "acme/Llama-FP8", dtype="fp8_e5m2")
    _manifest(deploy, "ok", "acme/Llama-FP8", dtype="fp8")
    r = lint_paths([str(deploy)], cwd=tmp_path, isolated=True, gpu="h100")
    assert "KV804" not in _codes(r)
    assert "KV203" in _codes(r, "e5m2.yaml")  # e5m2 with an FP8 checkpoint: needs the checkpoint's quant config
    assert "KV401" not in _codes(r, "ok.yaml")  # the checkpoint's calibrated scales were read
    assert {lc.config for f in r.files for lc in f.launches} == {f"hf:acme/Llama-FP8@{sha[:12]}"}
    assert fake_hub.bytes_served < 1 << 20


def test_each_repo_is_fetched_once_per_run(fake_hub: FakeHub, tmp_path: Path) -> None:
    cfg = json.loads((EXAMPLES / "Meta-Llama-3.1-8B" / "config.json").read_text())
    ids = [f"org{i}/model-{i}" for i in range(4)]
    for i, rid in enumerate(ids):
        d = tmp_path / "repos" / str(i)
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 4 + i}))
        fake_hub.add(rid, d)
    deploy = tmp_path / "deploy"
    for n in range(40):
        _manifest(deploy, f"m{n:02d}", ids[n % 4])
    r = lint_paths([str(deploy)], cwd=tmp_path, isolated=True, gpu="h100")
    assert r.summary.launches == 40 and "KV804" not in _codes(r)
    assert "KV401" in _codes(r)  # uncalibrated FP8: a model rule
    for rid in ids:
        assert fake_hub.count("GET", f"/api/models/{rid}") == 1
        assert fake_hub.count(None, f"/{rid}/resolve/") <= 2  # HEAD + GET of config.json


def test_offline_and_hub_false_turn_resolution_off_and_kv804_says_so(fake_hub: FakeHub, tmp_path: Path) -> None:
    fake_hub.add("acme/Llama-FP8", fp8_checkpoint(tmp_path / "ck", FP8, layers=4, weight_bytes=1 << 20))
    deploy = tmp_path / "deploy"
    _manifest(deploy, "pod", "acme/Llama-FP8")
    r = lint_paths([str(deploy)], cwd=tmp_path, isolated=True, offline=True)
    kv804 = [f for f in r.findings if f.code == "KV804"]
    assert len(kv804) == 1 and "Hub resolution is off (kvplan lint --offline)" in kv804[0].message
    assert "skipped" in kv804[0].message and "KV401" in kv804[0].skipped_rules  # one line; the codes in JSON / -v
    for name, text in (("kvplan.toml", "[lint]\nhub = false\n"), ("pyproject.toml", "[tool.kvplan]\nhub = false\n")):
        (tmp_path / name).write_text(text)
        r = lint_paths([str(deploy)], cwd=tmp_path)
        kv804 = [f for f in r.findings if f.code == "KV804"]
        assert len(kv804) == 1 and f"hub = false in {tmp_path / name}" in kv804[0].message
        (tmp_path / name).unlink()
    assert fake_hub.count() == 0
    # the CLI option, end to end
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", "lint", str(deploy),
                        "--offline", "--isolated", "--format", "json"], capture_output=True, text=True, env=env)
    doc = json.loads(p.stdout)
    assert [f["code"] for f in doc["findings"] if f["code"] == "KV804"] == ["KV804"]
    assert "--offline" in next(f["message"] for f in doc["findings"] if f["code"] == "KV804")


def test_models_mapping_wins_over_the_hub(fake_hub: FakeHub, tmp_path: Path) -> None:
    fake_hub.add("acme/Llama-FP8", fp8_checkpoint(tmp_path / "ck", FP8, layers=4, weight_bytes=1 << 20))
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "config.json").write_text((EXAMPLES / "Meta-Llama-3.1-8B" / "config.json").read_text())
    (tmp_path / "kvplan.toml").write_text('[lint.models]\n"acme/Llama-FP8" = "local"\n')
    _manifest(tmp_path / "deploy", "pod", "acme/Llama-FP8")
    r = lint_paths([str(tmp_path / "deploy")], cwd=tmp_path)
    assert {lc.config for f in r.files for lc in f.launches} == {"local"}
    assert fake_hub.count() == 0


def test_launch_line_revision_and_errors(fake_hub: FakeHub, tmp_path: Path) -> None:
    cfg = json.loads((EXAMPLES / "Meta-Llama-3.1-8B" / "config.json").read_text())
    for name, layers in (("v1", 8), ("v2", 12)):
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": layers}))
    v1 = fake_hub.add("acme/evolving", tmp_path / "v1", tags=("v1",))
    fake_hub.add("acme/evolving", tmp_path / "v2")
    fake_hub.add("acme/gated", tmp_path / "v1", gated=True)
    deploy = tmp_path / "deploy"
    _manifest(deploy, "pinned", "acme/evolving", extra=', "--kv-cache-dtype-skip-layers", "10", "--revision", "v1"')
    _manifest(deploy, "gated", "acme/gated")
    for n in range(3):
        _manifest(deploy, f"missing{n}", "acme/nothing-here")
    r = lint_paths([str(deploy)], cwd=tmp_path, isolated=True)
    pinned = [f for f in r.findings if "pinned" in f.location.path]
    assert any(f.code == "KV302" and "0..7" in f.message for f in pinned)  # 8 layers: the v1 tag
    assert {lc.config for f in r.files if "pinned" in f.path for lc in f.launches} == {f"hf:acme/evolving@{v1[:12]}"}
    gated = next(f for f in r.findings if "gated" in f.location.path and f.code == "KV804")
    assert "acme/gated is a gated repository" in gated.message and "accept its licence" in (gated.fix or "")
    missing = next(f for f in r.findings if "missing" in f.location.path and f.code == "KV804")
    assert "'acme/nothing-here' was not found" in missing.message
    assert fake_hub.count("GET", "/api/models/acme/nothing-here") == 1  # asked once for the three files


@pytest.mark.parametrize("text", ["--model ${MODEL_ID}", "--model my-model"])
def test_strings_that_are_not_ids_are_not_fetched(fake_hub: FakeHub, tmp_path: Path, text: str) -> None:
    p = tmp_path / "serve.sh"
    p.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        vllm serve {text.split()[1]} --kv-cache-dtype fp8
        """))
    r = lint_paths([str(p)], cwd=tmp_path, isolated=True)
    assert "KV804" in _codes(r)
    assert fake_hub.count() == 0
