"""Suppressions (comments, annotations), configuration discovery, select/ignore, per-file ignores."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kvplan.errors import KvplanInputError
from kvplan.lint import lint_paths
from kvplan.releases import DEFAULT_ENGINE_VERSION

LAUNCH = "vllm serve meta-llama/Meta-Llama-3.1-8B --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


def _codes(report) -> list[tuple[str, int]]:
    return sorted((f.code, f.location.line) for f in report.findings if not f.code.startswith("KV7"))


def test_comment_suppression_same_line_and_line_above(tmp_path: Path) -> None:
    _write(tmp_path, "a.sh", f"""
    {LAUNCH}  # kvplan: ignore[KV401, KV304] scales validated offline; no SWA in Llama
    # kvplan: ignore[KV401] validated on our eval set
    {LAUNCH}
    """)
    r = lint_paths([str(tmp_path / "a.sh")], cwd=tmp_path, isolated=True)
    # the comment above line 3 names only KV401
    assert _codes(r) == [("KV304", 3)]
    assert sorted((s.code, s.location.line, s.via) for s in r.suppressed) == [
        ("KV304", 1, "comment"), ("KV401", 1, "comment"), ("KV401", 3, "comment")]
    assert {s.reason for s in r.suppressed} == {"scales validated offline; no SWA in Llama",
                                                "validated on our eval set"}


def test_suppression_without_reason_unused_and_unknown_codes(tmp_path: Path) -> None:
    _write(tmp_path, "b.sh", f"""
    {LAUNCH}  # kvplan: ignore[KV401]
    vllm serve meta-llama/Meta-Llama-3.1-8B  # kvplan: ignore[KV502] sized for H200
    vllm serve meta-llama/Meta-Llama-3.1-8B  # kvplan: ignore[KV999] typo'd code
    """)
    r = lint_paths([str(tmp_path / "b.sh")], cwd=tmp_path, isolated=True)
    got = _codes(r)
    assert ("KV806", 1) in got and ("KV401", 1) not in got    # applies, but says it has no reason
    assert ("KV805", 2) in got                                 # nothing to suppress there
    assert ("KV810", 3) in got                                 # not a rule
    kv806 = next(f for f in r.findings if f.code == "KV806")
    assert kv806.location.column == len(LAUNCH) + 3            # points at the comment


def test_annotation_suppression_covers_its_document_only(tmp_path: Path) -> None:
    doc = """
    apiVersion: v1
    kind: Pod
    metadata:
      name: {name}
      annotations:
        kvplan.dev/ignore: "{ann}"
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          args: ["meta-llama/Meta-Llama-3.1-8B", "--kv-cache-dtype=fp8"]
    """
    text = textwrap.dedent(doc).format(name="a", ann="KV401: validated") + "---\n" + \
        textwrap.dedent(doc).format(name="b", ann="KV105")
    _write(tmp_path, "pods.yaml", text)
    r = lint_paths([str(tmp_path / "pods.yaml")], cwd=tmp_path, isolated=True)
    got = _codes(r)
    assert ("KV401", 11) not in got and ("KV401", 24) in got    # second document is not covered
    assert ("KV806", 19) in got and ("KV805", 19) in got        # second annotation: no reason, and unused


def test_select_ignore_and_fail_level(tmp_path: Path) -> None:
    _write(tmp_path, "c.sh", LAUNCH + " --calculate-kv-scales\n")
    p = str(tmp_path / "c.sh")
    assert {c for c, _ in _codes(lint_paths([p], cwd=tmp_path, isolated=True))} == {"KV002", "KV304", "KV401"}
    selected = lint_paths([p], cwd=tmp_path, isolated=True, select=["KV3", "KV002"])
    assert {c for c, _ in _codes(selected)} == {"KV002", "KV304"}
    assert {c for c, _ in _codes(lint_paths([p], cwd=tmp_path, isolated=True, ignore=["KV0"]))} == {"KV304", "KV401"}
    with pytest.raises(KvplanInputError):
        lint_paths([p], cwd=tmp_path, isolated=True, select=["E501"])


def test_config_discovered_upwards_from_pyproject(tmp_path: Path) -> None:
    _write(tmp_path, "pyproject.toml", """
    [project]
    name = "infra"
    [tool.kvplan]
    some-other-tool-key = 1
    [tool.kvplan.lint]
    gpu = "l4"
    ignore = ["KV401"]
    per-file-ignores = { "deploy/legacy/*" = ["KV304"] }
    exclude = ["deploy/vendor"]
    [tool.kvplan.lint.models]
    "/models/*" = { config = "models/llama", weight-gib = 14.96 }
    """)
    _write(tmp_path, "models/llama/config.json", (Path(__file__).resolve().parents[2] / "kvplan" / "data" / "models"
                                                  / "meta-llama--Meta-Llama-3.1-8B" / "config.json").read_text())
    _write(tmp_path, "deploy/legacy/run.sh",
           LAUNCH.replace("meta-llama/Meta-Llama-3.1-8B", "/models/llama-3.1-8b") + "\n")
    _write(tmp_path, "deploy/vendor/run.sh", "vllm serve x --kv-cache-dtype fp9\n")
    r = lint_paths([str(tmp_path / "deploy")], cwd=tmp_path)
    assert r.settings.config_file == "pyproject.toml" and r.settings.gpu == "l4"
    assert [f.path for f in r.files] == ["deploy/legacy/run.sh"]              # vendor excluded
    assert r.files[0].launches[0].config == "models/llama"                    # glob mapping
    assert ("KV502", 1) in _codes(r)                                          # 131072 tokens on an L4
    assert {s.via for s in r.suppressed} == {"per-file-ignores"}
    assert "KV401" not in {f.code for f in r.findings}


def test_kvplan_toml_wins_and_bad_config_is_an_input_error(tmp_path: Path) -> None:
    _write(tmp_path, "kvplan.toml", "[lint]\nfail-levl = 'warning'\n")
    _write(tmp_path, "run.sh", LAUNCH + "\n")
    with pytest.raises(KvplanInputError, match="Did you mean 'fail-level'"):
        lint_paths([str(tmp_path / "run.sh")], cwd=tmp_path)
    _write(tmp_path, "kvplan.toml", "[lint]\nengine-version = '0.5.4'\n")  # (0.6 on: launch lines judged)
    with pytest.raises(KvplanInputError, match="not a vLLM release kvplan knows"):
        lint_paths([str(tmp_path / "run.sh")], cwd=tmp_path)
    _write(tmp_path, "kvplan.toml", "[tool.kvplan.lint]\nfail-level = 'warning'\n")  # pyproject's spelling
    with pytest.raises(KvplanInputError, match=r"pyproject.toml's spelling") as e:
        lint_paths([str(tmp_path / "run.sh")], cwd=tmp_path)
    assert "[lint]" in (e.value.fix or "")
    _write(tmp_path, "kvplan.toml", "[lint\n")
    with pytest.raises(KvplanInputError, match="not valid TOML"):
        lint_paths([str(tmp_path / "run.sh")], cwd=tmp_path)
    with pytest.raises(KvplanInputError, match="unknown GPU"):
        lint_paths([str(tmp_path / "run.sh")], cwd=tmp_path, isolated=True, gpu="h1000")


def test_unknown_gpu_label_is_info_and_falls_back(tmp_path: Path) -> None:
    _write(tmp_path, "p.yaml", """
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-A10G}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          args: ["Qwen/Qwen3-8B"]
    """)
    r = lint_paths([str(tmp_path / "p.yaml")], cwd=tmp_path, isolated=True, gpu="l4")
    f = next(f for f in r.findings if f.code == "KV807")
    assert (f.location.line, f.location.column, f.severity.value) == (5, 42, "info")
    assert r.files[0].launches[0].gpu == "l4"


def test_each_file_uses_its_nearest_config(tmp_path: Path) -> None:
    from tests.conftest import ROOT
    direct = lint_paths([str(ROOT / "examples" / "deploy")], cwd=ROOT)
    from_root = lint_paths([str(ROOT / "examples")], cwd=ROOT)  # examples/ has no config; deploy/ has kvplan.toml
    key = lambda r: sorted((f.location.path, f.location.line, f.code) for f in r.findings)  # noqa: E731
    assert key(direct) == key(from_root)
    assert from_root.settings.config_file is None


def test_engine_version_selects_the_release_behaviour(tmp_path: Path) -> None:
    """--calculate-kv-scales: removed (error) on the default release (0.28 on), deprecated (warning) on 0.24, at
    the flag."""
    _write(tmp_path, "run.sh", "vllm serve acme/unknown --calculate-kv-scales\n")
    new = lint_paths([str(tmp_path / "run.sh")], cwd=tmp_path, isolated=True)
    assert new.engine.version == DEFAULT_ENGINE_VERSION
    assert [(f.code, f.severity.value, f.location.column) for f in new.findings if f.code.startswith("KV00")] == \
        [("KV002", "error", 25)]
    _write(tmp_path, "kvplan.toml", "[lint]\nengine-version = '0.24.0'\n")
    old = lint_paths([str(tmp_path / "run.sh")], cwd=tmp_path)
    assert old.engine.version == "0.24.0"
    assert [(f.code, f.severity.value, f.location.column) for f in old.findings if f.code.startswith("KV00")] == \
        [("KV003", "warning", 25)]


def test_engine_version_reaches_the_planner(tmp_path: Path) -> None:
    """Skip layers did not exist before vLLM 0.19: 0.18's own parser exits on the flag (KV004, naming the release
    that added it), and 0.18's plan carries KV009 (0.33's backend rows)."""
    _write(tmp_path, "run.sh",
           "vllm serve openai/gpt-oss-20b --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window\n")
    _write(tmp_path, "kvplan.toml", "[lint]\nengine-version = '0.18.0'\n")
    found = lint_paths([str(tmp_path / "run.sh")], cwd=tmp_path).findings
    kv004 = [f for f in found if f.code == "KV004"]
    assert kv004 and "vLLM 0.19.0 added it" in kv004[0].message and "KV009" in {f.code for f in found}
    _write(tmp_path, "kvplan.toml", "[lint]\nengine-version = '0.33.0'\n")
    assert not {"KV001", "KV004"} & {f.code for f in lint_paths([str(tmp_path / "run.sh")], cwd=tmp_path).findings}


def _kv604_project(tmp_path: Path, strict_line: str = "") -> Path:
    """A launch of a Llama config carrying layer-geometry keys kvplan does not use (KV604)."""
    import json
    cfg = json.loads((Path(__file__).resolve().parents[2] / "kvplan" / "data" / "models"
                      / "meta-llama--Meta-Llama-3.1-8B" / "config.json").read_text())
    cfg.update(swa_layers=[0, 2], local_num_key_value_heads=2)
    _write(tmp_path, "models/odd/config.json", json.dumps(cfg))
    _write(tmp_path, "pyproject.toml", f"""
    [tool.kvplan.lint]
    {strict_line}
    [tool.kvplan.lint.models]
    "/models/odd" = "models/odd"
    """)
    return _write(tmp_path, "run.sh", "vllm serve /models/odd --kv-cache-dtype fp8\n")


def _kv604(report) -> list[str]:
    return [f.severity.value for f in report.findings if f.code == "KV604"]


def test_strict_makes_kv604_an_error_from_the_cli_option_or_the_config(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kvplan.cli.main import app
    from kvplan.lint.run import exit_code
    run = _kv604_project(tmp_path)
    plain = lint_paths([str(run)], cwd=tmp_path)
    assert _kv604(plain) == ["warning"] and exit_code(plain) == 0 and plain.settings.strict is False
    strict = lint_paths([str(run)], cwd=tmp_path, strict=True)
    assert _kv604(strict) == ["error"] and exit_code(strict) == 1 and strict.settings.strict is True
    msg = next(f.message for f in strict.findings if f.code == "KV604")
    assert "swa_layers" in msg and "local_num_key_value_heads" in msg
    # `strict = true` in [tool.kvplan.lint] does the same
    configured = lint_paths([str(_kv604_project(tmp_path / "b", "strict = true"))], cwd=tmp_path / "b")
    assert _kv604(configured) == ["error"] and configured.settings.strict is True
    # the CLI: exit 0 with the warning, 1 with --strict
    import os
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        r0 = CliRunner().invoke(app, ["lint", "run.sh"], env={"NO_COLOR": "1"})
        r1 = CliRunner().invoke(app, ["lint", "run.sh", "--strict"], env={"NO_COLOR": "1"})
    finally:
        os.chdir(old)
    assert r0.exit_code == 0 and "KV604 [warning]" in r0.stdout, r0.output
    assert r1.exit_code == 1 and "KV604 [error]" in r1.stdout, r1.output
    # a bad value is one input error naming the key
    _write(tmp_path / "c", "pyproject.toml", '[tool.kvplan.lint]\nstrict = "yes please"\n')
    with pytest.raises(KvplanInputError, match="strict"):
        lint_paths([str(_write(tmp_path / "c", "run.sh", LAUNCH + "\n"))], cwd=tmp_path / "c")
