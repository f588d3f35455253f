"""The explain table: backend and query columns with --gpu, findings panel grouped by severity."""
from __future__ import annotations

import io

from rich.console import Console

import kvplan.api
from kvplan.report.table import render_plan
from tests.conftest import EXAMPLES

GPT_OSS = EXAMPLES / "gpt-oss-20b" / "config.json"


def _text(plan) -> str:
    c = Console(width=220, no_color=True, record=True, file=io.StringIO())
    render_plan(plan, c)
    return c.export_text()


def test_render_plan_backend_and_query_columns_only_with_gpu() -> None:
    flags = "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window"
    with_gpu = _text(kvplan.api.compile(GPT_OSS, flags, "h100"))
    assert "backend" in with_gpu and "query" in with_gpu
    assert "FLASH_ATTN FA3" in with_gpu and "float8_e4m3fn" in with_gpu
    assert " backend " not in _text(kvplan.api.compile(GPT_OSS, flags))


def test_render_findings_grouped_by_severity_errors_first() -> None:
    plan = kvplan.api.compile(GPT_OSS, "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window",
                              "b200", engine="vllm==0.19.0")
    text = _text(plan)
    e, w, i = text.index("errors ("), text.index("warnings ("), text.index("infos (")
    assert e < w < i
    assert text.index("KV704") < w < text.index("KV401") < i < text.index("KV009")


def _at(plan, width: int) -> str:
    c = Console(width=width, no_color=True, record=True, file=io.StringIO())
    render_plan(plan, c)
    return c.export_text()


def test_table_never_crops_the_layer_columns_it_drops_the_rules_column_instead() -> None:
    plan = kvplan.api.compile(GPT_OSS, "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window", "h100")
    wide = _at(plan, 260)
    assert "rules" in wide and "KV101, 104, 110" in wide and "column hidden" not in wide
    narrow = _at(plan, 170)
    assert "rules column hidden at this width" in narrow
    table = narrow.split("╭")[0]
    assert all(len(line.rstrip()) <= 170 for line in table.splitlines())
    assert "FLASH_ATTN FA3" in table and "┓" in table.splitlines()[1]  # right border drawn, nothing cropped
