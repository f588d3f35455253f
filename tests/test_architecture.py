"""Imports point down the layer list, and the planner path never imports torch/triton."""
from __future__ import annotations

import ast
import subprocess
import sys

from tests.conftest import EXAMPLES, ROOT

# The layers, lowest first: a package (kvplan/<name>/) or a module (kvplan/<name>.py). `pipeline` is the
# one compile pipeline; `api` is the facade (kvplan/api.py and the package's own kvplan.compile & co).
ORDER = ["model", "releases", "ingest", "backends", "rules", "planner", "report", "emit", "policy", "pipeline", "lint",
         "runtime", "schemas", "api", "service", "explore", "cli"]
# Modules any layer may import besides those below it.
SHARED = {"kvplan.errors", "kvplan.files"}
# What a layer below the facade may take from the package itself (`from kvplan import __version__`).
PACKAGE_NAMES = {"__version__"}
# The facade's entry points on the package (`import kvplan; kvplan.compile(...)`).
FACADE_NAMES = {"compile", "explain", "validate", "api"}


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kvplan"):
            if node.module == "kvplan":  # names taken from the package: the facade unless __version__
                yield from (f"kvplan.{a.name}" for a in node.names if a.name not in PACKAGE_NAMES)
            else:
                yield node.module
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("kvplan") and a.name != "kvplan":
                    yield a.name
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "kvplan"
              and node.attr in FACADE_NAMES):
            yield f"kvplan.{node.attr}"


def _layer_files(layer):
    package, module = ROOT / "kvplan" / layer, ROOT / "kvplan" / f"{layer}.py"
    files = list(package.rglob("*.py")) if package.is_dir() else [module]
    return [*files, ROOT / "kvplan" / "__init__.py"] if layer == "api" else files


def _layer_of(module):
    """The layer a kvplan module belongs to; the package's facade names are the `api` layer."""
    name = module.split(".")[1]
    return "api" if name in FACADE_NAMES else name


def test_imports_point_down() -> None:
    bad = []
    for i, layer in enumerate(ORDER):
        allowed = set(ORDER[: i + 1])
        for f in _layer_files(layer):
            for mod in _imports(f):
                if mod in SHARED or mod == "kvplan":
                    continue
                top = _layer_of(mod)
                if top in ORDER and top not in allowed:
                    bad.append(f"{f.relative_to(ROOT)} imports {mod}")
    assert not bad, "\n".join(bad)


def test_every_module_has_a_layer() -> None:
    """A new top-level package or module is placed in ORDER (or SHARED), so the layer test sees it."""
    tops = {p.stem for p in (ROOT / "kvplan").glob("*.py")} | {p.name for p in (ROOT / "kvplan").iterdir()
                                                                if (p / "__init__.py").is_file()}
    unplaced = tops - set(ORDER) - {m.split(".")[1] for m in SHARED} - {"__init__", "__main__", "data"}
    assert not unplaced, f"place these in ORDER: {sorted(unplaced)}"


def test_lower_layers_cannot_reach_the_facade(tmp_path) -> None:
    """The check itself: a lower layer importing kvplan.api or kvplan.compile is caught."""
    f = tmp_path / "m.py"
    f.write_text("import kvplan\nfrom kvplan import __version__\nfrom kvplan.api import compile\n"
                 "from kvplan import compile as c\nkvplan.compile('x')\n")
    got = [_layer_of(m) for m in _imports(f)]
    assert sorted(got) == ["api", "api", "api"]


def test_model_imports_no_kvplan_io() -> None:
    for f in (ROOT / "kvplan" / "model").rglob("*.py"):
        for mod in _imports(f):
            assert mod.startswith("kvplan.model"), f"{f.name} imports {mod}"


def test_plan_path_never_imports_torch_or_triton() -> None:
    code = ("import sys; from kvplan.cli.main import app; from typer.testing import CliRunner; "
            f"r = CliRunner().invoke(app, ['plan', r'{EXAMPLES / 'gpt-oss-20b'}', '--kv-cache-dtype', 'fp8']); "
            "r2 = CliRunner().invoke(app, ['explain', r'" + str(EXAMPLES / 'DeepSeek-V3') + "']); "
            "assert r.exit_code == 0 and r2.exit_code == 0, (r.output, r2.output); "
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'triton', 'transformers', 'numpy', 'huggingface_hub', 'httpx', 'httpx2')); "
            "print(heavy); assert not heavy")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
