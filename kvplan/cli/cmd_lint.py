"""`kvplan lint PATH...`: check deployment files for wrong KV cache flags (no logic here; see kvplan.lint).

Exit codes: 0 clean, 1 findings at or above --fail-level, 2 usage or input error.
"""
from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

import typer

from kvplan.errors import KvplanInputError


class LintFormat(str, Enum):
    text = "text"
    concise = "concise"
    json = "json"
    sarif = "sarif"
    github = "github"
    junit = "junit"


class LintFailLevel(str, Enum):
    error = "error"
    warning = "warning"
    info = "info"


def _codes(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [c.strip().upper() for c in value.split(",") if c.strip()]


def lint(
    paths: list[str] | None = typer.Argument(None, help="Files and folders to lint (folders are walked)."),
    format: LintFormat = typer.Option(LintFormat.text, "--format", "-f", "--output-format",
                                      help="text, concise (one line per finding), json, sarif (GitHub code scanning), "
                                           "github (annotations) or junit."),
    select: str | None = typer.Option(None, "--select",
                                      help="Comma-separated code prefixes to report (KV1,KV401); replaces the config's "
                                           "select."),
    ignore: str | None = typer.Option(None, "--ignore",
                                      help="Comma-separated code prefixes never to report (added to the config's "
                                           "ignore)."),
    fail_level: LintFailLevel | None = typer.Option(None, "--fail-level",
                                                    help="Exit 1 when a finding is at or above this severity (default: "
                                                         "error, or the config's)."),
    exit_zero: bool = typer.Option(False, "--exit-zero",
                                   help="Exit 0 even when there are findings (2 still means a usage or input error)."),
    gpu: str | None = typer.Option(None, "--gpu",
                                   help="Default GPU for launches whose manifest has no GPU node selector (h100, l4, "
                                        "sm90)."),
    config: Path | None = typer.Option(None, "--config",
                                       help="kvplan.toml or pyproject.toml to use instead of discovering one from the "
                                            "first path upwards."),
    isolated: bool = typer.Option(False, "--isolated", help="Ignore every configuration file."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the report to this file instead of stdout."),
    list_models: bool = typer.Option(False, "--list-models",
                                     help="List the model ids whose configs are bundled, and exit."),
    verbose: bool = typer.Option(False, "--verbose", "-v",
                                 help="Log each skipped file to stderr; text output lists the rules KV804 skipped."),
    statistics: bool = typer.Option(False, "--statistics",
                                    help="Print the number of findings per code instead of the findings "
                                         "(text formats)."),
    sarif_all_rules: bool = typer.Option(False, "--sarif-all-rules",
                                         help="SARIF: list every rule kvplan lint can report in the tool driver, not "
                                              "only those with results."),
    offline: bool = typer.Option(False, "--offline", help="Resolve no Hugging Face ids (air-gapped CI): their "
                                 "launches get KV804 saying so. Same as `hub = false` in the configuration."),
    file_timeout: float | None = typer.Option(None, "--file-timeout", min=0,
                                                 help="Seconds one file may take (default 5, or the config's "
                                                      "file-timeout; 0: no limit). A file over it is finding KV822."),
    strict: bool = typer.Option(False, "--strict",
                                help="An architecture not verified against vLLM, or config keys that look "
                                "like layer geometry but were not used (KV604), is an error. Same as `strict = true` "
                                "in the configuration."),
) -> None:
    """Lint deployment files (Kubernetes, KServe, LeaderWorkerSet, compose, vLLM --config YAML, launch scripts) for KV cache flag problems."""  # noqa: E501 - `kvplan --help` keeps a docstring's line breaks
    try:
        _run(paths or [], format, select, ignore, fail_level, exit_zero, gpu, config, isolated, output, list_models,
             verbose, statistics, sarif_all_rules, file_timeout, offline, strict)
    except KvplanInputError as e:
        typer.echo(f"kvplan: error: {e}", err=True)
        sys.exit(2)


def _run(paths: list[str], format: LintFormat, select: str | None, ignore: str | None,
         fail_level: LintFailLevel | None, exit_zero: bool, gpu: str | None, config: Path | None,
         isolated: bool, output: Path | None, list_models: bool, verbose: bool, statistics: bool = False,
         sarif_all_rules: bool = False, file_timeout: float | None = None, offline: bool = False,
         strict: bool = False) -> None:
    if list_models:
        from kvplan.lint.resolve import bundled_ids
        typer.echo("\n".join(bundled_ids()))
        return
    if not paths:
        raise KvplanInputError("no path to lint.", "Pass files or folders, e.g. `kvplan lint deploy/`.")
    if statistics and format not in (LintFormat.text, LintFormat.concise):
        raise KvplanInputError(f"--statistics prints a table and cannot be combined with --format {format.value}.",
                               "Drop --statistics (the JSON report has summary.by_code) or use --format text.")
    if sarif_all_rules and format is not LintFormat.sarif:
        raise KvplanInputError("--sarif-all-rules only applies to --format sarif.", "Add --format sarif or drop it.")
    from kvplan.lint.formats import render
    from kvplan.lint.formats import statistics as stats_table
    from kvplan.lint.run import exit_code, lint_paths
    report = lint_paths(paths, select=_codes(select), ignore=_codes(ignore) or (), gpu=gpu, config=config,
                        fail_level=fail_level.value if fail_level else None, isolated=isolated,
                        file_timeout=file_timeout, offline=offline, strict=strict)
    chart_notes: list[str] = []
    for fr in report.files:
        explicit = fr.path in {Path(p).as_posix() for p in paths}
        if fr.kind == "helm-template" and fr.note and not verbose:
            if fr.note not in chart_notes:  # one note per chart, not one per template
                chart_notes.append(fr.note)
                typer.echo(f"kvplan: note: {fr.note}", err=True)
        elif fr.status == "skipped" and (verbose or explicit):
            typer.echo(f"kvplan: note: skipped {fr.path}: {fr.note}", err=True)
    if format is not LintFormat.text and report.summary.skipped and not verbose:
        typer.echo(f"kvplan: {report.summary.files} files, {report.summary.linted} with vLLM launches, "
                   f"{report.summary.skipped} skipped (not deployment configs).", err=True)
    out = stats_table(report) if statistics else render(
        report, format.value, verbose=verbose, all_rules=sarif_all_rules, srcroot=Path.cwd().resolve().as_uri() + "/")
    if output is not None:
        from kvplan.cli.main import write_atomic
        write_atomic(output, out)
        if format is not LintFormat.text:
            typer.echo(f"kvplan: wrote {output}", err=True)
    else:
        sys.stdout.write(out)
        sys.stdout.flush()
    # sys.exit, not typer.Exit: the console entry point runs click with standalone_mode=False,
    # where typer.Exit's code is returned rather than used as the process status.
    sys.exit(exit_code(report, exit_zero=exit_zero))


# The lint output has no colour codes, so NO_COLOR holds by construction.
COMMANDS = {"lint": lint}
