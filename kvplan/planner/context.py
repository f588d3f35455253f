"""Compatibility re-export: the rule context lives in kvplan.rules.context (rules own what they read)."""
from kvplan.rules.context import ENGINE_NAME, ENGINE_VERSION, GpuFacts, RuleContext  # noqa: F401
from kvplan.rules.state import LayerState  # noqa: F401
