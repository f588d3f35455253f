"""Each release's own model registry decides which architectures it builds (kvplan.releases, generated
from every wheel): an architecture vLLM builds natively today is refused for a release that lacks it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from tests.conftest import ROOT

CONFIGS = ROOT / "tests" / "data" / "vllm_oracle_arch" / "configs"


def _config(tmp_path: Path, arch: str, **changes: object) -> Path:
    cfg = json.loads((CONFIGS / f"{arch}__default.json").read_text())
    cfg.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path / "config.json"


def test_architecture_added_later_is_refused_for_an_older_release(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "AliceAIForCausalLM")  # registered from vLLM 0.33.0 (model_type qwen3_next)
    assert kvplan.api.compile(cfg, engine="vllm==0.33.0").layers
    with pytest.raises(KvplanInputError) as e:
        kvplan.api.compile(cfg, engine="vllm==0.30.0")
    # the config-load check of the release (its registry and its transformers) refuses it first
    assert "AliceAIForCausalLM is not in vLLM 0.30.0's model registry (vLLM added it in 0.33.0)" in e.value.problem
    assert "are not supported for now" in e.value.problem and "vLLM release that supports it" in (e.value.fix or "")


def test_architecture_removed_in_034_is_refused_there(tmp_path: Path) -> None:
    # Keye's config class comes from the checkpoint's code; a stand-in model_type transformers loads keeps
    # that check out of the way, so what is tested is the registry of the release.
    cfg = _config(tmp_path, "KeyeForConditionalGeneration", model_type="qwen3")
    assert kvplan.api.compile(cfg, engine="vllm==0.33.0").layers
    with pytest.raises(KvplanInputError) as e:
        kvplan.api.compile(cfg, engine="vllm==0.34.0")
    assert ("KeyeForConditionalGeneration is not in vLLM 0.34.0's model registry (the last release that built it: "
            "0.33.0)") in e.value.problem


def test_remote_code_leaves_the_transformers_backend_open(tmp_path: Path) -> None:
    """With an auto_map AutoModel class and --trust-remote-code vLLM may build it through its Transformers
    backend (registry.py::_try_resolve_transformers): kvplan cannot tell, so it plans."""
    cfg = _config(tmp_path, "KeyeForConditionalGeneration",
                  auto_map={"AutoConfig": "configuration_keye.KeyeConfig",
                            "AutoModel": "modeling_keye.KeyeForConditionalGeneration"})
    assert kvplan.api.compile(cfg, "--trust-remote-code", engine="vllm==0.34.0").layers
