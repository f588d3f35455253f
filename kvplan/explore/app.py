"""The Textual app of `kvplan explore`: widgets over an `ExploreSession` (all logic lives there).

Imported only by `kvplan explore` (textual is the optional `tui` extra).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from rich.console import Group
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Input, Label, Select, Static

from kvplan.backends.gpus import GPU_PROFILES
from kvplan.errors import KvplanInputError
from kvplan.explore.state import KV_CACHE_DTYPES, SORTS, ExploreSession, engine_versions, findings_sorted, layer_fields
from kvplan.files import write_atomic
from kvplan.model.plan import Finding, LayerPlan
from kvplan.model.vocab import Severity
from kvplan.report.table import compress_indices, group_layers

__all__ = ["ExploreApp", "ExploreResult"]

# Same palette as `kvplan explain` (kvplan.report.table): green = model dtype, yellow = per-tensor
# FP8, cyan = per-token-head, magenta = 4-bit and packed formats.
MODE_STYLE = {"none": "green", "fp8_per_tensor": "yellow", "int8_per_token_head": "cyan",
              "fp8_per_token_head": "cyan", "int4_per_token_head": "magenta", "nvfp4": "magenta"}
SEV_STYLE = {Severity.error: "bold red", Severity.warning: "yellow", Severity.info: "blue"}
_SCALE_SHORT = {"default_1.0": "1.0 (uncal.)", "dynamic_per_token_head": "dynamic", "checkpoint_per_tensor":
                "ckpt tensor", "checkpoint_per_head": "ckpt head", "block_scales": "block"}
_KIND_SHORT = {"full_attention": "full", "sliding_attention": "sliding", "chunked_attention": "chunked",
               "linear_attention": "linear", "cross_attention": "cross", "encoder_only": "encoder"}


def _mode_style(mode: str) -> str:
    return MODE_STYLE.get(mode, "magenta" if mode != "none" else "green")


def _cell_key(cell: object) -> tuple:
    if isinstance(cell, Text):
        return (cell.plain, str(cell.style), tuple((sp.start, sp.end, str(sp.style)) for sp in cell.spans))
    return (str(cell),)


@dataclass
class ExploreResult:
    """What `kvplan explore` prints after the app has left the screen."""

    stdout: str = ""
    """The vLLM flags line (the `p` key), else empty."""
    stderr: list[str] = field(default_factory=list)
    """Notes: the emitter's findings, exported files."""


def _worst_severity(findings: Iterable[Finding]) -> dict[int, Severity]:
    """Per layer index, the most severe finding that names it."""
    worst: dict[int, Severity] = {}
    for f in findings:
        for i in f.layers:
            if i not in worst or f.severity.rank > worst[i].rank:
                worst[i] = f.severity
    return worst


def _layer_cells(lp: LayerPlan, idx: list[int], marker: str, sev: Severity | None) -> tuple[Text, ...]:
    """One row of the layer table: the layers `idx` (all planned like `lp`), in _LAYER_COLUMNS order."""
    style = _mode_style(lp.quant_mode.value)
    label = Text(compress_indices(idx) + (f" ({len(idx)})" if len(idx) > 1 else ""), style=style)
    if marker:
        label = Text(marker, style="dim") + label
    if sev is not None:
        label.append(" ⚑", style=SEV_STYLE[sev])
    if not lp.bytes_per_token:
        geom = "-"
    else:
        geom = f"latent {lp.head_size}" if lp.kind == "mla" else f"{lp.num_kv_heads}×{lp.head_size}"
    window = lp.sliding_window or lp.attention_chunk_size
    kind = _KIND_SHORT.get(lp.kind, lp.kind) + (f" {window}" if window else "")
    dtype = Text(lp.kv_cache_dtype or "-", style=style)
    if lp.skipped:
        dtype.append(" skipped", style="bold")
    scales = _SCALE_SHORT.get(lp.scale_source.value, lp.scale_source.value) if lp.quant_mode.is_quantized else "-"
    fa = f" FA{lp.flash_attn_version}" if lp.backend and lp.flash_attn_version else ""
    return (label, Text(kind), Text(geom), dtype, Text(lp.dtype or "-", style=style), Text(scales),
            Text(f"{lp.bytes_per_token:,}", justify="right"), Text((lp.backend or "-") + fa))


class ExploreApp(App[ExploreResult]):
    """Full-screen explorer: layers, the selected row's provenance, totals, findings, controls."""

    TITLE = "kvplan explore"
    CSS = """
    #controls { height: 1; margin: 0 1; }
    #controls Label { padding: 0 1 0 2; color: $text-muted; }
    #dtype { width: 26; }
    #gpu { width: 20; }
    #engine { width: 18; }
    #tp { width: 6; }
    #mml { width: 10; }
    #budget { width: 8; }
    #main { height: 1fr; }
    #layers { width: 3fr; height: 100%; border: round $primary-darken-2; }
    #layers:focus { border: round $accent; }
    #detail { width: 58; border: round $primary-darken-2; padding: 0 1; }
    #totals { height: 5; border: round $primary-darken-2; padding: 0 1; }
    #findings { height: 9; border: round $primary-darken-2; }
    #findings:focus { border: round $accent; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "toggle_skip", "skip layer(s)"),
        Binding("w", "toggle_sliding", "skip sliding"),
        Binding("a", "all_layers", "all layers"),
        Binding("d", "focus('dtype')", "kv dtype"),
        Binding("g", "focus('gpu')", "GPU"),
        Binding("t", "focus('tp')", "TP"),
        Binding("m", "focus('mml')", "max-len"),
        Binding("b", "focus('budget')", "budget", show=False),
        Binding("v", "focus('engine')", "engine"),
        Binding("o", "sort_findings", "sort findings"),
        Binding("r", "reset", "reset"),
        Binding("x", "export", "export JSON"),
        Binding("p", "print_flags", "print flags+quit"),
        Binding("q", "quit_app", "quit"),
        Binding("l", "focus('layers')", "layers", show=False),
        Binding("f", "focus('findings')", "findings", show=False),
        Binding("escape", "focus('layers')", "back to layers", show=False),
    ]

    def __init__(self, session: ExploreSession, *, export_path: Path = Path("kvplan-plan.json")) -> None:
        super().__init__()
        self.session = session
        self.export_path = export_path
        self.expanded: set[int] = set()
        self.all_layers = False
        self.sort = SORTS[0]
        self.result = ExploreResult()
        self._rows: dict[str, list[int]] = {}
        self._selected: list[int] = []
        self._syncing = False
        self._findings: list[Finding] = []
        self._detail_shown: tuple | None = None
        self._body_for: list[int] = []

    # ---- layout --------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        s = self.session
        c = s.controls
        yield Header(show_clock=False)
        gpus = list(GPU_PROFILES)
        if c.gpu and c.gpu not in gpus:
            gpus.insert(0, c.gpu)
        with Horizontal(id="controls"):
            yield Label("kv dtype")
            yield Select([(d, d) for d in KV_CACHE_DTYPES], value=c.kv_cache_dtype, allow_blank=False,
                         compact=True, id="dtype")
            yield Label("GPU")
            yield Select([(g, g) for g in gpus], value=c.gpu if c.gpu else Select.NULL, prompt="none",
                         allow_blank=True, compact=True, id="gpu")
            yield Label("TP")
            yield Input(str(c.tensor_parallel_size), compact=True, id="tp", restrict=r"[0-9]*")
            yield Label("max-model-len")
            yield Input("" if c.max_model_len is None else str(c.max_model_len), placeholder="model",
                        compact=True, id="mml")
            yield Label("KV GiB")
            yield Input("" if c.kv_budget_gib is None else f"{c.kv_budget_gib:g}", placeholder="-", compact=True,
                        id="budget")
            yield Label("engine")
            yield Select([(v, v) for v in engine_versions(c.engine)], value=c.engine, allow_blank=False,
                         compact=True, id="engine")
        with Horizontal(id="main"):
            yield DataTable(id="layers", cursor_type="row", zebra_stripes=False)
            with VerticalScroll(id="detail"):
                yield Static(id="detail-body")
        yield Static(id="totals")
        yield DataTable(id="findings", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        m = self.session.plan.model
        self.sub_title = f"{m.architecture or m.model_type} · {m.num_layers} layers · {self.session.path}"
        layers = self.query_one("#layers", DataTable)
        layers.border_title = "layers (enter: expand/collapse · s: skip · w: skip sliding)"
        layers.border_subtitle = ("[green]model dtype[/] · [yellow]FP8 per-tensor[/] · [cyan]per-token-head[/] · "
                                  "[magenta]4-bit / packed[/] · ⚑ findings")
        findings = self.query_one("#findings", DataTable)
        for name, width in (("severity", 8), ("code", 6), ("name", 26), ("layers", 12), ("message", 56),
                            ("fix", 56)):
            findings.add_column(name, key=name, width=width)
        self.refresh_all()
        layers.focus()

    # ---- drawing -------------------------------------------------------------------------
    def refresh_all(self) -> None:
        self._fill_layers()
        self._fill_totals()
        self._fill_findings()
        self._sync_controls()
        self._show_detail()

    def _groups(self) -> list[list[LayerPlan]]:
        out: list[list[LayerPlan]] = []
        for g in group_layers(self.session.plan.layers, expand=self.all_layers):
            if len(g) > 1 and self.expanded & {lp.index for lp in g}:
                out += [[lp] for lp in g]
            else:
                out.append(g)
        return sorted(out, key=lambda g: g[0].index)

    def _fill_layers(self) -> None:
        table = self.query_one("#layers", DataTable)
        keep = self._selected[0] if self._selected else None
        worst = _worst_severity(self.session.plan.findings)
        target_row = 0
        rows: dict[str, tuple] = {}
        grouped = group_layers(self.session.plan.layers)
        group_of = {lp.index: len(g) for g in grouped for lp in g}
        for n, g in enumerate(self._groups()):
            lp, idx = g[0], [x.index for x in g]
            if keep is not None and keep in idx:
                target_row = n
            # A collapsed group shows ▸; a layer of a group shown expanded shows ▾.
            marker = "▸ " if len(idx) > 1 else "▾ " if group_of.get(idx[0], 1) > 1 and not self.all_layers else ""
            sev = max((worst[i] for i in idx if i in worst), key=lambda s: s.rank, default=None)
            rows[f"row-{idx[0]}"] = (idx, _layer_cells(lp, idx, marker, sev))
        self._write_rows(table, rows)
        if table.row_count and table.cursor_row != target_row:
            table.move_cursor(row=target_row, scroll=True)
            self._selected = self._rows[list(rows)[target_row]]

    _LAYER_COLUMNS = ("layers", "kind", "KV h×size", "kv_cache_dtype", "stored", "scales", "B/token", "backend")

    def _write_rows(self, table: DataTable, rows: dict[str, tuple]) -> None:
        """Same rows as shown: update only the cells that changed (a 126-layer redraw stays cheap)."""
        old = getattr(self, "_cells", {})
        if list(rows) == list(old):
            widths = {c.key.value: c.content_width for c in table.columns.values()}
            for key, (_, cells) in rows.items():
                for col, (a, b) in zip(self._LAYER_COLUMNS, zip(old[key], cells, strict=True), strict=True):
                    if _cell_key(a) != _cell_key(b):  # re-measure the column only if the cell outgrows it
                        table.update_cell(key, col, b, update_width=b.cell_len > widths[col])
        else:
            table.clear(columns=True)  # columns too: their widths shrink back to the new content
            for name in self._LAYER_COLUMNS:
                table.add_column(name, key=name)
            for key, (_, cells) in rows.items():
                table.add_row(*cells, key=key)
        self._cells = {key: cells for key, (_, cells) in rows.items()}
        self._rows = {key: idx for key, (idx, _) in rows.items()}

    def _fill_totals(self) -> None:
        s = self.session
        numbers = Text(no_wrap=True, overflow="ellipsis")
        for t in s.totals():
            numbers.append(f"{t.label} ", style="dim")
            numbers.append(t.text, style="bold")
            if t.delta:
                better = (t.now or 0) < (t.start or 0) if t.label == "KV B/token" else (t.now or 0) > (t.start or 0)
                numbers.append(f" {t.delta}", style="green" if better else "red")
            numbers.append("   ")
        tot = s.plan.totals
        changes = s.changes()
        line2 = Text(f"quantized {tot.quantized_layers}/{tot.kv_layers} KV layers · vs start: ", style="dim",
                     no_wrap=True, overflow="ellipsis")
        line2.append("; ".join(changes) if changes else "unchanged")
        line3 = Text("as: ", style="dim", no_wrap=True, overflow="ellipsis")
        line3.append(s.plan_command(), style="italic")
        widget = self.query_one("#totals", Static)
        widget.update(Group(numbers, line2, line3), layout=False)  # fixed height: no relayout per change
        widget.border_title = "totals (per TP rank)"

    def _fill_findings(self) -> None:
        table = self.query_one("#findings", DataTable)
        fs = findings_sorted(self.session.plan.findings, self.sort)
        counts = {sev: sum(f.severity is sev for f in fs) for sev in Severity}
        table.border_title = (f"findings: {counts[Severity.error]} errors, {counts[Severity.warning]} warnings, "
                              f"{counts[Severity.info]} info · sorted by {self.sort} (o)")
        if fs == self._findings and table.row_count == len(fs):
            return
        table.clear()
        for n, f in enumerate(fs):
            table.add_row(Text(f.severity.value, style=SEV_STYLE[f.severity]), Text(f.code), Text(f.name),
                          Text(compress_indices(f.layers) if f.layers else "-"), Text(f.message),
                          Text(f.fix or "-", style="dim"), key=f"finding-{n}", height=None)
        self._findings = fs

    def _detail(self, idx: list[int]) -> list[Text]:
        plan = self.session.plan
        by_index = {lp.index: lp for lp in plan.layers}
        lp = by_index[idx[0]]
        head = Text(f"layer {idx[0]}" if len(idx) == 1 else f"layers {compress_indices(idx)} ({len(idx)})",
                    style="bold")
        if len(idx) > 1:
            head.append(f"\nidentical plans; fields and facts shown for layer {idx[0]} (enter: expand)", style="dim")
        decided: dict[str, list] = {}
        for d in lp.decisions:
            decided.setdefault(d.field, []).append(d)
        style = _mode_style(lp.quant_mode.value)
        width = max(len(n) for n, _ in layer_fields(lp)) + 2
        body = Text()
        for name, value in layer_fields(lp):
            ds = decided.pop(name, [])
            body.append(f"{name:<{width}}", style="dim")
            body.append(value, style=style if name in ("kv_cache_dtype", "dtype", "quant_mode") else "bold")
            for d in ds:
                last = d is ds[-1]
                was = "" if last else f" (was {getattr(d.value, 'value', d.value)})"
                body.append(f"\n{'':<4}{d.rule}", style="bold" if last else "dim strike")
                body.append(f" {d.fact}{was}", style="" if last else "dim")
            body.append("\n")
        for name, ds in decided.items():
            for d in ds:
                body.append(f"{name:<{width}}", style="dim")
                body.append(f"{getattr(d.value, 'value', d.value)}\n{'':<4}{d.rule} {d.fact}\n")
        t = body
        fs = self.session.findings_for(idx)
        parts: list[Text] = [head, Text(f"findings naming {'it' if len(idx) == 1 else 'them'}: {len(fs) or 'none'}",
                                  style="bold")]
        parts += [self._finding_text(f) for f in fs]
        parts += [Text("fields (rule · input fact)", style="bold"), t]
        return parts

    @staticmethod
    def _finding_text(f: Finding) -> Text:
        line = Text(f"{f.severity.value} {f.code} {f.name}", style=SEV_STYLE[f.severity])
        line.append(f"\n  {f.message}", style="")
        if f.layers:
            line.append(f" [layers {compress_indices(f.layers)}]", style="dim")
        if f.fix:
            line.append(f"\n  fix: {f.fix}", style="dim")
        return line

    def _show_detail(self, finding: Finding | None = None) -> None:
        panel = self.query_one("#detail", VerticalScroll)
        key = (finding.code if finding else None, tuple(self._selected))
        shown = self._detail_shown
        if shown is not None and shown[0] is self.session.plan and shown[1] == key:
            return
        self._detail_shown = (self.session.plan, key)
        if finding is not None:
            self._set_body([self._finding_text(finding)])
            panel.border_title = f"finding {finding.code}"
            return
        if not self._selected:
            self._set_body([Text("no layers")])
            return
        self._set_body(self._detail(self._selected))
        panel.border_title = "selected: " + (f"layer {self._selected[0]}" if len(self._selected) == 1 else
                                             f"layers {compress_indices(self._selected)}")

    def _set_body(self, parts: list[Text]) -> None:
        """Show text in the side panel, wrapped here so its height is known. While the text fits the
        panel's current height (grown, never shrunk, for one selection) only the panel repaints,
        instead of a layout of the whole screen: what keeps a change in a 126-row view quick."""
        body = self.query_one("#detail-body", Static)
        width = body.content_region.width
        if width <= 0:  # not laid out yet
            body.update(Group(*parts))
            return
        lines = [line for part in parts for line in part.wrap(self.console, width)]
        height = len(lines)
        current = body.styles.height.value if body.styles.height is not None else None
        keep = current is not None and height <= current and self._body_for == self._selected
        if not keep:
            body.styles.height = height
        self._body_for = list(self._selected)
        body.update(Text("\n").join(lines), layout=not keep)

    def _sync_controls(self) -> None:
        """Show the session's values in the controls (after a reset or a rejected edit)."""
        c = self.session.controls
        self._syncing = True
        try:
            dtype = self.query_one("#dtype", Select)
            if dtype.value != c.kv_cache_dtype:
                dtype.value = c.kv_cache_dtype
            gpu = self.query_one("#gpu", Select)
            if gpu.value != (c.gpu or Select.NULL):
                gpu.value = c.gpu if c.gpu else Select.NULL
            for wid, value in (("#tp", str(c.tensor_parallel_size)),
                               ("#mml", "" if c.max_model_len is None else str(c.max_model_len)),
                               ("#budget", "" if c.kv_budget_gib is None else f"{c.kv_budget_gib:g}")):
                inp = self.query_one(wid, Input)
                if inp.value != value:
                    inp.value = value
            engine = self.query_one("#engine", Select)
            if engine.value != c.engine:
                engine.value = c.engine
        finally:
            self._syncing = False

    # ---- changes -------------------------------------------------------------------------
    def _after(self, error: str | None) -> None:
        if error:
            self.notify(error, title="not applied", severity="error", markup=False)
        self.refresh_all()

    def on_select_changed(self, event: Select.Changed) -> None:
        if self._syncing:
            return
        s, value = self.session, event.value
        if event.select.id == "dtype" and value != s.controls.kv_cache_dtype:
            self._after(s.set_kv_cache_dtype(str(value)))
        elif event.select.id == "gpu" and (None if value is Select.NULL else value) != s.controls.gpu:
            self._after(s.set_gpu(None if value is Select.NULL else str(value)))
        elif event.select.id == "engine" and value != s.controls.engine:
            self._after(s.set_engine(str(value)))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        s = self.session
        setter = {"tp": s.set_tensor_parallel_size, "mml": s.set_max_model_len,
                  "budget": s.set_kv_budget_gib}.get(event.input.id or "")
        if setter is not None:
            self._after(setter(event.value))
            self.query_one("#layers", DataTable).focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "layers" and event.row_key.value in self._rows:
            self._selected = self._rows[event.row_key.value]
            self._show_detail()
        elif event.data_table.id == "findings" and event.row_key.value:
            n = int(event.row_key.value.rsplit("-", 1)[1])
            if n < len(self._findings) and self.focused is event.data_table:
                self._show_detail(self._findings[n])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id != "layers" or event.row_key.value not in self._rows:
            return
        idx = self._rows[event.row_key.value]
        group = next(g for g in group_layers(self.session.plan.layers) if idx[0] in {lp.index for lp in g})
        members = {lp.index for lp in group}
        if len(idx) > 1:
            self.expanded |= members
        else:
            self.expanded -= members
            self._selected = sorted(members)
        self.refresh_all()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        if event.data_table.id != "findings":
            return
        col = event.column_key.value
        if col == "severity":
            self.sort = "severity (info first)" if self.sort == "severity" else "severity"
        elif col in ("code", "name"):
            self.sort = "code"
        elif col == "layers":
            self.sort = "layer"
        self._fill_findings()

    def on_descendant_focus(self, event) -> None:
        wid = getattr(event.widget, "id", None)
        if wid == "layers":
            self._show_detail()
        elif wid == "findings" and self._findings:
            row = self.query_one("#findings", DataTable).cursor_row
            self._show_detail(self._findings[min(max(row, 0), len(self._findings) - 1)])

    # ---- actions -------------------------------------------------------------------------
    def action_toggle_skip(self) -> None:
        if self._selected:
            self._after(self.session.toggle_layers(self._selected))

    def action_toggle_sliding(self) -> None:
        self._after(self.session.toggle_sliding_window())

    def action_all_layers(self) -> None:
        self.all_layers = not self.all_layers
        self.expanded.clear()
        self._fill_layers()
        self._show_detail()

    async def action_focus(self, widget_id: str) -> None:  # textual's own action_focus is a coroutine
        self.query_one(f"#{widget_id}").focus()

    def action_sort_findings(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self._fill_findings()

    def action_reset(self) -> None:
        self.session.reset()
        self.refresh_all()
        self.notify("back to the starting plan")

    def action_export(self) -> None:
        text = self.session.export_json()
        path = self.export_path
        try:
            write_atomic(path, text)
        except KvplanInputError as e:
            self.notify(e.problem, severity="error", markup=False)
            return
        note = f"kvplan: wrote {path} ({len(text.encode()):,} bytes), the output of: {self.session.plan_command()}"
        self.result.stderr.append(note)
        self.notify(f"wrote {path}", title="exported", markup=False)

    def action_print_flags(self) -> None:
        command, findings = self.session.vllm_flags()
        self.result.stdout = command + "\n"
        self.result.stderr += [f"kvplan: {f.code} {f.severity.value}: {f.message}" for f in findings]
        self.exit(self.result)

    def action_quit_app(self) -> None:
        self.exit(self.result)
