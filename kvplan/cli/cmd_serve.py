"""`kvplan serve`: run the JSON API (needs the `serve` extra: fastapi + uvicorn).

    kvplan serve --port 8080                        # inline configs only, loopback
    kvplan serve --host 0.0.0.0 --allow-path /models --workers 2

fastapi and uvicorn are imported inside the command only, so the rest of the CLI never needs them.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Annotated

import typer

from kvplan.errors import KvplanInputError

__all__ = ["COMMANDS", "serve"]


def serve(
    host: Annotated[str, typer.Option("--host", help="Interface to listen on (default: loopback only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8080,
    allow_path: Annotated[list[Path] | None, typer.Option(
        "--allow-path", help="Directory requests may read config.json / checkpoints from via config_path "
                             "(repeatable; default: none, configs come inline).")] = None,
    max_body_bytes: Annotated[int, typer.Option(
        "--max-body-bytes", help="Largest request body; bigger ones get 413.")] = 1 << 20,
    max_layers: Annotated[int, typer.Option("--max-layers",
                                            help="Largest num_hidden_layers accepted (at most kvplan's own limit, "
                                                 "4096; docs/limits.md).")] = 1024,
    threads: Annotated[int, typer.Option("--threads", help="Planner threads per worker.")] = 4,
    workers: Annotated[int, typer.Option("--workers",
                                         help="Worker processes (the planner is CPU-bound; use one per core).")] = 1,
    log_level: Annotated[str, typer.Option("--log-level",
                                           help="uvicorn log level: critical, error, warning, info, debug.")] = "info",
    no_hub: Annotated[bool, typer.Option("--no-hub", help="Refuse requests naming a Hugging Face id (`model`); "
                                         "by default the server resolves them through its HF cache and Hub.")] = False,
) -> None:
    """Serve the planner as a JSON API: /v1/plan, /v1/emit, /v1/lint, /v1/rules, /v1/backends, /healthz."""
    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise KvplanInputError(f"kvplan serve needs {' and '.join(missing)} (the 'serve' extra), which is not "
                               "installed.",
                               "pip install 'kvplan[serve]'.")
    for name, value in (("--port", port), ("--threads", threads), ("--workers", workers),
                        ("--max-body-bytes", max_body_bytes), ("--max-layers", max_layers)):
        if value < 1 or (name == "--port" and value > 65535):
            raise KvplanInputError(f"{name} {value} is out of range.", f"Pass a positive {name}.")
    dirs = []
    for d in allow_path or ():
        if not d.is_dir():
            raise KvplanInputError(f"--allow-path {d} is not a directory.", "Pass an existing directory.")
        dirs.append(d.resolve())
    import uvicorn

    from kvplan.service.app import ServiceSettings, create_app
    settings = ServiceSettings(allow_paths=tuple(dirs), max_body_bytes=max_body_bytes, threads=threads,
                               max_layers=max_layers, hub=not no_hub)
    if workers > 1:
        # Worker processes import the app themselves: pass the settings through the environment.
        os.environ["KVPLAN_SERVE_SETTINGS"] = settings.to_json()
        uvicorn.run("kvplan.service.app:create_app_from_env", factory=True, host=host, port=port, workers=workers,
                    log_level=log_level)
    else:
        uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level)


COMMANDS = {"serve": serve}
"""Commands the main app registers (`kvplan serve`)."""
