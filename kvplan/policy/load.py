"""policy.yaml -> Policy, with every error reported as `FILE:LINE: where: problem` on one line.

PyYAML's compose step keeps a start mark (line, column) on every node; we walk the node tree to
map each document path (('rules', 2, 'set', 'kv_cache_dtype')) to its line, then validate with
the pydantic models and point the first error at the line of the deepest path it names.
"""
from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from kvplan.errors import KvplanInputError
from kvplan.ingest.limits import check_yaml, limits, read_bounded, read_toml
from kvplan.policy.model import Constraint, IntRange, LayerCondition, Policy, PolicyRule, Selector, Setting

FIX = "See the policy format in docs/api.md (schema: schemas/policy.schema.json)."
Marks = dict[tuple[Any, ...], int]


def _walk(node: yaml.Node, path: tuple[Any, ...], marks: Marks, source: str) -> None:
    marks[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            line = key_node.start_mark.line + 1
            if key in seen:
                raise KvplanInputError(f"{source}:{line}: duplicate key {key!r} (first at line {seen[key]}).",
                                       "Keep one of them.")
            seen[key] = line
            child = (*path, key)
            marks[child] = line
            _walk(value_node, child, marks, source)
            marks[child] = line  # errors about a key point at the key's line
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), marks, source)


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line(loc: tuple[Any, ...], marks: Marks) -> int:
    for n in range(len(loc), -1, -1):
        if loc[:n] in marks:
            return marks[loc[:n]]
    return 1


def _located(err: Any) -> dict[str, Any]:
    """A pydantic error with a clean message; '@a.0.b: msg' from a model validator moves its loc."""
    loc = tuple(err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if msg.startswith("@") and ": " in msg:
        path, msg = msg[1:].split(": ", 1)
        loc = loc + tuple(int(p) if p.isdigit() else p for p in path.split("."))
    return {"type": err["type"], "loc": loc, "msg": msg}


def _all_keys() -> list[str]:
    keys: set[str] = set()
    for m in (Policy, PolicyRule, Constraint, Selector, Setting, LayerCondition, IntRange):
        for name, f in m.model_fields.items():
            keys.add(f.alias or name)
    return sorted(keys)


_KEYS = _all_keys()


def policy_from_text(text: str, source: str = "<policy>") -> Policy:
    """Parse and validate policy YAML text; KvplanInputError carries `source:line` on one line."""
    check_yaml(text, source)  # size, depth and alias-expansion limits before composing (docs/limits.md)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise KvplanInputError(f"{source}: the policy file is empty.", "Start it with `version: 1`. " + FIX)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise KvplanInputError(f"{source}{line}: malformed YAML: {e.problem or e.context}.",
                               "Fix the YAML syntax (indentation, colons, quotes).") from None
    except yaml.YAMLError as e:
        raise KvplanInputError(f"{source}: malformed YAML: {e}.", "Fix the YAML syntax.") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise KvplanInputError(f"{source}:{node.start_mark.line + 1}: a policy is a YAML mapping, "
                               f"got a {type(data).__name__}.", "Start it with `version: 1`. " + FIX)
    marks: Marks = {}
    _walk(node, (), marks, source)
    try:
        policy = Policy.model_validate(data)
    except ValidationError as e:
        errs = [_located(err) for err in e.errors()]
        # Unknown keys first (usually the typo behind a "missing" error), then by line.
        errs.sort(key=lambda err: (err["type"] != "extra_forbidden", _line(err["loc"], marks)))
        first = errs[0]
        loc = first["loc"]
        where = _where(loc)
        msg = first["msg"]
        if first["type"] == "missing":
            msg = f"missing required key {loc[-1]!r}"
            where = _where(loc[:-1])
        elif first["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(loc[-1]), _KEYS, n=1, cutoff=0.6)
            msg = f"unknown key {loc[-1]!r}" + (f"; did you mean {close[0]!r}?" if close else "")
            where = _where(loc[:-1])
        more = f" (and {len(errs) - 1} more problem(s))" if len(errs) > 1 else ""
        prefix = f"{where}: " if where else ""
        raise KvplanInputError(f"{source}:{_line(loc, marks)}: {prefix}{msg}{more}.", FIX) from None
    object.__setattr__(policy, "__kvplan_source__", source)
    object.__setattr__(policy, "__kvplan_marks__", marks)
    return policy


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy YAML file (errors name the file and line)."""
    p = Path(path)
    try:
        text = read_bounded(p, "policy file", limits().max_lint_file_bytes).decode("utf-8")
    except FileNotFoundError:
        raise KvplanInputError(f"policy file not found: {p}.", "Pass --policy PATH to an existing YAML file.") from None
    except IsADirectoryError:
        raise KvplanInputError(f"{p} is a directory, not a policy file.",
                               "Pass --policy PATH to a YAML file.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise KvplanInputError(f"cannot read policy file {p}: {e.__class__.__name__}.",
                               "Check the file is readable UTF-8 YAML.") from None
    return policy_from_text(text, str(p))


def as_policy(policy: Policy | str | Path) -> Policy:
    """A Policy as given, or the one loaded from a policy YAML path."""
    return policy if isinstance(policy, Policy) else load_policy(policy)


def policy_source(policy: Policy) -> str:
    return getattr(policy, "__kvplan_source__", "<policy>")


def policy_line(policy: Policy, path: tuple[Any, ...]) -> int | None:
    """Line of a document path in the policy file (None for policies built in Python)."""
    marks: Marks | None = getattr(policy, "__kvplan_marks__", None)
    return _line(path, marks) if marks else None


def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise KvplanInputError(f"cannot read {path}: Python 3.10 needs the 'tomli' package for pyproject.toml.",
                                   "pip install tomli, or pass --policy explicitly.") from None
    try:
        return read_toml(path)  # size and nesting limits (docs/limits.md)
    except (OSError, UnicodeDecodeError) as e:
        raise KvplanInputError(f"cannot read {path}: {e.__class__.__name__}.", "Check the file is readable.") from None
    except tomllib.TOMLDecodeError as e:
        raise KvplanInputError(f"malformed TOML in {path}: {e}.", "Fix pyproject.toml.") from None


def find_pyproject_policy(start: str | Path | None = None) -> Path | None:
    """The policy named by the nearest kvplan configuration at or above `start` (default: cwd).

    Like `kvplan lint`, the nearest folder with a `kvplan.toml` (top-level `policy = "..."`) or a
    `pyproject.toml` with a `[tool.kvplan]` table wins; the path is relative to that file.
    None when that configuration names no policy (or there is none).
    """
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        for name in ("kvplan.toml", "pyproject.toml"):
            f = folder / name
            if not f.is_file():
                continue
            doc = _read_toml(f)
            table = doc if name == "kvplan.toml" else doc.get("tool", {}).get("kvplan")
            if not isinstance(table, dict):
                continue  # a pyproject.toml without [tool.kvplan] does not stop the search
            where = "policy" if name == "kvplan.toml" else "[tool.kvplan] policy"
            value = table.get("policy")
            if value is None:
                return None
            if not isinstance(value, str) or not value.strip():
                raise KvplanInputError(f"{f}: {where} must be a path string, got {value!r}.",
                                       'Write policy = "kvplan-policy.yaml".')
            p = (folder / value).resolve()
            if not p.is_file():
                raise KvplanInputError(f"{f}: {where} = {value!r} but {p} does not exist.",
                                       f"Fix the path (it is relative to {name}) or remove the setting.")
            return p
    return None
