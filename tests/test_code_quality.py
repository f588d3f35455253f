"""Lint, types and complexity gates: ruff, mypy and radon over the scope `pyproject.toml` configures.

`pytest` (the README's test command, which CI's `.ci/run` runs) runs these with the rest of the suite;
alone: `pytest tests/test_code_quality.py`. The tools come with the `test` extra, pinned there so a
new release of a checker cannot turn CI red on its own. CONTRIBUTING.md ("Lint and types") gives the
same commands to run by hand.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The Triton/Gluon kernel modules: their kernel bodies are traced by Triton rather than run as Python,
# so they are exempt from mypy (see [tool.mypy.overrides] in pyproject.toml) and from the complexity
# bound; every other function in the package must rate A-D.
KERNEL_MODULES = {
    "kvplan/runtime/attention.py",
    "kvplan/runtime/attention_gluon.py",
    "kvplan/runtime/prefill.py",
    "kvplan/runtime/prefill_gluon.py",
    "kvplan/runtime/write.py",
    "kvplan/runtime/write_gluon.py",
}
# radon's rank E starts at cyclomatic complexity 31.
MAX_COMPLEXITY = 30


def _need(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed: install the test extra (pip install -e '.[test]')")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_check_is_clean() -> None:
    _need("ruff")
    # `.`: the whole repository; [tool.ruff] in pyproject.toml names the rules and the excluded data folders.
    result = _run("ruff", "check", "--no-fix", "--output-format", "concise", ".")
    assert result.returncode == 0, f"ruff check . found problems:\n{result.stdout}{result.stderr}"


def test_mypy_is_clean() -> None:
    _need("mypy")
    # No arguments: [tool.mypy] names the package (kvplan) and the exempt kernel modules.
    result = _run("mypy")
    assert result.returncode == 0, f"mypy found problems:\n{result.stdout}{result.stderr}"


def test_kernel_modules_match_the_mypy_and_radon_exemptions() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    exempt = {
        module
        for override in config["tool"]["mypy"]["overrides"]
        if override.get("ignore_errors")
        for module in override["module"]
    }
    assert {f"{m.replace('.', '/')}.py" for m in exempt} == KERNEL_MODULES
    assert set(config["tool"]["radon"]["exclude"].split(",")) == KERNEL_MODULES
    for path in KERNEL_MODULES:
        assert (ROOT / path).is_file(), f"{path} is named as a kernel module but does not exist"


def test_no_function_outside_the_kernels_rates_e_or_f() -> None:
    _need("radon")
    from radon.complexity import cc_rank, cc_visit

    too_complex = []
    for path in sorted((ROOT / "kvplan").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in KERNEL_MODULES:
            continue
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if block.complexity > MAX_COMPLEXITY:
                rank = cc_rank(block.complexity)
                too_complex.append(f"{rel}:{block.lineno} {block.fullname} {rank} ({block.complexity})")
    assert not too_complex, "split these functions (radon cc -s -n E kvplan):\n" + "\n".join(too_complex)
