"""Imports point down the layer list, and the planner path never imports torch/triton."""
from __future__ import annotations

import ast
import subprocess
import sys

from tests.conftest import EXAMPLES, ROOT

ORDER = ["model", "ingest", "backends", "rules", "planner", "report", "emit", "policy", "lint", "runtime", "service", "explore", "cli"]
# Packages a lower layer may import besides those below it.
SHARED = {"kvplan", "kvplan.errors", "kvplan.files"}


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kvplan"):
            yield node.module
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("kvplan"):
                    yield a.name


def test_imports_point_down() -> None:
    bad = []
    for i, pkg in enumerate(ORDER):
        allowed = {f"kvplan.{p}" for p in ORDER[: i + 1]}
        for f in (ROOT / "kvplan" / pkg).rglob("*.py"):
            for mod in _imports(f):
                if mod in SHARED:
                    continue
                top = ".".join(mod.split(".")[:2])
                if top.startswith("kvplan.") and top.split(".")[1] in ORDER and top not in allowed:
                    bad.append(f"{f.relative_to(ROOT)} imports {mod}")
    assert not bad, "\n".join(bad)


def test_model_imports_no_kvplan_io() -> None:
    for f in (ROOT / "kvplan" / "model").rglob("*.py"):
        for mod in _imports(f):
            assert mod.startswith("kvplan.model"), f"{f.name} imports {mod}"


def test_plan_path_never_imports_torch_or_triton() -> None:
    code = ("import sys; from kvplan.cli.main import app; from typer.testing import CliRunner; "
            f"r = CliRunner().invoke(app, ['plan', r'{EXAMPLES / 'gpt-oss-20b'}', '--kv-cache-dtype', 'fp8']); "
            "r2 = CliRunner().invoke(app, ['explain', r'" + str(EXAMPLES / 'DeepSeek-V3') + "']); "
            "assert r.exit_code == 0 and r2.exit_code == 0, (r.output, r2.output); "
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton', 'transformers', 'numpy', 'huggingface_hub', 'httpx', 'httpx2')); "
            "print(heavy); assert not heavy")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
