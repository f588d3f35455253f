"""The bench result's published contract (schemas/bench-result.schema.json): the suite's JSON
carries its version and kind, validates against the schema, and is written whole, keys sorted."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")
pytest.importorskip("pydantic")  # the test extra has both; GPU images may not
pytest.importorskip("jsonschema")

import jsonschema
from rt_helpers import bench_row_validator

from kvplan.runtime import bench, bench_model
from kvplan.runtime.bench_cli import write_results

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "bench-result.schema.json").read_text())
# suites recorded on GPUs by this code (H200, rounds 20-23): what the kernels really produced
RECORDED = sorted((ROOT / "bench" / "results").glob("h200-runtime-r2[0-9]*-2026-11-29.json"))


def test_bench_keeps_the_models_version_and_kind():
    """`kvplan.runtime.bench` runs without pydantic, so it keeps its own copy of the contract's
    version and kind; they must be the schema's."""
    assert bench.BENCH_SCHEMA_VERSION == bench_model.BENCH_SCHEMA_VERSION
    assert bench.BENCH_KIND == bench_model.BENCH_KIND
    assert SCHEMA["$id"].endswith(f"bench-result-{bench.BENCH_SCHEMA_VERSION}.json")
    assert SCHEMA["properties"]["kind"]["const"] == bench.BENCH_KIND


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.stem)
def test_recorded_gpu_suites_match_the_row_schemas(path: Path):
    """Every row of the suites recorded on an H200 validates against its kind's schema (those
    before round 23c lack the version stamp and the host floor, which are the only differences)."""
    doc = json.loads(path.read_text())
    kinds = {r["kind"] for r in doc["rows"]}
    assert kinds == {"decode", "prefill", "write"}
    for row in doc["rows"]:
        errors = [e.message for e in bench_row_validator(row["kind"]).iter_errors(row)]
        assert not errors, (row["variant"], errors)
    top = {k: v for k, v in doc.items() if k != "rows"}
    assert not set(top) - set(SCHEMA["properties"]), set(top) - set(SCHEMA["properties"])


def test_recorded_suites_exist():
    assert len(RECORDED) >= 5


def test_stamped_gpu_suites_validate_whole():
    """Suites recorded since the stamp (round 23c on): the whole document, as the GPU wrote it."""
    stamped = [p for p in RECORDED if "schema_version" in json.loads(p.read_text())]
    assert stamped, "no recorded suite carries the version stamp"
    for path in stamped:
        doc = json.loads(path.read_text())
        jsonschema.Draft202012Validator(SCHEMA).validate(doc)
        bench_model.BenchResult.model_validate(doc)
        decode = [r for r in doc["rows"] if r["kind"] == "decode" and r.get("host_us")]
        assert decode and all(r["host_floor_us"] > 0 for r in decode)


def test_a_row_that_drifts_from_the_schema_is_caught():
    """The schema forbids unknown fields and wrong types: a renamed or retyped field fails."""
    row = json.loads(RECORDED[-1].read_text())["rows"][1]
    assert not list(bench_row_validator("decode").iter_errors(row))
    assert list(bench_row_validator("decode").iter_errors({**row, "host_ms": 1.0}))
    assert list(bench_row_validator("decode").iter_errors({**row, "batch": "64"}))
    missing = {k: v for k, v in row.items() if k != "frac_copy"}
    assert list(bench_row_validator("decode").iter_errors(missing))


def _stubbed_suite(monkeypatch) -> dict:
    """`run_suite` (on the `fake_gpu` fixture) with the GPU work replaced by rows taken from a
    recorded GPU suite."""
    recorded = json.loads(RECORDED[-1].read_text())["rows"]
    by_kind = {k: [r for r in recorded if r["kind"] == k] for k in ("decode", "prefill", "write")}
    monkeypatch.setattr(bench, "bench_decode_shape", lambda *a, **k: by_kind["decode"][:5])
    monkeypatch.setattr(bench, "bench_prefill_shape", lambda *a, **k: by_kind["prefill"][:2])
    monkeypatch.setattr(bench, "bench_write", lambda *a, **k: by_kind["write"][:4])
    return bench.run_suite("cuda", quick=True)


def test_suite_result_validates_and_is_stamped(monkeypatch, fake_gpu):
    res = _stubbed_suite(monkeypatch)
    assert res["schema_version"] == bench.BENCH_SCHEMA_VERSION and res["kind"] == bench.BENCH_KIND
    import kvplan
    assert res["kvplan_version"] == kvplan.__version__
    jsonschema.Draft202012Validator(SCHEMA).validate(res)
    bench_model.BenchResult.model_validate(res)  # the model agrees with its schema


def test_write_results_sorts_keys_and_writes_whole_files(monkeypatch, fake_gpu, tmp_path):
    res = _stubbed_suite(monkeypatch)
    out = tmp_path / "r.json"
    write_results(res, out)
    text = out.read_text()
    assert json.loads(text) == json.loads(json.dumps(res))
    assert text == json.dumps(json.loads(text), indent=1, sort_keys=True) + "\n"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left behind

    # a failed chart leaves no half-written PNG and no temp file
    def broken_plot(results, path):
        Path(path).write_bytes(b"\x89PNG half")
        raise RuntimeError("matplotlib broke")

    monkeypatch.setattr(bench, "plot", broken_plot)
    with pytest.raises(RuntimeError, match="matplotlib broke"):
        write_results(res, tmp_path / "s.json", tmp_path / "s.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "s.json"]


def test_format_table_shows_the_host_floor():
    res = {"device": "FakeGPU", "torch": "0", "triton": "0", "date": "2026-11-29",
           "copy_bandwidth": {"bytes": 2, "ms": 1.0, "bytes_per_s": 3.0e12},
           "rows": [dict(json.loads(RECORDED[-1].read_text())["rows"][1], host_us=17.0,
                         host_floor_us=7.1)]}
    table = bench.format_table(res)
    assert "| host (us/call) | host floor (us) |" in table
    assert "| 17.0 | 7.1 |" in table
