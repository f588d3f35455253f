"""`kvplan serve`: a small JSON API over the planner, emitters, rules, backends and lint.

    POST /v1/plan      config.json object (+ hf_quant_config) + flags + gpu  -> plan
    POST /v1/emit      a plan, or the same inputs as /v1/plan, + target      -> launch flags / config
    POST /v1/lint      deployment files inline                               -> lint report (501 without kvplan.lint)
    GET  /v1/rules     the rule catalogue (what `kvplan rules --format json` prints)
    GET  /v1/backends  the attention-backend table (`kvplan backends --format json`), ?gpu=h100
    GET  /healthz      liveness
    GET  /openapi.json generated from the request/response models

No file-system access beyond what a request carries, unless the server was started with
`--allow-path DIR` (then `config_path` may name a config or checkpoint under DIR). Request bodies
over the limit get 413 before they are parsed. Input errors are 400 with the CLI's message;
malformed request bodies are 422. The planner is pure and CPU-bound: endpoints are async and run
it on a bounded thread pool, so the event loop keeps answering (e.g. /healthz) under load.
"""
from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from kvplan import __version__
from kvplan.emit import emit as emit_plan
from kvplan.emit.load import plan_from_data
from kvplan.emit.model import EmitResult
from kvplan.errors import KvplanInputError
from kvplan.ingest.limits import InputLimitError, active_limits, loads_json
from kvplan.model.limits import MAX_LAYERS
from kvplan.model.plan import Plan
from kvplan.releases import DEFAULT_ENGINE_NAME, DEFAULT_ENGINE_VERSION
from kvplan.service.models import EmitRequest, ErrorResponse, Health, LintRequest, ModelRequest, PlanRequest

log = logging.getLogger("kvplan.service")

DEFAULT_MAX_BODY_BYTES = 1 << 20          # 1 MiB: a config.json is a few KiB, a 128-layer plan ~300 KiB
DEFAULT_MAX_LAYERS = 1024                 # below kvplan's own limit (4096): the layer check is the CLI's, narrowed


@dataclass(frozen=True)
class ServiceSettings:
    """How the server runs (the `kvplan serve` options)."""

    allow_paths: tuple[Path, ...] = ()
    """Directories `config_path` may point into (none: inline configs only)."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Largest accepted request body; larger ones get 413."""
    threads: int = 4
    """Planner threads (requests beyond this wait for a free thread)."""
    max_layers: int = DEFAULT_MAX_LAYERS
    """Largest num_hidden_layers accepted in an inline config."""
    hub: bool = True
    """Requests may name a Hugging Face model id (`model`), resolved through the server's HF cache and Hub."""

    def to_json(self) -> str:
        return json.dumps({"allow_paths": [str(p) for p in self.allow_paths], "max_body_bytes": self.max_body_bytes,
                           "threads": self.threads, "max_layers": self.max_layers, "hub": self.hub})

    @classmethod
    def from_json(cls, text: str) -> ServiceSettings:
        d = json.loads(text)
        return cls(allow_paths=tuple(Path(p) for p in d.get("allow_paths", ())),
                   max_body_bytes=int(d.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES)),
                   threads=int(d.get("threads", 4)), max_layers=int(d.get("max_layers", DEFAULT_MAX_LAYERS)),
                   hub=bool(d.get("hub", True)))


class ServiceError(Exception):
    """An HTTP error with the service's error body."""

    def __init__(self, status: int, type_: str, message: str, problem: str | None = None,
                 fix: str | None = None):
        super().__init__(message)
        self.status, self.type, self.message, self.problem, self.fix = status, type_, message, problem, fix


def _error_response(status: int, type_: str, message: str, problem: str | None = None,
                    fix: str | None = None) -> JSONResponse:
    body = {"error": {"type": type_, "message": message, "problem": problem, "fix": fix}}
    return JSONResponse(body, status_code=status)


def _json(data: Any) -> Response:
    """Deterministic JSON (sorted keys), like the CLI's."""
    if hasattr(data, "model_dump"):
        data = data.model_dump(mode="json")
    return Response(json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")),
                    media_type="application/json")


class BodyLimit:
    """Pure-ASGI middleware: 413 for bodies over the limit (by Content-Length, or counted while streaming)."""

    def __init__(self, app: Any, max_body_bytes: int):
        self.app, self.limit = app, max_body_bytes

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]], send: Callable) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._too_large(send, int(declared))
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._too_large(send, size)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if b"json" in headers.get(b"content-type", b""):
            try:  # the CLI's JSON depth limit, before FastAPI's parser recurses (docs/limits.md)
                loads_json(body, "request body")
            except InputLimitError as e:
                await self._send(send, 400, {"error": {"type": "input_error", "message": str(e),
                                                       "problem": e.problem, "fix": e.fix}})
                return
            except KvplanInputError:
                pass  # malformed JSON: FastAPI answers 422 request_invalid
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, send: Callable, size: int) -> None:
        msg = (f"request body is {size:,} bytes, over this server's limit of {self.limit:,}. "
               "Send only config.json (and hf_quant_config.json), or start the server with a larger --max-body-bytes.")
        error = {"type": "request_too_large", "message": msg, "problem": None, "fix": None}
        await self._send(send, 413, {"error": error})

    @staticmethod
    async def _send(send: Callable, status: int, doc: dict) -> None:
        body = json.dumps(doc).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def _check_gpu(gpu: str | None) -> None:
    if gpu is not None and gpu.strip().lower() == "auto":
        # resolve_gpu("auto") imports torch and probes this server's own GPU: not what a client means.
        raise KvplanInputError("gpu 'auto' would detect the server's own GPU.",
                               "Name the GPU the plan is for, e.g. h100 or sm90.")


class Service:
    """The request handlers, independent of FastAPI (what the endpoints call on a worker thread)."""

    def __init__(self, settings: ServiceSettings):
        self.settings = settings
        self.allowed = tuple(p.resolve() for p in settings.allow_paths)

    def _model_source(self, req: ModelRequest) -> tuple[Any, str | None]:
        if sum(x is not None for x in (req.config, req.config_path, req.model)) > 1:
            raise KvplanInputError("give one of config, config_path and model, not several.",
                                   "Send the config.json object inline, or a Hugging Face id as model.")
        if req.model is not None:
            if not self.settings.hub:
                raise ServiceError(403, "hub_disabled", "this server resolves no Hugging Face ids (started with "
                                   "--no-hub). Send the config.json object as `config`.")
            from kvplan.ingest.flags import flags_from
            from kvplan.ingest.hub import hub_id, resolve
            repo = hub_id(req.model) if "/" in req.model else None
            if repo is None:  # never a server-side path: those go through config_path and --allow-path
                raise KvplanInputError(f"model {req.model!r} is not a Hugging Face model id.",
                                       "Send an id such as meta-llama/Llama-3.1-8B-Instruct, or the config.json as "
                                       "`config`.")
            return resolve(repo, flags_from(req.flags).revision), req.model
        if req.config_path is not None:
            if not self.allowed:
                raise ServiceError(403, "path_not_allowed", "this server reads no files: config_path is disabled. "
                                   "Send the config.json object as `config`, or start the server with "
                                   "--allow-path DIR.")
            p = Path(req.config_path)
            if not p.is_absolute():
                p = self.allowed[0] / p
            real = p.resolve()
            if not any(real == a or real.is_relative_to(a) for a in self.allowed):
                raise ServiceError(403, "path_not_allowed", f"config_path {req.config_path!r} is outside the allowed "
                                   f"directories. Use a path under: {', '.join(map(str, self.allowed))}.")
            return real, str(req.config_path)
        if req.config is None:
            raise KvplanInputError("no model: the request has neither config nor config_path.",
                                   'Send {"config": {...config.json...}, "flags": [...]}.')
        return req.config, None

    def limits(self) -> Any:
        """The CLI's input limits (kvplan.ingest.limits), with this server's --max-layers."""
        return active_limits(max_layers=min(self.settings.max_layers, MAX_LAYERS))

    def plan(self, req: ModelRequest) -> Plan:
        with self.limits():
            return self._plan(req)

    def _plan(self, req: ModelRequest) -> Plan:
        from kvplan.pipeline import compile as compile_plan
        from kvplan.policy import policy_from_text
        _check_gpu(req.gpu)
        source, label = self._model_source(req)
        policy = policy_from_text(req.policy, "<request policy>") if req.policy is not None else None
        budget = int(req.kv_budget_gib * 2**30) if req.kv_budget_gib is not None else None
        return compile_plan(source, req.flags, req.gpu, policy=policy, hf_quant_config=req.hf_quant_config,
                            kv_budget_bytes=budget, label=label, engine=req.engine)

    def emit(self, req: EmitRequest) -> EmitResult:
        if req.plan is not None:
            given = [f for f in ("config", "config_path", "model", "hf_quant_config", "gpu", "kv_budget_gib", "policy",
                                 "engine")
                     if getattr(req, f) is not None] + (["flags"] if req.flags else [])
            if given:
                raise KvplanInputError(f"a plan was sent together with {', '.join(given)}; "
                                       "the plan already fixes them.",
                                       "Send either plan, or the model inputs to plan first.")
            with self.limits():
                plan = plan_from_data(req.plan, "<request plan>")
        else:
            plan = self.plan(req)
        return emit_plan(plan, req.to, per_layer=req.per_layer)

    def lint(self, req: LintRequest) -> dict[str, Any]:
        try:
            from kvplan.lint import lint_paths
        except (ImportError, AttributeError):
            raise ServiceError(501, "not_implemented", "linting is not available in this kvplan build "
                               "(kvplan.lint is not importable).") from None
        names = []
        for name in sorted(req.files):
            pp = PurePosixPath(name)
            hidden = any(p.startswith(".") for p in pp.parts)
            if not name or pp.is_absolute() or ".." in pp.parts or "\\" in name or hidden:
                raise KvplanInputError(f"file name {name!r} must be a relative path without '..' or hidden parts.",
                                       "Use names like deploy/vllm.yaml.")
            names.append(str(pp))
        with tempfile.TemporaryDirectory(prefix="kvplan-lint-") as tmp:
            root = Path(tmp)
            for name in names:
                f = root / name
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_text(req.files[name], encoding="utf-8")
            with self.limits():  # per-file size, YAML alias and time limits: findings, as in the CLI
                report = lint_paths(names, select=req.select, ignore=req.ignore, gpu=req.gpu,
                                    fail_level=req.fail_level, cwd=root, isolated=True)
            text = report.model_dump_json() if hasattr(report, "model_dump_json") else json.dumps(report)
            # Paths are reported relative to the scratch folder; never leak its location.
            text = text.replace(json.dumps(str(root) + "/")[1:-1], "").replace(json.dumps(str(root))[1:-1], ".")
        return json.loads(text)

    @staticmethod
    def rules() -> dict[str, Any]:
        from kvplan.planner.precedence import DECISION_ORDER
        from kvplan.rules.base import LINT_SCOPES, PLANNER_SCOPES, rules_in
        return {"schema_version": "1.0", "kvplan_version": __version__, "decision_order": list(DECISION_ORDER),
                "rules": [r.doc() for r in rules_in(*PLANNER_SCOPES, *LINT_SCOPES)],
                "emit_and_policy_rules": [r.doc() for r in rules_in("emit", "policy")]}

    @staticmethod
    def backends(gpu: str | None, engine: str | None) -> dict[str, Any]:
        try:
            from kvplan.backends.document import backends_document
        except ImportError:
            raise ServiceError(501, "not_implemented",
                               "the backend tables are not available in this kvplan build.") from None
        _check_gpu(gpu)
        return backends_document(gpu, engine) if engine else backends_document(gpu)


_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "Bad input (the CLI's one-line message)."},
    403: {"model": ErrorResponse, "description": "config_path outside --allow-path."},
    413: {"model": ErrorResponse, "description": "Request body too large."},
    422: {"model": ErrorResponse, "description": "Malformed request body."}}


def create_app(settings: ServiceSettings | None = None) -> FastAPI:
    """The FastAPI application (uvicorn serves it; tests start it on loopback)."""
    settings = settings or ServiceSettings()
    service = Service(settings)
    limiter = anyio.CapacityLimiter(max(1, settings.threads))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(service.rules)  # import the rule catalogue once, before requests race
        yield

    app = FastAPI(title="kvplan", version=__version__, lifespan=lifespan,
                  description="Per-layer KV cache plans for vLLM 0.33, and the flags that realise them.")
    if settings.max_body_bytes:
        app.add_middleware(BodyLimit, max_body_bytes=settings.max_body_bytes)

    async def run(fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args, limiter=limiter)

    @app.exception_handler(KvplanInputError)
    async def _input_error(_: Request, e: KvplanInputError) -> JSONResponse:
        return _error_response(400, "input_error", str(e), e.problem, e.fix)

    @app.exception_handler(ServiceError)
    async def _service_error(_: Request, e: ServiceError) -> JSONResponse:
        return _error_response(e.status, e.type, e.message, e.problem, e.fix)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, e: RequestValidationError) -> JSONResponse:
        errs = e.errors()
        first = errs[0] if errs else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ()))
        more = f" (and {len(errs) - 1} more problem(s))" if len(errs) > 1 else ""
        return _error_response(422, "request_invalid", f"{where}: {first.get('msg')}{more}.",
                               fix="See /openapi.json for the request shape.")

    @app.exception_handler(Exception)
    async def _internal(_: Request, e: Exception) -> JSONResponse:
        log.exception("internal error")
        return _error_response(500, "internal_error", f"internal error ({e.__class__.__name__}); this is a kvplan bug.")

    @app.get("/healthz", response_model=Health)
    async def healthz() -> Response:
        return _json(Health(kvplan_version=__version__,
                            engine={"name": DEFAULT_ENGINE_NAME, "version": DEFAULT_ENGINE_VERSION}))

    @app.post("/v1/plan", response_model=Plan, responses=_RESPONSES)
    async def plan(req: PlanRequest) -> Response:
        """Compile the per-layer KV plan (the same JSON as `kvplan plan`)."""
        return _json(await run(service.plan, req))

    @app.post("/v1/emit", response_model=EmitResult, responses=_RESPONSES)
    async def emit(req: EmitRequest) -> Response:
        """Launch flags and config file that realise a plan (the same JSON as `kvplan emit --format json`)."""
        return _json(await run(service.emit, req))

    @app.post("/v1/lint", responses={**_RESPONSES, 501: {"model": ErrorResponse, "description": "Lint not available."}})
    async def lint(req: LintRequest) -> Response:
        """Lint deployment files sent inline (the same JSON as `kvplan lint --output-format json`)."""
        return _json(await run(service.lint, req))

    @app.get("/v1/rules")
    async def rules() -> Response:
        """Every rule: code, name, severity, summary, why, fix, references."""
        return _json(await run(service.rules))

    @app.get("/v1/backends", responses={400: _RESPONSES[400]})
    async def backends(gpu: str | None = Query(None, description="GPU name or compute capability (h100, sm90)."),
                       engine: str | None = Query(None, description="Engine and version, e.g. vllm==0.33.0."),
                       ) -> Response:
        """The attention-backend capability table, optionally evaluated on one GPU."""
        return _json(await run(service.backends, gpu, engine))

    return app


def create_app_from_env() -> Any:
    """uvicorn factory for multi-worker runs: settings come from KVPLAN_SERVE_SETTINGS (JSON)."""
    import os
    return create_app(ServiceSettings.from_json(os.environ.get("KVPLAN_SERVE_SETTINGS", "{}")))
