"""`kvplan bench` on a machine without a GPU, and its outputs on a synthetic result."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from test_bench import FAKE  # noqa: E402

ENV = {"COLUMNS": "160", "NO_COLOR": "1", "PATH": "/usr/bin:/bin",
       # keep a PYTHONPATH install (a machine where kvplan's dependencies live off site-packages)
       **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {})}


def _kvplan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", *args],
                          capture_output=True, text=True, env=ENV)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cmd_bench_without_cuda_is_one_line_exit_2(tmp_path):
    r = _kvplan("bench", "--quick", "--out", str(tmp_path / "b.json"))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "needs a CUDA GPU" in lines[0] and "NVIDIA GPU" in lines[0]
    assert not (tmp_path / "b.json").exists()


def test_cmd_bench_is_listed_in_help():
    r = _kvplan("--help")
    assert r.returncode == 0 and "bench" in r.stdout


def test_cmd_bench_writes_json_png_and_prints_table(tmp_path, monkeypatch, capsys):
    """The command's outputs from a synthetic suite result (the suite itself needs a GPU)."""
    import kvplan.runtime.bench as bench_mod
    from kvplan.runtime.bench_cli import bench_command

    calls = []

    def fake_suite(device, quick=False, progress=None):
        calls.append((device, quick))
        for i in range(3):
            progress(f"step {i}", i, 3)
        return json.loads(json.dumps(FAKE))

    monkeypatch.setattr(bench_mod, "run_suite", fake_suite)
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    bench_command(out, png, quick=True)
    assert calls == [("cuda", True)]
    data = json.loads(out.read_text())
    assert {"device", "torch", "triton", "date", "copy_bandwidth", "rows"} <= set(data)
    assert data["copy_bandwidth"]["bytes_per_s"] == 3.0e12
    for row in data["rows"]:
        assert row["kind"] in ("decode", "prefill", "write")
        if row["kind"] == "prefill":
            assert {"variant", "ms", "batch", "new_tokens", "cached_tokens", "num_q_heads",
                    "num_kv_heads", "head_size", "flops", "tflops", "ratio_to_sdpa"} <= set(row)
            assert "kernel" in row or row["variant"].startswith("sdpa")
            continue
        assert {"variant", "ms", "bytes", "bytes_per_s", "frac_copy"} <= set(row)
        if row["kind"] == "decode":
            assert {"batch", "context", "num_q_heads", "num_kv_heads", "head_size",
                    "ratio_to_sdpa"} <= set(row)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = capsys.readouterr().out
    assert "| 64, 4096, 32, 8, 128, - | paged_int8_per_token_head | 0.2000 |" in table
    assert "0.550x" in table
    assert ("| 4, 4096, 0, 32, 8, 128 | paged_int8_per_token_head | prefill | 1.600 | 343 | 0.563x |"
            in table)


def test_cmd_bench_missing_output_folder_is_input_error(tmp_path, monkeypatch):
    from kvplan.cli import cmd_bench
    from kvplan.errors import KvplanInputError

    monkeypatch.setattr(cmd_bench, "_require_cuda", lambda: None)
    with pytest.raises(KvplanInputError, match="does not exist"):
        cmd_bench.bench(out=Path(tmp_path / "no" / "r.json"), plot=None, no_plot=True, quick=True)
