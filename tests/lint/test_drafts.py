"""Lint counts the speculative-decoding draft's KV cache as plan/explain do: the draft model --speculative-config
names is found as the served model is (the deployment's model map, the Hub), its layers join the pool, and a
draft whose config cannot be found is KV804 on the --speculative-config flag while the target is still checked."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from kvplan.lint import lint_paths
from tests.conftest import ROOT
from tests.lint.helpers import write_file

TARGET = ROOT / "tests/data/corpus/Meta-Llama-3.1-8B/config.json"
EAGLE3 = ROOT / "tests/data/vllm_oracle_capacity/configs/drafts/EAGLE3-LLaMA3.1-Instruct-8B.json"
_MODELS = """[tool.kvplan.lint.models]
"meta-llama/Llama-3.1-8B-Instruct" = { config = "target.json", weight-gib = 14.96 }
"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B" = "eagle.json"
"""


def _compose(draft: str, max_model_len: int = 131072) -> str:
    spec = json.dumps({"method": "eagle3", "model": draft, "num_speculative_tokens": 3})
    served = '"meta-llama/Llama-3.1-8B-Instruct", "--max-model-len"'
    return f"""
    services:
      llm:
        image: vllm/vllm-openai:v0.33.0
        command: [{served}, "{max_model_len}", "--speculative-config", '{spec}']
    """


def _lint(tmp_path: Path, draft: str, name: str, models: str = _MODELS, max_model_len: int = 131072):
    shutil.copy(TARGET, tmp_path / "target.json")
    shutil.copy(EAGLE3, tmp_path / "eagle.json")
    (tmp_path / "pyproject.toml").write_text(models)
    path = write_file(tmp_path, name, _compose(draft, max_model_len))
    return lint_paths([str(path)], cwd=tmp_path, gpu="l4", offline=True)


def _needed_gib(report) -> float:
    (kv502,) = [f for f in report.findings if f.code == "KV502"]
    return float(re.search(r"\(\d+\), ([\d.]+) GiB KV cache is needed", kv502.message).group(1))


def test_a_mapped_draft_adds_its_layers_to_the_request(tmp_path: Path) -> None:
    with_draft = _lint(tmp_path, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "with.yml")
    assert not [f for f in with_draft.findings if f.code == "KV804"]
    # the EAGLE3 head is one more bf16 layer of 8 KV heads x 128: 1/32 more than Llama 3.1 8B's 32 layers
    without = _lint(tmp_path, "nobody/unknown-eagle", "without.yml")
    assert _needed_gib(with_draft) == 16.50 and _needed_gib(without) == 16.00


def test_a_draft_without_config_is_kv804_on_the_speculative_config_flag(tmp_path: Path) -> None:
    report = _lint(tmp_path, "nobody/unknown-eagle", "deploy.yml")
    (kv804,) = [f for f in report.findings if f.code == "KV804"]
    assert "--speculative-config model 'nobody/unknown-eagle'" in kv804.message
    assert "the draft's KV cache is not counted" in kv804.message
    # on the --speculative-config flag (the command's 4th item), not on the served model (its 1st)
    assert (kv804.location.line, kv804.location.yaml_path) == (4, "services.llm.command[3]")
    assert any(f.code == "KV502" for f in report.findings)  # the target is still checked


def test_the_drafts_weights_are_a_term_of_the_gpu_budget(tmp_path: Path) -> None:
    """The drafter loads its weights before vLLM profiles: with the EAGLE3 head's 0.79 GiB known, an L4's KV memory
    (3.68 GiB for Llama-3.1-8B alone) drops to 2.89 GiB and a 24,000-token request (3.02 GiB) no longer fits."""
    heavy = _MODELS.replace('= "eagle.json"', '= { config = "eagle.json", weight-gib = 0.79 }')
    assert heavy != _MODELS
    report = _lint(tmp_path, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "heavy.yml", heavy, max_model_len=24000)
    (kv502,) = [f for f in report.findings if f.code == "KV502"]
    assert "(24000), 3.02 GiB KV cache is needed" in kv502.message and "memory (2.89 GiB)" in kv502.message
    light = _lint(tmp_path, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "light.yml", max_model_len=24000)
    assert not [f for f in light.findings if f.code == "KV502"]  # the head's weights unknown: 3.68 GiB
