"""vLLM `--config` YAML files (`vllm serve --config FILE`): flat keys that are `vllm serve` options."""
from __future__ import annotations

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kvplan.ingest.flags import KNOWN_FLAGS, MODELLED, REMOVED_FLAGS
from kvplan.lint.extracted import LOADER, Extracted, Site
from kvplan.lint.shell import Launch, Tok
from kvplan.lint.yamlnodes import YamlDoc, mget, mitems, seq

_FLAG_NAMES = {f.lstrip("-") for f in (*KNOWN_FLAGS, *REMOVED_FLAGS, *MODELLED) if f.startswith("--")}


def is_vllm_config(node: Node) -> bool:
    """A `vllm serve --config` file: flat keys, mostly vLLM flag names. A key that is no flag and
    holds a mapping or a list of mappings (`modelParameters:`, `inference:`) makes it something
    else, such as a Helm values file (a misspelt flag with a scalar or list value stays a finding)."""
    if not isinstance(node, MappingNode) or mget(node, "apiVersion") or mget(node, "services"):
        return False
    items = [(k.value.replace("_", "-"), v) for k, v in mitems(node)]
    if any(k not in _FLAG_NAMES and (isinstance(v, MappingNode) or any(not isinstance(x, ScalarNode) for x in seq(v)))
           for k, v in items):
        return False
    return bool(items) and sum(k in _FLAG_NAMES for k, _ in items) >= max(1, len(items) // 3)


def vllm_config_launch(doc: YamlDoc, node: MappingNode, out: Extracted) -> None:
    args: list[Tok] = []
    first: Tok | None = None
    for k, v in mitems(node):
        kt = doc.key_tok(k, k.value)
        first = first or kt
        flag = Tok("--" + k.value, kt.line, kt.col, kt.yaml_path)
        if isinstance(v, ScalarNode):
            if v.tag.endswith(":bool") or (v.value.lower() in ("true", "false") and v.style is None):
                if v.value.lower() == "true":
                    args.append(flag)
                continue
            args += [flag, doc.tok(v, k.value)]
        elif isinstance(v, SequenceNode):
            args.append(flag)
            args += [doc.tok(x, f"{k.value}[{i}]") for i, x in enumerate(v.value) if isinstance(x, ScalarNode)]
        elif isinstance(v, MappingNode):
            import json
            args += [flag, doc.tok(v, k.value, json.dumps(yaml.load(yaml.serialize(v), Loader=LOADER)))]
    if first is not None:
        launcher = Tok("vllm-config", first.line, first.col, first.yaml_path)
        out.sites.append(Site(Launch(launcher, tuple(args)), first))


