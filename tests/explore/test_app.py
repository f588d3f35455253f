"""`kvplan explore` driven headlessly with Textual's pilot, keys as a user presses them."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("textual")

from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Select

from kvplan.cli.main import app as cli
from kvplan.explore.app import ExploreApp
from kvplan.explore.state import ExploreSession, findings_sorted
from kvplan.releases import DEFAULT_ENGINE
from tests.conftest import EXAMPLES

GPT_OSS = EXAMPLES / "gpt-oss-20b" / "config.json"
ENV = {"COLUMNS": "160", "NO_COLOR": "1"}
SIZE = (180, 50)
runner = CliRunner()


def screen(app: ExploreApp) -> str:
    """The terminal as the user sees it: every cell the compositor draws, as plain text."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


def panel(app: ExploreApp, widget_id: str = "detail") -> str:
    """One widget's part of the screen, wrapped lines joined and whitespace collapsed."""
    r = app.query_one(f"#{widget_id}").content_region
    lines = screen(app).split("\n")[r.y:r.y + r.height]
    return " ".join(" ".join(line[r.x:r.x + r.width] for line in lines).split())


def rows(app: ExploreApp, table_id: str) -> list[list[str]]:
    t = app.query_one(f"#{table_id}", DataTable)
    return [[str(c) for c in t.get_row_at(i)] for i in range(t.row_count)]


def drive(session: ExploreSession, script: Callable[[Pilot, ExploreApp], Awaitable[None]],
          export_path: Path = Path("kvplan-plan.json")) -> ExploreApp:
    app = ExploreApp(session, export_path=export_path)

    async def run() -> None:
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await pilot.pause()
            await script(pilot, app)

    asyncio.run(run())
    return app


def test_explore_gpt_oss_session_skip_sliding_then_int8_per_token_head(tmp_path: Path) -> None:
    """The issue's session: open gpt-oss-20b, skip sliding layers, int8_per_token_head, export, print flags."""
    export = tmp_path / "plan.json"
    # the capacity figures below are vLLM 0.33.0's (16-token blocks)
    session = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "fp8"], gpu="h100", kv_budget_gib=40,
                             engine="vllm==0.33.0")
    seen: dict[str, object] = {}

    async def script(pilot: Pilot, app: ExploreApp) -> None:
        # start: every layer FP8 with scale 1.0 -> one group, flagged, and the KV401 warning with its fix
        assert [r[:5] for r in rows(app, "layers")] == [["▸ 0,2..22 (12) ⚑", "sliding 128", "8×64", "fp8",
                                                         "float8_e4m3fn"],
                                                         ["▸ 1,3..23 (12) ⚑", "full", "8×64", "fp8", "float8_e4m3fn"]]
        findings = rows(app, "findings")
        assert [r[1] for r in findings] == [f.code for f in findings_sorted(session.plan.findings)]
        assert [(r[0], r[1], r[3]) for r in findings if r[0] != "info"] == [("warning", "KV401", "0-23")]
        assert findings[0][5] == next(f.fix for f in session.plan.findings if f.code == "KV401")
        assert "KV B/token 24,576" in screen(app)

        await pilot.press("w")  # skip every sliding-window layer
        layers = rows(app, "layers")
        assert [r[0] for r in layers] == ["▸ 0,2..22 (12)", "▸ 1,3..23 (12) ⚑"]
        assert layers[0][3] == "auto skipped" and layers[0][4] == "bfloat16"

        await pilot.press("d", "enter", *"int8_per", "enter")  # the kv dtype control, type-to-search
        await pilot.pause()
        assert app.query_one("#dtype", Select).value == "int8_per_token_head"
        layers = rows(app, "layers")
        assert [r[0] for r in layers] == ["▸ 0,2..22 (12)", "▸ 1,3..23 (12)"]  # no findings, no markers
        assert layers[1][3:7] == ["int8_per_token_head", "int8", "dynamic", "1,088"]
        text = screen(app)
        assert "KV B/token 37,632 +13,056 (+53.1%)" in text
        assert "tokens that fit 2,918,417 −367,830 (−11.2%)" in text
        assert "concurrency @ 131,072 22.27 −2.80 (−11.2%)" in text
        assert "vs start: kv-cache-dtype fp8 → int8_per_token_head; skip [-] → [sliding_window]" in text
        assert "findings: 0 errors, 0 warnings," in text  # KV401 is gone with per-token-head scales
        assert [r[1] for r in rows(app, "findings")] == [f.code for f in findings_sorted(session.plan.findings)]
        assert all(r[0] == "info" for r in rows(app, "findings"))

        await pilot.press("escape", "down")  # the full-attention group: its provenance in the side panel
        assert "selected: layers 1,3..23" in screen(app)
        text = panel(app)
        assert "kv_cache_dtype int8_per_token_head KV101 --kv-cache-dtype int8_per_token_head passed explicitly" in text
        assert "scale_source dynamic_per_token_head KV120 per-token-head scales are computed at write time" in text
        assert "findings naming them: none" in text

        await pilot.press("x")  # export the plan JSON
        await pilot.pause()
        seen["exported"] = export.read_text(encoding="utf-8")
        assert "exported" in screen(app)
        await pilot.press("p")  # print the vLLM flags and quit

    app = drive(session, script, export)
    flags = ["--kv-cache-dtype", "int8_per_token_head", "--kv-cache-dtype-skip-layers", "sliding_window"]
    plan = runner.invoke(cli, ["plan", str(GPT_OSS), *flags, "--gpu", "h100", "--kv-budget-gib", "40",
                               "--engine", "vllm==0.33.0", "--format", "json", "--no-policy"], env=ENV)
    assert plan.exit_code == 0, plan.output
    assert seen["exported"] == plan.stdout  # byte-equal
    emitted = runner.invoke(cli, ["emit", str(GPT_OSS), "--to", "vllm", "--no-policy", *flags], env=ENV)
    assert emitted.exit_code == 0, emitted.output
    assert app.return_value is not None
    assert app.return_value.stdout == emitted.stdout == " ".join(flags) + "\n"
    assert app.return_value.stderr[0].startswith(f"kvplan: wrote {export} (")
    assert app.return_value.stderr[0].endswith(session.plan_command())


def test_explore_expand_a_group_and_skip_one_layer() -> None:
    session = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "sliding_window"])

    async def script(pilot: Pilot, app: ExploreApp) -> None:
        await pilot.press("enter")  # expand 0,2..22 into single layers
        layers = rows(app, "layers")
        assert len(layers) == 13 and layers[0][0] == "▾ 0" and layers[1][0] == "▸ 1,3..23 (12) ⚑"
        await pilot.press("s")  # layer 0 no longer skipped: the keyword becomes explicit indices
        assert session.controls.skip_layers == tuple(str(i) for i in range(2, 24, 2))
        assert rows(app, "layers")[0][3] == "fp8" and rows(app, "layers")[0][0].endswith("⚑")
        assert "selected: layer 0" in screen(app)
        assert "findings naming it: 1 warning KV401 uncalibrated-fp8-scales" in panel(app)
        await pilot.press("s")
        assert rows(app, "layers")[0][3] == "auto skipped"
        await pilot.press("enter")  # collapse again
        assert len(rows(app, "layers")) == 2
        await pilot.press("a")  # one row per layer
        assert len(rows(app, "layers")) == 24
        await pilot.press("q")

    drive(session, script)


def test_explore_controls_tp_max_model_len_gpu_and_reset() -> None:
    session = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "fp8"], kv_budget_gib=40)

    async def script(pilot: Pilot, app: ExploreApp) -> None:
        await pilot.press("m", *"32k", "enter")
        assert session.controls.max_model_len == 32000
        assert "concurrency @ 32,000" in screen(app)
        await pilot.press("t", "backspace", "2", "enter")
        assert session.controls.tensor_parallel_size == 2
        assert "TP 1 → 2" in screen(app)
        assert rows(app, "layers")[0][2] == "4×64"  # 8 KV heads over 2 ranks
        await pilot.press("g", "enter", *"h200", "enter")
        await pilot.pause()
        assert session.controls.gpu == "h200" and "GPU - → h200" in screen(app)
        assert rows(app, "layers")[0][7] != "-"  # a backend per layer once a GPU is known
        await pilot.press("escape", "r")
        assert session.plan is session.start and app.query_one("#tp", Input).value == "1"
        assert "vs start: unchanged" in screen(app)
        await pilot.press("q")

    drive(session, script)


def test_explore_engine_control_switches_the_modelled_release() -> None:
    session = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "int8_per_token_head"])

    async def script(pilot: Pilot, app: ExploreApp) -> None:
        assert app.query_one("#engine", Select).value == DEFAULT_ENGINE
        await pilot.press("v", "enter", *"vllm==0.19", "enter")
        await pilot.pause()
        assert session.controls.engine == "vllm==0.19.0" and session.plan.engine.version == "0.19.0"
        shown = rows(app, "findings")
        assert ("error", "KV005") in [(r[0], r[1]) for r in shown]
        assert f"engine {DEFAULT_ENGINE} → vllm==0.19.0" in screen(app)
        assert "--engine vllm==0.19.0 --format json" in screen(app)
        await pilot.press("q")

    drive(session, script)


def test_explore_bad_control_value_is_one_line_and_changes_nothing() -> None:
    session = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "fp8"])

    async def script(pilot: Pilot, app: ExploreApp) -> None:
        await pilot.press("t", "backspace", "0", "enter")
        await pilot.pause()
        assert session.compiles == 1 and app.query_one("#tp", Input).value == "1"
        assert "--tensor-parallel-size must be at least 1, got 0." in screen(app)
        await pilot.press("m", *"abc", "enter")
        await pilot.pause()
        assert session.compiles == 1 and app.query_one("#mml", Input).value == ""
        await pilot.press("q")

    drive(session, script)


def test_explore_findings_sort_by_severity_and_fix_text() -> None:
    session = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "fp8"], gpu="a100-80gb")  # KV701 error, KV401 warning

    async def script(pilot: Pilot, app: ExploreApp) -> None:
        shown = rows(app, "findings")
        assert [(r[0], r[1]) for r in shown][:2] == [("error", "KV701"), ("warning", "KV401")]
        assert [r[0] for r in shown] == sorted((r[0] for r in shown), key=["error", "warning", "info"].index)
        assert all(r[5] == (f.fix or "-") for r, f in zip(shown, findings_sorted(session.plan.findings), strict=True))
        await pilot.press("o")
        shown = rows(app, "findings")
        assert [r[0] for r in shown] == sorted((r[0] for r in shown), key=["info", "warning", "error"].index)
        assert shown[-1][:2] == ["error", "KV701"]
        assert "sorted by severity (info first)" in screen(app)
        await pilot.click("#findings", offset=(3, 1))  # the severity header flips the order back
        assert [r[0] for r in rows(app, "findings")][:2] == ["error", "warning"]
        await pilot.click("#findings", offset=(3, 1))
        assert "sorted by severity (info first)" in screen(app)
        await pilot.press("f")  # the highlighted finding in full in the side panel
        assert f"finding {shown[0][1]}" in screen(app)
        await pilot.press(*["down"] * (len(shown) - 1))
        assert "finding KV701" in screen(app) and "fix:" in panel(app)
        await pilot.press("q")

    app = drive(session, script)
    assert app.return_value is not None and app.return_value.stdout == ""


def test_explore_save_screenshot_is_svg(tmp_path: Path) -> None:
    session = ExploreSession(GPT_OSS, ["--kv-cache-dtype", "fp8"], gpu="h100", kv_budget_gib=40)

    async def script(pilot: Pilot, app: ExploreApp) -> None:
        app.save_screenshot("explore.svg", str(tmp_path))
        await pilot.press("q")

    drive(session, script)
    svg = (tmp_path / "explore.svg").read_text(encoding="utf-8")
    assert svg.startswith("<svg") and "kvplan" in svg


def test_docs_list_every_key_and_readme_shows_the_screenshot() -> None:
    from tests.conftest import ROOT
    doc = (ROOT / "docs" / "explore.md").read_text(encoding="utf-8")
    table = doc.split("## Keys", 1)[1].split("\n\n", 2)[1]
    for binding in ExploreApp.BINDINGS:
        assert f"`{binding.key}`" in table or f" {binding.key}" in table, f"docs/explore.md lacks key {binding.key!r}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/img/explore.svg)" in readme and (ROOT / "docs" / "img" / "explore.svg").is_file()
    assert "](img/explore.svg)" in doc
