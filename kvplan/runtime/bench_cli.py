"""`kvplan bench`: run the runtime benchmark suite with a progress bar, save JSON (+ PNG).

The CLI owner wires :func:`bench_command`; importing this module stays cheap (torch, triton
and the kernels load inside the function).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def bench_command(output_json: Path, plot_png: Path | None = None, quick: bool = False) -> dict:
    """Run `kvplan.runtime.bench.run_suite` on the GPU, write the results, return them.

    Progress goes to stderr (a rich progress bar); the markdown table is printed to stdout.
    Raises RuntimeError when no CUDA GPU is present or (for ``plot_png``) matplotlib is missing.
    """
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from kvplan.runtime.bench import format_table, run_suite

    console = Console(stderr=True)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                  console=console, transient=False) as bar:
        task = bar.add_task("kvplan bench", total=None)

        def progress(label: str, done: int, total: int) -> None:
            bar.update(task, description=label, completed=done, total=total)

        results = run_suite("cuda", quick=quick, progress=progress)
    write_results(results, Path(output_json), plot_png)
    sys.stdout.write(format_table(results) + "\n")
    return results


def write_results(results: dict, output_json: Path, plot_png: Path | None = None) -> None:
    """The suite's JSON (keys sorted; schemas/bench-result.schema.json) and its chart, each
    written whole or not at all."""
    from kvplan.files import atomic_output, write_atomic

    output_json.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(output_json, json.dumps(results, indent=1, sort_keys=True) + "\n")
    if plot_png is not None:
        from kvplan.runtime.bench import plot

        with atomic_output(plot_png, suffix=".png") as tmp:
            plot(results, str(tmp))
