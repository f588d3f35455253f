"""Shared pydantic base: frozen, no extra fields, docstrings become schema descriptions."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable model; unknown fields are an error, field docstrings feed the JSON Schema."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
