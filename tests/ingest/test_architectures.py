"""Architectures as vLLM keys them: no silent guesses (KV604, --strict), refusals, no transformers."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.ingest import architectures as vreg
from tests.conftest import ROOT, arch_config

CONFIGS = ROOT / "tests" / "data" / "vllm_oracle_arch" / "configs"


def _kv604(plan):
    return [f for f in plan.findings if f.code == "KV604"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", *args],
                          capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "200"})


def test_registry_counts_are_vllm_033s() -> None:
    reg = vreg.registry()
    assert reg["vllm_version"] == "0.33.0"
    assert reg["counts"] == {"text": 124, "multimodal": 127}


def test_verified_architecture_plans_without_kv604(tmp_path: Path) -> None:
    assert vreg.status("LlamaForCausalLM") == "verified"
    plan = kvplan.api.compile(arch_config(tmp_path, "LlamaForCausalLM__default"), "--kv-cache-dtype fp8")
    assert plan.model.architecture == "LlamaForCausalLM" and not _kv604(plan)


def _unverified_config(tmp_path: Path) -> tuple[str, Path]:
    """An architecture the oracle has not verified (vLLM's class could not be built on the CPU oracle)
    whose default config kvplan plans; which one changes as coverage grows. Once every registered
    architecture is verified: a fine-tune's own architecture name that vLLM's registry does not list,
    whose model class its auto_map names (vLLM's Transformers backend builds it under
    --trust-remote-code). Plan it with --trust-remote-code."""
    cov = vreg.coverage()["architectures"]
    for arch in sorted(a for a, e in cov.items() if e["status"] == "oracle-error"):
        if (CONFIGS / f"{arch}__default.json").is_file():
            try:
                kvplan.api.compile(CONFIGS / f"{arch}__default.json", "--trust-remote-code --kv-cache-dtype auto")
            except KvplanInputError:
                continue
            return arch, arch_config(tmp_path, f"{arch}__default")
    arch = "LlamaForCausalLMWithAdapters"
    assert not vreg.is_registered(arch)
    return arch, arch_config(tmp_path, "LlamaForCausalLM__default", architectures=[arch],
                             auto_map={"AutoModelForCausalLM": f"modeling_adapters.{arch}"})


def test_unverified_architecture_warns_and_names_keys(tmp_path: Path) -> None:
    arch, cfg = _unverified_config(tmp_path)
    assert vreg.status(arch) != "verified"
    plan = kvplan.api.compile(cfg, "--trust-remote-code --kv-cache-dtype auto")
    (f,) = _kv604(plan)
    assert f.severity.value == "warning"
    assert arch in f.message and "keys read:" in f.message and "num_attention_heads" in f.message
    strict = kvplan.api.compile(cfg, "--trust-remote-code --kv-cache-dtype auto", strict=True)
    assert [x.severity.value for x in _kv604(strict)] == ["error"]


def test_registered_but_unverified_architecture_names_its_status(tmp_path: Path, monkeypatch) -> None:
    """Every registered architecture is verified today; one the oracle could not answer says why (KV604)."""
    cov = copy.deepcopy(vreg.coverage())
    cov["architectures"]["LlamaForCausalLM"]["status"] = "oracle-error"
    monkeypatch.setattr(vreg, "coverage", lambda: cov)
    (f,) = _kv604(kvplan.api.compile(arch_config(tmp_path, "LlamaForCausalLM__default"), "--kv-cache-dtype auto"))
    assert f.severity.value == "warning"
    assert "LlamaForCausalLM is not verified against vLLM 0.33.0 (oracle-error; " in f.message


def test_unused_geometry_keys_are_named_even_for_a_verified_architecture(tmp_path: Path) -> None:
    p = arch_config(tmp_path, "LlamaForCausalLM__default", swa_layers=[0, 2], global_attn_layer_pattern="LLG",
             local_num_key_value_heads=2)
    (f,) = _kv604(kvplan.api.compile(p, "--kv-cache-dtype auto"))
    for k in ("swa_layers", "global_attn_layer_pattern", "local_num_key_value_heads"):
        assert k in f.message
    assert "NOT used" in f.message


def test_unknown_layer_type_is_said_and_planned_as_full_attention(tmp_path: Path) -> None:
    cfg = json.loads((CONFIGS / "Gemma3ForCausalLM__default.json").read_text())
    cfg["layer_types"][1] = "hyper_attention"
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    plan = kvplan.api.compile(p, "--kv-cache-dtype auto")
    assert plan.layers[1].kind == "full_attention"
    (f,) = _kv604(plan)
    assert "layer_types[1] = 'hyper_attention'" in f.message


def test_cli_strict_makes_kv604_fail_the_run(tmp_path: Path) -> None:
    p = str(_unverified_config(tmp_path)[1])  # not verified (no oracle answer)
    ok = _cli("plan", p, "--trust-remote-code", "--kv-cache-dtype", "auto")
    assert ok.returncode == 0, ok.stderr
    assert any(f["code"] == "KV604" and f["severity"] == "warning" for f in json.loads(ok.stdout)["findings"])
    strict = _cli("plan", p, "--strict", "--trust-remote-code", "--kv-cache-dtype", "auto")
    assert strict.returncode == 1
    assert any(f["code"] == "KV604" and f["severity"] == "error" for f in json.loads(strict.stdout)["findings"])
    doc = _cli("rule", "KV604")
    assert doc.returncode == 0 and "architecture-not-verified" in doc.stdout


def test_architecture_vllm_refuses_is_refused_with_its_reason(tmp_path: Path) -> None:
    p = arch_config(tmp_path, "MiniMaxForCausalLM__default")
    with pytest.raises(KvplanInputError, match=r"MiniMaxForCausalLM was supported in vLLM until v0\.23\.0"):
        kvplan.api.compile(p, "--kv-cache-dtype auto")
    r = _cli("plan", str(p))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "not supported anymore" in r.stderr
    # The release that still built it plans it.
    plan = kvplan.api.compile(p, "--kv-cache-dtype auto", engine="vllm==0.23.0")
    assert plan.model.architecture == "MiniMaxForCausalLM"


def test_refused_architecture_that_the_transformers_backend_builds_still_plans(tmp_path: Path) -> None:
    assert vreg.refusal("PersimmonForCausalLM") is None  # vLLM builds it through its Transformers backend
    plan = kvplan.api.compile(arch_config(tmp_path, "PersimmonForCausalLM__default"), "--kv-cache-dtype auto")
    assert plan.model.architecture == "PersimmonForCausalLM"
    # ... and the oracle measured it exact (tests/planner/test_vllm_arch_parity.py), so no KV604.
    assert vreg.status("PersimmonForCausalLM") == "verified" and not _kv604(plan)


def test_architecture_from_model_type_when_architectures_is_absent(tmp_path: Path) -> None:
    cfg = arch_config(tmp_path, "Qwen3ForCausalLM__default", architectures=None)
    plan = kvplan.api.compile(cfg, "--kv-cache-dtype auto")
    assert plan.model.architecture == "Qwen3ForCausalLM"


def test_base_install_plans_without_transformers(tmp_path: Path) -> None:
    """A config that omits keys gets its config class's defaults from data, transformers blocked."""
    cfg = json.loads((CONFIGS / "Qwen3ForCausalLM__default.json").read_text())
    for k in ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim"):
        cfg.pop(k, None)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    code = (
        "import sys, json; sys.modules['transformers'] = None\n"
        "import kvplan.api\n"
        f"p = kvplan.api.compile({str(p)!r}, '--kv-cache-dtype auto')\n"
        "print(json.dumps([p.model.num_layers, p.layers[0].num_kv_heads, p.layers[0].head_size]))\n"
        "assert 'transformers' not in sys.modules or sys.modules['transformers'] is None\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    d = vreg.config_defaults("qwen3")
    heads = d["num_attention_heads"]
    assert json.loads(r.stdout) == [d["num_hidden_layers"], d.get("num_key_value_heads", heads),
                                    d.get("head_dim", d["hidden_size"] // heads)]


def test_every_registered_model_type_is_known_without_transformers() -> None:
    reg = vreg.registry()
    for entry in reg["architectures"].values():
        for mt in entry["transformers_model_types"]:
            assert vreg.known_model_type(mt)


# ----------------------------------------------------------------------------- configs vLLM cannot load
def _foreign(tmp_path: Path, **over: object) -> Path:
    """A Qwen2-shaped language model under a wrapper model_type and architecture nobody ships."""
    cfg = json.loads((CONFIGS / "Qwen2ForCausalLM__default.json").read_text())
    doc = {"architectures": ["AcmeChatForConditionalGeneration"], "model_type": "acme_chat",
           "text_config": {**cfg, "model_type": "qwen2"}, **over}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(doc))
    return p


def _one_line_refusal(*args: str) -> str:
    r = _cli("plan", *args)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    return line


def _sub(tmp_path: Path, name: str) -> Path:
    (tmp_path / name).mkdir()
    return tmp_path / name


def _mimo(tmp_path: Path, **over: object) -> Path:
    """MiMo-7B's language model (model_type mimo: the checkpoint ships its own config class, MiMoConfig)."""
    return arch_config(tmp_path, "MiMoForCausalLM__default", **over)


_MIMO_AUTO_MAP = {"AutoConfig": "configuration_mimo.MiMoConfig",
                  "AutoModelForCausalLM": "modeling_mimo.MiMoForCausalLM"}


def test_model_type_vllm_cannot_load_is_refused_with_vllms_reason(tmp_path: Path) -> None:
    """A model_type transformers 5.20.2 and vLLM's config classes do not know, in a config without an
    auto_map: vLLM 0.33 fails loading the config, whatever the architecture (measured with the oracle:
    registered MiMoForCausalLM, deepseek_ref under DeepseekV4ForCausalLM, an unregistered one)."""
    for path, model_type in ((_foreign(tmp_path), "acme_chat"), (_mimo(_sub(tmp_path, "mimo")), "mimo"),
                             (_mimo(_sub(tmp_path, "ref"), model_type="deepseek_ref"), "deepseek_ref")):
        line = _one_line_refusal(str(path), "--trust-remote-code", "--engine", "vllm==0.33.0")
        assert "vLLM 0.33.0 cannot load this config" in line and "transformers 5.20.2" in line
        # The default release (0.34.0) refuses it as well, naming itself and the transformers its users get.
        line = _one_line_refusal(str(path), "--trust-remote-code")
        assert "vLLM 0.34.0 cannot load this config" in line and "transformers 5.22.2" in line
        assert (f"The checkpoint you are trying to load has model type `{model_type}` but Transformers does not "
                "recognize this architecture") in line and "auto_map" in line


def test_checkpoint_code_without_trust_remote_code_is_refused_naming_the_flag(tmp_path: Path) -> None:
    """With the auto_map the checkpoint publishes, vLLM loads MiMo's config class only under
    --trust-remote-code ("contains custom code which must be executed ... trust_remote_code=True");
    with the flag kvplan plans from config.json."""
    p = _mimo(tmp_path, auto_map=_MIMO_AUTO_MAP)
    line = _one_line_refusal(str(p), "--kv-cache-dtype", "fp8")
    assert "refuses this config without --trust-remote-code" in line and "model_type 'mimo'" in line
    assert "trust_remote_code=True" in line and "Pass --trust-remote-code" in line
    plan = kvplan.api.compile(p, "--trust-remote-code --kv-cache-dtype fp8")
    assert plan.model.architecture == "MiMoForCausalLM" and plan.kv_cache_dtype == "fp8"
    # A model_type transformers knows: vLLM uses transformers' own class and needs no flag (measured).
    known = arch_config(_sub(tmp_path, "qwen2"), "Qwen2ForCausalLM__default", auto_map=_MIMO_AUTO_MAP)
    assert kvplan.api.compile(known, "--kv-cache-dtype auto").model.architecture == "Qwen2ForCausalLM"


def test_architecture_neither_registered_nor_in_transformers_is_refused(tmp_path: Path) -> None:
    """Step-3.7-Flash published as Step3p7ForCausalLM: model_type step3p7 loads (vLLM's config class),
    but vLLM registers only Step3p7ForConditionalGeneration and transformers has no such model class:
    "Model architectures ['Step3p7ForCausalLM'] are not supported for now" (measured)."""
    rel = vreg.modelled_release("0.33.0")
    assert rel.loads_model_type("step3p7") and not rel.registers("Step3p7ForCausalLM")
    assert not rel.transformers_builds("Step3p7ForCausalLM") and rel.transformers_builds("LlamaForCausalLM")
    p = arch_config(tmp_path, "Step3p7ForConditionalGeneration__default", architectures=["Step3p7ForCausalLM"])
    line = _one_line_refusal(str(p), "--trust-remote-code", "--engine", "vllm==0.33.0")
    assert "Model architectures ['Step3p7ForCausalLM'] are not supported for now" in line
    assert "not in vLLM 0.33.0's model registry," in line and "transformers 5.20.2 has no model class" in line
    # An architecture transformers exports is left to vLLM's Transformers backend (not refused here).
    ok = arch_config(_sub(tmp_path, "t"), "LlamaForCausalLM__default", architectures=["BioGptForCausalLM"])
    assert not vreg.registry()["refused"].get("BioGptForCausalLM") and not rel.registers("BioGptForCausalLM")
    assert kvplan.api.compile(ok).model.architecture == "BioGptForCausalLM"


def test_what_kvplan_cannot_tell_vllm_refuses_stays_a_kv604_warning(tmp_path: Path) -> None:
    """An auto_map naming the model class, under --trust-remote-code: vLLM's Transformers backend runs
    the checkpoint's own code, which kvplan cannot read: planned from config.json, KV604."""
    remote = _foreign(tmp_path, auto_map={"AutoConfig": "configuration_acme.AcmeConfig",
                                          "AutoModelForCausalLM": "modeling_acme.AcmeChatForConditionalGeneration"})
    assert [f.severity.value for f in _kv604(kvplan.api.compile(remote, "--trust-remote-code"))] == ["warning"]
    line = _one_line_refusal(str(remote))
    assert "refuses this config without --trust-remote-code: model_type 'acme_chat'" in line
    # The same auto_map without the model class: nothing for vLLM's Transformers backend to build.
    config_only = _foreign(_sub(tmp_path, "c"), auto_map={"AutoConfig": "configuration_acme.AcmeConfig"})
    assert "are not supported for now" in _one_line_refusal(str(config_only), "--trust-remote-code")


def test_model_types_are_the_modelled_releases() -> None:
    rel = vreg.modelled_release("0.33.0")
    data = json.loads((ROOT / "kvplan" / "data" / "transformers_model_types.json").read_text())
    assert data["generated_by"] == "scripts/oracle/transformers_model_types.py"
    assert rel.vllm_version == vreg.vllm_version() == data["vllm_version"]
    assert rel.transformers_version == vreg.registry()["transformers_version"] == data["transformers_version"]
    assert rel.loads_model_type("exaone4") and rel.loads_model_type("deepseek_v4") and not rel.loads_model_type("acme")


def test_lint_takes_trust_remote_code_from_the_launch(tmp_path: Path) -> None:
    """A launch of a remote-code checkpoint without --trust-remote-code: vLLM would not start it."""
    model = _sub(tmp_path, "mimo")
    _mimo(model, auto_map=_MIMO_AUTO_MAP)
    (tmp_path / "a.sh").write_text("#!/bin/sh\nvllm serve ./mimo --kv-cache-dtype auto\n")
    (tmp_path / "b.sh").write_text("#!/bin/sh\nvllm serve ./mimo --kv-cache-dtype auto --trust-remote-code\n")
    r = subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", "lint", "a.sh", "b.sh",
                        "--format", "json"], capture_output=True, text=True, cwd=tmp_path,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "NO_COLOR": "1"})
    findings = json.loads(r.stdout)["findings"]
    refused = [f for f in findings if "without --trust-remote-code" in f["message"]]
    assert [f["location"]["path"] for f in refused] == ["a.sh"], findings
