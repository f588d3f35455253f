"""Scales are found from safetensors headers only; corrupt headers are one clear error."""
from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.ingest.safetensors import find_scales, read_header
from kvplan.model.vocab import ScaleSource
from tests.conftest import EXAMPLES


def write_safetensors(path: Path, tensors: dict[str, tuple]) -> None:
    """A real safetensors file with the given names, dtypes and shapes: ``(dtype, shape)`` or
    ``(dtype, shape, value)``. Scale tensors (``*_scale``) default to 0.05, a calibrated-looking
    value; other tensors are zero."""
    sizes = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "I8": 1}
    header, off, data = {}, 0, b""
    for name, spec in tensors.items():
        dt, shape = spec[0], spec[1]
        numel = 1
        for s in shape:
            numel *= s
        n = sizes[dt] * numel
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        value = spec[2] if len(spec) > 2 else (0.05 if name.endswith("_scale") else 0.0)
        vals = list(value) if isinstance(value, (list, tuple)) else [value] * numel
        if dt == "F32":
            data += struct.pack(f"<{numel}f", *vals)
        elif dt == "F16":
            data += struct.pack(f"<{numel}e", *vals)
        elif dt == "BF16":
            data += b"".join(struct.pack("<f", v)[2:] for v in vals)
        else:
            data += b"\0" * n
        off += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def make_checkpoint(tmp: Path, scales: dict[str, tuple[str, list[int]]], quant: dict | None = None) -> Path:
    cfg = json.loads((EXAMPLES / "Meta-Llama-3.1-8B" / "config.json").read_text())
    cfg["num_hidden_layers"] = 4
    if quant:
        cfg["quantization_config"] = quant
    (tmp / "config.json").write_text(json.dumps(cfg))
    weights = {f"model.layers.{i}.self_attn.q_proj.weight": ("BF16", [8, 8]) for i in range(4)}
    write_safetensors(tmp / "model.safetensors", {**weights, **scales})
    return tmp


CT_FP8 = {"quant_method": "compressed-tensors",
          "kv_cache_scheme": {"type": "float", "num_bits": 8, "strategy": "tensor", "symmetric": True,
                              "dynamic": False}}


def test_find_scales_reads_per_tensor_and_per_head_shapes(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, {
        "model.layers.0.self_attn.k_proj.k_scale": ("F32", []),
        "model.layers.0.self_attn.v_proj.v_scale": ("F32", []),
        "model.layers.1.self_attn.attn.k_scale": ("F32", [8]),
    })
    scales, files, total = find_scales(tmp_path)
    assert files == ("model.safetensors",)
    assert [(s.layer, s.kind, s.shape) for s in scales] == [
        (0, "k_scale", ()), (0, "v_scale", ()), (1, "k_scale", (8,))]
    assert total == 4 * 8 * 8 * 2 + 4 + 4 + 32


def test_checkpoint_folder_scale_source_per_layer(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, {f"model.layers.{i}.self_attn.attn.{k}_scale": ("F32", [])
                               for i in (0, 1) for k in ("k", "v")}, CT_FP8)
    plan = kvplan.api.compile(tmp_path, [])
    srcs = [lp.scale_source for lp in plan.layers]
    assert [lp.kv_cache_dtype for lp in plan.layers] == ["fp8"] * 4  # compressed-tensors: auto -> fp8
    assert srcs == [ScaleSource.checkpoint_per_tensor] * 2 + [ScaleSource.default_1_0] * 2
    assert any(f.code == "KV401" and f.layers == [2, 3] for f in plan.findings)


def test_v_scale_only_is_an_error_finding(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, {"model.layers.2.self_attn.attn.v_scale": ("F32", [])}, CT_FP8)
    plan = kvplan.api.compile(tmp_path, [])
    assert any(f.code == "KV403" and f.severity.value == "error" and f.layers == [2] for f in plan.findings)


def test_deprecated_kv_scale_is_reported(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, {"model.layers.3.self_attn.kv_scale": ("F32", [])}, CT_FP8)
    plan = kvplan.api.compile(tmp_path, [])
    assert any(f.code == "KV402" and f.layers == [3] for f in plan.findings)


@pytest.mark.parametrize("blob,expect", [
    (b"\x01\x02", "shorter than the 8-byte header"),
    (struct.pack("<Q", 500) + b'{"a": 1', "truncated"),
    (struct.pack("<Q", 7) + b"not json", "not valid JSON"),
    (struct.pack("<Q", 2**60), "not plausible"),
])
def test_corrupt_header_is_one_clear_error(tmp_path: Path, blob: bytes, expect: str) -> None:
    p = tmp_path / "model.safetensors"
    p.write_bytes(blob)
    with pytest.raises(KvplanInputError, match=expect):
        read_header(p)


def test_index_naming_missing_shard_is_an_error(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, {})
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "model-00002.safetensors"}}))
    with pytest.raises(KvplanInputError, match="missing shard"):
        kvplan.api.compile(tmp_path, [])


def test_scale_values_are_read_for_each_float_dtype(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, {
        "model.layers.0.self_attn.attn.k_scale": ("F32", [], 0.0125),
        "model.layers.0.self_attn.attn.v_scale": ("BF16", [], 0.5),
        "model.layers.1.self_attn.attn.k_scale": ("F16", [4], [0.25, 0.5, 0.125, 2.0]),
        "model.layers.1.self_attn.attn.v_scale": ("F32", [2], [float("nan"), 1.0]),
    })
    scales, _, _ = find_scales(tmp_path)
    got = {(s.layer, s.kind): (s.vmin, s.vmax) for s in scales}
    assert got[(0, "k_scale")] == pytest.approx((0.0125, 0.0125))
    assert got[(0, "v_scale")] == (0.5, 0.5)
    assert got[(1, "k_scale")] == (0.125, 2.0)
    vmin, vmax = got[(1, "v_scale")]
    assert vmin != vmin and vmax != vmax  # NaN anywhere -> NaN


def test_large_or_undecoded_scale_tensors_are_not_read(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, {
        "model.layers.0.self_attn.attn.k_scale": ("F32", [5000]),
        "model.layers.0.self_attn.attn.v_scale": ("F8_E4M3", []),
    })
    scales, _, _ = find_scales(tmp_path)
    assert [(s.kind, s.vmin, s.values_read) for s in scales] == [("k_scale", None, False),
                                                                   ("v_scale", None, False)]


def test_scale_data_past_end_of_file_is_one_clear_error(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, {"model.layers.0.self_attn.attn.k_scale": ("F32", [4])}, CT_FP8)
    f = tmp_path / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-8])  # cut the last scale's data short
    with pytest.raises(KvplanInputError, match="lies past the end of the file"):
        find_scales(tmp_path)
    r = subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", "plan",
                        str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Re-download" in r.stderr and "Traceback" not in r.stderr and r.stdout == ""


def test_invalid_scale_values_are_an_error_finding(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, {"model.layers.1.self_attn.attn.k_scale": ("F32", [], 0.0),
                               "model.layers.1.self_attn.attn.v_scale": ("F32", [], 0.02)}, CT_FP8)
    plan = kvplan.api.compile(tmp_path, [])
    f = next(f for f in plan.findings if f.code == "KV408")
    assert f.severity.value == "error" and f.layers == [1] and "k_scale has a value <= 0 (0)" in f.message


def test_scale_data_offsets_that_do_not_fit_the_shape_are_one_clear_error(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, {"model.layers.0.self_attn.attn.k_scale": ("F32", [4])}, CT_FP8)
    f = tmp_path / "model.safetensors"
    raw = f.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    name = "model.layers.0.self_attn.attn.k_scale"
    header[name]["data_offsets"][1] -= 4  # 12 bytes for 4 fp32 values
    body = json.dumps(header).encode()
    f.write_bytes(struct.pack("<Q", len(body)) + body + raw[8 + n:])
    r = subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", "plan",
                        str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "data_offsets" in r.stderr and "Traceback" not in r.stderr and r.stdout == ""
