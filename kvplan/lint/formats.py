"""Lint report formatters: text, json, sarif (2.1.0, GitHub code scanning), github (workflow commands), junit.

Pure functions from a LintReport to a string; every format is deterministic for equal reports.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote
from xml.etree import ElementTree as ET

from kvplan.lint.report import LintFinding, LintReport
from kvplan.model.vocab import Severity
from kvplan.rules.base import LINT_SCOPES, PLANNER_SCOPES, rules_in

FORMATS = ("text", "concise", "json", "sarif", "github", "junit")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {Severity.error: "error", Severity.warning: "warning", Severity.info: "note"}
_GH_LEVEL = {Severity.error: "error", Severity.warning: "warning", Severity.info: "notice"}


def render(report: LintReport, fmt: str, *, verbose: bool = False, all_rules: bool = False,
           srcroot: str | None = None) -> str:
    """The report in one format. `verbose`: text lists the rules KV804 skipped; `all_rules`: SARIF
    lists every rule lint can report, not only those with results; `srcroot`: the file:// URI that relative
    paths are relative to (SARIF originalUriBaseIds %SRCROOT%)."""
    if fmt == "text":
        return text(report, verbose=verbose)
    if fmt == "sarif":
        return sarif(report, all_rules=all_rules, srcroot=srcroot)
    return {"concise": concise, "json": to_json, "github": github, "junit": junit}[fmt](report)


# ----------------------------------------------------------------------------- text
def _where(f: LintFinding) -> str:
    return f"{f.location.path}:{f.location.line}:{f.location.column}"


def _rendered(f: LintFinding) -> str:
    """Said after the message when the position is in a Helm template's rendered output, not the template."""
    return (f" [line {f.location.line}, column {f.location.column} of the `helm template` output of this template: "
            "a template action wrote it]") if f.location.rendered else ""


def text(report: LintReport, verbose: bool = False) -> str:
    """ruff-style: one line per finding (path:line:col: CODE [severity] message), the fix indented below
    (with `verbose`, the rules a KV804 skipped too)."""
    lines: list[str] = []
    for f in report.findings:
        yp = f" ({f.location.yaml_path})" if f.location.yaml_path else ""
        lines.append(f"{_where(f)}: {f.code} [{f.severity.value}] {f.message}{_rendered(f)}{yp}")
        if f.fix:
            lines.append(f"    fix: {f.fix}")
        if verbose and f.skipped_rules:
            lines.append(f"    skipped: {', '.join(f.skipped_rules)}")
    return "\n".join([*lines, _summary(report)]) + "\n"


def concise(report: LintReport) -> str:
    """One line per finding, nothing else but the summary (ruff --output-format concise)."""
    lines = [f"{_where(f)}: {f.code} [{f.severity.value}] {f.message}{_rendered(f)}" for f in report.findings]
    return "\n".join([*lines, _summary(report)]) + "\n"


def statistics(report: LintReport) -> str:
    """Counts per code, most frequent first (ruff --statistics): count, code, severity, name."""
    rows: dict[str, list] = {}
    for f in report.findings:
        row = rows.setdefault(f.code, [0, f.code, f.severity.value, f.name])
        row[0] += 1
        if f.severity.rank > Severity(row[2]).rank:
            row[2] = f.severity.value
    ranked = sorted(rows.values(), key=lambda r: (-r[0], r[1]))
    out = [f"{n:>5}  {code}  [{sev}] {name}" for n, code, sev, name in ranked]
    return "\n".join([*out, _summary(report)]) + "\n"


def _summary(report: LintReport) -> str:
    s = report.summary
    files = f"{s.files} file{'s' if s.files != 1 else ''} ({s.linted} with vLLM launches, {s.skipped} skipped)"
    if s.findings:
        return (f"Found {s.findings} finding{'s' if s.findings != 1 else ''} ({s.errors} error, {s.warnings} warning, "
                f"{s.infos} info) in {files}" + (f"; {s.suppressed} suppressed" if s.suppressed else "") + ".")
    return (f"All checks passed: {s.launches} launch{'es' if s.launches != 1 else ''} in {files}"
            + (f"; {s.suppressed} suppressed" if s.suppressed else "") + ".")


# ----------------------------------------------------------------------------- json
def to_json(report: LintReport) -> str:
    return json.dumps(report.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


# ----------------------------------------------------------------------------- sarif
def _fingerprint(f: LintFinding) -> str:
    key = "\x1f".join((f.code, f.location.path, f.location.yaml_path or str(f.location.line), f.message))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def sarif(report: LintReport, all_rules: bool = False, srcroot: str | None = None) -> str:
    """SARIF 2.1.0 with one run; rules are those the results reference (with `all_rules`, every rule
    `kvplan lint` can report: the planner's and the KV8xx), sorted by code; relative paths are relative
    to %SRCROOT% (`srcroot` when given)."""
    lintable = {r.code: r for r in rules_in(*PLANNER_SCOPES, *LINT_SCOPES)}  # what `kvplan lint` can report
    codes = list(lintable) if all_rules else sorted({f.code for f in report.findings})
    index = {c: i for i, c in enumerate(codes)}
    rules: list[dict[str, Any]] = []
    for c in codes:
        r = lintable.get(c)
        if r is None:  # pragma: no cover - every reported code is declared
            rules.append({"id": c})
            continue
        refs = "".join(f"\n- {x}" for x in r.references)
        rules.append({
            "id": r.code, "name": r.name,
            "shortDescription": {"text": r.summary},
            "fullDescription": {"text": r.why},
            "help": {"text": f"{r.summary}\n\nWhy: {r.why}\n\nFix: {r.fix}"
                             + (f"\n\nReferences:{refs}" if refs else ""),
                     "markdown": f"**{r.code} {r.name}**: {r.summary}\n\n**Why:** {r.why}\n\n**Fix:** {r.fix}"
                                 + (f"\n\n**References:**{refs}" if refs else "")},
            "defaultConfiguration": {"level": _SARIF_LEVEL[r.severity]},
            "properties": {"tags": ["kvplan", r.family], "problem.severity": r.severity.value},
        })
    results = []
    for f in report.findings:
        artifact = ({"uri": PurePosixPath(f.location.path).as_uri()} if f.location.path.startswith("/")
                    else {"uri": quote(f.location.path), "uriBaseId": "%SRCROOT%"})
        loc: dict[str, Any] = {"physicalLocation": {"artifactLocation": artifact} if f.location.rendered else {
            "artifactLocation": artifact,
            "region": {"startLine": f.location.line, "startColumn": f.location.column}}}  # rendered: the file only
        if f.location.yaml_path:
            loc["logicalLocations"] = [{"fullyQualifiedName": f.location.yaml_path, "kind": "element"}]
        results.append({
            "ruleId": f.code, "ruleIndex": index[f.code], "level": _SARIF_LEVEL[f.severity],
            "message": {"text": f.message + _rendered(f) + (f" Fix: {f.fix}" if f.fix else "")},
            "locations": [loc],
            "partialFingerprints": {"kvplanFinding/v1": _fingerprint(f)},
            **({"properties": {k: v for k, v in (("model", f.model), ("upgrade_to", f.upgrade_to)) if v}}
               if (f.model or f.upgrade_to) else {}),
        })
    doc = {
        "$schema": SARIF_SCHEMA, "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "kvplan", "version": report.kvplan_version,
                                "semanticVersion": report.kvplan_version, "rules": rules,
                                "properties": {"engine": f"{report.engine.name} {report.engine.version}",
                                               "schema_version": report.schema_version}}},
            "columnKind": "unicodeCodePoints",
            **({"originalUriBaseIds": {"%SRCROOT%": {"uri": srcroot}}} if srcroot else {}),
            "invocations": [{"executionSuccessful": True}],
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


# ----------------------------------------------------------------------------- github
def _gh_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(s: str) -> str:
    return _gh_data(s).replace(":", "%3A").replace(",", "%2C")


def github(report: LintReport) -> str:
    """GitHub Actions workflow commands: ::error file=F,line=L,col=C,title=KV104 name::message."""
    out = []
    for f in report.findings:
        msg = f.message + _rendered(f) + (f" Fix: {f.fix}" if f.fix else "")
        where = "" if f.location.rendered else f",line={f.location.line},col={f.location.column}"
        out.append(f"::{_GH_LEVEL[f.severity]} file={_gh_prop(f.location.path)}{where},"
                   f"title={_gh_prop(f'{f.code} {f.name}')}::{_gh_data(msg)}")
    return "\n".join(out) + ("\n" if out else "")


# ----------------------------------------------------------------------------- junit
def junit(report: LintReport) -> str:
    """JUnit XML: one testsuite per file; one testcase per vLLM launch (passing when it has no finding,
    else failing with one failure per finding), one failing testcase per file-level finding, and one
    passing testcase for a checked file with neither."""
    by_file: dict[str, list[LintFinding]] = {}
    for f in report.findings:
        by_file.setdefault(f.location.path, []).append(f)
    launches = {fr.path: fr.launches for fr in report.files}
    paths = sorted({fr.path for fr in report.files if fr.status != "skipped"} | set(by_file))
    root = ET.Element("testsuites", name="kvplan lint")
    total = failed = 0
    for p in paths:
        fs = by_file.get(p, [])
        suite = ET.SubElement(root, "testsuite", name=p)
        cases = 0
        for i, li in enumerate(launches.get(p, [])):
            name = f"launch at {li.location.line}:{li.location.column}" + (f" ({li.model})" if li.model else "")
            case = ET.SubElement(suite, "testcase", name=name, classname=p)
            mine = [f for f in fs if f.launch == i]
            for f in mine:
                _failure(case, f)
            cases += 1
            failed += bool(mine)
        for f in fs:
            if f.launch is None:
                _failure(ET.SubElement(suite, "testcase", name=f"{f.code} {f.name} at {f.location.line}:"
                                                                  f"{f.location.column}", classname=p), f)
                cases += 1
                failed += 1
        if cases == 0:
            ET.SubElement(suite, "testcase", name="kvplan lint", classname=p)
            cases = 1
        suite.set("tests", str(cases))
        suite.set("failures", str(sum(1 for c in suite if c.find("failure") is not None)))
        suite.set("errors", "0")
        total += cases
    root.set("tests", str(total))
    root.set("failures", str(failed))
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _failure(case: ET.Element, f: LintFinding) -> None:
    fail = ET.SubElement(case, "failure", message=f"{f.code} {f.message}", type=f.severity.value)
    fail.text = (f"{_where(f)}: {f.code} [{f.severity.value}] {f.message}{_rendered(f)}"
                 + (f"\nfix: {f.fix}" if f.fix else ""))
