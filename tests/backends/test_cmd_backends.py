"""`kvplan gpus` / `kvplan backends` as a user runs them (CliRunner, fixed width, no colour)."""
from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

import kvplan
from kvplan.cli.cmd_backends import COMMANDS, backends_document, gpus_document
from kvplan.errors import KvplanInputError
from kvplan.releases import DEFAULT_ENGINE

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
runner = CliRunner()


def _app() -> typer.Typer:
    app = typer.Typer()
    for name, fn in COMMANDS.items():
        app.command(name)(fn)
    return app


def run(*args: str):
    return runner.invoke(_app(), list(args), env=ENV)


def test_gpus_text_lists_every_profile() -> None:
    r = run("gpus")
    assert r.exit_code == 0, r.output
    for name in ("h100-sxm", "b300", "mi300x", "rtx-pro-6000", "e4m3fnuz"):
        assert name in r.stdout


def test_gpus_json_is_sorted_stable_and_versioned() -> None:
    a, b = run("gpus", "--format", "json").stdout, run("gpus", "--format", "json").stdout
    doc = json.loads(a)
    assert a == b and list(doc) == sorted(doc)
    assert doc["schema_version"] == "1.0" and doc["kvplan_version"] == kvplan.__version__
    assert f"{doc['engine']['name']}=={doc['engine']['version']}" == DEFAULT_ENGINE  # GPUs: any release
    names = [g["name"] for g in doc["gpus"]]
    assert names == sorted(names) and doc == gpus_document()


def test_gpus_markdown_is_a_pipe_table() -> None:
    out = run("gpus", "--format", "markdown").stdout
    assert out.startswith("| name | GPU |") and "| h100-sxm |" in out


def test_backends_json_full_matrix() -> None:
    r = run("backends", "--format", "json")
    doc = json.loads(r.stdout)
    assert doc["engine"] == {"name": "vllm", "version": "0.34.0"} and doc["gpu"] is None  # the default release
    names = [b["name"] for b in doc["backends"]]
    assert names == sorted(names) and "FLASHINFER_MLA_SPARSE_SM120" in names
    assert all(b["source"] for b in doc["backends"])


def test_backends_for_gpu_shows_which_dtypes_work() -> None:
    doc = json.loads(run("backends", "--gpu", "a100", "--format", "json").stdout)
    on = {b["name"]: b for b in doc["on_gpu"]["backends"]}
    assert on["TRITON_ATTN"]["kv_cache_dtypes"]["int8_per_token_head"]["status"] == "ok"
    fp8 = on["TRITON_ATTN"]["kv_cache_dtypes"]["fp8"]
    assert fp8["status"] == "impl_error" and "requires SM89+" in fp8["detail"]
    assert on["FLASH_ATTN"]["kv_cache_dtypes"]["fp8"]["status"] == "rejected"
    assert "CUTLASS_MLA" in on and not on["CUTLASS_MLA"]["eligible"]
    assert "ROCM_ATTN" not in on  # other platform
    default = doc["on_gpu"]["default_backend"]["dense_head128"]
    assert default["fp8"]["backend"] == "FLASHINFER" and default["auto"]["flash_attn_version"] == 2


def test_backends_text_for_gpu_prints_matrix_and_defaults() -> None:
    r = run("backends", "--gpu", "sm90")
    assert r.exit_code == 0, r.output
    assert "generic SM90 (H100 SXM)" in r.stdout and "Automatic selection" in r.stdout
    assert "FLASH_ATTN FA3 (fp8 Q)" in r.stdout


def test_backends_markdown_without_gpu() -> None:
    out = run("backends", "--format", "markdown").stdout
    assert out.startswith("### Attention backends, vllm==0.34.0") and "| FLASH_ATTN | dense |" in out


@pytest.mark.parametrize("args,match", [
    (("backends", "--gpu", "h10"), "unknown GPU 'h10'"),
    (("backends", "--engine", "sglang"), "is not verified"),
    (("backends", "--engine", "vllm==0.19.0"), "is not verified"),
    (("gpus", "--format", "yaml"), "unknown --format"),
])
def test_backends_bad_input_raises_kvplan_input_error(args, match: str) -> None:
    r = run(*args)
    assert r.exit_code != 0 and isinstance(r.exception, KvplanInputError)
    assert match in str(r.exception)


def test_backends_document_is_byte_stable() -> None:
    first = json.dumps(backends_document("b200"), sort_keys=True)
    assert first == json.dumps(backends_document("b200"), sort_keys=True)
