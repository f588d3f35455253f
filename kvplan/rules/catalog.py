"""Imports every built-in rule family so that declaring them registers them.

Rule families that live above `rules` in the layer order (the linter's KV8xx) register
themselves when their package is imported; the CLI and the service import them before listing.
"""
from kvplan.rules import backend, config_errors, dtype, engine_version, flags, memory, model, scales, skip, startup  # noqa: F401
