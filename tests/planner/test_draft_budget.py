"""The draft model's weights are a term of the GPU budget: vLLM's drafter loads them (GPUModelRunner.load_model ->
drafter.load_model) before the memory profile that sizes the KV cache."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import kvplan.api
from tests.conftest import ROOT
from tests.ingest.test_safetensors import write_safetensors

TARGET = ROOT / "tests/data/corpus/Meta-Llama-3.1-8B/config.json"
EAGLE3 = ROOT / "tests/data/vllm_oracle_capacity/configs/drafts/EAGLE3-LLaMA3.1-Instruct-8B.json"


def _folder(tmp_path: Path, name: str, config: Path, mib: int) -> Path:
    d = tmp_path / name
    d.mkdir()
    shutil.copy(config, d / "config.json")
    write_safetensors(d / "model.safetensors", {"w": ("BF16", [mib, 512, 1024])})  # mib MiB of bf16
    return d


def _terms(plan) -> dict[str, int]:
    return {t.name: t.bytes for t in plan.totals.kv_budget_terms or []}


def test_a_draft_checkpoints_weights_are_subtracted_per_rank(tmp_path: Path) -> None:
    target = _folder(tmp_path, "target", TARGET, 8)
    draft = _folder(tmp_path, "eagle", EAGLE3, 6)
    spec = json.dumps({"method": "eagle3", "model": str(draft), "num_speculative_tokens": 3})
    with_draft = kvplan.api.compile(target, ["--max-model-len", "8192", "--speculative-config", spec,
                                             "--tensor-parallel-size", "2"], gpu="h100")
    plain = kvplan.api.compile(target, ["--max-model-len", "8192", "--tensor-parallel-size", "2"], gpu="h100")
    terms = _terms(with_draft)
    assert terms["draft weights"] == -(6 << 20) // 2  # split over the 2 ranks, as the target's weights
    assert "draft weights" not in _terms(plain)
    assert with_draft.totals.kv_budget_bytes == plain.totals.kv_budget_bytes - (3 << 20)
    (term,) = [t for t in with_draft.totals.kv_budget_terms or [] if t.name == "draft weights"]
    assert str(draft) in term.basis


def test_mtp_layers_add_no_draft_weights(tmp_path: Path) -> None:
    """MTP layers are the checkpoint's own tensors: already in the weights term."""
    target = _folder(tmp_path, "qwen", ROOT / "tests/data/corpus/Qwen3.5-27B/config.json", 8)
    spec = json.dumps({"method": "mtp", "num_speculative_tokens": 1})
    plan = kvplan.api.compile(target, ["--max-model-len", "8192", "--speculative-config", spec], gpu="h100")
    assert "draft weights" not in _terms(plan) and "weights" in _terms(plan)
