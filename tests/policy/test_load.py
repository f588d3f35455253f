"""Policy files: validation errors name the file and line; pyproject [tool.kvplan] policy discovery."""
from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.errors import KvplanInputError
from kvplan.policy import find_pyproject_policy, load_policy, policy_from_text
from tests.emit.helpers import ROOT

GOOD = """\
version: 1
name: p
rules:
  - code: KV901
    name: fp8-kv
    reason: halve KV memory
    set: {kv_cache_dtype: fp8}
"""


def _error(text: str) -> str:
    with pytest.raises(KvplanInputError) as e:
        policy_from_text(text, "policy.yaml")
    msg = str(e.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("text,expected", [
    (GOOD.replace("kv_cache_dtype: fp8", "kv_cache_dtype: fp9"),
     "policy.yaml:7: rules[0].set.kv_cache_dtype: invalid kv_cache_dtype 'fp9'"),
    (GOOD.replace("    set:", "    sett:"),
     "policy.yaml:7: rules[0]: unknown key 'sett'; did you mean 'set'?"),
    (GOOD.replace("    reason: halve KV memory\n", ""),
     "policy.yaml:4: rules[0]: missing required key 'reason'"),
    (GOOD.replace("KV901", "KV995"),
     "policy.yaml:4: rules[0].code: policy code 'KV995' must be KV900-KV979"),
    (GOOD.replace("name: fp8-kv", "name: FP8 KV"),
     "policy.yaml:5: rules[0].name: name 'FP8 KV' must be kebab-case"),
    (GOOD + "  - {code: KV901, name: again, reason: r, set: {kv_cache_dtype: fp8}}\n",
     "policy.yaml:8: rules[1].code: code KV901 is used twice (fp8-kv and again)"),
    (GOOD + "  - {code: KV902, name: s, reason: r, select: {kind: slidng_attention}, set: {kv_cache_dtype: model}}\n",
     "policy.yaml:8: rules[1].select.kind: unknown layer kind 'slidng_attention'"),
    (GOOD + "  - {code: KV902, name: s, reason: r, select: {index: '5-2'}, set: {kv_cache_dtype: model}}\n",
     "policy.yaml:8: rules[1].select.index: index range '5-2' runs backwards"),
    (GOOD + "  - {code: KV902, name: s, reason: r, set: {kv_cache_dtype: fp8, quant_mode: nvfp4}}\n",
     "policy.yaml:8: rules[1].set: set exactly one of kv_cache_dtype or quant_mode"),
    (GOOD + "constraints:\n  - {code: KV910, name: c, reason: r, min_tokens: 10, forbid: {quantized: true}}\n",
     "policy.yaml:9: constraints[0]: a constraint needs exactly one of forbid, require"),
    (GOOD + "constraints:\n  - {code: KV910, name: c, reason: r, forbid: {}}\n",
     "policy.yaml:9: constraints[0].forbid: name at least one of kv_cache_dtype"),
    (GOOD.replace("version: 1", "version: 2"), "policy.yaml:1: version: Input should be 1"),
    (GOOD + "version: 1\n", "policy.yaml:8: duplicate key 'version' (first at line 1)"),
    ("version: 1\nrules: [\n", "policy.yaml:3: malformed YAML"),
    ("", "policy.yaml: the policy file is empty"),
    ("- a\n- b\n", "policy.yaml:1: a policy is a YAML mapping, got a list"),
])
def test_policy_errors_point_at_the_line(text: str, expected: str) -> None:
    assert _error(text).startswith(expected)


def test_policy_good_file_loads_with_shorthands() -> None:
    p = policy_from_text(GOOD + "  - {code: KV902, name: s, reason: r, select: {kind: sliding_attention, "
                                "index: [0, '2-3', -1], head_size: 64}, set: {quant_mode: none}}\n")
    sel = p.rules[1].select
    assert sel.kind == ["sliding_attention"] and sel.head_size == [64]
    assert sel.indices(24) == {0, 2, 3, 23}


def test_load_policy_missing_file() -> None:
    with pytest.raises(KvplanInputError, match="policy file not found"):
        load_policy("/nonexistent/policy.yaml")


def test_example_policies_load() -> None:
    files = sorted((ROOT / "examples" / "policies").glob("*.yaml"))
    assert len(files) >= 3
    for f in files:
        assert load_policy(f).version == 1


def test_pyproject_policy_is_found_relative_to_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.kvplan]\npolicy = "ops/kv.yaml"\n')
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "kv.yaml").write_text(GOOD)
    sub = tmp_path / "deploy" / "prod"
    sub.mkdir(parents=True)
    assert find_pyproject_policy(sub) == (tmp_path / "ops" / "kv.yaml").resolve()


def test_pyproject_without_policy_and_bad_policy_path(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.kvplan]\nfail-level = "warning"\n')
    assert find_pyproject_policy(tmp_path) is None
    (tmp_path / "pyproject.toml").write_text('[tool.kvplan]\npolicy = "missing.yaml"\n')
    with pytest.raises(KvplanInputError, match=r"\[tool.kvplan\] policy = 'missing.yaml' but .* does not exist"):
        find_pyproject_policy(tmp_path)


def test_kvplan_toml_wins_and_pyproject_without_table_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.kvplan]\npolicy = "root.yaml"\n')
    (tmp_path / "root.yaml").write_text(GOOD)
    team = tmp_path / "team"
    team.mkdir()
    (team / "pyproject.toml").write_text('[project]\nname = "team"\n')  # no [tool.kvplan]: keep looking
    assert find_pyproject_policy(team) == (tmp_path / "root.yaml").resolve()
    (team / "kvplan.toml").write_text('policy = "team.yaml"\n')
    (team / "team.yaml").write_text(GOOD)
    assert find_pyproject_policy(team) == (team / "team.yaml").resolve()
