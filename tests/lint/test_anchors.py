"""Lint positions come from what a finding is about (its subject, else its rule's subject flags), never from
the message text."""
from __future__ import annotations

import json
from pathlib import Path

from kvplan.lint.engine import Anchors, index_flags
from kvplan.lint.shell import Tok
from kvplan.model.plan import Subject
from kvplan.rules.base import get_rule
from tests.conftest import EXAMPLES
from tests.lint.helpers import lint_text

LLAMA = "meta-llama/Meta-Llama-3.1-8B"  # a bundled model id: 32 layers


def _line(*words: str) -> list[Tok]:
    toks, col = [], 1
    for w in words:
        toks.append(Tok(w, 1, col))
        col += len(w) + 1
    return toks


def test_subject_value_points_at_the_token_inside_a_comma_list() -> None:
    uses, pos = index_flags(_line("--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "0,99"))
    a = Anchors(uses, uses, pos, {})
    tok = a.token(get_rule("KV302"), Subject(flag="--kv-cache-dtype-skip-layers", value="99"), Tok("model", 9, 9))
    assert (tok.line, tok.col) == (1, 1 + len("--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 0,"))


def test_no_subject_uses_the_rule_subject_flags_in_order_then_the_default() -> None:
    uses, pos = index_flags(_line("-q", "fp8", "--max-model-len", "4096"))
    a = Anchors(uses, uses, pos, {})
    default = Tok("model", 7, 3)
    assert a.token(get_rule("KV105"), None, default).value == "-q"  # no --kv-cache-dtype: --quantization
    assert a.token(get_rule("KV502"), None, default).value == "--max-model-len"
    assert a.token(get_rule("KV604"), None, default) is default  # a model rule: the served model


def test_subject_of_a_stray_argument_and_of_a_flag_as_written() -> None:
    uses, pos = index_flags(_line("m", "extra", "--kv-cache-type", "fp8"))
    a = Anchors(uses, uses, pos, {})
    assert a.token(get_rule("KV001"), Subject(argument="extra"), Tok("", 1, 1)).col == 3
    assert a.token(get_rule("KV001"), Subject(flag="--kv-cache-type"), Tok("", 1, 1)).col == 9


def test_lint_points_skip_index_findings_at_the_index(tmp_path: Path) -> None:
    r = lint_text(tmp_path, "serve.sh", f"vllm serve {LLAMA} --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 3 99\n")
    f = next(f for f in r.findings if f.code == "KV302")
    line = f"vllm serve {LLAMA} --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 3 99"
    assert (f.location.line, f.location.column) == (1, line.index(" 99") + 2)


def test_upgrade_rewording_does_not_move_findings(tmp_path: Path) -> None:
    # The message of a launch pinned to an old release is reworded ("on upgrade from ..."); the position is not.
    # (Its launch line is judged by that release's own parser: a typo is an error of that release, unchanged.)
    text = """
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: vllm
        image: IMAGE
        args: ["vllm", "serve", "LLAMA", "--calculate-kv-scales", "--kv-cache-type", "fp8"]
    """.replace("LLAMA", LLAMA)
    now = lint_text(tmp_path, "now.yaml", text.replace("IMAGE", "vllm/vllm-openai:v0.33.0"))
    old = lint_text(tmp_path, "old.yaml", text.replace("IMAGE", "vllm/vllm-openai:v0.10.0"))
    f_now = next(f for f in now.findings if f.code == "KV002")
    f_old = next(f for f in old.findings if f.code == "KV002")
    assert f_old.message.startswith("on upgrade from vLLM 0.10.0") and not f_now.message.startswith("on upgrade")
    assert (f_old.location.line, f_old.location.column) == (f_now.location.line, f_now.location.column)
    typo_now = next(f for f in now.findings if f.code == "KV001")
    typo_old = next(f for f in old.findings if f.code == "KV001")
    assert typo_old.severity.value == "error" and not typo_old.message.startswith("on upgrade")
    assert (typo_old.location.line, typo_old.location.column) == (typo_now.location.line, typo_now.location.column)


def test_plan_json_carries_the_subject(tmp_path: Path) -> None:
    import kvplan
    plan = kvplan.compile(EXAMPLES / "gpt-oss-20b", ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "99",
                                                      "--kv-cache-type", "x"])
    doc = json.loads(plan.model_dump_json())
    by_code = {f["code"]: f for f in doc["findings"]}
    assert by_code["KV302"]["subject"] == {"flag": "--kv-cache-dtype-skip-layers", "value": "99", "argument": None,
                                           "launch_fact": None}
    assert by_code["KV001"]["subject"]["flag"] == "--kv-cache-type"
    assert all("subject" not in f for f in doc["findings"] if f["code"] not in ("KV001", "KV302"))
    assert doc["schema_version"] == "1.5"
