"""`kvplan lint` as a user runs it: formats (SARIF validated against the 2.1.0 schema), exit codes,
bad inputs that never traceback, rule documentation, the published report schema."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest
from typer.testing import CliRunner

from kvplan.cli.main import app
from kvplan.lint.report import lint_report_schema
from tests.conftest import ROOT

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}
DEPLOY = "examples/deploy"
SARIF_SCHEMA = json.loads((Path(__file__).parent / "sarif-schema-2.1.0.json").read_text())


def lint(*args: str, cwd: Path = ROOT):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return runner.invoke(app, ["lint", *args], env=ENV)
    finally:
        os.chdir(old)


def test_cli_text_format_points_at_file_line_column() -> None:
    r = lint(f"{DEPLOY}/k8s-deployment-typo.yaml")
    assert r.exit_code == 1, r.output  # KV002 is an error
    lines = r.stdout.splitlines()
    assert lines[0] == ("examples/deploy/k8s-deployment-typo.yaml:27:15: KV001 [error] unknown flag --kv-cache-type: "
                        'vLLM exits with "unrecognized arguments: --kv-cache-type=fp8"; did you mean --kv-cache-dtype? '
                        "(spec.template.spec.containers[0].args[1])")
    assert lines[1] == "    fix: Replace it with --kv-cache-dtype."
    assert lines[-1].startswith("Found 2 findings (2 error, 0 warning, 0 info) in 1 file")
    assert "\x1b[" not in r.stdout


def test_cli_exit_codes_fail_level_and_exit_zero() -> None:
    clean = f"{DEPLOY}/clean-deployment.yaml"
    assert lint(clean).exit_code == 0
    assert "All checks passed" in lint(clean).stdout
    warn_only = f"{DEPLOY}/serve-llama70b.sh"  # KV105 warning
    assert lint(warn_only).exit_code == 0
    assert lint(warn_only, "--fail-level", "warning").exit_code == 1
    assert lint(f"{DEPLOY}/k8s-deployment-typo.yaml", "--exit-zero").exit_code == 0
    assert lint(f"{DEPLOY}/k8s-deployment-typo.yaml", "--ignore", "KV002").exit_code == 1  # KV001: vLLM exits 2
    assert lint(f"{DEPLOY}/k8s-deployment-typo.yaml", "--ignore", "KV001,KV002").exit_code == 0
    assert lint(f"{DEPLOY}/k8s-deployment-typo.yaml", "--select", "KV001", "--fail-level", "warning").exit_code == 1


def test_cli_usage_and_config_errors_exit_2_with_one_line() -> None:
    r = lint(f"{DEPLOY}/clean-deployment.yaml", "--gpu", "h1000")
    assert r.exit_code == 2 and r.stderr.startswith("kvplan: error: unknown GPU 'h1000'")
    assert len(r.stderr.splitlines()) == 1
    assert lint().exit_code == 2
    assert lint(f"{DEPLOY}/clean-deployment.yaml", "--format", "xml").exit_code == 2
    assert lint(f"{DEPLOY}/clean-deployment.yaml", "--config", "nope.toml").exit_code == 2


def test_cli_json_is_versioned_sorted_stable_and_matches_published_schema() -> None:
    a = lint(DEPLOY, "--format", "json")
    b = lint(DEPLOY, "--format", "json")
    assert a.stdout == b.stdout and a.exit_code == 1
    doc = json.loads(a.stdout)
    jsonschema.validate(doc, json.loads((ROOT / "schemas" / "lint-report.schema.json").read_text()))
    assert doc["schema_version"] == "1.2" and doc["kind"] == "kvplan.lint-report" and doc["kvplan_version"]
    assert doc["engine"] == {"name": "vllm", "version": "0.33.0"}
    keys = [(f["location"]["path"], f["location"]["line"], f["location"]["column"], f["code"]) for f in doc["findings"]]
    assert keys == sorted(keys)
    assert [f["path"] for f in doc["files"]] == sorted(f["path"] for f in doc["files"])
    assert "skipped" in a.stderr  # the log line goes to stderr, never into the JSON


def test_cli_sarif_validates_against_sarif_2_1_0_schema() -> None:
    r = lint(DEPLOY, "--format", "sarif")
    doc = json.loads(r.stdout)
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(doc)
    run = doc["runs"][0]
    rules = [x["id"] for x in run["tool"]["driver"]["rules"]]
    assert rules == sorted(rules) and "KV803" in rules
    res = next(x for x in run["results"] if x["ruleId"] == "KV803")
    assert res["level"] == "error" and rules[res["ruleIndex"]] == "KV803"
    loc = res["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "examples/deploy/vllm-config.yaml", "uriBaseId": "%SRCROOT%"}
    assert loc["region"] == {"startLine": 3, "startColumn": 17}
    assert all(x["partialFingerprints"] for x in run["results"])


def test_cli_sarif_with_no_findings_is_valid() -> None:
    doc = json.loads(lint(f"{DEPLOY}/clean-deployment.yaml", "--format", "sarif").stdout)
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(doc)
    assert doc["runs"][0]["results"] == []


def test_cli_github_annotations_are_escaped_workflow_commands() -> None:
    out = lint(f"{DEPLOY}/k8s-deployment-typo.yaml", "--format", "github").stdout.splitlines()
    assert out[0].startswith("::error file=examples/deploy/k8s-deployment-typo.yaml,line=27,col=15,"
                             "title=KV001 unknown-flag::"
                             "unknown flag --kv-cache-type: vLLM exits with ")
    assert out[1].startswith("::error file=examples/deploy/k8s-deployment-typo.yaml,line=30,col=15,"
                             "title=KV002 removed-flag::")
    info = lint(f"{DEPLOY}/leaderworkerset.yaml", "--format", "github", "--select", "KV105").stdout
    assert info.startswith("::notice ")


def test_cli_junit_is_well_formed_xml(tmp_path: Path) -> None:
    out = tmp_path / "lint.xml"
    r = lint(DEPLOY, "--format", "junit", "-o", str(out))
    assert r.exit_code == 1 and r.stdout == ""
    root = ET.fromstring(out.read_text())
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    clean = suites["examples/deploy/clean-deployment.yaml"]
    assert clean.get("failures") == "0" and clean.get("tests") == "1"
    assert clean.find("testcase").get("name").startswith("launch at ")  # the passing launch is a test case
    typo = suites["examples/deploy/k8s-deployment-typo.yaml"]
    (case,) = typo.findall("testcase")  # one launch, failing with both of its findings
    assert typo.get("failures") == "1" and [f.get("message")[:5] for f in case.findall("failure")] == ["KV001", "KV002"]
    assert int(root.get("tests")) == sum(int(s.get("tests")) for s in suites.values())


def test_cli_malformed_binary_and_missing_inputs_are_findings_not_tracebacks(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n    - name: x\n   image: [\n")
    (tmp_path / "blob.yaml").write_bytes(b"\x00\x01\x02binary")
    (tmp_path / "latin1.sh").write_bytes("vllm serve caf\xe9\n".encode("latin-1"))
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tmp_path / "ok.sh").write_text("vllm serve Qwen/Qwen3-8B --kv-cache-dtype fp9\n")
    r = lint(str(tmp_path), "missing.yaml", "--format", "json", "--isolated", cwd=tmp_path)
    assert r.exception is None or isinstance(r.exception, SystemExit)
    doc = json.loads(r.stdout)
    got = {(f["location"]["path"], f["code"], f["location"]["line"], f["location"]["column"]) for f in doc["findings"]}
    assert ("bad.yaml", "KV801", 6, 4) in got
    assert ("blob.yaml", "KV800", 1, 1) in got and ("latin1.sh", "KV800", 1, 1) in got
    assert ("missing.yaml", "KV800", 1, 1) in got
    assert ("ok.sh", "KV803", 1, 43) in got  # the other files are still linted
    status = {f["path"]: (f["status"], f["note"]) for f in doc["files"]}
    assert status["logo.png"][0] == "skipped" and "binary" in status["logo.png"][1]
    assert r.exit_code == 1


def test_cli_unreadable_file_is_a_finding(tmp_path: Path) -> None:
    p = tmp_path / "secret.yaml"
    p.write_text("a: 1\n")
    p.chmod(0)
    try:
        if os.access(p, os.R_OK):
            pytest.skip("running as root: permissions do not apply")
        doc = json.loads(lint(str(p), "--format", "json", "--isolated", cwd=tmp_path).stdout)
        assert doc["findings"][0]["code"] == "KV800" and "cannot read" in doc["findings"][0]["message"]
    finally:
        p.chmod(0o644)


def test_rule_docs_list_lint_codes() -> None:
    r = runner.invoke(app, ["rule", "KV803"], env=ENV)
    assert r.exit_code == 0 and r.stdout.startswith("KV803 invalid-flag-value (check, error)")
    doc = json.loads(runner.invoke(app, ["rules", "--format", "json"], env=ENV).stdout)
    codes = {x["code"] for x in doc["rules"]}
    assert {f"KV8{n:02d}" for n in range(12)} <= codes
    assert all(x["why"] and x["fix"] for x in doc["rules"] if x["code"].startswith("KV8"))


def test_list_models_names_the_bundled_configs() -> None:
    out = lint("--list-models").stdout.split()
    assert {"openai/gpt-oss-20b", "meta-llama/Meta-Llama-3.1-8B", "Qwen/Qwen3-8B", "google/gemma-3-27b-it",
            "deepseek-ai/DeepSeek-V3", "nvidia/Llama-3.1-70B-Instruct-FP8"} <= set(out)


def test_lint_report_schema_checked_in_matches_models() -> None:
    on_disk = json.loads((ROOT / "schemas" / "lint-report.schema.json").read_text())
    assert on_disk == lint_report_schema(), "run: python -m kvplan.lint.report > schemas/lint-report.schema.json"
    for name, d in on_disk["$defs"].items():
        for field, spec in d.get("properties", {}).items():
            assert spec.get("description"), f"{name}.{field} has no description"


def test_lint_never_imports_torch_or_triton() -> None:
    code = (f"import sys, os; os.chdir(r'{ROOT}'); from kvplan.cli.main import app; "
            "from typer.testing import CliRunner; "
            "r = CliRunner().invoke(app, ['lint', 'examples/deploy', '--format', 'sarif']); "
            "assert r.exit_code == 1, r.output; "
            "heavy = sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('torch', 'triton', 'transformers', 'numpy')); "
            "assert not heavy, heavy")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_cli_concise_is_one_line_per_finding_and_statistics_counts_codes() -> None:
    full = lint(DEPLOY)
    concise = lint(DEPLOY, "--format", "concise")
    report = json.loads(lint(DEPLOY, "--format", "json").stdout)
    lines = concise.stdout.splitlines()
    assert concise.exit_code == full.exit_code == 1
    assert len(lines) == report["summary"]["findings"] + 1 and lines[-1] == full.stdout.splitlines()[-1]
    assert all(re.match(r"^examples/deploy/\S+:\d+:\d+: KV\d{3} \[(error|warning|info)\] ", x) for x in lines[:-1])
    stats = lint(DEPLOY, "--statistics").stdout.splitlines()
    counts = {m.group(2): int(m.group(1)) for m in (re.match(r"^\s*(\d+)  (KV\d{3})  \[", x) for x in stats) if m}
    assert counts == report["summary"]["by_code"]
    assert [int(x.split()[0]) for x in stats[:-1]] == sorted(counts.values(), reverse=True)
    bad = lint(DEPLOY, "--statistics", "--format", "json")
    assert bad.exit_code == 2 and "--statistics" in bad.output


def test_cli_verbose_text_lists_the_rules_kv804_skipped(tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_text("vllm serve my-org/private-model --kv-cache-dtype fp8\n")
    quiet = lint("run.sh", "--isolated", cwd=tmp_path).stdout
    loud = lint("run.sh", "--isolated", "-v", cwd=tmp_path).stdout
    assert "KV804" in quiet and "KV401" not in quiet
    assert "    skipped: " in loud and "KV401" in loud


def test_cli_sarif_all_rules_and_srcroot_base() -> None:
    doc = json.loads(lint(DEPLOY, "--format", "sarif", "--sarif-all-rules").stdout)
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(doc)
    run = doc["runs"][0]
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert ids == sorted(ids) and {"KV001", "KV401", "KV804", "KV812", "KV813"} <= set(ids)
    assert all(ids[res["ruleIndex"]] == res["ruleId"] for res in run["results"])
    base = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert base.startswith("file:///") and base.endswith("/") and Path(base[len("file://"):]) == ROOT.resolve()
    assert lint(DEPLOY, "--sarif-all-rules").exit_code == 2  # only with --format sarif


def test_cli_helm_chart_without_helm_is_one_note_per_chart(tmp_path: Path) -> None:
    chart = tmp_path / "charts" / "llm"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: llm\nversion: 0.1.0\n")
    for name in ("a.yaml", "b.yaml"):
        (chart / "templates" / name).write_text(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}\n"
            "{{- if .Values.x }}\nspec: {}\n{{- end }}\n")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = runner.invoke(app, ["lint", "charts", "--isolated"], env={**ENV, "PATH": str(tmp_path / "no-helm")})
    finally:
        os.chdir(old)
    notes = [x for x in r.stderr.splitlines() if "Helm chart charts/llm" in x]
    assert r.exit_code == 0 and len(notes) == 1 and "`helm` is not on PATH" in notes[0]
    assert "KV801" not in r.stdout
