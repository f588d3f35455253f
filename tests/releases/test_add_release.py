"""The review report of scripts/add_vllm_release.py: what changed between two releases, from their tables."""
from __future__ import annotations

import sys

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import add_vllm_release as add


def test_report_sections_name_the_0_34_changes() -> None:
    old, new = add.read_release("0.33.0"), add.read_release("0.34.0")
    options = "\n".join(add.option_changes(old["options"], new["options"]))
    assert "added (11)" in options and "`--enable-extensible-kv-cache`" in options
    assert "`--all2all-backend` choices: added ['mori']" in options
    assert "`--enable-ex` was `--enable-expert-parallel`, now ambiguous" in options  # vLLM 0.34 exits on it
    defaults = "\n".join(add.defaults_changes(old["facts"], new["facts"]))
    assert "`--gpu-memory-utilization`: `0.92` -> `None`" in defaults
    quant = "\n".join(add.set_diff("q", old["facts"]["quantization_methods"], new["facts"]["quantization_methods"]))
    assert "removed (1): `fp_quant`" in quant


def test_committed_0_34_report_is_current() -> None:
    text = (ROOT / "docs" / "releases" / "vllm-0.34.0.md").read_text()
    old, new = add.read_release("0.33.0"), add.read_release("0.34.0")
    for line in add.option_changes(old["options"], new["options"]) + add.defaults_changes(old["facts"], new["facts"]):
        assert line in text.splitlines(), line
