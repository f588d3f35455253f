"""PNG chart of a validate report: per-layer attention error by quant mode (and the end-to-end KL)."""
from __future__ import annotations

from pathlib import Path

from kvplan.files import atomic_output
from kvplan.runtime.validate_model import ModelEval, ValidateReport

_COLORS = {"none": "#4c72b0", "fp8_per_tensor": "#dd8452", "int8_per_token_head": "#55a868",
           "fp8_per_token_head": "#c44e52", "int4_per_token_head": "#8172b3"}


def plot_report(report: ValidateReport, path: str | Path) -> None:
    """Write the chart atomically (temp file + rename)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if report.model_eval is not None else 1
    fig, axes = plt.subplots(1, panels, figsize=(7.5 * panels, 4.2), squeeze=False)
    ax = axes[0][0]
    by: dict[str, list[tuple[int, float, float]]] = {}
    for r in report.layers:
        if r.decode is not None and r.prefill is not None:
            by.setdefault(r.quant_mode, []).append((r.index, r.decode.rel_l2, r.prefill.rel_l2))
    for mode in sorted(by):
        pts = sorted(by[mode])
        c = _COLORS.get(mode, "#333333")
        ax.plot([p[0] for p in pts], [p[2] for p in pts], "o-", color=c, ms=4, lw=1, label=f"{mode} prefill")
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "x:", color=c, ms=4, lw=1, label=f"{mode} decode")
        tol = next(m.tolerance for m in report.modes if m.quant_mode == mode)
        ax.axhline(tol, color=c, ls="--", lw=0.8, alpha=0.7)
    fails = [r for r in report.layers if r.status == "fail" and r.prefill is not None and r.decode is not None]
    if fails:
        ax.scatter([r.index for r in fails], [max(r.prefill.rel_l2, r.decode.rel_l2) for r in fails],  # type: ignore[union-attr]
                   s=90, facecolors="none", edgecolors="red", label="over tolerance")
    ax.set_yscale("log")
    ax.set_xlabel("layer")
    ax.set_ylabel("attention output rel L2 vs fp32 (log)")
    ax.set_title(f"{report.model_type}: per-layer error ({report.kv_source.kind} K/V, {report.device}); "
                 "dashed = tolerance", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    if report.model_eval is not None:
        ax2 = axes[0][1]
        rows = report.model_eval.rows
        vals = [max(r.kl_mean, 1e-7) for r in rows]
        ax2.barh([r.name for r in rows][::-1], vals[::-1], color="#4c72b0")
        ax2.set_xscale("log")
        ax2.set_xlabel("mean next-token KL vs unquantized (nats, log)")
        ax2.set_title(f"end to end: {report.model_eval.model.split(' (')[0]}, {report.model_eval.tokens} tokens",
                      fontsize=9)
        ax2.grid(alpha=0.3, axis="x")
        for y, row in enumerate(rows[::-1]):
            ax2.text(max(row.kl_mean, 1e-7), y, f" top1 {row.top1_agreement:.3f}", va="center", fontsize=7)
    _save(plt, fig, path)


def _save(plt, fig, path: str | Path) -> None:
    """Lay out, write the PNG atomically (nothing half-written) and free the figure."""
    fig.tight_layout()
    try:
        with atomic_output(path, suffix=".png") as tmp:
            fig.savefig(tmp, dpi=110)
    finally:
        plt.close(fig)


def plot_model_eval(ev: ModelEval, path: str | Path) -> None:
    """End-to-end rows (mean KL per configuration) and, when measured, the per-layer sensitivity
    (KL with one layer quantized, sorted), written atomically."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if ev.sensitivity is not None else 1
    fig, axes = plt.subplots(1, panels, figsize=(7.5 * panels, max(4.2, 0.22 * len(ev.rows))), squeeze=False)
    ax = axes[0][0]
    rows = ev.rows[::-1]
    floor = min([r.kl_mean for r in rows if r.kl_mean > 0] or [1e-6]) / 10  # a zero-KL control on a log axis
    ax.barh([r.name for r in rows], [max(r.kl_mean, floor) for r in rows], color="#4c72b0")
    ax.set_xscale("log")
    ax.set_xlabel("mean next-token KL vs the reference (nats, log)")
    ax.set_title(f"{ev.model}: {ev.tokens} tokens of {ev.text}", fontsize=9)
    ax.grid(alpha=0.3, axis="x")
    for y, r in enumerate(rows):
        zero = " KL 0," if r.kl_mean <= 0 else ""
        ax.text(max(r.kl_mean, floor), y, f"{zero} top1 {r.top1_agreement:.3f}", va="center", fontsize=7)
    if ev.sensitivity is not None:
        ax2 = axes[0][1]
        sens = ev.sensitivity.layers
        names = [f"{s.index}{' (sw)' if s.kind == 'sliding_attention' else ''}" for s in sens][::-1]
        ax2.barh(names, [max(s.kl_mean, 1e-9) for s in sens][::-1],
                 color=["#dd8452" if s.kind == "sliding_attention" else "#55a868" for s in sens][::-1])
        ax2.set_xscale("log")
        ax2.set_xlabel(f"mean KL with only this layer {ev.sensitivity.kv_cache_dtype} (log)")
        ax2.set_ylabel("layer (sorted, most sensitive on top)")
        ax2.set_title("per-layer sensitivity", fontsize=9)
        ax2.tick_params(axis="y", labelsize=max(4, min(8, int(400 / max(1, len(sens))))))
        ax2.grid(alpha=0.3, axis="x")
    _save(plt, fig, path)


def plot_sensitivity(sens, path: str | Path, *, title: str, chosen: list[int] | None = None) -> None:
    """Per-layer KL with one layer quantized, sorted; the chosen skip layers in red."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sens.layers
    fig, ax = plt.subplots(figsize=(7.5, max(3.5, 0.18 * len(rows))))
    pick = set(chosen or [])
    ax.barh([str(s.index) for s in rows][::-1], [max(s.kl_mean, 1e-9) for s in rows][::-1],
            color=["#c44e52" if s.index in pick else "#55a868" for s in rows][::-1])
    ax.set_xscale("log")
    ax.set_xlabel(f"mean KL with only this layer {sens.kv_cache_dtype} (log); red = kept in bf16")
    ax.set_ylabel("layer (most sensitive on top)")
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="y", labelsize=max(4, min(8, int(400 / max(1, len(rows))))))
    ax.grid(alpha=0.3, axis="x")
    _save(plt, fig, path)
