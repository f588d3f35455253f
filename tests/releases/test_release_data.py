"""kvplan's per-release vLLM data: generated from every release's wheel, stored once, read lazily."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from kvplan.releases import DATA_DIR, find_release, known_releases, option_history, release
from tests.conftest import DATA, ROOT

INDEX = json.loads((DATA_DIR / "releases.json").read_text())


def test_every_minor_release_from_0_6_to_the_newest_is_known() -> None:
    versions = [r.version for r in known_releases()]
    assert versions[0] == "0.6.0" and versions[-1] == "0.34.0"  # the newest on the index at generation
    for minor in range(6, 35):
        assert f"0.{minor}.0" in versions
    assert versions == sorted(versions, key=lambda v: release(v).key)


def test_tables_are_content_addressed_stored_once_and_used() -> None:
    used = {(kind, e[kind]) for e in INDEX["releases"].values() for kind in ("options", "registry", "facts")}
    for kind in ("options", "registry", "facts"):
        files = sorted((DATA_DIR / kind).glob("*.json"))
        assert files
        for p in files:
            assert hashlib.sha256(p.read_bytes()).hexdigest()[:16] == p.stem, p
            assert (kind, p.stem) in used, f"{p} belongs to no release"
    for entry in INDEX["releases"].values():  # where each table was read from
        assert entry["wheel"].startswith("vllm-") and len(entry["wheel_sha256"]) == 64


def test_a_patch_without_its_own_tables_reads_its_minor_release() -> None:
    assert find_release((0, 19, 1)) is not None and find_release((0, 19, 1)).minor == "0.19"
    assert find_release((0, 5, 4)) is None and find_release((0, 99, 0)) is None


def test_stubbed_parser_agrees_with_the_real_parser_0_33() -> None:
    """0.33.0's argv cases, once through vLLM 0.33.0 imported with all its dependencies, once through the
    table kvplan generated (its serve module's three missing web-server imports stubbed): same answers."""
    real = json.loads((DATA / "vllm_serve_argv_cases-0.33.0.json").read_text())["cases"]
    ours = {tuple(c["argv"]): c for c in json.loads((DATA / "vllm_argv_cases" / "0.33.0.json").read_text())["cases"]}
    for c in real:
        o = ours[tuple(c["argv"])]
        assert o["exit"] == c["exit"], c["argv"]
        if c["exit"] == 2:
            assert o["error"] == c["error"], c["argv"]
        else:
            assert o["namespace"] == {k: v for k, v in c["namespace"].items() if k != "model_tag"}, c["argv"]
    assert len(release("0.33.0").options.options) == 321


def test_stubbed_parser_agrees_with_the_real_parser_0_34() -> None:
    """vLLM 0.34.0 read in a venv where it imports with nothing stubbed: the same option table (same content
    id), the same `--kv-cache-dtype` values and the same answers to every argv case."""
    real = json.loads((DATA / "vllm_parser_real" / "0.34.0.json").read_text())
    assert real["stubbed_modules"] == []
    assert INDEX["releases"]["0.34.0"]["options"] == real["options_id"]
    assert list(release("0.34.0").kv_cache_dtypes) == real["kv_cache_dtypes"]
    ours = json.loads((DATA / "vllm_argv_cases" / "0.34.0.json").read_text())["cases"]
    assert ours == real["cases"]


def test_release_reads_only_the_tables_asked_for() -> None:
    code = (
        "import pathlib\n"
        "seen = []\n"
        "orig = pathlib.Path.read_text\n"
        "def spy(self, *a, **k):\n"
        "    seen.append(self.parent.name + '/' + self.name)\n"
        "    return orig(self, *a, **k)\n"
        "pathlib.Path.read_text = spy\n"
        "from kvplan.releases import release\n"
        "r = release('0.28.0'); r.options; r.kv_cache_dtypes\n"
        "print('\\n'.join(s for s in seen if s.startswith(('vllm/', 'options/', 'facts/', 'registry/'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    e = INDEX["releases"]["0.28.0"]
    assert sorted(out.stdout.split()) == sorted(
        ["vllm/releases.json", f"options/{e['options']}.json", f"facts/{e['facts']}.json"])


@pytest.mark.parametrize("version", ["0.6.0", "0.18.0", "0.28.0", "0.34.0"])
def test_release_answers_what_it_accepts_and_decides(version: str) -> None:
    r = release(version)
    assert "auto" in r.kv_cache_dtypes and "fp8" in r.kv_cache_dtypes
    assert "fp8" in r.quantization_methods
    assert "LlamaForCausalLM" in r.architectures
    assert r.attention_backends
    assert r.accepts("--kv-cache-dtype") and r.accepts("--tensor-parallel-size")
    assert r.parser_default("gpu_memory_utilization") in (0.9, 0.92, None)


def test_history_knows_when_a_flag_went() -> None:
    h = option_history("--num-scheduler-steps")
    assert h is not None and h.first == "0.6.0" and h.removed_in is not None
    assert option_history("--no-such-flag") is None
