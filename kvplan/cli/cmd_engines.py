"""`kvplan engines`: the vLLM releases kvplan knows, and what is exact for each."""
from __future__ import annotations

import json
from typing import Annotated

import typer

from kvplan.errors import KvplanInputError

__all__ = ["COMMANDS", "engines"]


def engines(fmt: Annotated[str, typer.Option("--format", "-f", help="text or json.")] = "text") -> None:
    """List every vLLM release kvplan knows: launch lines judged exactly by its own parser, and the KV plan
    (exact, modelled, or launch lines only)."""
    from kvplan.backends.release_list import engines_document
    from kvplan.cli.cmd_backends import _console

    f = fmt.strip().lower()
    if f not in ("text", "json"):
        raise KvplanInputError(f"unknown --format {fmt!r}.", "use one of: text, json")
    doc = engines_document()
    if f == "json":
        typer.echo(json.dumps(doc.model_dump(mode="json"), indent=2, sort_keys=True))
        return
    from rich.table import Table

    t = Table(title=f"vLLM releases (default {doc.default}; attention-backend rows verified against vLLM's own "
                    f"selector for {doc.backend_rows_from})")
    for h in ("release", "launch lines", "KV plan", "backend rows", "options", "kv dtypes", "quant methods",
              "architectures"):
        t.add_column(h)
    for r in doc.releases:
        t.add_row(r.version + (" (default)" if r.default else ""), r.launch_lines, r.plan, r.backend_rows,
                  str(r.options),
                  str(len(r.kv_cache_dtypes)), str(r.quantization_methods), str(r.architectures))
    _console().print(t)


COMMANDS = {"engines": engines}
"""Commands the main app registers (`kvplan engines`)."""
