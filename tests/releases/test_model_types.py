"""The config model types each release loads (kvplan/data/vllm/model_types.json, scripts/gen_vllm_release.py):
a config is refused or planned as the release planned loads it, and the refusal names that release."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.ingest import architectures as vreg
from kvplan.releases import known_releases, release
from tests.conftest import CORPUS, ROOT

REFERENCE = json.loads((ROOT / "kvplan" / "data" / "transformers_model_types.json").read_text())
KIMI_K3 = ROOT / "tests" / "data" / "published_configs" / "Kimi-K3" / "config.json"


def test_every_planned_release_has_its_model_types() -> None:
    planned = [r for r in known_releases() if r.key >= (0, 18)]
    assert planned and all(r.config_loading is not None for r in planned)
    assert release("0.17.0").config_loading is None  # launch lines only: no plan, no config loading


def test_static_reading_equals_what_the_033_oracle_venv_imported() -> None:
    """0.33.0 with the transformers its requirement resolves to (5.20.2, the oracle venv's): the tables read
    from the wheels equal those scripts/oracle/transformers_model_types.py took from the imported modules."""
    got = release("0.33.0").config_loading
    assert got is not None and got.transformers_version == REFERENCE["transformers_version"] == "5.20.2"
    assert got.transformers_requirement == "<5.21.0,>=5.16.1"
    assert got.vllm_config_model_types == frozenset(REFERENCE["vllm_config_model_types"])
    assert got.transformers_model_types == frozenset(REFERENCE["transformers_model_types"])
    registered = {a for a in release("0.33.0").architectures if a in REFERENCE["transformers_model_classes"]}
    assert registered and registered <= got.transformers_model_classes


def test_034_loads_what_its_own_config_registry_and_transformers_add() -> None:
    r33, r34 = vreg.modelled_release("0.33.0"), vreg.modelled_release("0.34.0")
    assert r34.vllm_version == "0.34.0" and r34.transformers_version == "5.22.2"
    for model_type in ("kimi_k31", "lfm3"):  # vllm/transformers_utils/config.py::_CONFIG_REGISTRY of 0.34
        assert r34.loads_model_type(model_type) and not r33.loads_model_type(model_type)
    assert r34.loads_model_type("mistral_large4") and not r33.loads_model_type("mistral_large4")  # transformers 5.22
    # Not loaded by either: the checkpoint ships its own config class (auto_map, --trust-remote-code).
    assert not r34.loads_model_type("minimax_m3") and not r34.loads_model_type("bailing_moe_v2_5")


def _kimi_k31(tmp_path: Path) -> Path:
    """Kimi K3's published config under model_type kimi_k31 (vLLM 0.34's _CONFIG_REGISTRY maps it to the same
    KimiK3Config), without the auto_map: only vLLM's own config class can load it; the architecture
    (KimiK3ForConditionalGeneration) is registered by both releases, so only config loading differs."""
    cfg = json.loads(KIMI_K3.read_text())
    cfg["model_type"] = "kimi_k31"
    cfg.pop("auto_map")
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p


def test_034_only_model_type_plans_at_034_and_is_refused_at_033(tmp_path: Path) -> None:
    p = _kimi_k31(tmp_path)
    plan = kvplan.api.compile(p, "--kv-cache-dtype auto", engine="vllm==0.34.0")
    assert plan.model.architecture == "KimiK3ForConditionalGeneration" and plan.layers
    with pytest.raises(KvplanInputError) as e:
        kvplan.api.compile(p, "--kv-cache-dtype auto", engine="vllm==0.33.0")
    assert ("vLLM 0.33.0 cannot load this config: model_type 'kimi_k31' is unknown to transformers 5.20.2 "
            "(what `pip install vllm==0.33.0` installs)") in str(e.value)


def test_cli_refusal_is_one_line_naming_the_planned_release(tmp_path: Path) -> None:
    p = _kimi_k31(tmp_path)
    r = subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", "plan", str(p),
                        "--engine", "vllm==0.33.0"], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and r.stdout == "", r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "vLLM 0.33.0 cannot load this config: model_type 'kimi_k31'" in line


T5 = CORPUS / "t5-small-summarization-finetune" / "config.json"


@pytest.mark.parametrize("version,measured", [("0.33.0", ""), ("0.34.0", " (measured with vLLM 0.33.0)"),
                                              ("0.28.0", " (measured with vLLM 0.33.0)")])
def test_t5_refusal_names_the_planned_releases_registry(version: str, measured: str) -> None:
    with pytest.raises(KvplanInputError) as e:
        kvplan.api.compile(T5, "--kv-cache-dtype auto", engine=f"vllm=={version}")
    msg = str(e.value)
    assert f"vLLM {version} refuses architecture T5ForConditionalGeneration" in msg
    assert (f"Model architecture T5ForConditionalGeneration is not in vLLM {version}'s model registry, and its "
            f"Transformers-backend fallback fails{measured}:") in msg


def test_lint_loads_the_config_as_the_pinned_release_does(tmp_path: Path) -> None:
    """The same checkpoint launched by the default release (0.34) and by an image pinned to 0.33: only the
    0.33 launch gets the refusal, naming 0.33."""
    _kimi_k31(_model_dir(tmp_path))
    (tmp_path / "a.sh").write_text("#!/bin/sh\nvllm serve ./k31 --kv-cache-dtype auto\n")
    (tmp_path / "docker-compose.yml").write_text(
        'services:\n  v:\n    image: vllm/vllm-openai:v0.33.0\n    command: ["--model", "./k31", "--kv-cache-dtype", '
        '"auto"]\n')
    r = subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", "lint", "a.sh",
                        "docker-compose.yml", "--format", "json"], capture_output=True, text=True, cwd=tmp_path,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "NO_COLOR": "1"})
    findings = json.loads(r.stdout)["findings"]
    refused = [f for f in findings if "cannot load this config" in f["message"]]
    assert [f["location"]["path"] for f in refused] == ["docker-compose.yml"], findings
    assert "vLLM 0.33.0 cannot load this config: model_type 'kimi_k31'" in refused[0]["message"]


def _model_dir(tmp_path: Path) -> Path:
    (tmp_path / "k31").mkdir()
    return tmp_path / "k31"
