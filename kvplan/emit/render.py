"""EmitResult -> text: a flags line, the engine's config YAML, or the full JSON document."""
from __future__ import annotations

import json

import yaml

from kvplan.emit.model import EmitResult

FORMATS: tuple[str, ...] = ("args", "yaml", "json")


def render(result: EmitResult, fmt: str = "args") -> str:
    """`args`: the flags on one line; `yaml`: the config file (findings as comments); `json`: everything."""
    if fmt == "args":
        return result.command + "\n"
    if fmt == "json":
        return json.dumps(result.model_dump(mode="json"), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if fmt == "yaml":
        head = [f"# kvplan {result.kvplan_version}: KV cache settings for {result.target.name} "
                f"{result.target.version} (kvplan.emit schema {result.schema_version})"]
        if result.model_source:
            head.append(f"# plan: {result.model_source} ({result.plan_engine.name} {result.plan_engine.version})")
        head.append(f"# usage: {result.config_usage}")
        if result.target.name == "trtllm":
            algo = {"fp8": "FP8", "nvfp4": "NVFP4"}.get(str(result.config.get("kv_cache_config", {}).get("dtype")))
            if algo:
                head.append(f"# legacy TensorRT engine flow: QuantConfig(kv_cache_quant_algo=QuantAlgo.{algo})")
        head.append("# exact: every KV layer gets its planned dtype" if result.exact else
                    f"# NOT exact: {len(result.differences)} layer(s) differ from the plan (see findings)")
        for f in result.findings:
            head.append(f"# {f.code} {f.severity.value}: {f.message}")
        body = yaml.safe_dump(result.config, sort_keys=True, default_flow_style=False, allow_unicode=True)
        return "\n".join(head) + "\n" + body
    raise ValueError(f"unknown format {fmt!r}")
