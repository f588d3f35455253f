"""The catalogue: imports every rule family so that each declared rule is in the one registry.

Every code kvplan reports is declared in a module of `kvplan.rules`, the planner's rules and the
deployment families alike (the linter's KV8xx in `lint_rules`, the emitters' and policy engine's
KV98x/KV99x in `deploy_rules`), so `kvplan rules` is complete whatever else was imported.
"""
from kvplan.rules import (  # noqa: F401
    backend,
    config_errors,
    deploy_rules,
    dtype,
    engine_version,
    flags,
    lint_rules,
    memory,
    model,
    scales,
    skip,
    startup,
)
