"""The engine release as an input: --engine / compile(engine=...), the modelled range, versioned rules."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import kvplan.api
from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.engines import (
    SUPPORTED_ENGINES,
    kv_cache_dtypes_for,
    resolve_engine,
    tables_exact,
)
from kvplan.backends.vllm_rows import ENGINE_FEATURES
from kvplan.cli.main import app
from kvplan.errors import KvplanInputError
from tests.conftest import EXAMPLES

GPT_OSS = str(EXAMPLES / "gpt-oss-20b" / "config.json")
SKIP_SW = "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window"


def test_resolve_engine_default_and_range() -> None:
    assert str(resolve_engine(None)) == SUPPORTED_ENGINES[0]  # the default is the newest release
    assert resolve_engine("vllm==0.19.1").version == (0, 19, 1)
    assert SUPPORTED_ENGINES[0] == "vllm==0.34.0" and SUPPORTED_ENGINES[-1] == "vllm==0.18.0"  # newest first
    for spec in SUPPORTED_ENGINES:
        assert str(resolve_engine(spec)) == spec


@pytest.mark.parametrize("spec,match", [
    ("sglang==0.4.6", "vLLM only"), ("trtllm", "vLLM only"), ("vllm==0.1", "no data for vLLM 0.1.0"),
    ("vllm==0.17.9", "judges launch lines only"), ("vllm==0.35.0", "no data for vLLM 0.35.0"),
    ("vllm==abc", "cannot read"),
    ("vllmm==0.33", "unknown engine"),
])
def test_resolve_engine_rejects_unmodelled_or_malformed(spec: str, match: str) -> None:
    with pytest.raises(KvplanInputError, match=match):
        resolve_engine(spec)


def test_kv_dtype_list_per_release() -> None:
    assert "int8_per_token_head" not in kv_cache_dtypes_for(EngineVersion.parse("vllm==0.19.0"))
    assert "int8_per_token_head" in kv_cache_dtypes_for(EngineVersion.parse("vllm==0.20.0"))
    assert tables_exact(EngineVersion.parse("vllm==0.33.1")) and not tables_exact(EngineVersion.parse("vllm==0.32.0"))


def test_every_engine_feature_states_its_mapping() -> None:
    for f in ENGINE_FEATURES:
        assert f.source and f.versions and (f.introduced_by or f.fixed_or_removed_by), f.name


def test_compile_records_engine_and_keeps_signature() -> None:
    p = kvplan.api.compile(GPT_OSS, SKIP_SW, engine="vllm==0.19.0")
    assert (p.engine.name, p.engine.version) == ("vllm", "0.19.0")
    assert f"vllm=={kvplan.api.compile(GPT_OSS, SKIP_SW).engine.version}" == SUPPORTED_ENGINES[0]
    with pytest.raises(KvplanInputError):
        kvplan.api.compile(GPT_OSS, SKIP_SW, engine="sglang==0.4")


def test_flashinfer_skip_crash_only_before_fix() -> None:
    # Seed report on PR #39002 (merged 2026-04-11): the crash exists from skip layers (0.19) until the fix (0.20).
    codes = {v: [f.code for f in kvplan.api.compile(GPT_OSS, SKIP_SW, "b200", engine=v).findings]
             for v in ("vllm==0.19.0", "vllm==0.20.0", "vllm==0.33.0")}
    assert "KV704" in codes["vllm==0.19.0"]
    assert "KV704" not in codes["vllm==0.20.0"] and "KV704" not in codes["vllm==0.33.0"]


def test_calculate_kv_scales_history() -> None:
    flags = "--kv-cache-dtype fp8 --calculate-kv-scales"

    def codes(v: str) -> set[str]:
        return {f.code for f in kvplan.api.compile(GPT_OSS, flags, engine=v).findings}
    assert "KV002" in codes("vllm==0.33.0") and "KV003" not in codes("vllm==0.33.0")
    assert "KV003" in codes("vllm==0.20.0") and "KV002" not in codes("vllm==0.20.0")


def test_cli_engine_option_plan_and_explain() -> None:
    r = CliRunner().invoke(app, ["plan", GPT_OSS, "--engine", "vllm==0.19.0", "--gpu", "b200", *SKIP_SW.split()])
    assert r.exit_code == 1  # the crash is an error finding
    doc = json.loads(r.stdout)
    assert doc["engine"] == {"name": "vllm", "version": "0.19.0"}
    assert any(f["code"] == "KV704" for f in doc["findings"])
    r = CliRunner().invoke(app, ["explain", GPT_OSS, "--engine", "vllm==0.19.0", *SKIP_SW.split()],
                           env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert r.exit_code == 0 and "vllm 0.19.0" in r.stdout.lower()


@pytest.mark.parametrize("spec", ["sglang==0.4.6", "vllm==0.1", "vllm==x.y"])
def test_cli_engine_bad_value_one_line_exit_2(spec: str) -> None:
    r = subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", "plan", GPT_OSS,
                        "--engine", spec], capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"})
    assert r.returncode == 2 and r.stdout == ""
    err = r.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1 and "--engine" in err


# rule -> (ENGINE_FEATURES entry, whether the rule holds where the feature holds or where it does not)
_RULE_FEATURES = {
    "KV002": ("calculate_kv_scales", False), "KV003": ("calculate_kv_scales_deprecated", True),
    "KV104": ("kv_cache_dtype_skip_layers", True), "KV109": ("explicit_kv_cache_dtype_wins", False),
    "KV704": ("flashinfer_skip_layer_query_dtype_crash", True),
}


@pytest.mark.parametrize("code", sorted(_RULE_FEATURES))
def test_rule_version_ranges_agree_with_engine_features(code: str) -> None:
    from kvplan.backends.vllm_rows import engine_feature
    from kvplan.rules.base import get_rule
    rule = get_rule(code)
    feature, same = _RULE_FEATURES[code]
    assert rule.versions != "*" and rule.doc()["engine_versions"] == rule.versions
    for spec in SUPPORTED_ENGINES:
        ev = EngineVersion.parse(spec)
        assert ev.satisfies(rule.versions) == (engine_feature(feature).holds_for(ev) == same), (code, spec)


def test_rules_outside_their_release_do_not_run() -> None:
    # KV104 (skip-layers) does not exist in 0.18: nothing is skipped and it decides nothing.
    p = kvplan.api.compile(GPT_OSS, SKIP_SW, engine="vllm==0.18.0")
    assert all("KV104" not in lp.decided_by and not lp.skipped for lp in p.layers)
    assert {f.code for f in p.findings} >= {"KV004", "KV009"}


def test_default_engine_is_defined_once() -> None:
    """Every module reads the default release from kvplan.releases (releases.json): no string literal spells it."""
    import ast

    from kvplan.releases import DEFAULT_ENGINE, DEFAULT_ENGINE_VERSION
    from tests.conftest import ROOT

    spellings = {DEFAULT_ENGINE, DEFAULT_ENGINE_VERSION}
    found = []
    for path in sorted((ROOT / "kvplan").rglob("*.py")):
        tree = ast.parse(path.read_text())
        # A release table's keys (RELEASE_DATES) and a list of releases (ORACLE_VERIFIED_RELEASES) name
        # releases, not the default.
        keys = {id(k) for d in ast.walk(tree) if isinstance(d, ast.Dict) for k in d.keys}
        keys |= {id(e) for t in ast.walk(tree) if isinstance(t, ast.Tuple | ast.List) and len(t.elts) > 1
                 and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in t.elts) for e in t.elts}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in spellings and id(node) not in keys:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not found, "\n".join(found)
    assert EngineVersion() == EngineVersion.parse(DEFAULT_ENGINE) and str(EngineVersion()) == DEFAULT_ENGINE
