"""Published schemas (schemas/emit-result.schema.json, schemas/policy.schema.json) match the models."""
from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from kvplan.emit.model import emit_schema
from kvplan.policy.model import policy_schema
from tests.emit.helpers import ROOT

REGENERATE = ('python -c "import json; from kvplan.emit.model import emit_schema; from kvplan.policy.model import '
              "policy_schema; [open(f'schemas/{n}.schema.json', 'w').write(json.dumps(s, indent=2, sort_keys=True) "
              "+ '\\n') for n, s in (('emit-result', emit_schema()), ('policy', policy_schema()))]\"")


@pytest.mark.parametrize("name,schema", [("emit-result", emit_schema), ("policy", policy_schema)])
def test_published_schema_matches_the_model(name: str, schema) -> None:
    published = json.loads((ROOT / "schemas" / f"{name}.schema.json").read_text())
    assert published == schema(), f"schemas/{name}.schema.json drifted; regenerate with: {REGENERATE}"
    jsonschema.Draft202012Validator.check_schema(published)


def test_example_policies_validate_against_the_published_schema() -> None:
    published = json.loads((ROOT / "schemas" / "policy.schema.json").read_text())
    files = sorted((ROOT / "examples" / "policies").glob("*.yaml"))
    assert files
    for f in files:
        jsonschema.validate(yaml.safe_load(f.read_text()), published)
