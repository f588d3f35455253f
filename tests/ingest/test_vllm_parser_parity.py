"""kvplan reads launch lines as vLLM 0.33's own `vllm serve` parser does.

The cases and their answers (namespace values, or the exit-2 message) were produced by vLLM 0.33.0's
real parser imported with all its dependencies (tests/data/vllm_serve_argv_cases-0.33.0.json; every
release's own cases: tests/releases/test_launch_lines.py).
Each case is checked three ways: the shared argv scanner, the findings of a plan, and the findings
of `kvplan lint` on a script that launches it.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.ingest.flags import MODELLED_DESTS, parse_flags, scan_argv, serve_options
from kvplan.lint import lint_paths
from tests.conftest import DATA, EXAMPLES

# the cases are vLLM 0.33.0's parser answers: every check below reads 0.33.0's table and plans for 0.33.0
VERSION = "0.33.0"
ENGINE = f"vllm=={VERSION}"
TABLE = json.loads((DATA / f"vllm_serve_argv_cases-{VERSION}.json").read_text())
CASES = TABLE["cases"]
LLAMA = EXAMPLES / "Meta-Llama-3.1-8B" / "config.json"
MODEL_ID = "meta-llama/Meta-Llama-3.1-8B"  # bundled with kvplan (kvplan/data/models), so lint can plan it
PARSER_CODES = {"KV001", "KV006", "KV007"}
# vLLM's parser takes these, but vLLM rejects them later (CacheConfig validation) and kvplan cannot
# plan them: an input error naming the valid values.
REFUSED_LATER = {("m", "--kv-cache-dtype", "fp9")}
# Flags vLLM's parser rejects that kvplan reports under a more specific code.
REMOVED = {("m", "--calculate-kv-scales"): "KV002"}


def _ids(c: dict[str, Any]) -> str:
    return " ".join(c["argv"])


def _argv(c: dict[str, Any]) -> list[str]:
    return ["vllm", "serve", *(MODEL_ID if a == "m" else a for a in c["argv"])]


def _same(got: Any, want: Any, coerced: bool = False) -> bool:
    """`coerced`: a config-class JSON option, whose values vLLM's pydantic class then converts
    ('1' -> 1); kvplan keeps the JSON as written, so only the text must agree there."""
    if isinstance(want, dict) and isinstance(got, dict):
        return all(_same(got.get(k), v, coerced) for k, v in want.items())
    if coerced and isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(_same(g, w, coerced) for g, w in zip(got, want, strict=True))
    return got == want or (coerced and str(got) == str(want))


def test_table_comes_from_vllm_0_33_parser() -> None:
    assert TABLE["engine_version"] == serve_options(VERSION).engine_version == VERSION
    assert len(CASES) >= 40 and sum(c["exit"] == 2 for c in CASES) >= 12


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_scan_matches_vllm_parser(case: dict[str, Any]) -> None:
    scan = scan_argv(["vllm", "serve", *case["argv"]], VERSION)
    if case["exit"] == 2:
        assert case["error"] in [e.message for e in scan.errors]
        return
    assert scan.errors == []
    got = {**scan.values, "model_tag": scan.model}
    for dest, want in case["namespace"].items():
        opt = serve_options(VERSION).by_dest.get(dest)
        coerced = opt is not None and opt.type_name == "parse_dataclass"
        assert _same(got.get(dest), want, coerced), (dest, got.get(dest), want)


def _modelled_value_error(case: dict[str, Any]) -> bool:
    """The parser rejects the value of an option kvplan plans with: kvplan exits 2 as vLLM does."""
    return any(e.dest in MODELLED_DESTS for e in scan_argv(["vllm", "serve", *case["argv"]], VERSION).errors)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_plan_findings_match_vllm_parser(case: dict[str, Any]) -> None:
    key = tuple(case["argv"])
    if key in REFUSED_LATER:
        with pytest.raises(KvplanInputError, match="Valid values"):
            kvplan.api.compile(LLAMA, _argv(case), engine=ENGINE)
        return
    if case["exit"] == 2 and _modelled_value_error(case):
        with pytest.raises(KvplanInputError) as e:
            kvplan.api.compile(LLAMA, _argv(case), engine=ENGINE)
        assert e.value.problem.rstrip(".") == case["error"].rstrip(".")
        return
    plan = kvplan.api.compile(LLAMA, _argv(case), engine=ENGINE)
    errors = [f for f in plan.findings if f.severity.value == "error"]
    if key in REMOVED:
        assert [f.code for f in errors] == [REMOVED[key]]
    elif case["exit"] == 2:
        hits = [f for f in errors if f.code in PARSER_CODES and case["error"] in f.message]
        assert hits, [f.message for f in plan.findings]
    else:
        assert not [f for f in plan.findings if f.code in PARSER_CODES], [f.message for f in plan.findings]
        sf = parse_flags(_argv(case), VERSION)
        for dest, fld in MODELLED_DESTS.items():
            if dest in case["namespace"] and dest != "attention_config":
                want = case["namespace"][dest]
                got = getattr(sf, fld)
                assert (list(got) if isinstance(got, tuple) else got) == (None if want == -1 else want), dest


def test_lint_findings_match_vllm_parser(tmp_path: Path) -> None:
    """One script, one launch per case: lint reports exactly the parser's exits, at the flag."""
    script = tmp_path / "serve.sh"
    script.write_text("#!/bin/sh\n" + "".join(shlex.join(_argv(c)) + " &\n" for c in CASES))
    config = tmp_path / "kvplan.toml"
    config.write_text(f'[lint]\nengine-version = "{VERSION}"\n')
    report = lint_paths([str(script)], cwd=tmp_path, config=config)
    by_line: dict[int, list[Any]] = {}
    for f in report.findings:
        by_line.setdefault(f.location.line, []).append(f)
    for n, case in enumerate(CASES, start=2):
        found = by_line.get(n, [])
        key = tuple(case["argv"])
        parser = [f for f in found if f.code in PARSER_CODES]
        if key in REMOVED:
            assert [f.code for f in found if f.severity == "error"] == [REMOVED[key]], (case, found)
        elif case["exit"] == 2:
            want = case["error"]
            if _modelled_value_error(case) or key in REFUSED_LATER:
                parser = [f for f in found if f.code == "KV803"]
            assert [f for f in parser if want in f.message and f.severity == "error"], (case, found)
            flag = parser[0].message.split(" ")[2 if parser[0].code != "KV803" else 1].rstrip(":").split("/")[0]
            if flag.startswith("-") and parser[0].code != "KV803":  # the finding points at the flag's own token
                line = shlex.join(_argv(case))
                assert line[parser[0].location.column - 1:].replace("_", "-").startswith(flag), (line, parser[0])
        else:
            assert not parser, (case, parser)


def test_prefixes_resolve_as_in_vllm() -> None:
    f = parse_flags(shlex.split("vllm serve m --kv-cache-dtype-s sliding_window --max-model 4096 "
                                "--tensor-parallel 4 --gpu-memory-util 0.8 --kv-cache-dtype fp8"))
    assert f.kv_cache_dtype_skip_layers == ("sliding_window",) and f.max_model_len == 4096
    assert f.tensor_parallel_size == 4 and f.gpu_memory_utilization == 0.8 and f.flag_errors == ()


def test_ambiguous_and_unknown_are_error_findings_with_did_you_mean() -> None:
    plan = kvplan.api.compile(LLAMA, "--kv-cache-dtyp fp8 --tensor_paralel_size 8")
    by = {f.code: f for f in plan.findings}
    assert by["KV006"].severity.value == "error"
    assert ("ambiguous option: --kv-cache-dtyp could match --kv-cache-dtype, --kv-cache-dtype-skip-layers"
            in by["KV006"].message)
    assert "did you mean --kv-cache-dtype?" in by["KV006"].message
    assert by["KV001"].severity.value == "error"
    assert "unrecognized arguments: --tensor-paralel-size 8" in by["KV001"].message
    assert "did you mean --tensor-parallel-size?" in by["KV001"].message
    assert plan.flags.get("tensor_parallel_size", 1) == 1  # the typo configures nothing


def test_comma_list_is_one_token_that_matches_nothing() -> None:
    plan = kvplan.api.compile(LLAMA, "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 0,1")
    assert not any(lp.skipped for lp in plan.layers)
    kv301 = [f for f in plan.findings if f.code == "KV301"]
    assert kv301 and "'0,1' matches nothing in vLLM" in kv301[0].message and "did you mean `0 1`?" in kv301[0].message


def test_real_options_are_not_unknown() -> None:
    line = ("vllm serve m --chat-template t.jinja --media-io-kwargs '{\"video\": {\"num_frames\": 8}}' "
            "--video-pruning-rate 0.5 --code-revision main --enable-prefix --no-enable-log-requests -O3 "
            "--compilation-config.cudagraph_mode FULL --served-model-name a b --device-memory-utilization 0.8")
    f = parse_flags(shlex.split(line))
    assert f.flag_errors == () and f.unknown_flags == ()
    assert f.gpu_memory_utilization == 0.8


def test_every_vllm_option_spelling_is_known() -> None:
    table = serve_options(VERSION)
    assert table.engine_version == VERSION and len(table.options) == 321
    for o in table.options:
        for s in o.spellings:
            scan = scan_argv(["m", s] + (["1"] if o.nargs not in (0, "?") else []), VERSION)
            assert not [e for e in scan.errors if e.kind in ("unknown", "ambiguous")], s



def test_unpassed_flags_take_vllm_033_defaults(tmp_path: Path) -> None:
    """A flag the launch line leaves out plans with vLLM 0.33's own default (0.92 GPU memory, ...)."""
    from kvplan.backends.capabilities import EngineVersion
    from kvplan.backends.defaults import resolved_gpu_memory_utilization
    from kvplan.model.flags import ServingFlags
    from kvplan.releases import release
    rows = {o.dest: o for o in release("0.33.0").options.options}
    for dest, field in MODELLED_DESTS.items():
        vllm_default = rows[dest].default
        ours = ServingFlags.model_fields[field].default
        if field == "gpu_memory_utilization":  # None: the release's default, resolved by the budget
            assert ours is None and resolved_gpu_memory_utilization(EngineVersion.parse(ENGINE), "cuda") == vllm_default
            continue
        if vllm_default is None:
            assert ours in (None, (), {}), dest
        else:
            assert ours == (tuple(vllm_default) if isinstance(vllm_default, list) else vllm_default), dest
    assert parse_flags(["vllm", "serve", MODEL_ID], VERSION).gpu_memory_utilization is None
    from tests.hubserver import fp8_checkpoint
    ck = fp8_checkpoint(tmp_path / "ck", EXAMPLES / "nvidia-Llama-3.1-70B-Instruct-FP8", layers=4,
                        weight_bytes=1 << 30)  # weight size known: a capacity figure
    budget = {argv: kvplan.api.compile(ck, list(argv), gpu="h100", engine=ENGINE).totals.kv_budget_bytes
              for argv in ((), ("--gpu-memory-utilization", "0.92"), ("--gpu-memory-utilization", "0.9"))}
    assert budget[()] is not None
    assert budget[()] == budget[("--gpu-memory-utilization", "0.92")] > budget[("--gpu-memory-utilization", "0.9")]
