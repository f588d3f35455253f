"""vLLM `--config` files attached to the launches that pass them (one launch, not two).

`vllm serve MODEL --config FILE ...` reads FILE's keys as arguments placed right after the model and
before the rest of the command line, so the command line wins where both set an option (vLLM
FlexibleArgumentParser._pull_args_from_config). A launch whose `--config` names a vLLM config file
linted in the same run gets that file's keys in that order, each token keeping the config file as its
place (findings on them are reported there); the config file is then no launch of its own. A config
file nothing passes is linted alone, as before. The value is matched as a path next to the launch's
file, else by file name when exactly one linted config file has it (a path inside the container,
`/app/config.yaml`, copied from `./config.yaml`).
"""
from __future__ import annotations

import posixpath
from dataclasses import replace
from pathlib import Path

from kvplan.lint.extracted import Extracted, Site
from kvplan.lint.shell import Launch, Tok

CONFIG_LAUNCHER = "vllm-config"


def _config_value(args: tuple[Tok, ...]) -> tuple[int, int, Tok] | None:
    """(start, end) of the `--config X` / `--config=X` words in `args`, and the value token."""
    for i, t in enumerate(args):
        if t.value == "--config" and i + 1 < len(args) and not args[i + 1].unknown:
            return i, i + 2, args[i + 1]
        if t.value.startswith("--config=") and not t.unknown:
            return i, i + 1, t.at(len("--config="))
    return None


def _is_config_file(ex: Extracted) -> bool:
    return ex.kind == "vllm-config" and bool(ex.sites) and all(
        s.launch.launcher.value == CONFIG_LAUNCHER for s in ex.sites)


def attach_vllm_configs(files: list[tuple[Path, str, Extracted]]) -> None:
    """Give each launch that passes a linted vLLM config file that file's keys; the file's own site goes."""
    configs = {display: (path, ex) for path, display, ex in files if _is_config_file(ex)}
    if not configs:
        return
    by_name: dict[str, list[str]] = {}
    for display in configs:
        by_name.setdefault(posixpath.basename(display), []).append(display)
    resolved = {str(p.resolve()): d for d, (p, _) in configs.items()}
    for path, display, ex in files:
        for site in ex.sites:
            got = _config_value(site.launch.args)
            if got is None:
                continue
            start, end, value = got
            target = resolved.get(str((path.parent / value.value).resolve())) if not value.value.startswith("/") \
                else None
            names = by_name.get(posixpath.basename(value.value), [])
            target = target or (names[0] if len(names) == 1 else None)
            if target is None or target == display:
                continue
            _merge(site, start, end, target, configs[target][1])
            configs[target][1].attached_to.append(f"{display}:{site.anchor.line}")
    for _, ex in configs.values():
        if ex.attached_to:
            ex.sites = []
            ex.note = "vLLM --config file of " + ", ".join(ex.attached_to) + " (its keys are linted with that launch)"


def _merge(site: Site, start: int, end: int, display: str, config: Extracted) -> None:
    """The launch's argv as vLLM builds it: model, the config's keys, then the rest of the command line."""
    args = site.launch.args
    keys = tuple(replace(t, file=display) for s in config.sites for t in s.launch.args)
    head = args[:1] if args and not args[0].value.startswith("-") else ()
    rest = args[len(head):start] + args[end:]
    site.launch = Launch(site.launch.launcher, head + keys + rest, site.launch.dialect, site.launch.image)
