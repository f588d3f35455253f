"""`--policy` on plan/explain: explicit files, project configuration discovery, --no-policy."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import EXAMPLES, ROOT

LLAMA = str(EXAMPLES / "Meta-Llama-3.1-8B")
EDGES = str(EXAMPLES / "policies" / "protect-edges.yaml")


def kvplan(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {"COLUMNS": "200", "NO_COLOR": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", *args],
                          capture_output=True, text=True, env=env, cwd=cwd)


def test_plan_with_policy_records_the_policy_rules() -> None:
    r = kvplan("plan", LLAMA, "--policy", EDGES)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    by_index = {lp["index"]: lp for lp in doc["layers"]}
    assert by_index[0]["kv_cache_dtype"] == "auto" and by_index[31]["kv_cache_dtype"] == "auto"
    assert by_index[5]["kv_cache_dtype"] == "fp8"
    assert by_index[0]["decided_by"][0] == "KV902" and by_index[5]["decided_by"][0] == "KV901"
    assert doc["flags"]["kv_cache_dtype_skip_layers"] == ["0", "1", "31"]


def test_explain_with_policy_says_why_in_the_policy_words() -> None:
    r = kvplan("explain", LLAMA, "--policy", EDGES)
    assert r.returncode == 0, r.stderr
    assert "policy 'protect-edges' rule KV902 keep-edge-layers-16bit" in r.stdout


def test_project_configuration_names_the_policy(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(f'[tool.kvplan]\npolicy = "{EDGES}"\n')
    r = kvplan("plan", LLAMA, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "using policy" in r.stderr and "--no-policy" in r.stderr
    assert json.loads(r.stdout)["layers"][0]["decided_by"][0] == "KV902"
    plain = kvplan("plan", LLAMA, "--no-policy", cwd=tmp_path)
    assert plain.returncode == 0 and "using policy" not in plain.stderr
    assert json.loads(plain.stdout)["layers"][0]["kv_cache_dtype"] == "auto"
    assert json.loads(plain.stdout)["layers"][0]["decided_by"][0] != "KV902"


def test_policy_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    missing = kvplan("plan", LLAMA, "--policy", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.count("\n") == 1 and "policy file not found" in missing.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nrules:\n  - code: KV901\n    name: x\n    reason: y\n    set: {kv_cache_dtype: fp9}\n")
    r = kvplan("plan", LLAMA, "--policy", str(bad))
    assert r.returncode == 2 and "bad.yaml:6" in r.stderr and "Traceback" not in r.stderr
    both = kvplan("plan", LLAMA, "--policy", EDGES, "--no-policy")
    assert both.returncode == 2 and "contradict" in both.stderr


def test_policy_constraint_violation_fails_the_plan(tmp_path: Path) -> None:
    pol = tmp_path / "no-e5m2.yaml"
    pol.write_text("version: 1\nname: no-e5m2\nconstraints:\n  - code: KV910\n    name: no-fp8-e5m2\n"
                   "    reason: e5m2 regresses our evals\n    forbid: {kv_cache_dtype: [fp8_e5m2]}\n")
    r = kvplan("plan", LLAMA, "--policy", str(pol), "--kv-cache-dtype", "fp8_e5m2")
    assert r.returncode == 1, r.stderr
    assert any(f["code"] == "KV910" for f in json.loads(r.stdout)["findings"])
    ok = kvplan("plan", LLAMA, "--policy", str(pol), "--kv-cache-dtype", "fp8")
    assert ok.returncode == 0


def test_policy_with_calibrated_scales(tmp_path: Path) -> None:
    smol = str(EXAMPLES / "SmolLM2-135M-Instruct" / "config.json")
    scales = tmp_path / "scales.json"
    capture = ROOT / "tests" / "data" / "smollm2" / "smollm2-135m-calibration.npz"
    cal = kvplan("calibrate", smol, "--kv-source", str(capture), "--out", str(scales))
    assert cal.returncode == 0, cal.stderr
    r = kvplan("plan", smol, "--policy", EDGES, "--kv-scales", str(scales))
    assert r.returncode == 0, r.stderr
    layers = json.loads(r.stdout)["layers"]
    assert (layers[0]["kv_cache_dtype"], layers[0]["scale_source"]) == ("auto", "none")
    assert (layers[5]["kv_cache_dtype"], layers[5]["scale_source"]) == ("fp8", "calibrated")
