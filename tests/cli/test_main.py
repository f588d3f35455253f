"""CLI behaviour as a user sees it: outputs, exit codes, one-line errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
from typer.testing import CliRunner

from kvplan.cli.main import app
from kvplan.releases import DEFAULT_ENGINE_VERSION
from kvplan.schemas import schema_dict
from tests.conftest import CORPUS, EXAMPLES

runner = CliRunner()
GPT_OSS = str(EXAMPLES / "gpt-oss-20b" / "config.json")
ENV = {"COLUMNS": "160", "NO_COLOR": "1"}


def kvplan(*args: str) -> subprocess.CompletedProcess:
    """Run the real console entry point (exit codes and stderr exactly as users get them)."""
    return subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", *args],
                          capture_output=True, text=True, env={**ENV, "PATH": "/usr/bin:/bin"})


def test_plan_json_validates_against_published_schema() -> None:
    r = runner.invoke(app, ["plan", GPT_OSS, "--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers",
                            "sliding_window"], env=ENV)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schema_dict("plan"))
    assert doc["schema_version"] == "1.5" and doc["engine"] == {"name": "vllm", "version": DEFAULT_ENGINE_VERSION}
    assert [layer["kv_cache_dtype"] for layer in doc["layers"][:2]] == ["auto", "fp8"]


def test_plan_json_is_byte_stable() -> None:
    a = runner.invoke(app, ["plan", GPT_OSS, "--kv-cache-dtype", "fp8"], env=ENV).stdout
    b = runner.invoke(app, ["plan", GPT_OSS, "--kv-cache-dtype", "fp8"], env=ENV).stdout
    assert a == b and list(json.loads(a)) == sorted(json.loads(a))


def test_explain_shows_table_totals_and_findings() -> None:
    r = runner.invoke(app, ["explain", GPT_OSS, "--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers",
                            "sliding_window"], env=ENV)
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "0,2..22 (12)" in out and "1,3..23 (12)" in out
    assert "36,864" in out and "25.0%" in out
    assert "KV401" in out and "warnings (1)" in out


def test_explain_all_layers_expands_rows() -> None:
    r = runner.invoke(app, ["explain", GPT_OSS, "--all-layers"], env=ENV)
    assert r.exit_code == 0
    assert "│ 23 " in r.stdout and "(12)" not in r.stdout


def test_plan_exit_1_on_error_finding() -> None:
    r = runner.invoke(app, ["plan", str(CORPUS / "gemma-2b" / "config.json"), "--kv-cache-dtype", "bfloat16"], env=ENV)
    assert r.exit_code == 1
    assert any(f["code"] == "KV201" for f in json.loads(r.stdout)["findings"])


def test_plan_out_writes_file(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", GPT_OSS, "--out", str(out)], env=ENV)
    assert r.exit_code == 0 and r.stdout == ""
    assert json.loads(out.read_text())["model"]["num_layers"] == 24


def test_bad_inputs_one_line_exit_2(tmp_path: Path) -> None:
    bad_json = tmp_path / "config.json"
    bad_json.write_text('{"model_type": "llama", ')
    unknown = tmp_path / "u" / "config.json"
    unknown.parent.mkdir()
    unknown.write_text(json.dumps({"model_type": "no_such_model_xyz", "num_hidden_layers": 2}))
    cases = [
        ([str(tmp_path / "missing.json")], "path not found"),
        ([str(bad_json)], "malformed JSON"),
        ([str(unknown)], "unknown model_type"),
        ([GPT_OSS, "--kv-cache-dtype", "fp8_e4m3fn"], "invalid --kv-cache-dtype 'fp8_e4m3fn'"),
        ([GPT_OSS, "--tensor-parallel-size", "two"], "argument --tensor-parallel-size/-tp: invalid int value: 'two'"),
        ([GPT_OSS, "--attention-config", "{not json"], "invalid JSON for --attention-config"),
    ]
    for args, expect in cases:
        r = kvplan("plan", *args)
        assert r.returncode == 2, (args, r.stderr)
        assert expect in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        assert r.stdout == ""


def test_invalid_dtype_lists_all_valid_values() -> None:
    r = kvplan("plan", GPT_OSS, "--kv-cache-dtype", "int8")
    assert r.returncode == 2
    assert "int8_per_token_head" in r.stderr and "nvfp4_4over6" in r.stderr


def test_out_not_written_on_error(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    r = kvplan("plan", GPT_OSS, "--kv-cache-dtype", "bogus", "--out", str(out))
    assert r.returncode == 2 and not out.exists()


def test_unknown_flag_is_an_error_finding_not_a_crash() -> None:
    # vLLM exits with status 2 on it, so the plan carries an error finding (exit 1 at the default fail level).
    r = runner.invoke(app, ["plan", GPT_OSS, "--kv-cache-type", "fp8", "--format", "json"], env=ENV)
    assert r.exit_code == 1
    f = [f for f in json.loads(r.stdout)["findings"] if f["code"] == "KV001"]
    assert f and f[0]["severity"] == "error" and "did you mean --kv-cache-dtype?" in f[0]["message"]


def test_rule_prints_documentation() -> None:
    r = runner.invoke(app, ["rule", "KV104"], env=ENV)
    assert r.exit_code == 0 and "skip-layers" in r.stdout and "Why:" in r.stdout and "Fix:" in r.stdout
    r = runner.invoke(app, ["rules", "--format", "json"], env=ENV)
    doc = json.loads(r.stdout)
    codes = [x["code"] for x in doc["rules"]]
    assert codes == sorted(codes) and {"KV101", "KV104", "KV130"} <= set(codes)
    assert doc["decision_order"][:3] == ["KV100", "KV101", "KV102"]


def test_unknown_rule_exit_2() -> None:
    r = kvplan("rule", "KV999")
    assert r.returncode == 2 and "no rule" in r.stderr


def test_version() -> None:
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and "kvplan 0.1.0" in r.stdout


def test_console_entry_exit_code_1_on_error_finding() -> None:
    r = kvplan("plan", str(CORPUS / "gemma-2b" / "config.json"), "--kv-cache-dtype", "bfloat16")
    assert r.returncode == 1 and json.loads(r.stdout)["findings"]


def test_usage_errors_are_one_line_exit_2() -> None:
    """Option values the parser rejects (wrong --format, missing argument, unknown command) get
    the same one-line form as input errors, naming the valid values and the help to read."""
    cases = [
        (["lint", "examples/deploy", "--format", "xml"],
         "'xml' is not one of 'text', 'concise', 'json', 'sarif', 'github', 'junit'", "kvplan lint --help"),
        (["plan", GPT_OSS, "--format", "yaml"], "'yaml' is not one of", "kvplan plan --help"),
        (["plan"], "missing argument", "kvplan plan --help"),
        (["plna"], "no such command 'plna'", "kvplan --help"),
    ]
    for args, expect, helps in cases:
        r = kvplan(*args)
        assert r.returncode == 2, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("kvplan: error: "), r.stderr
        assert expect in lines[0] and f"(see '{helps}')" in lines[0], lines[0]
        assert "Usage:" not in r.stderr and "Value error" not in r.stderr and r.stdout == ""


def test_plan_reads_vllm_config_yaml_like_vllm(tmp_path: Path) -> None:
    (tmp_path / "serve.yaml").write_text("kv-cache-dtype: fp8\nkv-cache-dtype-skip-layers: [sliding_window]\n")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = runner.invoke(app, ["plan", GPT_OSS, "--config", "serve.yaml", "--max-model", "4096", "--format", "json"],
                          env=ENV)
    finally:
        os.chdir(old)
    doc = json.loads(r.stdout)
    assert doc["flags"]["kv_cache_dtype"] == "fp8" and doc["flags"]["max_model_len"] == 4096
    assert doc["layers"][0]["kv_cache_dtype"] == "auto" and doc["layers"][1]["kv_cache_dtype"] == "fp8"


def test_importing_the_cli_reads_no_argv_and_loads_verbs_on_demand() -> None:
    """Importing kvplan.cli.main does not look at sys.argv: under a `kvplan plan` argv the optional verbs
    are not imported, yet the same `app` runs them when asked (they load on first lookup)."""
    code = ("import sys; sys.argv = ['kvplan', 'plan']; from kvplan.cli.main import app; "
            "assert 'kvplan.cli.cmd_lint' not in sys.modules, 'optional verbs imported at import time'; "
            "from typer.testing import CliRunner; "
            "r = CliRunner().invoke(app, ['rule', 'KV104']); assert r.exit_code == 0, r.output; "
            "assert 'kvplan.cli.cmd_lint' not in sys.modules, 'a core verb loaded the optional ones'; "
            "r = CliRunner().invoke(app, ['lint', 'examples/deploy/clean-deployment.yaml']); "
            "assert r.exit_code == 0, r.output; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
