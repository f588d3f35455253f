"""The public API: a tested __all__ and a runnable example."""
from __future__ import annotations

import kvplan
from tests.conftest import EXAMPLES


def test_all_is_exactly_the_public_api() -> None:
    assert set(kvplan.__all__) == {"__version__", "compile", "explain", "lint", "validate", "KvplanInputError", "Plan"}
    for name in kvplan.__all__:
        assert hasattr(kvplan, name) or name in ("lint", "validate")


def test_compile_returns_typed_plan() -> None:
    plan = kvplan.compile(EXAMPLES / "gpt-oss-20b" / "config.json", "--kv-cache-dtype fp8")
    assert isinstance(plan, kvplan.Plan)
    assert plan.totals.bytes_per_token == 24 * 1024


def test_compile_accepts_dict_flags() -> None:
    plan = kvplan.compile(EXAMPLES / "gpt-oss-20b",
                          {"kv_cache_dtype": "fp8", "kv_cache_dtype_skip_layers": ["sliding_window"]})
    assert plan.layers[0].kv_cache_dtype == "auto" and plan.layers[1].kv_cache_dtype == "fp8"


def test_explain_returns_text() -> None:
    text = kvplan.explain(EXAMPLES / "Meta-Llama-3.1-8B" / "config.json", "--kv-cache-dtype int8_per_token_head")
    assert "int8_per_token_head" in text and "2,112" in text


def test_lint_is_callable_before_and_after_the_package_import() -> None:
    import subprocess
    import sys
    code = ("import kvplan; r1 = kvplan.lint('examples/deploy/clean-deployment.yaml'); "
            "import kvplan.lint.run; r2 = kvplan.lint(['examples/deploy/k8s-deployment-typo.yaml']); "
            "print(r1.summary.findings, r2.summary.findings > 0)")
    from tests.conftest import ROOT
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "True"]


def test_lint_reports_findings_with_positions() -> None:
    report = kvplan.lint(EXAMPLES / "deploy" / "k8s-deployment-typo.yaml")
    assert report.summary.findings > 0
    f = report.findings[0]
    assert f.location.path.endswith("k8s-deployment-typo.yaml") and f.location.line > 0


def test_validate_executes_a_plan_and_checks_its_bytes() -> None:
    report = kvplan.validate(EXAMPLES / "SmolLM2-135M-Instruct" / "config.json", "--kv-cache-dtype int8_per_token_head",
                             device="cpu", layers={0, 29}, synthetic_tokens=32)
    assert report.passed
    ran = {lr.index: lr for lr in report.layers if lr.status != "skipped"}
    assert set(ran) == {0, 29}
    for lr in ran.values():
        assert lr.status == "pass" and lr.quant_mode == "int8_per_token_head"
        assert lr.bytes_allocated == lr.bytes_expected and lr.bytes_per_token_plan == 3 * (2 * 64 + 8)


def test_one_compile_entry() -> None:
    """kvplan.compile, kvplan.api.compile and kvplan.pipeline.compile are one function; the old names are gone
    or a deprecated alias of the same pipeline."""
    import warnings

    import kvplan.api
    import kvplan.pipeline
    import kvplan.policy
    assert kvplan.compile is kvplan.api.compile is kvplan.pipeline.compile
    assert not hasattr(kvplan.policy, "compile_with_policy") and not hasattr(kvplan.policy, "apply_policy")
    path, flags = EXAMPLES / "gpt-oss-20b", "--kv-cache-dtype fp8"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan, quant = kvplan.api.compile_with_quant(path, flags)
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    assert (plan, quant) == tuple(kvplan.pipeline.run(path, flags)) and plan == kvplan.compile(path, flags)


def test_compile_takes_a_policy_and_an_inline_config() -> None:
    import json

    from kvplan.policy import load_policy
    cfg = json.loads((EXAMPLES / "Meta-Llama-3.1-8B" / "config.json").read_text())
    policy = load_policy(EXAMPLES / "policies" / "protect-edges.yaml")
    from_dict = kvplan.compile(cfg, policy=policy, label="llama")
    from_path = kvplan.compile(EXAMPLES / "Meta-Llama-3.1-8B", policy=policy)
    assert from_dict.model.source == "llama" and from_dict.flags["kv_cache_dtype_skip_layers"] == ["0", "1", "31"]
    assert [lp.decided_by for lp in from_dict.layers] == [lp.decided_by for lp in from_path.layers]
