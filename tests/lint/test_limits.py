"""`kvplan lint` on hostile files: each limit hit is a finding on that file (KV820 size, KV821 YAML
aliases/depth, KV822 time budget), never a crash or a silent skip, and the files after it are linted."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kvplan.lint.run as lint_run
from kvplan.cli.main import app
from kvplan.errors import KvplanInputError
from kvplan.ingest.limits import active_limits
from kvplan.lint.run import lint_paths
from tests.ingest.test_limits import alias_bomb

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}
BAD_DTYPE = "vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype fp9\n"
# the linted launch has no image, so it is the default release (0.34), whose backend rows are verified: no KV009


def _findings(report) -> set[tuple[str, str, int]]:
    return {(Path(f.location.path).name, f.code, f.location.line) for f in report.findings}


def test_alias_bomb_manifest_is_kv821_and_later_files_are_linted(tmp_path: Path) -> None:
    (tmp_path / "a-bomb.yaml").write_text(alias_bomb())
    (tmp_path / "b.sh").write_text(BAD_DTYPE)
    r = lint_paths([str(tmp_path)], isolated=True, cwd=tmp_path)
    assert _findings(r) == {("a-bomb.yaml", "KV821", 9), ("b.sh", "KV803", 1)}
    by = {f.path: f for f in r.files}
    assert by["a-bomb.yaml"].status == "error" and by["b.sh"].status == "linted"
    kv821 = next(f for f in r.findings if f.code == "KV821")
    assert kv821.severity.value == "error" and "alias *a4" in kv821.message and kv821.fix


def test_recursive_alias_and_deep_yaml_are_kv821(tmp_path: Path) -> None:
    (tmp_path / "rec.yaml").write_text("apiVersion: v1\nkind: Pod\nspec: &s\n  containers: [*s]\n")
    (tmp_path / "deep.yaml").write_text("apiVersion: v1\nkind: Pod\nspec: " + "[" * 300 + "]" * 300 + "\n")
    r = lint_paths([str(tmp_path)], isolated=True, cwd=tmp_path)
    assert {(n, c) for n, c, _ in _findings(r)} == {("rec.yaml", "KV821"), ("deep.yaml", "KV821")}


def test_oversized_files_are_kv820_by_size_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(100 * 1024 * 1024)  # sparse 100 MB
    (tmp_path / "ok.sh").write_text(BAD_DTYPE)
    r = lint_paths([str(tmp_path)], isolated=True, cwd=tmp_path)
    assert _findings(r) == {("big.yaml", "KV820", 1), ("ok.sh", "KV803", 1)}
    msg = next(f.message for f in r.findings if f.code == "KV820")
    assert "big.yaml is 104,857,600 bytes, over kvplan's limit of 8 MiB" in msg


def test_scripts_over_the_line_and_word_limits_are_kv820(tmp_path: Path) -> None:
    (tmp_path / "lines.sh").write_text("echo\n" * 50 + BAD_DTYPE)
    (tmp_path / "words.sh").write_text("x " * 500 + "\n" + BAD_DTYPE)
    (tmp_path / "ok.sh").write_text(BAD_DTYPE)
    with active_limits(max_text_lines=20, max_text_tokens=100):
        r = lint_paths([str(tmp_path)], isolated=True, cwd=tmp_path)
    assert _findings(r) == {("lines.sh", "KV820", 1), ("words.sh", "KV820", 1), ("ok.sh", "KV803", 1)}
    msgs = sorted(f.message for f in r.findings if f.code == "KV820")
    assert "lines.sh has 52 lines, over kvplan's limit of 20" in msgs[0]
    assert "words.sh has 505 words, over kvplan's limit of 100" in msgs[1]


def _slow_extract(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make one file pathological: extracting it spins forever (the budget must stop it)."""
    real = lint_run._extract

    def extract(c, text):
        if c.path.name == name:
            while True:
                pass
        return real(c, text)

    monkeypatch.setattr(lint_run, "_extract", extract)


def test_per_file_time_budget_is_kv822_and_the_run_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-slow.sh").write_text(BAD_DTYPE)
    (tmp_path / "b.sh").write_text(BAD_DTYPE)
    _slow_extract(monkeypatch, "a-slow.sh")
    r = lint_paths([str(tmp_path)], isolated=True, cwd=tmp_path, file_timeout=0.3)
    assert _findings(r) == {("a-slow.sh", "KV822", 1), ("b.sh", "KV803", 1)}
    msg = next(f.message for f in r.findings if f.code == "KV822")
    assert msg == "linting a-slow.sh took longer than its time budget of 0.3 s; it was not checked."


def test_time_budget_from_config_and_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kvplan.toml").write_text("[lint]\nfile-timeout = 0.3\n")
    (tmp_path / "a-slow.sh").write_text(BAD_DTYPE)
    _slow_extract(monkeypatch, "a-slow.sh")
    r = lint_paths([str(tmp_path)], cwd=tmp_path)
    assert ("a-slow.sh", "KV822", 1) in _findings(r)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = runner.invoke(app, ["lint", "a-slow.sh", "--isolated", "--file-timeout", "0.2", "--format", "json"],
                            env=ENV)
    finally:
        os.chdir(old)
    assert res.exit_code == 1, res.output
    assert [f["code"] for f in json.loads(res.stdout)["findings"]] == ["KV822"]
    assert "0.2 s" in json.loads(res.stdout)["findings"][0]["message"]


def test_invalid_file_timeout_in_config_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "kvplan.toml").write_text("[lint]\nfile-timeout = -1\n")
    (tmp_path / "a.sh").write_text(BAD_DTYPE)
    with pytest.raises(KvplanInputError, match=r"file-timeout|file_timeout"):
        lint_paths([str(tmp_path)], cwd=tmp_path)


@pytest.mark.parametrize("code", ["KV820", "KV821", "KV822"])
def test_limit_codes_are_documented(code: str) -> None:
    r = runner.invoke(app, ["rule", code], env=ENV)
    assert r.exit_code == 0 and r.stdout.startswith(code)
    assert "docs/limits.md" in r.stdout
    assert f"| {code} |" in (Path(__file__).parents[2] / "docs" / "lint.md").read_text()


def test_hostile_lint_configuration_is_one_input_error(tmp_path: Path) -> None:
    (tmp_path / "a.sh").write_text(BAD_DTYPE)
    (tmp_path / "kvplan.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(KvplanInputError, match="nests too deeply to read"):
        lint_paths([str(tmp_path)], cwd=tmp_path)
    (tmp_path / "kvplan.toml").write_text("[lint]\nkv-budget-gib = -4\n")
    with pytest.raises(KvplanInputError, match=r"kv-budget-gib|kv_budget_gib"):
        lint_paths([str(tmp_path)], cwd=tmp_path)


def test_a_fifo_is_kv800_not_a_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")
    (tmp_path / "ok.sh").write_text(BAD_DTYPE)
    r = lint_paths([str(tmp_path)], isolated=True, cwd=tmp_path)
    assert _findings(r) == {("pipe.yaml", "KV800", 1), ("ok.sh", "KV803", 1)}
    assert "not a regular file" in next(f.message for f in r.findings if f.code == "KV800")
