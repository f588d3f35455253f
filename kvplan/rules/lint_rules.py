"""Deployment-file rules (KV8xx): problems in the files `kvplan lint` reads that are not facts about a KV plan.

Declared here, in the one catalogue, so `kvplan rule KV803` and `kvplan rules` list them whatever was
imported. Scopes: `file` (the file as a whole: unreadable, unparsable, over a limit, suppressions),
`launch` (one vLLM launch and its pod: model, GPUs, image) and `flags` (one flag's value as written).
The linter (`kvplan.lint`) reads the files and positions the findings; the checks that need only
launch facts are the bodies below. (The FP8 prefill-query advice is the backend rule KV703.)
"""
from __future__ import annotations

from kvplan.rules.base import define

LINT_FAMILY = "lint"
_LINT_DOC = "docs/lint.md"


unreadable_file = define(
    code="KV800", scope="file", name="unreadable-file", severity="error", family=LINT_FAMILY,
    summary="A path given to `kvplan lint` cannot be read as text (missing, unreadable, binary, not UTF-8).",
    why="A deployment file the linter cannot read is a file CI does not check; the other files are still linted.",
    fix="Fix the path or the file's permissions, or exclude it ([tool.kvplan.lint] exclude).",
    references=(_LINT_DOC,))

malformed_yaml = define(
    code="KV801", scope="file", name="malformed-yaml", severity="error", family=LINT_FAMILY,
    summary="A YAML file (manifest, compose file, vLLM --config) does not parse.",
    why="kubectl, docker compose and `vllm serve --config` reject the file; documents before the error "
        "are still linted.",
    fix="Fix the YAML syntax at the reported line and column (indentation, quotes, tabs).",
    references=(_LINT_DOC,))

shell_syntax = define(
    code="KV802", scope="file", name="unparsable-launch-line", severity="error", family=LINT_FAMILY,
    summary="A shell launch line cannot be split into arguments (unterminated quote).",
    why="The shell (or `sh -c` in a container) fails before vLLM starts, or passes arguments you did "
        "not intend.",
    fix="Close the quote, or split the command into a YAML list of arguments.",
    references=(_LINT_DOC,))

invalid_flag_value = define(
    code="KV803", scope="flags", name="invalid-flag-value", severity="error", family=LINT_FAMILY,
    summary="A KV-relevant vLLM flag has a value vLLM rejects (e.g. --kv-cache-dtype fp9).",
    why="vLLM validates these values at startup (CacheConfig._validate_cache_dtype raises "
        "'Invalid kv_cache_dtype'), so the pod crash-loops; kvplan cannot plan with the value either.",
    fix="Use one of the valid values the message lists (the closest one is suggested).",
    references=("vllm/config/cache.py::CacheConfig._validate_cache_dtype", _LINT_DOC))

model_config_not_found = define(
    code="KV804", scope="launch", name="model-config-not-found", severity="warning", family=LINT_FAMILY,
    summary="The served model's config.json was not found, so the rules that need the model were skipped.",
    why="Most KV rules (dtype, scales, skip indices, memory) need the model's layers; without them "
        "only flag rules run, and the finding lists the skipped ones. For a Hugging Face id it says why "
        "the id did not resolve: not found or private, gated, not in the cache offline, or Hub "
        "resolution turned off (`kvplan lint --offline`, `hub = false`).",
    fix="Map the model id to a config.json in [tool.kvplan.lint.models] (pyproject.toml or "
        "kvplan.toml), use a bundled model id (`kvplan lint --list-models`), or let kvplan reach the "
        "Hugging Face Hub or cache (HF_TOKEN / `hf auth login` for gated repos; see docs/hub.md).",
    references=(_LINT_DOC,))

unused_suppression = define(
    code="KV805", scope="file", name="unused-suppression", severity="warning", family=LINT_FAMILY,
    summary="A `# kvplan: ignore[...]` comment or kvplan.dev/ignore annotation suppresses nothing.",
    why="Stale suppressions hide the next real finding of that code (ruff RUF100, mypy unused-ignore).",
    fix="Remove the code from the suppression, or the whole suppression.",
    references=(_LINT_DOC,))

suppression_without_reason = define(
    code="KV806", scope="file", name="suppression-without-reason", severity="warning", family=LINT_FAMILY,
    summary="A suppression gives no reason.",
    why="A reviewer cannot tell a deliberate exception from a silenced bug; kube-linter and checkov "
        "document the annotation value as the reason.",
    fix="Write the reason after the codes: `# kvplan: ignore[KV401] scales calibrated offline` or "
        "`kvplan.dev/ignore: \"KV401: scales calibrated offline\"`.",
    references=(_LINT_DOC,))

unknown_gpu = define(
    code="KV807", scope="launch", name="unknown-gpu", severity="info", family=LINT_FAMILY,
    summary="A GPU node selector or configured GPU names no GPU kvplan models, so GPU rules were skipped.",
    why="Backend, FP8 support and KV memory findings need the GPU's compute capability and memory.",
    fix="Set gpu = \"h100\" in [tool.kvplan.lint] or pass --gpu (see `kvplan gpus`).",
    references=(_LINT_DOC,))

tp_exceeds_gpus = define(
    code="KV808", scope="launch", name="parallelism-exceeds-gpus", severity="error", family=LINT_FAMILY,
    summary="--tensor-parallel-size x --pipeline-parallel-size is larger than the GPUs the pod (group) requests.",
    why="vLLM needs one GPU per rank; with fewer visible GPUs it fails at startup (Ray placement group "
        "or CUDA device count check).",
    fix="Request as many nvidia.com/gpu as TP x PP (per LeaderWorkerSet group: size x GPUs per pod), "
        "or lower the parallel sizes.",
    references=("vllm/config/parallel.py::ParallelConfig", _LINT_DOC))

flag_and_value_in_one_arg = define(
    code="KV809", scope="flags", name="flag-and-value-in-one-argument", severity="error", family=LINT_FAMILY,
    summary="A YAML argument list item holds a flag and its value (\"--kv-cache-dtype fp8\").",
    why="Kubernetes passes each list item as one argv entry with no shell splitting; argparse treats "
        "an entry with a space as a positional and vLLM exits with 'unrecognized arguments'.",
    fix="Write `--kv-cache-dtype=fp8` or two list items: `- --kv-cache-dtype` and `- fp8`.",
    references=("https://docs.python.org/3/library/argparse.html", _LINT_DOC))

unknown_suppression_code = define(
    code="KV810", scope="file", name="unknown-suppression-code", severity="warning", family=LINT_FAMILY,
    summary="A suppression names a code that is not a kvplan rule.",
    why="A mistyped code suppresses nothing, and the finding it was meant for still fires.",
    fix="Use a code from `kvplan rules` (e.g. KV401).",
    references=(_LINT_DOC,))

unresolved_value = define(
    code="KV811", scope="flags", name="unresolved-flag-value", severity="info", family=LINT_FAMILY,
    summary="A KV flag's value comes from a variable the linter cannot resolve, so it was not checked.",
    why="Values like $(KV_DTYPE) or ${KV_DTYPE} are filled in at run time from a Secret, ConfigMap or "
        "the shell environment the linter does not see.",
    fix="Give the variable a literal value in the same manifest (env: value:) or script, or suppress "
        "with a reason.",
    references=(_LINT_DOC,))

unmodelled_release = define(
    code="KV812", scope="launch", name="unmodelled-engine-release", severity="info", family=LINT_FAMILY,
    summary="The image pins a vLLM release outside the ones kvplan models (0.18 to 0.33).",
    why="Flags and KV rules change between releases: a launch pinned to vllm/vllm-openai:v0.10.0 is linted "
        "against the newest modelled release, and its findings are reported as upgrade findings ('on "
        "upgrade from vLLM 0.10.0 to 0.33.0: ...', severity info), not as errors of the release it runs.",
    fix="Upgrade the image to a modelled release and fix the upgrade findings, or suppress KV812 with a reason.",
    references=("https://hub.docker.com/r/vllm/vllm-openai/tags (tags are vLLM release versions)", _LINT_DOC))

unpinned_image = define(
    code="KV813", scope="launch", name="unpinned-vllm-image", severity="info", family=LINT_FAMILY,
    summary="A vLLM image without a release tag (:latest, :nightly, none), so the release is not pinned.",
    why="`latest` moves: the flags a pod accepts change under it. kvplan lints such launches against the "
        "newest release it models and says so.",
    fix="Pin the image to a release tag, e.g. vllm/vllm-openai:v0.33.0.",
    references=("https://hub.docker.com/r/vllm/vllm-openai/tags (tags are vLLM release versions)", _LINT_DOC))


input_too_large = define(
    code="KV820", scope="file", name="input-too-large", severity="error", family=LINT_FAMILY,
    summary="A file is over kvplan's input limits (size, script lines or words), so it was not checked.",
    why="Lint runs in CI on pull requests, so anyone who opens one controls its input; the limits keep "
        "one file from taking unbounded time or memory. A deployment file is far below them (docs/limits.md).",
    fix="Split the file, or exclude generated files ([tool.kvplan.lint] exclude).",
    references=("docs/limits.md", _LINT_DOC))

yaml_too_complex = define(
    code="KV821", scope="file", name="yaml-over-limits", severity="error", family=LINT_FAMILY,
    summary="A YAML file's aliases expand past kvplan's budget (alias bomb) or it nests too deeply; not checked.",
    why="PyYAML shares aliased nodes, but every walk over the document pays for each alias again: nine "
        "levels of nine aliases are 387 million nodes. A recursive alias (a node containing itself) is "
        "refused too. kubectl's YAML decoder limits alias expansion as well.",
    fix="Write the repeated parts out (or template them), flatten the nesting, or split the file.",
    references=("docs/limits.md", _LINT_DOC))

file_timeout = define(
    code="KV822", scope="file", name="file-time-budget-exceeded", severity="error", family=LINT_FAMILY,
    summary="Linting one file took longer than its time budget (--file-timeout, default 5 s); it was not checked.",
    why="One pathological file must not stall CI; the other files are still linted.",
    fix="Find what makes the file slow (a huge script, thousands of launches), split it, or raise "
        "file-timeout in [tool.kvplan.lint].",
    references=("docs/limits.md", _LINT_DOC))

