"""`kvplan serve`: the planner, emitters, rules, backends and lint as a JSON API (FastAPI + uvicorn).

Needs the `serve` extra (`pip install 'kvplan[serve]'`). Only this package imports fastapi/uvicorn.
"""
from __future__ import annotations

from kvplan.service.app import ServiceSettings, create_app
from kvplan.service.models import EmitRequest, LintRequest, PlanRequest

__all__ = ["EmitRequest", "LintRequest", "PlanRequest", "ServiceSettings", "create_app"]
