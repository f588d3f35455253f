"""Benchmark plumbing that runs without a GPU (table formatting, CLI entry point, plot)."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from kvplan.runtime.bench import format_table, plot

FAKE = {
    "device": "FakeGPU", "torch": "0", "triton": "0", "date": "2026-11-23",
    "copy_bandwidth": {"bytes": 2, "ms": 1.0, "bytes_per_s": 3.0e12},
    "rows": [
        dict(kind="decode", variant="sdpa_bf16", batch=64, context=4096, num_q_heads=32,
             num_kv_heads=8, head_size=128, sliding_window=None, block_size=16, ms=0.365,
             bytes=1.07e9, bytes_per_s=2.94e12, frac_copy=0.98, ratio_to_sdpa=1.0, rel_err=0.002),
        dict(kind="decode", variant="paged_int8_per_token_head", batch=64, context=4096,
             num_q_heads=32, num_kv_heads=8, head_size=128, sliding_window=None, block_size=16,
             ms=0.2, eager_ms=0.31, bytes=5.5e8, bytes_per_s=2.75e12, frac_copy=0.92, ratio_to_sdpa=0.55,
             rel_err=0.01),
        dict(kind="prefill", variant="sdpa_bf16_causal_whole_prompt", batch=4, new_tokens=4096,
             cached_tokens=0, num_q_heads=32, num_kv_heads=8, head_size=128, block_size=16,
             ms=0.9, flops=5.5e11, tflops=610.0, ratio_to_sdpa=1.0, rel_err=None),
        dict(kind="prefill", variant="paged_int8_per_token_head", batch=4, new_tokens=4096,
             cached_tokens=0, num_q_heads=32, num_kv_heads=8, head_size=128, block_size=16,
             ms=1.6, flops=5.5e11, tflops=343.4, ratio_to_sdpa=0.563, rel_err=0.07,
             kernel="prefill"),
        dict(kind="write", variant="write_int8_per_token_head", num_tokens=8192, num_kv_heads=8,
             head_size=128, block_size=16, ms=0.02, launch_ms=0.03, bytes=5.1e7, bytes_per_s=2.5e12,
             frac_copy=0.85),
    ],
}


def test_bench_format_table_lists_every_row():
    table = format_table(FAKE)
    assert "FakeGPU" in table and "3.00 TB/s" in table
    # GPU time (graph replay) first, then the eager call time
    assert "| 64, 4096, 32, 8, 128, - | paged_int8_per_token_head | 0.2000 | 0.3100 |" in table
    assert "0.550x" in table and "92%" in table
    assert "| 8192 x (8, 128) | write_int8_per_token_head |" in table
    # eager over graph time, side by side
    assert "| 0.2000 | 0.3100 | 1.55x |" in table
    # the prefill table: TFLOP/s and the ratio to SDPA bf16 causal
    assert "| 4, 4096, 0, 32, 8, 128 | paged_int8_per_token_head | prefill | 1.600 | 343 | 0.563x |" in table
    json.dumps(FAKE)  # the result format is plain JSON


def test_prefill_flop_count_and_reference():
    """The prefill table's FLOP count (visible causal pairs, with and without cached context
    and windows) and its fp32 bottom-right causal reference (chunked) against a dense one."""
    import torch

    from kvplan.runtime.bench import _causal_reference, _visible_pairs

    assert _visible_pairs(2, 3, 0) == 2 * 6
    assert _visible_pairs(1, 2, 5) == 6 + 7
    assert _visible_pairs(1, 4, 0, window=2) == 1 + 2 + 2 + 2
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 5, 8, generator=gen)
    k = torch.randn(2, 3, 9, 8, generator=gen)
    v = torch.randn(2, 3, 9, 8, generator=gen)
    mask = torch.arange(9)[None, :] <= (torch.arange(5)[:, None] + 4)
    dense = torch.softmax((q @ k.transpose(-1, -2) / 8 ** 0.5).masked_fill(~mask, float("-inf")),
                          -1) @ v
    assert torch.allclose(_causal_reference(q, k, v, chunk=2), dense, atol=1e-5)


def test_bench_plot_writes_png_or_explains(tmp_path):
    path = tmp_path / "bench.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="matplotlib"):
            plot(FAKE, str(path))
        return
    plot(FAKE, str(path))
    assert path.stat().st_size > 1000


def test_bench_command_is_importable_without_side_effects():
    from kvplan.runtime.bench_cli import bench_command

    assert callable(bench_command)


def test_bench_run_suite_needs_cuda(monkeypatch):
    import torch

    from kvplan.runtime.bench import run_suite

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="CUDA"):
        run_suite("cuda", quick=True)


def test_bench_suite_result_records_how_it_was_timed(monkeypatch, fake_gpu):
    """The suite's JSON says how its timings were taken (L2 flush, statistic, graph replays), so
    results from different rounds can be compared knowingly; the progress callback sees every
    step and 'done'. The GPU work itself is stubbed: this checks the assembly, on any machine."""
    bench = fake_gpu
    calls = []
    monkeypatch.setattr(bench, "bench_decode_shape", lambda *a, **k: calls.append(a) or [])
    monkeypatch.setattr(bench, "bench_write", lambda *a, **k: [])
    prefill = []
    monkeypatch.setattr(bench, "bench_prefill_shape", lambda *a, **k: prefill.append(a) or [])
    steps = []
    res = bench.run_suite("cuda", quick=True, progress=lambda label, d, t: steps.append(label))
    assert res["timing"]["l2_flush"].startswith("read") and res["timing"]["statistic"] == "median"
    assert res["device"] == "FakeGPU" and res["num_sms"] == 132 and res["quick"] is True
    assert len(calls) == len(bench.QUICK_SHAPES) and steps[0] == "copy bandwidth"
    assert len(prefill) == len(bench.QUICK_PREFILL_SHAPES)
    assert steps[-1] == "done"
    json.dumps(res)  # plain JSON


@pytest.mark.gpu
def test_bench_decode_shape_times_graph_replays(cuda_device):
    """Every decode variant (the split path's scratch buffers included) runs under a CUDA graph,
    and the replayed kernel computed the right answer: GPU and eager times are both reported."""
    from kvplan.runtime.bench import bench_decode_shape

    rows = bench_decode_shape(4, 8192, 16, 4, 128, None, 3.0e12, naive=False)
    by = {r["variant"]: r for r in rows}
    assert set(by) == {"sdpa_bf16", "paged_bf16", "paged_fp8_per_tensor",
                       "paged_int8_per_token_head", "paged_fp8_per_token_head",
                       "paged_int4_per_token_head"}
    for r in rows:
        assert r["ms"] > 0 and r["eager_ms"] > 0
        assert r.get("nan_outputs", 0) == 0
    assert by["paged_bf16"]["rel_err"] < 0.01
    assert by["paged_int8_per_token_head"]["rel_err"] < 0.15
    for name, r in by.items():  # host time of the eager call, beside this host's floor
        if name.startswith("paged_"):
            assert r["host_floor_us"] > 0 and r["host_us"] > 0, r
    _valid_rows(rows)


def _valid_rows(rows: list[dict]) -> None:
    """The rows as the published schema describes them (schemas/bench-result.schema.json);
    the test is reported skipped, after its other checks, where jsonschema is not installed."""
    from rt_helpers import bench_row_validator
    for r in rows:
        bench_row_validator(r["kind"]).validate(r)


@pytest.mark.gpu
def test_bench_prefill_shape_reports_tflops(cuda_device):
    """The prefill rows: SDPA bf16 causal over the whole prompt first, then every cache mode
    (INT4 included) with TFLOP/s, the ratio to SDPA and a finite error against fp32."""
    from kvplan.runtime.bench import bench_prefill_shape

    rows = bench_prefill_shape(2, 256, 300, 8, 2, 128, rep_ms=5)
    by = {r["variant"]: r for r in rows}
    assert rows[0]["variant"] == "sdpa_bf16_causal_whole_prompt"
    assert {"paged_bf16", "paged_int8_per_token_head", "paged_int4_per_token_head"} <= set(by)
    for r in rows[1:]:
        assert r["tflops"] > 0 and r["nan_outputs"] == 0
        assert abs(r["ratio_to_sdpa"] - r["tflops"] / rows[0]["tflops"]) < 1e-9
    assert by["paged_bf16"]["rel_err"] < 0.01
    assert by["paged_int8_per_token_head"]["rel_err"] < 0.15
    _valid_rows(rows)


def test_trace_analysis_reports_ramp_and_drain():
    """bench/trace_decode.py's summary of a per-program timeline: the span, the first-tile
    latency, and the drain (last end minus mean end), with the programs counted per SM."""
    import importlib.util
    from pathlib import Path

    import torch

    path = Path(__file__).resolve().parents[2] / "bench" / "trace_decode.py"
    spec = importlib.util.spec_from_file_location("trace_decode", path)
    trace_decode = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trace_decode)
    # three programs on two SMs (ns): start, first tile, end, SM
    t = torch.tensor([[1000, 4000, 101000, 0], [1000, 3000, 99000, 1], [1500, 4500, 95500, 0]])
    s = trace_decode.analyse(t, num_sms=2)
    assert s["programs"] == 3 and s["span_us"] == 100.0
    assert s["first_tile_us"][0.5] == 3.0
    assert abs(s["drain_us"] - (100.0 - (100.0 + 98.0 + 94.5) / 3)) < 1e-9
    assert s["programs_per_sm"] == {"min": 1, "max": 2}
    assert s["sm_end_us"]["max"] == 100.0


@pytest.mark.parametrize("permute", [True, False])
def test_paged_fill_writes_every_token_in_either_page_order(device, permute):
    """The benchmarks' cache fill (bench/page_order.py compares the two orders): every
    sequence's tokens land on the pages its block table names; in order, sequence b owns pages
    b * n .. b * n + n - 1; permuted, the table is a permutation of all pages."""
    import torch

    from kvplan.runtime.bench import _make_kv, _paged_fill
    from kvplan.runtime.layout import LayerLayout
    from kvplan.runtime.reference import dequantize_kv_cache

    gen = torch.Generator(device=device).manual_seed(3)
    k, v = _make_kv(3, 40, 2, 64, device, gen)
    cache, bt = _paged_fill(LayerLayout.simple("bfloat16", 2, 64), k, v, 16, gen,
                            permute=permute)
    assert bt.shape == (3, 3)
    assert sorted(bt.flatten().tolist()) == list(range(9))
    if not permute:
        assert bt.flatten().tolist() == list(range(9))
    kd, vd = dequantize_kv_cache(cache)  # [pages, 16, heads, 64]
    for b in range(3):
        pages = bt[b].long()
        kb = kd[pages].flatten(0, 1)[:40]  # [tokens, heads, 64]
        vb = vd[pages].flatten(0, 1)[:40]
        assert torch.equal(kb, k[b].transpose(0, 1).float())
        assert torch.equal(vb, v[b].transpose(0, 1).float())


def test_prefill_rows_name_their_kernel():
    """Each prefill row says which kernel ran it: off an sm_90 GPU the Triton prefill kernel
    (8-bit and INT4 caches through the dequantized workspace), the decode-form kernel where the
    prefill kernel does not read the call (fp32 queries, kernel='triton', INT4 without the
    workspace), and the table shows the column."""
    import torch

    from kvplan.runtime.attention import AttentionConfig
    from kvplan.runtime.bench import prefill_kernel_name
    from kvplan.runtime.cache import allocate_kv_cache
    from kvplan.runtime.layout import LayerLayout

    def cache(dtype):
        return allocate_kv_cache(LayerLayout.simple(dtype, 8, 128), 4, 16, "cpu")

    q = torch.zeros(4, 32, 128, dtype=torch.bfloat16)
    for dtype in ("bfloat16", "int8_per_token_head", "fp8", "int4_per_token_head"):
        assert prefill_kernel_name(cache(dtype), q) == "prefill"
    assert prefill_kernel_name(cache("bfloat16"), q, AttentionConfig(kernel="triton")) == "decode-form"
    assert prefill_kernel_name(cache("float32"), q.float()) == "decode-form"
    int4 = cache("int4_per_token_head")
    assert prefill_kernel_name(int4, q, AttentionConfig(dequant=False)) == "decode-form"
    rows = [dict(kind="prefill", variant="paged_bf16", batch=4, new_tokens=4096, cached_tokens=0,
                 num_q_heads=32, num_kv_heads=8, head_size=128, ms=1.1, flops=5.5e11,
                 tflops=500.0, ratio_to_sdpa=0.83, rel_err=0.0017, kernel="hopper")]
    table = format_table({**FAKE, "rows": rows})
    assert "| kernel |" in table and "| paged_bf16 | hopper | 1.100 | 500 | 0.830x |" in table


def test_prefill_problem_packs_queries_and_reference(device):
    """The prefill benchmarks' shared inputs: the packed query is the last ``new`` tokens of
    each sequence, the reference is the fp32 bottom-right causal attention over the whole
    prompt, the FLOPs count visible pairs, and FP8 per-tensor caches are filled with
    amax / 448 scales (the cache is written by the write kernel: on the GPU, or in the
    interpreter on the CPU)."""
    import torch

    from kvplan.runtime.bench import PrefillProblem, _causal_reference, _filled_cache
    from kvplan.runtime.layout import LayerLayout

    gen = torch.Generator(device=device).manual_seed(1)
    p = PrefillProblem.make(2, 5, 3, 4, 2, 16, device, gen)
    qf, kr, vr = p.sdpa_args
    assert p.q.shape == (10, 4, 16) and torch.equal(p.q[5:], qf[1, :, 3:].transpose(0, 1))
    want = _causal_reference(qf[:, :, 3:], kr, vr).transpose(1, 2).reshape(10, 4, 16)
    assert torch.equal(p.ref, want)
    assert p.qsl.tolist() == [0, 5, 10] and p.seq_lens.tolist() == [8, 8]
    assert p.flops == 4 * 16 * 4 * 2 * (5 * 3 + 15) and p.sdpa_flops == 4 * 16 * 4 * 2 * 36
    cache, _ = _filled_cache(LayerLayout.simple("fp8", 2, 16), p.k, p.v, 4, gen)
    assert cache.k_scale == float(p.k.abs().max()) / 448.0
    assert cache.v_scale == float(p.v.abs().max()) / 448.0


@pytest.mark.parametrize("setting,says", [("prefetch=1", "unknown setting 'prefetch'"),
                                          ("pack_p", "needs an integer value: pack_p=N")])
def test_tune_hopper_prefill_refuses_bad_settings_in_one_line(setting, says):
    """bench/tune_hopper_prefill.py: a setting the kernel does not have, or one without its
    value, is one line on stderr and exit 2 (before any GPU work), not a traceback."""
    import subprocess
    import sys

    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    from tests.conftest import ROOT
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "tune_hopper_prefill.py"),
                        "--shape", "1,16,0,8,2,128", "--settings", setting],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], r.stderr
