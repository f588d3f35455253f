"""kvplan command line: parse, call the library, pick a formatter, exit. No logic here.

Exit codes: 0 clean, 1 findings at or above --fail-level, 2 usage or input error.
"""
from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from kvplan import __version__
from kvplan.errors import KvplanInputError
from kvplan.files import write_atomic
from kvplan.releases import DEFAULT_ENGINE

# `kvplan rules --format json`: 1.1 added every lint/emit/policy code, `scope` values for them and `reserved`.
RULES_SCHEMA_VERSION = "1.1"
SCOPE_RUNNERS = {"global": "planner, once per plan", "layer": "planner, per layer", "plan": "planner, on the plan",
                 "flags": "kvplan lint, a flag's value", "launch": "kvplan lint, a launch and its pod",
                 "file": "kvplan lint, a deployment file", "emit": "kvplan emit", "policy": "policy engine"}

ENGINE_FLAGS_HELP = ("Engine flags are accepted verbatim after the path, as in a vLLM launch line: "
                     "--kv-cache-dtype, --kv-cache-dtype-skip-layers, --dtype, --tensor-parallel-size, "
                     "--max-model-len, --block-size, --gpu-memory-utilization, --max-num-batched-tokens, "
                     "--attention-backend, --attention-config, --quantization, --hf-overrides, and --revision "
                     "(the branch, tag or commit of a Hugging Face model id).")


def _register_optional(target: typer.Typer) -> None:
    """Command modules register here: each `kvplan/cli/cmd_*.py` exposes COMMANDS = {name: function}.

    Their heavy imports (torch, triton, textual, fastapi) stay inside the command functions.
    """
    import importlib
    for mod in ("cmd_backends", "cmd_engines", "cmd_lint", "cmd_emit", "cmd_serve", "cmd_validate", "cmd_bench",
                "cmd_explore"):
        try:
            m = importlib.import_module(f"kvplan.cli.{mod}")
        except ModuleNotFoundError as e:
            if e.name == f"kvplan.cli.{mod}":
                continue
            raise
        commands = getattr(m, "COMMANDS", None)
        if commands is None and mod == "cmd_backends":
            commands = {n: getattr(m, n) for n in ("gpus", "backends") if hasattr(m, n)}
        for name, fn in (commands or {}).items():
            ctx = getattr(fn, "context_settings", None)
            target.command(name, context_settings=ctx)(fn) if ctx else target.command(name)(fn)


class _LazyCommands(TyperGroup):
    """The verbs outside the core (lint, emit, validate, ...) are loaded when first looked up or listed,
    so `kvplan plan` starts without importing their modules (and importing this module reads no argv)."""

    _optional_loaded = False

    def _load_optional(self) -> None:
        if self._optional_loaded:
            return
        self._optional_loaded = True
        optional = typer.Typer()
        _register_optional(optional)
        for name, command in typer.main.get_group(optional).commands.items():
            if name not in self.commands:
                self.add_command(command, name)

    # (Any: the context and command classes are typer's vendored click, whose names are private.)
    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            self._load_optional()
            command = super().get_command(ctx, cmd_name)
        return command

    def list_commands(self, ctx: Any) -> list[str]:
        self._load_optional()
        return super().list_commands(ctx)


app = typer.Typer(name="kvplan", cls=_LazyCommands, add_completion=False, no_args_is_help=True,
                  help="Decide, explain and prove per-layer KV cache plans before launch.",
                  context_settings={"help_option_names": ["-h", "--help"]})


class PlanFormat(str, Enum):
    json = "json"
    text = "text"


class FailLevel(str, Enum):
    error = "error"
    warning = "warning"
    info = "info"
    never = "never"


def out_console() -> Console:
    """stdout console: honours NO_COLOR and COLUMNS; 180 columns when not a terminal (files, CI logs)."""
    width = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else None
    c = Console(no_color=bool(os.environ.get("NO_COLOR")) or None, soft_wrap=False, width=width)
    if width is None and not c.is_terminal:
        c = Console(no_color=bool(os.environ.get("NO_COLOR")) or None, soft_wrap=False, width=180)
    return c


def err_console() -> Console:
    return Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")) or None)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kvplan {__version__} (models {DEFAULT_ENGINE} by default; `kvplan engines` lists every release)")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """kvplan: a dtype-policy compiler for LLM KV caches."""


def _fail_code(plan, fail_level: FailLevel) -> int:
    if fail_level is FailLevel.never:
        return 0
    from kvplan.model.vocab import Severity
    floor = Severity(fail_level.value).rank
    return 1 if any(f.severity.rank >= floor for f in plan.findings) else 0


def _configured_policy() -> Path | None:
    """`policy` from the nearest kvplan.toml / pyproject.toml [tool.kvplan] (cheap probe first)."""
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        k, pp = folder / "kvplan.toml", folder / "pyproject.toml"
        try:
            found = k.is_file() or (pp.is_file() and "kvplan" in pp.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            found = False
        if found:
            from kvplan.policy.load import find_pyproject_policy
            return find_pyproject_policy(here)
    return None


def _compile(ctx: typer.Context, path: str, gpu: str | None, kv_budget_gib: float | None,
             policy: Path | None = None, no_policy: bool = False, engine: str | None = None,
             kv_scales: Path | None = None, offline: bool = False):
    if offline:  # read at resolution time by kvplan.ingest.hub (huggingface_hub is not imported yet)
        os.environ["HF_HUB_OFFLINE"] = "1"
    budget = int(kv_budget_gib * 2**30) if kv_budget_gib is not None else None
    from kvplan.ingest.flags import expand_config_file
    argv = expand_config_file(ctx.args)  # vLLM's --config serve.yaml, read as vLLM reads it
    if policy is not None and no_policy:
        raise KvplanInputError("--policy and --no-policy contradict each other.", "Pass one of them.")
    pol = policy if policy is not None else (None if no_policy else _configured_policy())
    if pol is not None and policy is None:
        err_console().print(f"kvplan: using policy {pol} (from the project configuration; --no-policy ignores it)",
                            markup=False, highlight=False)
    from kvplan.pipeline import compile as compile_plan
    return compile_plan(path, argv, gpu, policy=pol, kv_budget_bytes=budget, engine=engine, kv_scales=kv_scales)


_EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}
PathArg = typer.Argument(..., help="config.json, a checkpoint folder (config.json, hf_quant_config.json, "
                         "*.safetensors), or a Hugging Face model id (org/name; --revision picks a branch, tag "
                         "or commit).")
OfflineOpt = typer.Option(False, "--offline", help="Hugging Face ids from the local cache only (as HF_HUB_OFFLINE=1).")
GpuOpt = typer.Option(None, "--gpu", help="GPU profile: a name (h100), a compute capability (sm90) or auto.")
EngineOpt = typer.Option(DEFAULT_ENGINE, "--engine", help=f"Engine release to model: {DEFAULT_ENGINE} (default) "
                         "or an older vLLM down to vllm==0.18.0 (its flags, KV rules and known bugs).")
BudgetOpt = typer.Option(None, "--kv-budget-gib", help="KV cache memory per GPU in GiB (else estimated from --gpu "
                         "and the checkpoint's weights).")
FailOpt = typer.Option(FailLevel.error, "--fail-level", help="Exit 1 when a finding is at or above this severity.")
KvScalesOpt = typer.Option(None, "--kv-scales", help="k/v scales from `kvplan calibrate`: per-tensor FP8 layers "
                           "get scale_source calibrated.")
PolicyOpt = typer.Option(None, "--policy", help="Policy YAML: your rules (selector -> setting) and constraints "
                         "(default: `policy` in the nearest kvplan.toml or pyproject.toml [tool.kvplan]).")
NoPolicyOpt = typer.Option(False, "--no-policy", help="Ignore the policy named by the project configuration.")
StrictOpt = typer.Option(False, "--strict", help="An architecture not verified against vLLM, or config keys "
                         "that look like layer geometry but were not used (KV604), is an error.")


def _strict(p, strict: bool):
    if not strict:
        return p
    from kvplan.planner.compile import apply_strict
    return apply_strict(p)


@app.command(context_settings=_EXTRA, epilog=ENGINE_FLAGS_HELP)
def plan(ctx: typer.Context, path: str = PathArg,
         format: PlanFormat = typer.Option(PlanFormat.json, "--format", "-f", help="json (default) or text."),
         out: Path | None = typer.Option(None, "--out", "-o", help="Write the plan here instead of stdout."),
         gpu: str | None = GpuOpt, engine: str = EngineOpt, kv_budget_gib: float | None = BudgetOpt,
         all_layers: bool = typer.Option(False, "--all-layers", help="text format: one row per layer."),
         fail_level: FailLevel = FailOpt, policy: Path | None = PolicyOpt,
         no_policy: bool = NoPolicyOpt, kv_scales: Path | None = KvScalesOpt,
         offline: bool = OfflineOpt, strict: bool = StrictOpt) -> None:
    """Compile the per-layer KV plan and print it (JSON by default)."""
    p = _strict(_compile(ctx, path, gpu, kv_budget_gib, policy, no_policy, engine, kv_scales, offline), strict)
    if format is PlanFormat.json:
        from kvplan.report.json_report import dumps
        text = dumps(p)
        if out:
            write_atomic(out, text)
        else:
            sys.stdout.write(text)
    else:
        from kvplan.report.table import render_plan
        render_plan(p, out_console(), expand=all_layers)
    raise typer.Exit(_fail_code(p, fail_level))


@app.command(context_settings=_EXTRA, epilog=ENGINE_FLAGS_HELP)
def explain(ctx: typer.Context, path: str = PathArg, gpu: str | None = GpuOpt,
            engine: str = EngineOpt, kv_budget_gib: float | None = BudgetOpt,
            all_layers: bool = typer.Option(False, "--all-layers", help="One row per layer instead of grouped runs."),
            fail_level: FailLevel = typer.Option(FailLevel.never, "--fail-level",
                                                 help="Exit 1 when a finding is at or above this severity."),
            policy: Path | None = PolicyOpt, no_policy: bool = NoPolicyOpt,
            kv_scales: Path | None = KvScalesOpt, offline: bool = OfflineOpt,
            strict: bool = StrictOpt) -> None:
    """Explain the plan: per-layer table, which rule decided what and why, totals, findings."""
    p = _strict(_compile(ctx, path, gpu, kv_budget_gib, policy, no_policy, engine, kv_scales, offline), strict)
    from kvplan.report.table import render_plan
    render_plan(p, out_console(), expand=all_layers)
    raise typer.Exit(_fail_code(p, fail_level))


@app.command("rules")
def rules_cmd(format: PlanFormat = typer.Option(PlanFormat.text, "--format", "-f", help="text or json.")) -> None:
    """List every rule: code, name, scope, severity, summary (planner, lint, emit and policy codes)."""
    from kvplan.planner.precedence import DECISION_ORDER
    from kvplan.rules.base import RESERVED, all_rules
    rs = all_rules()
    if format is PlanFormat.json:
        doc = {"schema_version": RULES_SCHEMA_VERSION, "kvplan_version": __version__,
               "decision_order": list(DECISION_ORDER), "rules": [r.doc() for r in rs],
               "reserved": [rng.doc() for rng in RESERVED]}
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        return
    from rich.table import Table
    t = Table(title="kvplan rules (decision rules run in this order: " + " > ".join(DECISION_ORDER) + ")",
              title_justify="left")
    for c in ("code", "name", "kind", "scope", "severity", "summary"):
        t.add_column(c, overflow="fold")
    for r in rs:
        t.add_row(r.code, r.name, r.kind, r.scope, r.severity.value, r.summary)
    for rng in RESERVED:
        t.add_row(f"{rng.first}-{rng.last}", rng.name, "check", rng.scope, "(yours)", rng.summary)
    out_console().print(t)


@app.command("rule")
def rule_cmd(code: str = typer.Argument(..., help="Rule code (KV104) or name (skip-layers)."),
             format: PlanFormat = typer.Option(PlanFormat.text, "--format", "-f")) -> None:
    """Print one rule's documentation."""
    from kvplan.rules.base import get_rule
    r = get_rule(code)
    if r is None:
        raise KvplanInputError(f"no rule {code!r}.", "Run `kvplan rules` to list the codes.")
    if format is PlanFormat.json:
        sys.stdout.write(json.dumps(r.doc(), indent=2, sort_keys=True) + "\n")
        return
    d = r.doc()
    lines = [f"{d['code']} {d['name']} ({d['kind']}, {d['severity']})", "", d["summary"], "",
             f"Scope: {d['scope']} ({SCOPE_RUNNERS[d['scope']]})", "", "Why: " + d["why"], "", "Fix: " + d["fix"]]
    if d["references"]:
        lines += ["", "References:"] + [f"  - {ref}" for ref in d["references"]]
    typer.echo("\n".join(lines))


@app.command("schema")
def schema_cmd(name: str = typer.Argument(
        "plan", help="Which schema: plan, lint-report, emit-result, policy, validate-report, "
                     "kv-scales, bench-result, tune-report."),
               ) -> None:
    """Print a published JSON Schema (generated from the models)."""
    from kvplan.schemas import SCHEMAS, schema_text
    if name not in SCHEMAS:
        raise KvplanInputError(f"no schema {name!r}.", "Available: " + ", ".join(sorted(SCHEMAS)) + ".")
    sys.stdout.write(schema_text(name))


def _usage_line(e: Exception) -> str:
    """One line for a command-line usage error (click prints usage + message over 3-4 lines):
    the problem, then where the valid forms are listed."""
    msg = " ".join(str(e.format_message()).split())  # type: ignore[attr-defined]
    msg = msg.replace(": Value error, ", ": ")
    ctx = getattr(e, "ctx", None)
    path = (getattr(ctx, "command_path", "") or "").split() if ctx is not None else []
    where = " ".join(["kvplan", *path[1:]])  # the program name may be `-c` or `__main__.py`
    msg = msg.rstrip(".")
    return f"{msg[:1].lower()}{msg[1:]} (see '{where} --help')"


def main() -> None:
    """Console entry point: input errors are one line on stderr and exit code 2."""
    try:
        rc = app(standalone_mode=False)
    except KvplanInputError as e:
        err_console().print(f"kvplan: error: {e}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except SystemExit:
        raise
    except Exception as e:  # (typer's vendored) click usage errors arrive here in non-standalone mode
        if hasattr(e, "format_message") and hasattr(e, "exit_code"):
            err_console().print(f"kvplan: error: {_usage_line(e)}", markup=False, highlight=False,
                                soft_wrap=True)
            sys.exit(2 if e.exit_code not in (0, 1) else e.exit_code)
        if type(e).__name__ == "Abort":
            sys.exit(130)
        raise
    sys.exit(rc if isinstance(rc, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
