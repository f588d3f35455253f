"""`kvplan engines` as a user runs it (CliRunner, fixed width, no colour)."""
from __future__ import annotations

import json

import jsonschema
from typer.testing import CliRunner

from kvplan.cli.main import app
from kvplan.errors import KvplanInputError
from kvplan.releases import DEFAULT_ENGINE_VERSION, known_releases
from kvplan.schemas import schema_dict

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def test_engines_json_lists_every_release_with_what_is_exact() -> None:
    r = CliRunner().invoke(app, ["engines", "--format", "json"], env=ENV)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schema_dict("engines"))
    rows = {x["version"]: x for x in doc["releases"]}
    assert set(rows) == {rel.version for rel in known_releases()}
    assert doc["releases"][0]["version"] == known_releases()[-1].version  # newest first
    assert doc["default"] == DEFAULT_ENGINE_VERSION and rows[DEFAULT_ENGINE_VERSION]["default"]
    assert rows["0.33.0"]["plan"] == "exact" and rows["0.33.0"]["options"] == 321
    assert rows["0.6.0"]["plan"] == "launch-lines-only" and rows["0.6.0"]["launch_lines"] == "exact"
    assert rows["0.28.0"]["plan"] == "exact"  # per layer and backend grid both answered by 0.28.0's own code
    assert rows["0.22.0"]["plan"] == "verified"  # in ORACLE_VERIFIED_RELEASES, backend rows not checked
    assert rows["0.26.0"]["plan"] == "modelled"
    assert "octave_k3v4" not in rows["0.28.0"]["kv_cache_dtypes"]


def test_engines_text_and_bad_format() -> None:
    r = CliRunner().invoke(app, ["engines"], env=ENV)
    assert r.exit_code == 0 and "0.6.0" in r.stdout and "launch-lines-only" in r.stdout
    bad = CliRunner().invoke(app, ["engines", "--format", "yaml"], env=ENV)
    assert isinstance(bad.exception, KvplanInputError) and "unknown --format 'yaml'" in str(bad.exception)
