"""Imports every built-in rule family so that declaring them registers them."""
from kvplan.rules import backend, config_errors, dtype, flags, memory, model, scales, skip  # noqa: F401

try:  # lint-only rules (KV8xx) live with the linter; list them with the rest
    from kvplan.lint import rules as _lint_rules  # noqa: F401
except ImportError:  # pragma: no cover
    pass
