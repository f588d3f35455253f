"""`kvplan emit` as a user runs it: stdout/stderr split, exit codes, one-line errors, nothing half-written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from kvplan.cli.main import app
from kvplan.schemas import schema_dict
from tests.emit.helpers import EXAMPLES, ROOT

GPT_OSS = EXAMPLES / "gpt-oss-20b"
ENV = {"COLUMNS": "160", "NO_COLOR": "1"}
runner = CliRunner()


def kvplan(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The real console entry point (exit codes and stderr exactly as users get them)."""
    env = {**ENV, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", *args],
                          capture_output=True, text=True, env=env, cwd=cwd or ROOT)


@pytest.fixture
def plan_json(tmp_path: Path) -> Path:
    out = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", str(GPT_OSS), "--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers",
                            "sliding_window", "--out", str(out)], env=ENV)
    assert r.exit_code == 0, r.output
    jsonschema.validate(json.loads(out.read_text()), schema_dict("plan"))
    return out


def test_emit_args_stdout_is_only_the_flags_line(plan_json: Path) -> None:
    r = kvplan("emit", str(plan_json), "--to", "vllm")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window\n"
    assert r.stderr == ""


def test_emit_findings_go_to_stderr_and_fail_level_sets_exit(plan_json: Path) -> None:
    r = kvplan("emit", str(plan_json), "--to", "sglang")
    assert r.returncode == 0
    assert r.stdout == "--kv-cache-dtype fp8_e4m3\n"
    assert r.stderr.startswith("kvplan: KV982 warning: released SGLang has one KV dtype")
    strict = kvplan("emit", str(plan_json), "--to", "sglang", "--fail-level", "warning")
    assert strict.returncode == 1 and strict.stdout == r.stdout


def test_emit_json_is_versioned_sorted_and_byte_stable(plan_json: Path) -> None:
    a = runner.invoke(app, ["emit", str(plan_json), "--to", "trtllm", "--format", "json"], env=ENV)
    b = runner.invoke(app, ["emit", str(plan_json), "--to", "trtllm", "--format", "json"], env=ENV)
    assert a.exit_code == 0 and a.stdout == b.stdout
    doc = json.loads(a.stdout)
    assert list(doc) == sorted(doc)
    assert doc["schema_version"] == "1.1" and doc["kind"] == "kvplan.emit" and doc["target"]["name"] == "trtllm"
    published = json.loads((ROOT / "schemas" / "emit-result.schema.json").read_text())
    jsonschema.validate(doc, published)


def test_emit_yaml_to_file(plan_json: Path, tmp_path: Path) -> None:
    out = tmp_path / "kv.yaml"
    r = kvplan("emit", str(plan_json), "--format", "yaml", "--out", str(out))
    assert r.returncode == 0 and r.stdout == ""
    assert "kv-cache-dtype-skip-layers:\n- sliding_window\n" in out.read_text()


def test_emit_from_config_with_flags_plans_first() -> None:
    r = kvplan("emit", str(GPT_OSS), "--to", "vllm", "--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers",
               *[str(i) for i in range(0, 24, 2)], "--tensor-parallel-size", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window --tensor-parallel-size 2\n"


def test_emit_policy_from_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.kvplan]\npolicy = "kv-policy.yaml"\n')
    (tmp_path / "kv-policy.yaml").write_text(
        "version: 1\nrules:\n"
        "  - {code: KV901, name: fp8-kv, reason: halve KV memory, set: {kv_cache_dtype: fp8}}\n"
        "  - {code: KV902, name: sliding-16bit, reason: few tokens, select: {kind: sliding_attention},"
        " set: {kv_cache_dtype: model}}\n")
    r = kvplan("emit", str(GPT_OSS), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window\n"
    plain = kvplan("emit", str(GPT_OSS), "--no-policy", cwd=tmp_path)
    assert plain.stdout == "--kv-cache-dtype auto\n"


@pytest.mark.parametrize("args,needle", [
    (["emit", "missing.json"], "path not found"),
    (["emit", "{plan}", "--to", "lmdeploy"], "unknown --to 'lmdeploy'"),
    (["emit", "{plan}", "--format", "toml"], "unknown --format 'toml'"),
    (["emit", "{plan}", "--kv-cache-dtype", "fp8"], "engine flags (--kv-cache-dtype fp8) were given with a PLAN.json"),
    (["emit", "{plan}", "--policy", "p.yaml"], "--policy applies when planning"),
    (["emit", "{bad}"], "does not match the plan schema: layers[0].quant_mode"),
    (["emit", "{broken}"], "malformed JSON in"),
    (["emit", "{other}"], "is a kvplan.emit document"),
    (["emit", str(GPT_OSS), "--policy", "{badpolicy}"], "bad.yaml:3: rules[0]: missing required key 'set'"),
])
def test_emit_bad_input_is_one_line_exit_2_nothing_written(args: list[str], needle: str, plan_json: Path,
                                                           tmp_path: Path) -> None:
    doc = json.loads(plan_json.read_text())
    doc["layers"][0]["quant_mode"] = "fp9"
    (tmp_path / "bad_plan.json").write_text(json.dumps(doc))
    (tmp_path / "broken.json").write_text('{"kind": "kvplan.plan", ')
    (tmp_path / "other.json").write_text('{"kind": "kvplan.emit", "schema_version": "1.0"}')
    (tmp_path / "bad.yaml").write_text("version: 1\nrules:\n  - {code: KV901, name: a, reason: r}\n")
    subst = {"{plan}": str(plan_json), "{bad}": str(tmp_path / "bad_plan.json"),
             "{broken}": str(tmp_path / "broken.json"), "{other}": str(tmp_path / "other.json"),
             "{badpolicy}": str(tmp_path / "bad.yaml")}
    out = tmp_path / "out.txt"
    r = kvplan(*[subst.get(a, a) for a in args], "--out", str(out))
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvplan: error: ") and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists() and not any(p.name.startswith(".out.txt") for p in tmp_path.iterdir())


def test_emit_does_not_import_service_or_heavy_modules(plan_json: Path) -> None:
    code = ("import sys; from kvplan.cli.main import app; from typer.testing import CliRunner; "
            f"r = CliRunner().invoke(app, ['emit', r'{plan_json}', '--to', 'sglang']); assert r.exit_code == 0, "
            "r.output; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'uvicorn', 'starlette', 'torch', "
            "'triton')); "
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stdout + r.stderr
