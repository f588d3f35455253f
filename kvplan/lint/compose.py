"""docker compose services -> launches (command/entrypoint, environment, interpolation, GPU devices)."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from yaml.nodes import MappingNode, Node, ScalarNode

from kvplan.ingest.limits import InputLimitError, limits, read_bounded
from kvplan.lint.argv import ArgItem, launches_from_argv, lex_resilient, referenced
from kvplan.lint.dockerfile import dockerfile_entrypoint_is_vllm, is_dockerfile
from kvplan.lint.extracted import EXTRA_ARGS_ENV, Extracted, Site
from kvplan.lint.shell import (
    VLLM_IMAGE,
    Launch,
    Tok,
    VarValue,
    interpolate,
    split_value,
)
from kvplan.lint.yamlnodes import YamlDoc, mget, mitems, scalar, seq

_COMPOSE_REF = re.compile(r"\$(?:\{([A-Za-z_]\w*)(?:(:?[-?])([^}]*))?\}|([A-Za-z_]\w*))")


def compose_interpolate(t: Tok) -> Tok:
    """docker compose's interpolation of one value: `${VAR:-default}` / `${VAR-default}` take the
    default, `$$` is a literal `$`, and a variable with no default comes from the shell or `.env` at
    `docker compose up` time, so the value is unknown."""
    if "$" not in t.value:
        return t
    value, unknown = interpolate(t.value, _COMPOSE_REF,
                                 lambda m: m.group(3) if m.group(2) in (":-", "-") else None)
    return replace(t, value=value, unknown=unknown or t.unknown)


def _built_image(doc: YamlDoc, svc: Node, path: str, compose_file: Path | None) -> tuple[bool, Tok, Tok | None] | None:
    """A service built from a Dockerfile (`build: DIR`, `build: {context, dockerfile}`, `dockerfile_inline`):
    (its entrypoint is the vLLM server, the `build` key's token, the vLLM image it derives from, placed at the
    `build` key), or None when there is no build or the Dockerfile cannot be read."""
    bnode = mget(svc, "build")
    if bnode is None:
        return None
    key = next(doc.key_tok(k, f"{path}.build") for k, v in mitems(svc) if v is bnode)
    inline = scalar(mget(bnode, "dockerfile_inline"))
    if inline is not None:
        text = inline
    else:
        if compose_file is None:
            return None
        context = scalar(bnode) if isinstance(bnode, ScalarNode) else (scalar(mget(bnode, "context")) or ".")
        name = scalar(mget(bnode, "dockerfile")) or "Dockerfile"
        if not context or "://" in context or "$" in context + name:
            return None
        file = compose_file.parent / context / name
        try:
            data = read_bounded(file, "Dockerfile", limits().max_lint_file_bytes, str(file))
            text = data.decode("utf-8-sig")
        except (OSError, UnicodeDecodeError, InputLimitError):
            return None
    if not is_dockerfile(text):
        return None
    vllm, image = dockerfile_entrypoint_is_vllm(text)
    return vllm, key, (Tok(image.value, key.line, key.col, key.yaml_path) if image is not None else None)


def _service_env(doc: YamlDoc, svc: Node, path: str) -> tuple[dict[str, VarValue], list[tuple[str, VarValue]]]:
    """A service's `environment` (list of NAME=value or mapping), interpolated, in order."""
    env: dict[str, VarValue] = {}
    ordered: list[tuple[str, VarValue]] = []
    enode = mget(svc, "environment")
    for i, e in enumerate(seq(enode)):
        s = scalar(e) or ""
        name, eq, _ = s.partition("=")
        if eq:
            t = compose_interpolate(doc.tok(e, f"{path}.environment[{i}]").at(len(name) + 1))
            ordered.append((name, VarValue(t.value, t, t.unknown)))
    for k, v in mitems(enode):
        if isinstance(v, ScalarNode):
            t = compose_interpolate(doc.tok(v, f"{path}.environment.{k.value}"))
            ordered.append((k.value, VarValue(t.value, t, t.unknown)))
    env.update(ordered)
    return env, ordered


def _service_argv(doc: YamlDoc, svc: Node, path: str, out: Extracted) -> list[ArgItem]:
    """`entrypoint` + `command`: a string is split shell-like (no shell), a list is taken as is."""
    items: list[ArgItem] = []
    for key in ("entrypoint", "command"):
        node = mget(svc, key)
        if isinstance(node, ScalarNode):
            for t in lex_resilient(node.value, doc.pos_in(node), f"{path}.{key}", out):
                if not t.op:
                    items.append(ArgItem(compose_interpolate(t)))
        for i, it in enumerate(seq(node)):
            if isinstance(it, ScalarNode):
                t = doc.tok(it, f"{path}.{key}[{i}]")
                ti = compose_interpolate(t)
                items.append(ArgItem(ti, it if ti is t else None))
    return items


def _gpu_devices(svc: Node) -> int | None:
    count = None
    for dev in seq(mget(mget(mget(mget(svc, "deploy"), "resources"), "reservations"), "devices")):
        c = scalar(mget(dev, "count"))
        if c and c.isdigit():
            count = int(c)
        ids = seq(mget(dev, "device_ids"))
        if ids:
            count = len(ids)
    return count


def _local_images(doc: YamlDoc, services: MappingNode, compose_file: Path | None) -> dict[str, tuple[bool, Tok | None]]:
    """Images a service builds and tags (`build:` + `image: NAME`): NAME -> (its entrypoint is the vLLM server,
    the vLLM image it derives from). Another service that runs NAME runs that Dockerfile's image."""
    local: dict[str, tuple[bool, Tok | None]] = {}
    for sk, svc in mitems(services):
        name = scalar(mget(svc, "image"))
        built = _built_image(doc, svc, f"services.{sk.value}", compose_file) if name else None
        if name and built is not None:
            local[name] = (built[0], built[2])
    return local


def compose_services(doc: YamlDoc, services: MappingNode, out: Extracted, compose_file: Path | None = None) -> None:
    local = _local_images(doc, services, compose_file)
    for sk, svc in mitems(services):
        path = f"services.{sk.value}"
        inode = mget(svc, "image")
        env, ordered = _service_env(doc, svc, path)
        items = _service_argv(doc, svc, path, out)
        implicit = None
        built = _built_image(doc, svc, path, compose_file) if mget(svc, "entrypoint") is None else None
        if built is None and mget(svc, "entrypoint") is None and (scalar(inode) or "") in local:
            it = doc.tok(inode, f"{path}.image")  # a local image another service builds
            vllm, base = local[scalar(inode) or ""]
            built = (vllm, it, Tok(base.value, it.line, it.col, it.yaml_path) if base is not None else None)
        if built is not None:
            if mget(svc, "command") is None:
                continue  # the Dockerfile's own ENTRYPOINT/CMD: that launch is the Dockerfile's, linted there
            if built[0]:  # the built image's entrypoint is the vLLM server: `command` holds engine arguments
                implicit = built[1]
        elif mget(svc, "entrypoint") is None and VLLM_IMAGE.search(scalar(inode) or ""):
            implicit = doc.tok(inode, f"{path}.image")
        launches = launches_from_argv(doc, items, env, implicit, out, yaml_list=True, k8s=False)
        texts = [it.tok.value for it in items]
        image_tok = doc.tok(inode, f"{path}.image") if isinstance(inode, ScalarNode) else None
        if built is not None and built[2] is not None:
            image_tok = built[2]
        for launch in launches:
            extra: list[Tok] = []
            if launch.launcher is implicit:
                for name, vv in ordered:
                    if EXTRA_ARGS_ENV.match(name) and not referenced(name, texts):
                        extra += ([replace(vv.tok, unknown=True)] if vv.unknown else split_value(vv.value, vv.tok))
            launch = Launch(launch.launcher, launch.args + tuple(extra), launch.dialect)
            out.sites.append(Site(launch, launch.launcher, gpu_count=_gpu_devices(svc), image=image_tok))
