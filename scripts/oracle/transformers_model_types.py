#!/usr/bin/env python3
"""Write kvplan/data/transformers_model_types.json: the model types vLLM 0.33.0 loads, as it imports them.

Per release (from 0.18) the same tables are read statically from the wheels by scripts/gen_vllm_release.py
(kvplan/data/vllm/model_types.json); this imported reference checks that reading
(tests/releases/test_model_types.py) and serves releases without their own data.

Run by hand with the interpreter of the vLLM 0.33.0 oracle venv (never in CI):

    VLLM_TARGET_DEVICE=cpu <venv>/bin/python scripts/oracle/transformers_model_types.py

vLLM loads a config.json through its own config classes (`vllm.transformers_utils.config.
_CONFIG_REGISTRY`) or through transformers' `AutoConfig`, which knows the model types of its
`CONFIG_MAPPING_NAMES` and, with `--trust-remote-code`, the config class a checkpoint names in
its `auto_map`. A model_type in neither table, in a config without `auto_map`, makes vLLM refuse the
config before it looks at the architecture ("The checkpoint you are trying to load has model type
`X` but Transformers does not recognize this architecture"). The file records both tables, from
the transformers release installed next to vLLM (the one vLLM's requirements pin).

It also records the model classes transformers exports (`transformers_model_classes`: the names of
`dir(transformers)` that name a model class, *Model* or *For*): an architecture that is not in vLLM's
registry is built through vLLM's Transformers backend only when `getattr(transformers, arch)` finds
it or the config's `auto_map` names an AutoModel class (vllm/model_executor/models/registry.py::
_try_resolve_transformers); otherwise vLLM refuses it ("Model architectures [...] are not supported
for now").
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "kvplan" / "data" / "transformers_model_types.json"


def main() -> int:
    import transformers
    import vllm
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from vllm.transformers_utils import config as vcfg

    doc = {
        "kind": "kvplan.transformers_model_types",
        "vllm_version": vllm.__version__,
        "transformers_version": transformers.__version__,
        "generated_by": "scripts/oracle/transformers_model_types.py",
        "transformers_model_types": sorted(CONFIG_MAPPING_NAMES),
        "vllm_config_model_types": sorted(vcfg._CONFIG_REGISTRY),
        "transformers_model_classes": sorted(n for n in dir(transformers)
                                             if n[:1].isupper() and ("Model" in n or "For" in n)),
    }
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(doc['transformers_model_types'])} transformers model types, "
          f"{len(doc['vllm_config_model_types'])} vLLM config classes, "
          f"{len(doc['transformers_model_classes'])} transformers model classes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
