"""Plan -> JSON text: stable key order, layers in order, findings pre-sorted."""
from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel


def to_jsonable(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")


def dumps(obj: BaseModel | dict[str, Any], indent: int = 2) -> str:
    """Deterministic JSON: sorted keys, UTF-8, trailing newline."""
    data = to_jsonable(obj) if isinstance(obj, BaseModel) else obj
    return json.dumps(data, indent=indent, sort_keys=True, ensure_ascii=False) + "\n"
