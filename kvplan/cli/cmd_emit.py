"""`kvplan emit`: print the launch flags / config file that realise a plan in vLLM, SGLang or TensorRT-LLM.

    kvplan emit PLAN.json --to vllm                      # flags line on stdout
    kvplan emit PLAN.json --to vllm --format yaml -o kv.yaml
    kvplan emit examples/gpt-oss-20b --to sglang --policy policy.yaml --kv-cache-dtype fp8

Input is a PLAN.json (from `kvplan plan ... --format json`) or a config.json / checkpoint folder,
which is planned first with the vLLM flags that follow it (and the policy, if any). Results go to
stdout; with `--format args` the line is shell-quoted and the emitter's findings go to stderr, so
`eval "vllm serve MODEL $(kvplan emit plan.json)"` works. Exit 0, 1 (a finding at or above
--fail-level), 2 (bad input: one line, nothing written).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kvplan.errors import KvplanInputError

__all__ = ["COMMANDS", "emit"]

_SEVERITIES = ("error", "warning", "info", "never")


def _is_plan_file(source: str) -> bool:
    """A .json file other than config.json that holds a kvplan document (or is unreadable as JSON)."""
    p = Path(source)
    if not p.is_file() or p.suffix.lower() != ".json" or p.name == "config.json":
        return False
    from kvplan.emit.load import looks_like_plan, read_json
    try:
        data = read_json(p)
    except KvplanInputError:
        return True  # load_plan reports it as the plan problem it is
    return looks_like_plan(data)


def emit(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(
        help="PLAN.json from `kvplan plan --format json`, or a config.json / checkpoint folder to plan first "
             "(vLLM flags may follow it).")],
    to: Annotated[str, typer.Option("--to", help="Target engine: vllm, sglang or trtllm.")] = "vllm",
    format: Annotated[str, typer.Option(
        "--format", "-f",
        help="args (flags on one line), yaml (the engine's config file) or json (everything).")] = "args",
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write here instead of stdout (all or nothing).")] = None,
    per_layer: Annotated[bool, typer.Option(
        "--per-layer", help="SGLang / TensorRT-LLM: use the per-layer KV dtype syntax of unreleased engine pull "
                            "requests (finding KV983).")] = False,
    policy: Annotated[Path | None, typer.Option(
        "--policy", help="Policy YAML applied when planning from a config (default: [tool.kvplan] policy in "
                         "pyproject.toml).")] = None,
    no_policy: Annotated[bool, typer.Option("--no-policy", help="Ignore [tool.kvplan] policy.")] = False,
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU profile when planning from a config.")] = None,
    kv_budget_gib: Annotated[float | None, typer.Option(
        "--kv-budget-gib", help="KV memory per GPU in GiB when planning from a config.")] = None,
    fail_level: Annotated[str, typer.Option(
        "--fail-level",
        help="Exit 1 when an emitter finding is at or above this: error, warning, info, never.")] = "error",
) -> None:
    """Emit the launch flags and config file that realise a plan in vLLM, SGLang or TensorRT-LLM."""
    from kvplan.emit import FORMATS, TARGETS, render
    from kvplan.emit import emit as emit_plan
    from kvplan.emit.load import load_plan
    from kvplan.model.vocab import Severity

    if to not in TARGETS:
        raise KvplanInputError(f"unknown --to {to!r}.", "Use --to vllm, sglang or trtllm.")
    if format not in FORMATS:
        raise KvplanInputError(f"unknown --format {format!r}.", "Use --format args, yaml or json.")
    if fail_level not in _SEVERITIES:
        raise KvplanInputError(f"unknown --fail-level {fail_level!r}.", "Use error, warning, info or never.")
    from kvplan.ingest.flags import expand_config_file
    engine_flags = expand_config_file(ctx.args)  # vLLM's --config serve.yaml, read as vLLM reads it
    if _is_plan_file(source):
        if engine_flags:
            raise KvplanInputError(f"engine flags ({' '.join(engine_flags)}) were given with a PLAN.json; the plan "
                                   "already fixes them.", "Pass the model config instead of PLAN.json to plan with "
                                                          "flags.")
        if policy is not None:
            raise KvplanInputError("--policy applies when planning; a PLAN.json is already planned.",
                                   "Pass the model config instead (kvplan emit CONFIG --policy P ...).")
        plan = load_plan(source)
    else:
        from kvplan.pipeline import compile as compile_plan
        from kvplan.policy import find_pyproject_policy
        pol = policy if policy is not None else (None if no_policy else find_pyproject_policy())
        budget = int(kv_budget_gib * 2**30) if kv_budget_gib is not None else None
        plan = compile_plan(source, engine_flags, gpu, policy=pol, kv_budget_bytes=budget)
    result = emit_plan(plan, to, per_layer=per_layer)
    text = render(result, format)
    if out is not None:
        from kvplan.cli.main import write_atomic
        write_atomic(out, text)
    else:
        sys.stdout.write(text)
    if format == "args" or out is not None:
        for f in result.findings:
            sys.stderr.write(f"kvplan: {f.code} {f.severity.value}: {f.message}\n")
    if fail_level != "never":
        floor = Severity(fail_level).rank
        if any(f.severity.rank >= floor for f in result.findings):
            raise typer.Exit(1)


emit.context_settings = {"allow_extra_args": True, "ignore_unknown_options": True}  # type: ignore[attr-defined]

COMMANDS = {"emit": emit}
"""Commands the main app registers (`kvplan emit`)."""
