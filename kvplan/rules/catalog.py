"""Imports every built-in rule family so that declaring them registers them."""
from kvplan.rules import backend, config_errors, dtype, flags, memory, model, scales, skip  # noqa: F401
