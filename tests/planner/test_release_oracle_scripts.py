"""The per-release oracle harness stays usable: its patches apply, its answers round-trip.

The oracle itself needs a vLLM interpreter and runs by hand (scripts/oracle/release_oracle.sh); these
checks need neither vLLM nor the network.
"""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

ORACLE = ROOT / "scripts" / "oracle"
PATCHES = sorted((ORACLE / "releases").glob("vllm_oracle-*.patch"))


def _release_corpus():
    spec = importlib.util.spec_from_file_location("release_corpus", ORACLE / "release_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs the patch tool")
@pytest.mark.parametrize("patch_file", PATCHES, ids=[p.name for p in PATCHES])
def test_release_patch_applies_to_the_oracle(patch_file: Path, tmp_path: Path) -> None:
    shutil.copy(ORACLE / "vllm_oracle.py", tmp_path / "vllm_oracle.py")
    r = subprocess.run(["patch", "-p0", "--forward", "--batch"], cwd=tmp_path, input=patch_file.read_text(),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    compile((tmp_path / "vllm_oracle.py").read_text(), "vllm_oracle.py", "exec")


def test_layer_runs_merge_only_equal_consecutive_layers() -> None:
    rc = _release_corpus()
    rec = [{"index": i, "kv_cache_dtype": "fp8", "kv_quant_mode": "FP8_PER_TENSOR",
            "sliding_window": 1024 if i % 6 != 5 else None,
            "kv_cache_spec": {"num_kv_heads": 4, "head_size": 256}} for i in range(8)]
    assert rc.layer_runs(rec) == [[0, 4, "fp8", "FP8_PER_TENSOR", 1024, 4, 256],
                                  [5, 5, "fp8", "FP8_PER_TENSOR", None, 4, 256],
                                  [6, 7, "fp8", "FP8_PER_TENSOR", 1024, 4, 256]]


def test_answer_file_round_trips_and_scrubs_paths() -> None:
    rc = _release_corpus()
    res = {"mode": "model", "engine": {"model_dtype": "bfloat16"}, "layers": [],
           "error": {"stage": "create_engine_config", "type": "OSError",
                     "message": "Can't load image processor for '/tmp/vllm-oracle-ab12_x'."}}
    doc = {"format": rc.FORMAT, "vllm_version": "0.34.0", "model": "m", "notes": [],
           "cases": {"auto": rc.compact(res)}}
    back = json.loads(rc.dumps(doc))
    assert back == doc
    assert back["cases"]["auto"]["error"]["message"] == "Can't load image processor for '<model dir>'."


def test_text_only_copy_keeps_dtype_and_quantization() -> None:
    rc = _release_corpus()
    cfg = {"architectures": ["Gemma3ForConditionalGeneration"], "torch_dtype": "bfloat16",
           "quantization_config": {"quant_method": "fp8"}, "text_config": {"model_type": "gemma3_text"}}
    text = rc.text_only(cfg)
    assert text["architectures"] == ["Gemma3ForCausalLM"] and text["torch_dtype"] == "bfloat16"
    assert text["quantization_config"] == {"quant_method": "fp8"} and text["model_type"] == "gemma3_text"
