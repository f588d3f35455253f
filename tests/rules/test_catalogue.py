"""One catalogue: every code the source can report is a declared rule that `kvplan rule CODE` documents."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kvplan.cli.main import app
from kvplan.rules.base import LINT_SCOPES, PLANNER_SCOPES, RESERVED, SCOPES, all_rules, declare, define, get_rule
from tests.conftest import ROOT

runner = CliRunner()
ENV = {"NO_COLOR": "1", "COLUMNS": "200"}
_CODE = re.compile(r"KV\d{3}")


def _source_codes() -> set[str]:
    """Every KVnnn literal in the package source (codes, documentation and messages alike)."""
    return {m.group(0) for f in (ROOT / "kvplan").rglob("*.py") for m in _CODE.finditer(f.read_text())}


def test_every_code_in_the_source_is_documented() -> None:
    codes = _source_codes()
    assert {"KV001", "KV104", "KV803", "KV980", "KV993"} <= codes
    doc = json.loads(runner.invoke(app, ["rules", "--format", "json"], env=ENV).stdout)
    listed = {r["code"] for r in doc["rules"]}
    missing = []
    for code in sorted(codes):
        r = runner.invoke(app, ["rule", code, "--format", "json"], env=ENV)
        answered = r.exit_code == 0 and json.loads(r.stdout)["code"] == code
        if not answered or (code not in listed and not any(rng.covers(code) for rng in RESERVED)):
            missing.append(code)
    assert not missing, f"codes in kvplan/ that `kvplan rule` does not answer: {missing}"


def test_catalogue_complete_without_importing_lint_emit_or_policy() -> None:
    # A fresh interpreter that imports only the rules layer sees every scope's rules (no import side effects).
    code = ("import sys; from kvplan.rules.base import all_rules; rs = all_rules(); "
            "print(sorted({r.scope for r in rs})); print(len(rs)); "
            "print(sorted(m for m in sys.modules if m.startswith(('kvplan.lint', 'kvplan.emit', 'kvplan.policy'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    scopes, n, loaded = out.splitlines()
    assert set(eval(scopes)) == set(SCOPES) and int(n) == len(all_rules()) and loaded == "[]"


@pytest.mark.parametrize("code,scope", [("KV803", "flags"), ("KV808", "launch"), ("KV800", "file"),
                                        ("KV980", "emit"), ("KV990", "policy"), ("KV104", "layer")])
def test_rule_answers_with_scope(code: str, scope: str) -> None:
    r = runner.invoke(app, ["rule", code], env=ENV)
    assert r.exit_code == 0 and r.stdout.startswith(code) and f"Scope: {scope}" in r.stdout


def test_policy_file_codes_answer_with_the_reserved_range() -> None:
    r = runner.invoke(app, ["rule", "KV905", "--format", "json"], env=ENV)
    assert r.exit_code == 0 and json.loads(r.stdout)["name"] == "policy-file-rule"
    doc = json.loads(runner.invoke(app, ["rules", "--format", "json"], env=ENV).stdout)
    assert doc["schema_version"] == "1.1" and doc["reserved"][0]["codes"] == "KV900-KV979"
    assert get_rule("KV999") is None  # unassigned: `kvplan rule KV999` is "no rule", exit 2 (tests/cli)


def test_planner_runs_only_planner_scopes() -> None:
    from kvplan.planner.compile import _rules
    assert {r.scope for r in _rules().values()} <= set(PLANNER_SCOPES)
    assert not any(c.startswith(("KV8", "KV9")) for c in _rules())
    assert get_rule("KV808").scope in LINT_SCOPES


def test_declare_validates_metadata() -> None:
    ok = dict(name="x-y", summary="s", why="w", fix="f", family="t")
    with pytest.raises(ValueError, match="three digits"):
        define(code="KV12", **ok)
    with pytest.raises(ValueError, match="duplicate"):
        define(code="KV001", **{**ok, "name": "brand-new-name"})
    with pytest.raises(ValueError, match="reserved"):
        define(code="KV950", **ok)
    with pytest.raises(ValueError, match="scope"):
        declare(code="KV899", scope="nowhere", **ok)(lambda ctx: ())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kebab-case"):
        define(code="KV898", **{**ok, "name": "Not_Kebab"})


def test_docs_rules_md_carries_the_generated_catalogue() -> None:
    from kvplan.rules.catalog import catalogue_markdown
    doc = (ROOT / "docs" / "rules.md").read_text()
    assert catalogue_markdown() in doc, "docs/rules.md catalogue drifted: run `python -m kvplan.rules.catalog`"
    assert all(f"| {r.code} | {r.name} |" in doc for r in all_rules())
