"""Deployment-file rules (KV8xx): problems in the files `kvplan lint` reads that are not facts about a KV plan.

Declared here, in the one catalogue, so `kvplan rule KV803` and `kvplan rules` list them whatever was
imported. Scopes: `file` (the file as a whole: unreadable, unparsable, over a limit, suppressions),
`launch` (one vLLM launch and its pod: model, GPUs, image) and `flags` (one flag's value as written).

The checks that need only facts are rule bodies here: the `launch`/`flags` bodies read `LaunchFacts`
(KV807, KV808, KV811, KV812, KV813), the suppression bodies read `SuppressionFacts` (KV805, KV806,
KV810). The linter (`kvplan.lint`) gathers those facts from the file and points each finding at its
subject. The rest are raised where the file is read or parsed (KV800-KV802, KV809, KV820-KV822), the
flags parsed (KV803) or the model resolved (KV804), and have no body. (The FP8 prefill-query advice is
the backend rule KV703.)
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.engines import SUPPORTED_ENGINES, resolve_engine
from kvplan.errors import KvplanInputError
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import Subject
from kvplan.rules.base import Emit, declare, define

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
        "resolution turned off (`kvplan lint --offline`, `hub = false`). It is reported once per model "
        "per run, at the first launch, listing every place the model is launched.",
    fix="Map the model id to a config.json in [tool.kvplan.lint.models] (pyproject.toml or "
        "kvplan.toml), use a bundled model id (`kvplan lint --list-models`), or let kvplan reach the "
        "Hugging Face Hub or cache (HF_TOKEN / `hf auth login` for gated repos; see docs/hub.md).",
    references=(_LINT_DOC,))


flag_and_value_in_one_arg = define(
    code="KV809", scope="flags", name="flag-and-value-in-one-argument", severity="error", family=LINT_FAMILY,
    summary="A YAML argument list item holds a flag and its value (\"--kv-cache-dtype fp8\").",
    why="Kubernetes passes each list item as one argv entry with no shell splitting; argparse treats "
        "an entry with a space as a positional and vLLM exits with 'unrecognized arguments'.",
    fix="Write `--kv-cache-dtype=fp8` or two list items: `- --kv-cache-dtype` and `- fp8`.",
    references=("https://docs.python.org/3/library/argparse.html", _LINT_DOC))


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


# ---------------------------------------------------------------------------------------------------------
# Launch-scope checks. The linter gathers these facts from the file (kvplan.lint.engine) and maps each
# finding's subject to the token it is about.

MODELLED_FIRST = (0, 18, 0)
def _modelled() -> str:
    return f"vLLM {'.'.join(map(str, MODELLED_FIRST))} to {newest_engine().version_str}"
# vLLM's own release images: their tag is the vLLM version (v0.10.0, v0.25.0-ubuntu2404, 0.11.0).
_VLLM_RELEASE_REPO = re.compile(r"(?:^|/)vllm/vllm-openai(?:-[a-z0-9]+)?$", re.I)
_RELEASE_TAG = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:(?:\.post\d+)|(?:[-+.][\w.-]*))?$")
_IMAGE = Subject(launch_fact="image")


def image_release(image: str) -> tuple[str, tuple[int, int, int] | str | None] | None:
    """("pinned", (0, 10, 0)) for vllm/vllm-openai:v0.10.0, ("unpinned", "latest"|"nightly"|None) for a
    vLLM image without a release tag, None for other images (their tag says nothing about vLLM)."""
    ref = image.strip()
    name = ref.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    repo, tag = (name.rsplit(":", 1) if ":" in last else (name, None))
    if not _VLLM_RELEASE_REPO.search(repo):
        return None
    m = _RELEASE_TAG.match(tag or "")
    if m:
        return "pinned", (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    return "unpinned", tag


def pinned_version(image: str) -> str | None:
    """The vLLM release a vllm/vllm-openai image tag pins ("0.10.0"), else None."""
    rel = image_release(image)
    if rel and rel[0] == "pinned" and isinstance(rel[1], tuple):
        return ".".join(str(x) for x in rel[1])
    return None


def modelled_engine(version: str) -> EngineVersion | None:
    """The modelled vLLM release `version` names, or None when kvplan does not model it."""
    try:
        return resolve_engine(f"vllm=={version}")
    except KvplanInputError:
        return None


def newest_engine() -> EngineVersion:
    """What `:latest` and upgrades mean: the newest release kvplan models."""
    return resolve_engine(SUPPORTED_ENGINES[0])


@dataclass(frozen=True)
class LaunchFacts:
    """What the launch-scope rules read: a launch's flags and the pod around it, as plain values."""

    flags: ServingFlags
    image: str | None = None
    """The container image as written."""
    gpu_label: str | None = None
    """The GPU node selector / label value as written."""
    gpu_from_label: str | None = None
    """The kvplan GPU that label names (None: it names none kvplan models)."""
    default_gpu: str | None = None
    gpu_count: int | None = None
    """GPUs one pod requests."""
    group_size: int = 1
    """Pods per LeaderWorkerSet group."""
    unresolved: tuple[tuple[str, str], ...] = ()
    """(flag, value) of modelled flags whose value is only known at run time."""


@declare(code="KV807", scope="launch", name="unknown-gpu", severity="info", family=LINT_FAMILY,
         summary="A GPU node selector or configured GPU names no GPU kvplan models, so GPU rules were skipped.",
         why="Backend, FP8 support and KV memory findings need the GPU's compute capability and memory.",
         fix="Set gpu = \"h100\" in [tool.kvplan.lint] or pass --gpu (see `kvplan gpus`).",
         references=(_LINT_DOC,))
def unknown_gpu(ctx: LaunchFacts) -> Iterator[Emit]:
    if ctx.gpu_label is not None and ctx.gpu_from_label is None:
        yield Emit(f"GPU label {ctx.gpu_label!r} names no GPU kvplan models; "
                   + (f"using the default GPU {ctx.default_gpu}." if ctx.default_gpu
                      else "GPU-dependent rules were skipped."), subject=Subject(launch_fact="gpu_label"))


@declare(code="KV808", scope="launch", name="parallelism-exceeds-gpus", severity="error", family=LINT_FAMILY,
         summary="--tensor-parallel-size x --pipeline-parallel-size is larger than the GPUs the pod (group) requests.",
         why="vLLM needs one GPU per rank; with fewer visible GPUs it fails at startup (Ray placement group "
             "or CUDA device count check).",
         fix="Request as many nvidia.com/gpu as TP x PP (per LeaderWorkerSet group: size x GPUs per pod), "
             "or lower the parallel sizes.",
         references=("vllm/config/parallel.py::ParallelConfig", _LINT_DOC),
         subject_flags=("--tensor-parallel-size", "--pipeline-parallel-size"))
def tp_exceeds_gpus(ctx: LaunchFacts) -> Iterator[Emit]:
    tp, pp = ctx.flags.tensor_parallel_size, ctx.flags.pipeline_parallel_size
    if ctx.gpu_count is None or tp * pp <= ctx.gpu_count * ctx.group_size:
        return
    have = ctx.gpu_count * ctx.group_size
    where = f"{ctx.group_size} pods x {ctx.gpu_count} = {have}" if ctx.group_size > 1 else f"{have}"
    yield Emit(f"TP {tp} x PP {pp} needs {tp * pp} GPUs but the {'group' if ctx.group_size > 1 else 'pod'} "
               f"requests {where}.")


@declare(code="KV811", scope="flags", name="unresolved-flag-value", severity="info", family=LINT_FAMILY,
         summary="A KV flag's value comes from a variable the linter cannot resolve, so it was not checked.",
         why="Values like $(KV_DTYPE) or ${KV_DTYPE} are filled in at run time from a Secret, ConfigMap or "
             "the shell environment the linter does not see.",
         fix="Give the variable a literal value in the same manifest (env: value:) or script, or suppress "
             "with a reason.",
         references=(_LINT_DOC,))
def unresolved_value(ctx: LaunchFacts) -> Iterator[Emit]:
    for flag, value in ctx.unresolved:
        yield Emit(f"{flag} {value} is set from a value kvplan cannot resolve statically, so it was not checked.",
                   subject=Subject(flag=flag, value=value))


@declare(code="KV812", scope="launch", name="unmodelled-engine-release", severity="info", family=LINT_FAMILY,
         summary="The image pins a vLLM release outside the ones kvplan plans for (0.18 to the newest it knows).",
         why="KV rules change between releases: a launch pinned to vllm/vllm-openai:v0.10.0 has its launch line "
             "judged by 0.10.0's own parser (kvplan has the option table of every release from 0.6.0), and its "
             "plan findings are reported as upgrade findings against the newest release ('on upgrade from vLLM "
             "0.10.0 to X: ...', severity info), not as errors of the release it runs.",
         fix="Upgrade the image to a modelled release and fix the upgrade findings, or suppress KV812 with a reason.",
         references=("https://hub.docker.com/r/vllm/vllm-openai/tags (tags are vLLM release versions)", _LINT_DOC))
def unmodelled_release(ctx: LaunchFacts) -> Iterator[Emit]:
    v = pinned_version(ctx.image) if ctx.image else None
    if v is None or modelled_engine(v) is not None:
        return
    newest = newest_engine().version_str
    if tuple(int(x) for x in v.split(".")) < MODELLED_FIRST:
        yield Emit(f"image {ctx.image} runs vLLM {v}, older than the releases kvplan plans for ({_modelled()}); "
                   f"its flags are judged by vLLM {v}'s own parser where kvplan has it; findings marked 'on upgrade' "
                   f"are what vLLM {newest} would reject or change, not errors of the pinned release.", subject=_IMAGE,
                   fix=f"Upgrade the image to a modelled release (vllm/vllm-openai:v{newest}) and fix the upgrade "
                       "findings, or suppress KV812 with a reason.")
    else:
        yield Emit(f"image {ctx.image} runs vLLM {v}, newer than the releases kvplan knows ({_modelled()}); "
                   f"linted against vLLM {newest}, the newest one.", subject=_IMAGE,
                   fix="Upgrade kvplan to a release that models it, or suppress KV812 with a reason.")


@declare(code="KV813", scope="launch", name="unpinned-vllm-image", severity="info", family=LINT_FAMILY,
         summary="A vLLM image without a release tag (:latest, :nightly, none), so the release is not pinned.",
         why="`latest` moves: the flags a pod accepts change under it. kvplan lints such launches against the "
             "newest release it models and says so.",
         fix="Pin the image to a release tag, e.g. vllm/vllm-openai:v0.33.0.",
         references=("https://hub.docker.com/r/vllm/vllm-openai/tags (tags are vLLM release versions)", _LINT_DOC))
def unpinned_image(ctx: LaunchFacts) -> Iterator[Emit]:
    rel = image_release(ctx.image) if ctx.image else None
    if rel is None or rel[0] != "unpinned":
        return
    newest = newest_engine().version_str
    what = f"tag {rel[1]!r}" if rel[1] else "no release tag"
    yield Emit(f"image {ctx.image} has {what}, so the vLLM release is not pinned; linted against "
               f"vLLM {newest}, the newest release kvplan models.", subject=_IMAGE,
               fix=f"Pin the image to a release (vllm/vllm-openai:v{newest}) so deployments are reproducible.")


# ---------------------------------------------------------------------------------------------------------
# Suppression checks: one suppression (`# kvplan: ignore[...]` or a kvplan.dev/ignore annotation) at a time.
# The finding is about the suppression itself (the linter points at it).

@dataclass(frozen=True)
class SuppressionFacts:
    """One suppression after the file's findings were matched against it."""

    codes: tuple[str, ...]
    """The codes it names, upper-cased."""
    reason: str | None
    used: frozenset[str]
    """Codes it hid a finding of."""
    known: frozenset[str]
    """Codes `kvplan lint` can report."""
    active: frozenset[str]
    """Codes selected for this file (not ignored, not in per-file-ignores): only those can be unused."""


@declare(code="KV805", scope="file", name="unused-suppression", severity="warning", family=LINT_FAMILY,
         summary="A `# kvplan: ignore[...]` comment or kvplan.dev/ignore annotation suppresses nothing.",
         why="Stale suppressions hide the next real finding of that code (ruff RUF100, mypy unused-ignore).",
         fix="Remove the code from the suppression, or the whole suppression.",
         references=(_LINT_DOC,))
def unused_suppression(ctx: SuppressionFacts) -> Iterator[Emit]:
    for code in ctx.codes:
        if code in ctx.known and code not in ctx.used and code in ctx.active:
            yield Emit(f"suppression of {code} is unused: no {code} finding here.",
                       fix=f"Remove {code} from the suppression.")


@declare(code="KV806", scope="file", name="suppression-without-reason", severity="warning", family=LINT_FAMILY,
         summary="A suppression gives no reason.",
         why="A reviewer cannot tell a deliberate exception from a silenced bug; kube-linter and checkov "
             "document the annotation value as the reason.",
         fix="Write the reason after the codes: `# kvplan: ignore[KV401] scales calibrated offline` or "
             "`kvplan.dev/ignore: \"KV401: scales calibrated offline\"`.",
         references=(_LINT_DOC,))
def suppression_without_reason(ctx: SuppressionFacts) -> Iterator[Emit]:
    if ctx.reason is None:
        yield Emit(f"suppression of {', '.join(ctx.codes)} gives no reason.")


@declare(code="KV810", scope="file", name="unknown-suppression-code", severity="warning", family=LINT_FAMILY,
         summary="A suppression names a code that is not a kvplan rule.",
         why="A mistyped code suppresses nothing, and the finding it was meant for still fires.",
         fix="Use a code from `kvplan rules` (e.g. KV401).",
         references=(_LINT_DOC,))
def unknown_suppression_code(ctx: SuppressionFacts) -> Iterator[Emit]:
    for code in ctx.codes:
        if code not in ctx.known:
            yield Emit(f"suppression names {code}, which is not a kvplan rule.")


SUPPRESSION_RULES = (suppression_without_reason, unknown_suppression_code, unused_suppression)
"""The rules the linter runs on each suppression (in this order)."""
