"""Scales are found from safetensors headers only; corrupt headers are one clear error."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.ingest.safetensors import find_scales, read_header
from kvplan.model.vocab import ScaleSource
from tests.conftest import EXAMPLES


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A real safetensors file (header + zero data) with the given names, dtypes and shapes."""
    sizes = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "I8": 1}
    header, off = {}, 0
    for name, (dt, shape) in tensors.items():
        n = sizes[dt]
        for s in shape:
            n *= s
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * off)


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
          "kv_cache_scheme": {"type": "float", "num_bits": 8, "strategy": "tensor", "symmetric": True, "dynamic": False}}


def test_find_scales_reads_per_tensor_and_per_head_shapes(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, {
        "model.layers.0.self_attn.k_proj.k_scale": ("F32", []),
        "model.layers.0.self_attn.v_proj.v_scale": ("F32", []),
        "model.layers.1.self_attn.attn.k_scale": ("F32", [8]),
    })
    scales, files, total = find_scales(tmp_path)
    assert files == ("model.safetensors",)
    assert [(s.layer, s.kind, s.shape) for s in scales] == [(0, "k_scale", ()), (0, "v_scale", ()), (1, "k_scale", (8,))]
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
