"""Published schemas are generated from the models and checked in (drift tests)."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli.main import app
from kvplan.schemas import SCHEMAS, schema_dict, schema_text
from tests.conftest import ROOT


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_checked_in_schema_matches_models(name: str) -> None:
    on_disk = json.loads((ROOT / "schemas" / f"{name}.schema.json").read_text())
    assert on_disk == schema_dict(name), f"run: kvplan schema {name} > schemas/{name}.schema.json"


def test_every_schema_file_is_registered() -> None:
    files = {p.name.removesuffix(".schema.json") for p in (ROOT / "schemas").glob("*.schema.json")}
    assert files == set(SCHEMAS)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_command_prints_the_file(name: str) -> None:
    r = CliRunner().invoke(app, ["schema", name])
    assert r.exit_code == 0, r.output
    assert r.output == schema_text(name)
    doc = json.loads(r.output)
    assert doc["$schema"].endswith("2020-12/schema") and name in doc["$id"]


def test_unknown_schema_names_the_choices() -> None:
    r = CliRunner().invoke(app, ["schema", "plans"])
    assert r.exit_code != 0
    assert "lint-report" in str(r.exception) or "lint-report" in r.output


def test_schema_documents_every_field() -> None:
    s = schema_dict("plan")
    for name, d in s["$defs"].items():
        for field, spec in d.get("properties", {}).items():
            assert spec.get("description"), f"{name}.{field} has no description"
