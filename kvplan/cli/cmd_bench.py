"""`kvplan bench`: time the Triton runtime kernels on the local GPU (no logic here; see
kvplan.runtime.bench). torch and triton are imported inside the command only.

Exit codes: 0 done, 2 no usable GPU / runtime extra missing / unwritable output.
"""
from __future__ import annotations

from pathlib import Path

import typer

from kvplan.errors import KvplanInputError


def _require_cuda() -> None:
    """One clear line when this machine cannot run the suite."""
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as exc:
        raise KvplanInputError(f"kvplan bench needs torch and triton ({exc.name} is not installed).",
                               "Install the runtime extra: pip install 'kvplan[runtime]'.") from None
    if not torch.cuda.is_available():
        raise KvplanInputError("kvplan bench needs a CUDA GPU and torch sees none.",
                               "Run it on a machine with an NVIDIA GPU and a CUDA build of torch.")


def bench(
    out: Path = typer.Option(Path("kvplan-bench.json"), "--out", "-o",
                             help="Where to write the results as JSON."),
    plot: Path | None = typer.Option(None, "--plot",
                                        help="PNG chart path (default: --out with .png)."),
    no_plot: bool = typer.Option(False, "--no-plot", help="Do not draw the PNG chart."),
    quick: bool = typer.Option(False, "--quick",
                               help="Two decode shapes, one prefill shape and two write sizes (about 20 s)."),
) -> None:
    """Benchmark paged decode and prefill attention and quantize-on-write on this GPU beside bf16 SDPA; prints the tables."""  # noqa: E501 - `kvplan --help` keeps a docstring's line breaks
    _require_cuda()
    png = None if no_plot else (plot or out.with_suffix(".png"))
    if png is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise KvplanInputError("--plot needs matplotlib, which is not installed.",
                                   "pip install matplotlib, or pass --no-plot.") from None
    for path in (out, png):
        if path is not None and path.parent and not path.parent.exists():
            raise KvplanInputError(f"output folder '{path.parent}' does not exist.",
                                   "Create it or pick another --out/--plot path.")
    from kvplan.runtime.bench_cli import bench_command

    bench_command(out, png, quick=quick)
    typer.echo(f"wrote {out}" + (f" and {png}" if png else ""), err=True)


COMMANDS = {"bench": bench}
