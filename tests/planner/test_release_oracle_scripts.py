"""The per-release oracle harness stays usable: its patches apply, its answers round-trip.

The oracle itself needs a vLLM interpreter and runs by hand (scripts/oracle/release_oracle.sh); these
checks need neither vLLM nor the network.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
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


# ----------------------------------------------------------------------------- scripts/add_vllm_release.py
def _add_release():
    if "add_vllm_release" in sys.modules:
        return sys.modules["add_vllm_release"]
    spec = importlib.util.spec_from_file_location("add_vllm_release", ROOT / "scripts" / "add_vllm_release.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["add_vllm_release"] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


KNOWN = ("0.33.0", "0.34.0")
CORPUS_MODELS = ("Qwen3-8B", "gpt2-saved-copy")


def _args(tmp_path: Path, *argv: str):
    add = _add_release()
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    (venv / "bin" / "python").write_text("")
    return add, add.parse_args([*argv, "--oracle-venv", str(venv), "--python", str(venv / "bin" / "python")])


@pytest.mark.parametrize("argv,says", [
    (["0.35"], "is not a release number like 0.35.0"),
    (["0.35.0", "--previous", "0.99.0"], "--previous 0.99.0: kvplan has no tables for it"),
    (["0.33.0", "--previous", "0.34.0"], "--previous 0.34.0 is not older than 0.33.0"),
    (["0.10.0"], "no known release before 0.10.0 to compare with"),
    (["0.35.0", "--no-generate"], "--no-generate: kvplan has no tables for 0.35.0 yet"),
    (["0.35.0", "--cases", "auto", "fp16"], "--cases fp16: unknown flag set"),
    (["0.35.0", "--only", "Qwen3-8B", "NoSuchModel"], "--only NoSuchModel: not a corpus model"),
])
def test_add_release_argument_errors_are_one_line(tmp_path: Path, argv: list[str], says: str) -> None:
    add, a = _args(tmp_path, *argv)
    with pytest.raises(add.InputError) as e:
        add.check_args(a, KNOWN, CORPUS_MODELS)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_add_release_without_the_oracle_venv_names_the_setup_command(tmp_path: Path) -> None:
    add = _add_release()
    python = tmp_path / "python"
    python.write_text("")
    a = add.parse_args(["0.35.0", "--oracle-venv", str(tmp_path / "none"), "--python", str(python)])
    with pytest.raises(add.InputError, match=r"no oracle interpreter at .*none/bin/python: build it with "
                                             r"`ORACLE_VENV=.*none scripts/oracle/setup_venv.sh`, or pass --no-oracle"):
        add.check_args(a, KNOWN, CORPUS_MODELS)
    add.check_args(add.parse_args(["0.35.0", "--no-oracle", "--python", str(python)]), KNOWN, CORPUS_MODELS)


def test_add_release_cli_exits_2_with_one_line(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "add_vllm_release.py"), "0.34.0", "--cases", "fp16"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == ["add_vllm_release: error: --cases fp16: unknown flag set "
                                             "(known: auto bf16 fp8 fp8-skip-0-2 fp8-skip-sw int8pth)"]


def test_source_diff_counts_lines_per_file_sorted() -> None:
    add = _add_release()
    old = {"vllm/platforms/cuda.py": ["a", "b", "c"], "vllm/v1/attention/backends/x.py": ["x"],
           "vllm/platforms/rocm.py": ["same"]}
    new = {"vllm/platforms/cuda.py": ["a", "B", "c", "d"], "vllm/v1/attention/backends/a.py": ["1", "2"],
           "vllm/platforms/rocm.py": ["same"]}
    got = add.diff_sources(old, new)
    assert [(c.path, c.state, c.added, c.removed) for c in got] == [
        ("vllm/platforms/cuda.py", "changed", 2, 1),
        ("vllm/v1/attention/backends/a.py", "added", 2, 0),
        ("vllm/v1/attention/backends/x.py", "removed", 0, 1)]
    section = add.source_section("Backend capability code touched", "intro", got)
    assert "3 files, 6 changed lines." in section
    assert "| `vllm/platforms/cuda.py` | changed | +2 | -1 |" in section
    assert add.source_section("T", "intro", [])[-2] == "No change."


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="t" name="test_p[0.35.0-B-fp8]">
  <failure message="AssertionError: L3 kv_cache_dtype&#10;assert 'fp8' == 'auto'">x</failure></testcase>
<testcase classname="t" name="test_p[0.35.0-A-auto]" />
<testcase classname="t" name="test_p[0.35.0-C-auto]">
  <skipped message="the oracle could not run vLLM 0.35.0 here" /></testcase>
</testsuite></testsuites>"""


def test_parity_results_list_every_mismatch_and_skip() -> None:
    add = _add_release()
    results = add.parse_junit(JUNIT)
    assert [(r.test_id, r.outcome) for r in results] == [
        ("test_p[0.35.0-A-auto]", "passed"), ("test_p[0.35.0-B-fp8]", "failed"), ("test_p[0.35.0-C-auto]", "skipped")]
    lines = add.parity_lines(results, "corpus cases")
    assert lines[0] == "3 corpus cases: 1 match, 1 mismatch, 1 skipped (the oracle could not run the case here)."
    assert "- `test_p[0.35.0-B-fp8]`: AssertionError: L3 kv_cache_dtype" in lines
    assert "- `test_p[0.35.0-C-auto]`: the oracle could not run vLLM 0.35.0 here" in lines


def test_answers_compared_with_the_previous_release() -> None:
    add = _add_release()
    run = {"error": None, "mode": "model", "model_dtype": "bfloat16",
           "layers": [[0, 3, "fp8", "FP8_PER_TENSOR", None, 8, 128]]}
    old = {"M": {"auto": run, "fp8": run, "int8pth": run}, "N": {"auto": run}}
    new = {"M": {"auto": run, "fp8": {**run, "layers": [[0, 3, "auto", "NONE", None, 8, 128]]},
                 "int8pth": {**run, "error": {"message": "invalid choice: 'int8_per_token_head'"}}}}
    same, differ, limited = add.compare_answers(old, new, ("0.33.0", "0.34.0"))
    assert same == 1 and limited == []
    assert differ == ["- `M` / `fp8`: per-layer KV caches differ (dtype, quant mode, window or geometry)",
                      "- `M` / `int8pth`: now refused: invalid choice: 'int8_per_token_head'"]
    # An answer the oracle machine could not give is not a difference of the release.
    inspected = {**run, "error": {"message": "Model architectures ['X'] failed to be inspected."}}
    same, differ, limited = add.compare_answers({"Q": {"auto": inspected}}, {"Q": {"auto": run}}, ("0.33.0", "0.34.0"))
    assert (same, differ) == (0, [])
    assert limited == ["- `Q` / `auto`: the oracle could not run it here (0.33.0: failed to be inspected)"]


def test_report_is_deterministic_and_says_what_was_not_run() -> None:
    add = _add_release()
    old, new = add.read_release("0.33.0"), add.read_release("0.34.0")
    backend = [add.FileChange("vllm/v1/attention/backends/flash_attn.py", "changed", 40, 2)]
    parity = [add.Step("kvplan against the corpus answers", "ran", "",
                       ["1 corpus cases: 1 match, 0 mismatch, 0 skipped"])]
    inp = add.ReportInput("0.34.0", "0.33.0", old, new, backend, [], None, parity)
    text = add.build_report(inp)
    assert text == add.build_report(inp)
    assert "## Backend capability code touched" in text
    assert "| `vllm/v1/attention/backends/flash_attn.py` | changed | +40 | -2 |" in text
    assert "Not run (--no-oracle)" in text and "### kvplan against the corpus answers: ran" in text
    assert "- removed (1): `fp_quant`" in text  # quantization methods
    steps = [add.Step("Capacity oracle (scripts/oracle/capacity_oracle.py)", "skipped", "no release option yet")]
    with_oracle = add.build_report(add.ReportInput("0.34.0", "0.33.0", old, new, backend, [], steps, parity))
    assert "### Capacity oracle (scripts/oracle/capacity_oracle.py): not run" in with_oracle
    assert "Not run (--no-oracle)" not in with_oracle


def test_oracle_hooks_pass_the_release_only_to_scripts_that_take_it(tmp_path: Path) -> None:
    add = _add_release()
    aware, plain = tmp_path / "aware.py", tmp_path / "plain.py"
    aware.write_text("import argparse\np = argparse.ArgumentParser()\np.add_argument('--cases')\n"
                     "p.add_argument('--release')\np.add_argument('--site')\np.parse_args()\n")
    plain.write_text("import argparse\np = argparse.ArgumentParser()\np.add_argument('--cases')\np.parse_args()\n")
    site = tmp_path / "vllm-0.35.0"
    cmd = add.release_aware_command(aware, sys.executable, dict(os.environ), "0.35.0", site, ["--cases", "c.json"])
    assert cmd == [sys.executable, str(aware), "--cases", "c.json", "--release", "0.35.0", "--site", str(site)]
    assert add.release_aware_command(plain, sys.executable, dict(os.environ), "0.35.0", site, []) is None
    assert add.release_aware_command(tmp_path / "absent.py", sys.executable, dict(os.environ), "0.35.0", site,
                                     []) is None


def test_report_lists_the_config_model_types_a_release_loads_or_drops() -> None:
    add = _add_release()
    old, new = add.read_release("0.33.0"), add.read_release("0.34.0")
    lines = add.model_type_changes(old["model_types"], new["model_types"])
    assert ("- added (7): `kimi_k31`, `lfm3`, `lfm3_audio`, `lfm3_vl`, `ming_v3_asr`, `nemo_speechlm`, "
            "`ricursive`") in lines
    assert "transformers 5.20.2 (`<5.21.0,>=5.16.1`) -> 5.22.2 (`<5.23.0,>=5.16.1`):" in lines
    assert any(x.startswith("- added (17): `flint`") and "`mistral_large4`" in x for x in lines)
    assert add.model_type_changes(None, new["model_types"])[2].startswith("Not compared")
