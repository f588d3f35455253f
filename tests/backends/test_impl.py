"""Backend quirks live with their backend: selection code never branches on a backend's name."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.gpus import resolve_gpu
from kvplan.backends.impl import FAMILIES, HOOK_CLASSES, BackendHooks, hooks_for
from kvplan.backends.request import BackendRequest
from kvplan.backends.select import select_backend
from kvplan.backends.vllm_rows import BACKENDS
from tests.conftest import ROOT

BACKENDS_PKG = ROOT / "kvplan" / "backends"
PACKAGE = ROOT / "kvplan"


def _strings(node: ast.AST) -> list[str]:
    """String constants a comparison operand names (a literal, or a tuple/list/set of literals)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for elt in node.elts for s in _strings(elt)]
    return []


def name_branches(source: str) -> list[tuple[int, str]]:
    """(line, backend name) for every comparison or startswith/endswith against a backend name."""
    hits: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        operands: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("startswith", "endswith"):
            operands = list(node.args)
        hits += [(node.lineno, s) for op in operands for s in _strings(op) if s in BACKENDS]
    return hits


def _owned(path: Path) -> set[str]:
    """Backend names a family module owns (its HOOKS keys); nothing for any other module."""
    for family in FAMILIES:
        if Path(family.__file__).resolve() == path.resolve():
            return set(family.HOOKS)
    return set()


def test_name_branches_finds_comparisons_against_backend_names() -> None:
    src = ('if name == "FLASH_ATTN": pass\n'
           'ok = row.name in ("TRITON_ATTN", "other")\n'
           'x = name.startswith("FLASHINFER")\n'
           'y = kv == "fp8"\n')
    assert name_branches(src) == [(1, "FLASH_ATTN"), (2, "TRITON_ATTN"), (3, "FLASHINFER")]


def test_backend_selection_has_no_branch_on_a_backend_name_outside_its_own_module() -> None:
    # The whole package: rules and planner ask the hooks too (e.g. FlashInfer's pre-#39002 query dtype).
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        allowed = _owned(path)
        bad += [f"{path.relative_to(ROOT)}:{line} compares against {name}"
                for line, name in name_branches(path.read_text()) if name not in allowed]
    assert not bad, "\n".join(bad)


def test_hooks_are_registered_once_for_real_backends() -> None:
    names = [n for family in FAMILIES for n in family.HOOKS]
    assert len(names) == len(set(names)), "a backend has hooks in two family modules"
    assert set(names) <= set(BACKENDS)
    for name in BACKENDS:
        hooks = hooks_for(name)
        assert hooks.row is BACKENDS[name]
        assert type(hooks) is HOOK_CLASSES.get(name, BackendHooks)


def test_backend_without_quirks_is_decided_by_its_row_alone() -> None:
    # FLEX_ATTENTION has no hooks class: its row's dtypes decide (no quantized KV on it).
    assert "FLEX_ATTENTION" not in HOOK_CLASSES
    h100 = resolve_gpu("h100")
    req = BackendRequest(head_size=128, kv_cache_dtype="fp8")
    v033 = EngineVersion.parse("vllm==0.33.0")  # the release whose default block (16 tokens) is asserted
    choice = select_backend(req, h100, v033, forced="FLEX_ATTENTION")
    assert choice.status == "error" and choice.rejected == {"FLEX_ATTENTION": ("kv_cache_dtype not supported",)}
    ok = select_backend(BackendRequest(head_size=128), h100, v033, forced="FLEX_ATTENTION")
    assert ok.status == "selected" and ok.block_size == 16 and ok.flash_attn_version is None


@pytest.mark.parametrize(("gpu", "expected"), [("a100", 2), ("h100", 3), ("b200", 4)])
def test_flash_attn_version_comes_from_the_flash_attn_hooks_only(gpu: str, expected: int) -> None:
    prof = resolve_gpu(gpu)
    req = BackendRequest(head_size=128)
    assert hooks_for("FLASH_ATTN").flash_attn_version(req, prof, {})[0] == expected
    assert hooks_for("TRITON_ATTN").flash_attn_version(req, prof, {}) == (None, [])
