"""The lint report: the JSON document `kvplan lint --format json` prints (schema: schemas/lint-report.schema.json).

Everything here is data; ordering is fixed (files by path, findings by path, line, column, code)
so that two runs over the same tree print the same bytes.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from kvplan.model.base import Frozen
from kvplan.model.plan import EngineRef
from kvplan.model.vocab import Severity

LINT_SCHEMA_VERSION = "1.2"

FileKind = Literal["kubernetes", "compose", "vllm-config", "helm-values", "helm-template", "dockerfile", "shell",
                   "text", "unknown"]
FileStatus = Literal["linted", "skipped", "error"]


class Location(Frozen):
    """Where a finding points: file, 1-based line and column, and the YAML path when the file is YAML."""

    path: str
    """File path as given on the command line (relative to the working directory when under it), '/'-separated."""
    line: int = 1
    """1-based line of the token the finding is about."""
    column: int = 1
    """1-based column (in characters) of that token."""
    yaml_path: str | None = None
    """Dotted path of the YAML node, e.g. spec.template.spec.containers[0].args[3] (null outside YAML)."""
    rendered: bool = False
    """True when the file is a Helm template and line and column are in its `helm template` output: the text
    came from a template action (values, helpers), so no line of the template holds it. False: a line of the file."""


class LintFinding(Frozen):
    """One finding at a location in a deployment file."""

    code: str
    """Stable rule code (KVnnn); `kvplan rule CODE` prints its documentation."""
    name: str
    """Rule name (kebab-case)."""
    severity: Severity
    """error: vLLM would refuse to start or crash; warning: works but likely not what you want; info: advice."""
    message: str
    """What is wrong, in one sentence."""
    fix: str | None = None
    """How to fix it."""
    location: Location
    """Where it is."""
    model: str | None = None
    """The served model the launch names (as written), when the finding belongs to a launch."""
    layers: list[int] = Field(default_factory=list)
    """Layer indices the finding names (planner findings), else empty."""
    launch: int | None = None
    """Index (in the file's `launches`) of the launch the finding belongs to; null for file-level findings."""
    upgrade_to: str | None = None
    """Set when the image pins a vLLM release older than kvplan models: the modelled release this finding
    is about ("on upgrade to ..."); such findings are info, not errors of the pinned release."""
    skipped_rules: list[str] = Field(default_factory=list)
    """KV804: the rules that need the model's config and were skipped (text output shows them with -v)."""


class Suppressed(Frozen):
    """A finding a suppression hid (kept in the report so reviewers can audit them)."""

    code: str
    """Code of the suppressed finding."""
    location: Location
    """Where the suppressed finding pointed."""
    reason: str | None = None
    """The reason the suppression gave (null when it gave none, which is itself finding KV806)."""
    via: Literal["comment", "annotation", "per-file-ignores"]
    """What suppressed it."""


class LaunchInfo(Frozen):
    """One vLLM launch found in a file, and what the linter used to check it."""

    location: Location
    """Where the launch starts (the `vllm` word, the container, or the first key of a vLLM config)."""
    model: str | None = None
    """Model as written in the launch (positional, --model, --model_id or storageUri), if any."""
    config: str | None = None
    """config.json used for the plan rules: a local path, a mapped path or `bundled:<hf id>`; null if none found."""
    gpu: str | None = None
    """GPU profile the plan was made for (from node selectors, else --gpu / the configured default)."""
    gpu_count: int | None = None
    """GPUs the pod (LeaderWorkerSet: the group) requests, when the file says."""
    image: str | None = None
    """Container image of the launch (as written), when it runs in one."""
    pinned: str | None = None
    """vLLM release the image tag pins (vllm/vllm-openai:v0.10.0 -> 0.10.0), when it is a vLLM release image."""
    engine: str | None = None
    """vLLM release the launch was linted against (the pinned one when modelled, else the configured one)."""


class FileResult(Frozen):
    """One file the linter looked at."""

    path: str
    """File path, '/'-separated."""
    kind: FileKind
    """What the file was recognised as."""
    status: FileStatus
    """linted (at least one vLLM launch checked), skipped (not a deployment config), error (unreadable/unparsable)."""
    note: str | None = None
    """Why it was skipped, or what went wrong."""
    launches: list[LaunchInfo] = Field(default_factory=list)
    """vLLM launches found in the file."""


class Summary(Frozen):
    """Counts over the whole run."""

    files: int
    """Files looked at."""
    linted: int
    """Files with at least one vLLM launch."""
    skipped: int
    """Files that are not deployment configs."""
    launches: int
    """vLLM launches checked."""
    findings: int
    """Findings reported (after select/ignore and suppressions)."""
    errors: int
    """Findings of severity error."""
    warnings: int
    """Findings of severity warning."""
    infos: int
    """Findings of severity info."""
    suppressed: int
    """Findings hidden by suppressions."""
    by_code: dict[str, int] = Field(default_factory=dict)
    """Reported findings per code."""


class Settings(Frozen):
    """The settings the run used (after config file and command line)."""

    config_file: str | None = None
    """The pyproject.toml / kvplan.toml read, if any."""
    fail_level: Literal["error", "warning", "info"] = "error"
    """Exit 1 when a reported finding is at or above this severity."""
    select: list[str] = Field(default_factory=list)
    """Code prefixes selected (empty: all)."""
    ignore: list[str] = Field(default_factory=list)
    """Code prefixes ignored."""
    gpu: str | None = None
    """Default GPU for launches whose manifest names none."""
    strict: bool = False
    """`--strict` / `strict = true`: KV604 (architecture unverified against vLLM, unused geometry keys) is an error."""


class LintReport(Frozen):
    """The result of `kvplan lint`."""

    schema_version: str = LINT_SCHEMA_VERSION
    """Version of this JSON contract."""
    kind: Literal["kvplan.lint-report"] = "kvplan.lint-report"
    """Document kind."""
    kvplan_version: str
    """kvplan version that produced the report."""
    engine: EngineRef
    """Engine and version whose behaviour the rules model."""
    settings: Settings
    """Settings used."""
    summary: Summary
    """Counts."""
    files: list[FileResult] = Field(default_factory=list)
    """Every file looked at, sorted by path."""
    findings: list[LintFinding] = Field(default_factory=list)
    """Reported findings, sorted by path, line, column, code, message."""
    suppressed: list[Suppressed] = Field(default_factory=list)
    """Findings hidden by suppressions, same order."""


def lint_report_schema() -> dict:
    """The published JSON Schema of the report (schemas/lint-report.schema.json, drift-tested)."""
    s = LintReport.model_json_schema(mode="serialization")
    s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    s["$id"] = f"https://kvplan.dev/schemas/lint-report-{LINT_SCHEMA_VERSION}.json"
    return s


def lint_report_schema_text() -> str:
    import json
    return json.dumps(lint_report_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m kvplan.lint.report > schemas/lint-report.schema.json
    import sys
    sys.stdout.write(lint_report_schema_text())
