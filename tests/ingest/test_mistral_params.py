"""Mistral-format checkpoints (params.json): read as vLLM 0.33's Mistral config parser converts them.

The Pixtral tests plan a params.json and diff the plan with vLLM's own answer for the config vLLM
builds from that params.json (tests/data/vllm_oracle_arch: PixtralForConditionalGeneration cases,
whose configs are vLLM's conversion of these keys).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.ingest.mistral_params import config_file, hf_config_from_params
from tests.conftest import ROOT
from tests.hubserver import fake_hub_fixture  # noqa: F401 - fixture
from tests.planner.arch_parity import compare, load_answer

# Pixtral-12B-2409's params.json geometry, cut to the 8 layers of the oracle's Pixtral cases.
PIXTRAL = {"dim": 5120, "n_layers": 8, "head_dim": 128, "hidden_dim": 14336, "n_heads": 32, "n_kv_heads": 8,
           "rope_theta": 1000000000.0, "norm_eps": 1e-05, "vocab_size": 131072,
           "vision_encoder": {"hidden_size": 1024, "num_channels": 3, "image_size": 1024, "patch_size": 16,
                              "rope_theta": 10000.0, "intermediate_size": 4096, "num_hidden_layers": 4,
                              "num_attention_heads": 16, "image_token_id": 10, "image_break_token_id": 12,
                              "image_end_token_id": 13, "adapter_bias": True}}


def _folder(tmp_path: Path, params: dict, *files: str) -> Path:
    (tmp_path / "params.json").write_text(json.dumps(params))
    for f in files:
        (tmp_path / f).write_text("{}")
    return tmp_path


@pytest.mark.parametrize(("case", "window"), [("default", None), ("swa", 4096),
                                             ("swa-pattern", [None, 4096, 4096, 4096])])
@pytest.mark.parametrize("flag", ["auto", "fp8"])
def test_pixtral_params_json_plans_as_vllm_builds_it(tmp_path: Path, case: str, window: object, flag: str) -> None:
    params = dict(PIXTRAL, **({"sliding_window": window} if window is not None else {}))
    plan = kvplan.api.compile(_folder(tmp_path, params), ["--kv-cache-dtype", flag])
    answer = load_answer(f"PixtralForConditionalGeneration__{case}__{flag}")
    assert answer is not None and answer["error"] is None
    assert plan.model.architecture == "PixtralForConditionalGeneration"
    assert compare(plan, answer) == []


def test_converted_keys_are_vllms() -> None:
    got = hf_config_from_params(dict(PIXTRAL, sliding_window=[None, 4096]), Path("params.json"))
    assert (got["model_type"], got["architectures"]) == ("pixtral", ["PixtralForConditionalGeneration"])
    text = got["text_config"]
    assert (text["hidden_size"], text["num_hidden_layers"], text["num_key_value_heads"]) == (5120, 8, 8)
    assert text["layer_types"] == ["full_attention", "sliding_attention"] * 4 and text["sliding_window"] == 4096
    assert text["max_position_embeddings"] == 128000  # vLLM's default when params.json has none
    moe = {k: v for k, v in PIXTRAL.items() if k != "vision_encoder"}
    mixtral = hf_config_from_params(dict(moe, moe={"num_experts": 8}), Path("p"))
    assert mixtral["architectures"] == ["MixtralForCausalLM"]
    large3 = hf_config_from_params(dict(moe, moe={"num_experts": 8, "num_shared_experts": 1, "expert_hidden_dim": 2048},
                                        qk_nope_head_dim=128, qk_rope_head_dim=64, kv_lora_rank=512), Path("p"))
    assert (large3["model_type"], large3["architectures"]) == ("deepseek_v3", ["MistralLarge3ForCausalLM"])
    assert (large3["n_routed_experts"], large3["moe_intermediate_size"]) == (8, 2048)
    fp8 = hf_config_from_params(dict(moe, quantization={"qformat_weight": "fp8_e4m3"}), Path("p"))
    assert fp8["quantization_config"] == {"quant_method": "fp8", "activation_scheme": "static"}


def test_which_file_vllm_reads(tmp_path: Path) -> None:
    """--config-format auto: params.json when consolidated*.safetensors are there, else config.json."""
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "params.json").write_text("{}")
    assert config_file(tmp_path).name == "config.json"
    (tmp_path / "consolidated.safetensors").write_text("")
    assert config_file(tmp_path).name == "params.json"
    (tmp_path / "config.json").unlink()
    (tmp_path / "consolidated.safetensors").unlink()
    assert config_file(tmp_path).name == "params.json"  # what --config-format mistral reads


@pytest.mark.parametrize(("over", "words"), [
    ({"sliding_window": [None, 4096, 2048]}, "sliding_window"),
    ({"sliding_window": "4k"}, "sliding_window"),
    ({"quantization": {"qformat_weight": "int3"}}, "quantization"),
])
def test_bad_params_json_is_one_clear_error(tmp_path: Path, over: dict, words: str) -> None:
    folder = _folder(tmp_path, dict(PIXTRAL, **over))
    with pytest.raises(KvplanInputError, match=words):
        kvplan.api.compile(folder, "--kv-cache-dtype auto")
    run = subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", "plan", str(folder)],
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert run.returncode == 2
    assert "Traceback" not in run.stderr and words in run.stderr


def test_folder_without_any_config_names_both_files(tmp_path: Path) -> None:
    with pytest.raises(KvplanInputError, match=r"no config.json \(or Mistral-format params.json\)"):
        kvplan.api.compile(tmp_path, "--kv-cache-dtype auto")


def _without_source(plan) -> dict:
    d = plan.model_dump(mode="json")
    d["model"].pop("source")
    d["model"].pop("hub", None)
    return d


def test_mistral_format_hub_repo_plans_like_the_folder(fake_hub, tmp_path: Path, monkeypatch) -> None:
    """A Hub repository in Mistral format (params.json + consolidated.safetensors, no config.json, as
    mistralai/Pixtral-12B-2409 publishes it): params.json is fetched, the plan is the folder's, and a
    second run works offline from the cache."""
    from tests.hubserver import go_offline, write_safetensors

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "params.json").write_text(json.dumps(PIXTRAL))
    write_safetensors(repo / "consolidated.safetensors", [("layers.0.attention.wk.weight", "BF16", [4096], None)])
    fake_hub.add("mistralai/Pixtral-12B-2409", repo)
    hub_plan = kvplan.api.compile("mistralai/Pixtral-12B-2409", "--kv-cache-dtype fp8")
    disk_plan = kvplan.api.compile(repo, "--kv-cache-dtype fp8")
    assert _without_source(hub_plan) == _without_source(disk_plan)
    assert hub_plan.model.architecture == "PixtralForConditionalGeneration"
    assert hub_plan.model.hub is not None and "params.json" in hub_plan.model.hub.files
    assert "config.json" not in hub_plan.model.hub.files
    go_offline(monkeypatch)
    assert _without_source(kvplan.api.compile("mistralai/Pixtral-12B-2409", "--kv-cache-dtype fp8")) == \
        _without_source(disk_plan)


def test_hub_repo_with_both_files_reads_what_vllm_reads(fake_hub, tmp_path: Path) -> None:
    """config.json and params.json: vLLM reads params.json when consolidated*.safetensors are there."""
    from tests.hubserver import write_safetensors

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "params.json").write_text(json.dumps(dict(PIXTRAL, n_kv_heads=4)))
    (repo / "config.json").write_text(json.dumps(json.loads(
        (ROOT / "tests/data/vllm_oracle_arch/configs/PixtralForConditionalGeneration__default.json").read_text())))
    fake_hub.add("org/both", repo)
    assert {lp.num_kv_heads for lp in kvplan.api.compile("org/both").layers} == {8}  # config.json
    write_safetensors(repo / "consolidated.safetensors", [("layers.0.attention.wk.weight", "BF16", [64], None)])
    fake_hub.add("org/both-consolidated", repo)
    assert {lp.num_kv_heads for lp in kvplan.api.compile("org/both-consolidated").layers} == {4}  # params.json


def test_config_json_beside_params_json_fills_what_params_json_lacks(tmp_path: Path) -> None:
    """As vLLM's Mistral parser: the context length comes from config.json when params.json has none
    (else 128000), and keys the conversion leaves out are taken from config.json."""
    text = {k: v for k, v in PIXTRAL.items() if k != "vision_encoder"}
    from tests.hubserver import write_safetensors

    (tmp_path / "params.json").write_text(json.dumps(text))
    write_safetensors(tmp_path / "consolidated.safetensors", [("layers.0.attention.wk.weight", "BF16", [64], None)])
    assert kvplan.api.compile(tmp_path, "--kv-cache-dtype auto").totals.max_model_len == 128000
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["MistralForCausalLM"], "model_type": "mistral",
                                                      "max_position_embeddings": 32768, "torch_dtype": "float16"}))
    plan = kvplan.api.compile(tmp_path, "--kv-cache-dtype auto")
    assert plan.totals.max_model_len == 32768
    assert plan.model.dtype == "float16"
    assert plan.model.architecture == "MistralForCausalLM"


ML4 = Path(__file__).parents[1] / "data" / "mistral_large4" / "fp8-kv" / "params.json"


def test_mistral_large_4_remap_is_vllms() -> None:
    """vLLM 0.34's _remap_mistral_large_4_args: patterns repeated over the layers, DSA keys lifted."""
    cfg = hf_config_from_params(json.loads(ML4.read_text()), ML4)
    assert (cfg["model_type"], cfg["architectures"]) == ("mistral_large_4", ["MistralLarge4ForCausalLM"])
    assert cfg["kv_source_layers"] == [0, 0, 2, 2, 4, 4, 6, 6]
    assert cfg["nope_layer_flags"] == [False, False, True, True] * 2
    assert cfg["index_sharing"] == ["full", "shared"] * 4
    assert (cfg["index_topk"], cfg["index_head_dim"], cfg["fp8_kv_cache"]) == (64, 128, True)
    assert "dsa" not in cfg and "kv_sharing" not in cfg


@pytest.mark.parametrize(("over", "words"), [
    ({"kv_sharing": {"source_layers_str": "0,0,1,2,4,4,6,6"}}, "must share KV with an earlier, non-sharing layer"),
    ({"kv_sharing": {"source_layers_str": "0,0,2"}}, "lists 3 layers, n_layers is 8"),
    ({"kv_sharing": {"source_layers_str": "0,0,0,3,4,4,6,6"}}, "layer 2 must share KV .* same NoPE/RoPE kind"),
    ({"dsa": {"topk": 64, "n_heads": 4, "head_dim": 128, "norm_eps": 1e-6, "ssmax_scaling": False,
              "sharing": "shared,full"}}, "starting with 'full'"),
    ({"dsa": {"topk": 64, "n_heads": 4, "head_dim": 128, "norm_eps": 1e-6, "ssmax_scaling": False,
              "window": 3}}, "unknown dsa keys"),
    ({"dsa": {"n_heads": 4, "head_dim": 128, "norm_eps": 1e-6, "ssmax_scaling": False}}, "dsa has no index_topk"),
    ({"qk_nope_head_dim": None}, "needs MLA"),
])
def test_bad_mistral_large_4_params_is_one_clear_error(tmp_path: Path, over: dict, words: str) -> None:
    folder = _folder(tmp_path, dict(json.loads(ML4.read_text()), **over))
    with pytest.raises(KvplanInputError, match=words):
        kvplan.api.compile(folder, "", engine="vllm==0.34.0")
