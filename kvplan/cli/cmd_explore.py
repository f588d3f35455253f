"""`kvplan explore`: a full-screen terminal explorer of a plan ("what if" on the flags).

    kvplan explore examples/gpt-oss-20b/config.json --kv-cache-dtype fp8 --gpu h100 --kv-budget-gib 40

Takes what `kvplan plan` takes (vLLM flags verbatim after the path, --gpu, --engine,
--kv-budget-gib, --policy / --no-policy). Bad input is one line on stderr and exit 2, before any screen is drawn.
When stdout is not a terminal it prints the static `kvplan explain` output instead, with a note on
stderr. Textual (the `tui` extra) is imported here only, never on the plan/explain/lint paths.
Keys and controls: docs/explore.md.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kvplan.errors import KvplanInputError
from kvplan.releases import DEFAULT_ENGINE

__all__ = ["COMMANDS", "explore"]


def explore(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(
        help="config.json or a checkpoint folder; vLLM flags may follow it, as in a launch line.")],
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="GPU profile to start with: a name (h100), a compute capability (sm90) or auto.")] = None,
    engine: Annotated[str, typer.Option(
        "--engine", help=f"Engine release to start with: {DEFAULT_ENGINE} (default) or an older vLLM down to "
                         "vllm==0.18.0.")] = DEFAULT_ENGINE,
    kv_budget_gib: Annotated[float | None, typer.Option(
        "--kv-budget-gib", help="KV cache memory per GPU in GiB (else estimated from --gpu and the weights).")] = None,
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Where the x key exports the plan JSON.")] = Path("kvplan-plan.json"),
    policy: Annotated[Path | None, typer.Option(
        "--policy", help="Policy YAML (default: `policy` in the nearest kvplan.toml / pyproject.toml).")] = None,
    no_policy: Annotated[bool, typer.Option("--no-policy", help="Ignore the project's configured policy.")] = False,
) -> None:
    """Explore a plan interactively: change dtype, skips, GPU, TP, max-model-len and watch it recompile."""
    from kvplan.cli.main import _configured_policy, err_console, out_console
    from kvplan.explore.state import ExploreSession

    if policy is not None and no_policy:
        raise KvplanInputError("--policy and --no-policy contradict each other.", "Pass one of them.")
    pol = policy if policy is not None else (None if no_policy else _configured_policy())
    if kv_budget_gib is not None and kv_budget_gib <= 0:
        raise KvplanInputError(f"--kv-budget-gib must be positive, got {kv_budget_gib:g}.",
                               "Pass e.g. --kv-budget-gib 40.")
    session = ExploreSession(path, list(ctx.args), gpu=gpu, kv_budget_gib=kv_budget_gib, policy=pol, engine=engine)
    if not sys.stdout.isatty():
        err_console().print("kvplan: explore needs a terminal (stdout is not one); printing the static "
                            "`kvplan explain` output instead.", markup=False, highlight=False, soft_wrap=True)
        from kvplan.report.table import render_plan
        render_plan(session.plan, out_console())
        return
    try:
        from kvplan.explore.app import ExploreApp
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "textual":
            raise
        raise KvplanInputError("kvplan explore needs the Textual library.",
                               "Install the extra: pip install 'kvplan[tui]'.") from None
    result = ExploreApp(session, export_path=out).run()
    if result is None:
        return
    for line in result.stderr:
        sys.stderr.write(line + "\n")
    sys.stdout.write(result.stdout)


explore.context_settings = {"allow_extra_args": True, "ignore_unknown_options": True}  # type: ignore[attr-defined]

COMMANDS = {"explore": explore}
"""Commands the main app registers (`kvplan explore`)."""
