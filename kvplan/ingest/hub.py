"""Hugging Face Hub model ids -> the files kvplan reads, without downloading any weights.

`kvplan plan org/name` (and every other command that takes a config path) resolves the id here,
through the `huggingface_hub` library and its conventions: HF_TOKEN or a stored login, HF_HOME /
HF_HUB_CACHE, HF_HUB_OFFLINE=1, HF_ENDPOINT, a revision (branch, tag or commit).

Resolution of an id (an existing local path always wins; callers check that first):

1. Online: one model-info request gives the commit sha and the file list; config.json,
   hf_quant_config.json and model.safetensors.index.json are fetched into the Hugging Face cache
   with `hf_hub_download` (nothing is fetched again for a commit already cached); of each
   ``*.safetensors`` file only the header and the bytes of the k/v/q scale tensors are read, by
   HTTP range requests through the library's own session. Those bytes and the file list are kept
   beside the library's cache entry for the commit (``models--org--name/kvplan/<sha>/``), so a
   later run needs no network for them.
2. Offline (HF_HUB_OFFLINE=1, ``offline=True``, or the Hub unreachable): the revision resolves
   through the cache's refs, and everything is read from the cache; nothing cached is one error line.

`huggingface_hub` is imported only here, and only when an id is resolved.
"""
from __future__ import annotations

import base64
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanInputError
from kvplan.ingest.safetensors import ByteSource

# The small files kvplan reads whole (everything else is read by ranges, or not at all).
SMALL_FILES = ("config.json", "hf_quant_config.json", "model.safetensors.index.json", "params.json")
INDEX = "model.safetensors.index.json"
_FIRST_READ = 100_000        # one request usually covers a safetensors header (what huggingface_hub reads first too)
_MERGE_GAP = 64 * 1024       # scale tensors closer than this are fetched by one range request
_TIMEOUT = 30.0
_TTL = 300.0                 # an in-process resolution of a branch/tag is reused this long (explore, serve, lint)
_FAILURE_TTL = 30.0          # and a failed one (not found, gated, unreachable) this long
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
_PART = r"[A-Za-z0-9_](?:[\w.-]{0,94}[A-Za-z0-9_])?"
_ID_RE = re.compile(rf"^{_PART}/{_PART}$")
_PATH_SUFFIXES = (".json", ".safetensors", ".yaml", ".yml", ".toml", ".gguf", ".bin")

ID_RULES = "an id is org/name: letters, digits, '-', '_' and '.', no '--' or '..', at most 96 characters"


def _truthy(v: str | None) -> bool:
    return (v or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def hub_id(text: str) -> str | None:
    """The repo id `text` names, None when it reads as a file path; a malformed id is an input error.

    Call only when `text` is not an existing local path. ``hf://org/name`` is always an id;
    ``org/name`` (one slash, no path-like start or file extension) is one too.
    """
    s = text.strip()
    explicit = s.startswith("hf://")
    if explicit:
        s = s[len("hf://"):].strip("/")
    elif (s.count("/") != 1 or s.startswith((".", "/", "~")) or s.endswith("/")
          or s.lower().endswith(_PATH_SUFFIXES) or "\\" in s):
        return None
    ok = bool(_ID_RE.match(s)) and "--" not in s and ".." not in s and not s.endswith(".git") and len(s) <= 96
    if not ok:
        raise KvplanInputError(f"{text!r} is neither an existing path nor a valid Hugging Face model id ({ID_RULES}).",
                               "Pass a config.json, a checkpoint folder, or an id such as "
                               "meta-llama/Llama-3.1-8B-Instruct.")
    return s


def looks_like_hub_id(text: str) -> bool:
    """True when `text` is not a local path and names a (well-formed) Hub id."""
    if Path(text).expanduser().exists():
        return False
    try:
        return hub_id(text) is not None
    except KvplanInputError:
        return False


# ---------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class HubSettings:
    """Where the Hub and its cache are, read from the environment when an id is resolved."""

    endpoint: str
    cache_dir: Path
    offline: bool


def settings(offline: bool | None = None) -> HubSettings:
    """HF_ENDPOINT, HF_HUB_CACHE / HF_HOME and HF_HUB_OFFLINE as they are now (the library reads
    them once at import; a long-lived process may have changed them since)."""
    from huggingface_hub import constants
    env = os.environ
    endpoint = (env.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")
    if env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE"):
        cache = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or ""
    elif env.get("HF_HOME"):
        cache = os.path.join(env["HF_HOME"], "hub")
    else:
        cache = constants.HF_HUB_CACHE
    off = offline if offline else (_truthy(env.get("HF_HUB_OFFLINE") or env.get("TRANSFORMERS_OFFLINE"))
                                   if ("HF_HUB_OFFLINE" in env or "TRANSFORMERS_OFFLINE" in env)
                                   else bool(constants.HF_HUB_OFFLINE))
    return HubSettings(endpoint=endpoint, cache_dir=Path(os.path.expanduser(os.path.expandvars(cache))), offline=off)


# ---------------------------------------------------------------------------------- the resolved model
@dataclass
class HubModel:
    """A Hub repo at one commit: the small files in the cache, the safetensors files by name."""

    repo_id: str
    revision: str | None
    commit: str
    folder: Path
    """The cache snapshot folder holding the small files."""
    small_files: tuple[str, ...]
    safetensors: tuple[str, ...]
    settings: HubSettings
    _files: dict[str, RemoteFile] = field(default_factory=dict, repr=False)

    def __str__(self) -> str:
        return f"hf://{self.repo_id}@{self.commit}"

    @property
    def label(self) -> str:
        return self.repo_id if self.revision is None else f"{self.repo_id}@{self.revision}"

    def sources(self) -> list[ByteSource]:
        """The safetensors files to read headers and scales of: local when the snapshot holds the
        whole file (a full download), else by range requests (or their cached bytes)."""
        out: list[ByteSource] = []
        for name in self.safetensors:
            local = self.folder / name
            if local.is_file():
                out.append(ByteSource(local))
                continue
            if name not in self._files:
                self._files[name] = RemoteFile(self, name)
            out.append(self._files[name])
        return out

    def files_read(self, read_safetensors: bool) -> list[str]:
        return sorted({*self.small_files, *(self.safetensors if read_safetensors else ())})


def _repo_folder(repo_id: str) -> str:
    return "models--" + repo_id.replace("/", "--")


def _kv_dir(s: HubSettings, repo_id: str, commit: str) -> Path:
    """kvplan's bytes for one commit, beside the library's cache entry (deleted with it)."""
    return s.cache_dir / _repo_folder(repo_id) / "kvplan" / commit


def _write_json(path: Path, doc: Any) -> None:
    """Whole file or nothing; a read-only cache only costs the re-fetch next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(doc, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def _read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


class RemoteFile(ByteSource):
    """A Hub safetensors file read by HTTP range requests; the bytes read are cached per commit."""

    def __init__(self, model: HubModel, name: str):
        self.model = model
        self.name = name
        self.label = f"hf://{model.repo_id}/{name} (commit {model.commit[:12]})"
        self._store = _kv_dir(model.settings, model.repo_id, model.commit) / (name.replace("/", "%2F") + ".ranges.json")
        self._chunks: list[tuple[int, bytes]] = []
        doc = _read_json(self._store)
        if isinstance(doc, dict) and isinstance(doc.get("chunks"), list):
            try:
                self._chunks = [(int(a), base64.b64decode(b)) for a, b in doc["chunks"]]
            except (TypeError, ValueError):
                self._chunks = []
        self._eof: int | None = doc.get("size") if isinstance(doc, dict) and isinstance(doc.get("size"), int) else None

    # cached bytes
    def _covered(self, offset: int, n: int) -> bytes | None:
        end = offset + n
        if self._eof is not None:
            end = min(end, self._eof)
        for start, data in self._chunks:
            if start <= offset and end <= start + len(data):
                return data[offset - start:end - start]
        return None

    def read(self, offset: int, n: int) -> bytes:
        hit = self._covered(offset, n)
        if hit is not None:
            return hit
        want = max(n, _FIRST_READ) if offset == 0 else n
        self._fetch(offset, want)
        hit = self._covered(offset, n)
        return hit if hit is not None else b""

    def prefetch(self, ranges: list[tuple[int, int]]) -> None:
        todo = [(a, n) for a, n in ranges if self._covered(a, n) is None]
        merged: list[list[int]] = []
        for a, n in sorted(todo):
            if merged and a - merged[-1][1] <= _MERGE_GAP:
                merged[-1][1] = max(merged[-1][1], a + n)
            else:
                merged.append([a, a + n])
        for a, b in merged:
            self._fetch(a, b - a)

    def _fetch(self, offset: int, n: int) -> None:
        m = self.model
        if m.settings.offline:
            raise KvplanInputError(
                f"{m.label}: bytes {offset}-{offset + n - 1} of {self.name} (commit {m.commit[:12]}) are not in the "
                f"cache {m.settings.cache_dir} and HF_HUB_OFFLINE=1 forbids fetching them.",
                f"Run `kvplan plan {m.repo_id}` once online to cache them, or unset HF_HUB_OFFLINE.")
        data, size = _range_get(m, self.name, offset, n)
        if size is not None:
            self._eof = size
        self._chunks.append((offset, data))
        self._chunks.sort(key=lambda c: c[0])
        chunks = [[a, base64.b64encode(b).decode()] for a, b in self._chunks]
        _write_json(self._store, {"size": self._eof, "chunks": chunks})


def _range_get(m: HubModel, name: str, offset: int, n: int) -> tuple[bytes, int | None]:
    """`n` bytes from `offset` of a repo file (fewer at its end), and the file's size when known.

    Uses the library's HTTP session, headers (token) and error mapping. A server that ignores the
    Range header is read no further than the bytes asked for."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status
    url = hf_hub_url(m.repo_id, name, revision=m.commit, endpoint=m.settings.endpoint)
    headers = build_hf_headers()
    headers["Range"] = f"bytes={offset}-{offset + n - 1}"
    headers["Accept-Encoding"] = "identity"
    try:
        with get_session().stream("GET", url, headers=headers, timeout=_TIMEOUT) as r:
            if r.status_code == 416:  # past the end of the file
                return b"", None
            if r.status_code >= 400:
                r.read()  # an error body is small; the library's error mapping reads it
            hf_raise_for_status(r)
            buf = bytearray()
            skip = offset if r.status_code == 200 else 0  # Range ignored: the body starts at byte 0
            for chunk in r.iter_bytes():
                if skip:
                    cut = min(skip, len(chunk))
                    chunk, skip = chunk[cut:], skip - cut
                buf += chunk
                if len(buf) >= n:
                    break
            size = None
            cr = r.headers.get("Content-Range", "")
            if "/" in cr and cr.rsplit("/", 1)[1].isdigit():
                size = int(cr.rsplit("/", 1)[1])
            elif r.status_code == 200 and str(r.headers.get("Content-Length", "")).isdigit():
                size = int(r.headers["Content-Length"])
            return bytes(buf[:n]), size
    except Exception as e:
        raise _hub_error(e, m.repo_id, m.revision, m.settings, filename=name) from None


# ---------------------------------------------------------------------------------- errors
def _is_network_error(e: BaseException) -> bool:
    names = {c.__name__ for c in type(e).__mro__}
    return bool(names & {"ConnectError", "ConnectTimeout", "TimeoutException", "NetworkError", "ProxyError",
                         "OfflineModeIsEnabled", "ConnectionError", "RemoteProtocolError", "ReadTimeout"}) \
        or isinstance(e, (ConnectionError, TimeoutError))


def _hub_error(e: BaseException, repo_id: str, revision: str | None, s: HubSettings,
               filename: str | None = None) -> KvplanInputError:
    """One line naming the id and the fix, for what huggingface_hub raised."""
    if isinstance(e, KvplanInputError):
        return e
    from huggingface_hub import errors as he
    rev = f" at revision {revision!r}" if revision else ""
    page = f"{s.endpoint}/{repo_id}"
    if isinstance(e, he.GatedRepoError):
        return KvplanInputError(
            f"{repo_id} is a gated repository and this account has not been granted access{rev}.",
            f"Open {page}, log in and accept its licence, then run `hf auth login` (or set HF_TOKEN) "
            "with a token of that account.")
    if isinstance(e, he.RepositoryNotFoundError):
        token = _has_token()
        return KvplanInputError(
            f"Hugging Face repository {repo_id!r} was not found at {s.endpoint}"
            + (" or your token cannot read it." if token else ", or it is private and no token was sent."),
            "Check the id; for a private repository run `hf auth login` or set HF_TOKEN"
            + (" to a token with read access." if token else "."))
    if isinstance(e, he.RevisionNotFoundError):
        return KvplanInputError(f"{repo_id} has no revision {revision!r}.",
                                "Pass an existing branch, tag or commit sha with --revision.")
    if isinstance(e, he.EntryNotFoundError) and not isinstance(e, he.LocalEntryNotFoundError):
        return KvplanInputError(f"{repo_id}{rev} has no file {filename!r}.",
                                "Check the id and --revision.")
    if _is_network_error(e) or isinstance(e, he.LocalEntryNotFoundError):
        return KvplanInputError(
            f"cannot reach {s.endpoint} to resolve {repo_id}{rev}, and it is not in the Hugging Face cache "
            f"{s.cache_dir}.",
            "Check the network (or HF_ENDPOINT); on an air-gapped machine copy the cache there and set "
            "HF_HUB_OFFLINE=1, or pass a local config.json.")
    status = getattr(getattr(e, "response", None), "status_code", None)
    what = f"HTTP {status}" if status else type(e).__name__
    return KvplanInputError(f"the Hub at {s.endpoint} answered {what} for {repo_id}{rev}"
                            + (f" ({filename})" if filename else "") + ".",
                            "Retry later; check HF_ENDPOINT and your token (HF_TOKEN / `hf auth login`).")


def _token_id() -> str:
    """Which credentials requests go out with (a login or HF_TOKEN change resolves anew)."""
    try:
        from huggingface_hub import get_token
        tok = get_token()
    except Exception:
        tok = None
    import hashlib
    return hashlib.sha256(tok.encode()).hexdigest()[:16] if tok else ""


def _has_token() -> bool:
    try:
        from huggingface_hub import get_token
        return bool(get_token())
    except Exception:
        return False


# ---------------------------------------------------------------------------------- resolving
_LOCK = threading.Lock()
_MEMO: dict[tuple[Any, ...], tuple[float, HubModel | KvplanInputError]] = {}
_KEY_LOCKS: dict[tuple[Any, ...], threading.Lock] = {}


def resolve(repo_id: str, revision: str | None = None, *, offline: bool | None = None) -> HubModel:
    """The repo at `revision` (None: its default branch), with its small files in the cache.

    Each (id, revision) is resolved once per process (for a branch or tag, for 5 minutes; a
    failure is remembered for 30 seconds), so a lint run or an explorer session asks the Hub once
    per model, and concurrent callers wait for the one request in flight."""
    s = settings(offline)
    key = (repo_id, revision, s.endpoint, str(s.cache_dir), s.offline, _token_id())
    with _LOCK:
        lock = _KEY_LOCKS.setdefault(key, threading.Lock())
    with lock:
        hit = _MEMO.get(key)
        if hit is not None:
            age, value = time.monotonic() - hit[0], hit[1]
            if isinstance(value, KvplanInputError):
                if age < _FAILURE_TTL:
                    raise value
            elif age < _TTL or _COMMIT_RE.match(revision or ""):
                return value
        try:
            model = _resolve(repo_id, revision, s)
        except KvplanInputError as e:  # a failure is remembered briefly too: a lint run asks once per id
            _MEMO[key] = (time.monotonic(), e)
            raise
        _MEMO[key] = (time.monotonic(), model)
        return model


def _resolve(repo_id: str, revision: str | None, s: HubSettings) -> HubModel:
    if s.offline:
        return _from_cache(repo_id, revision, s, why="HF_HUB_OFFLINE=1")
    if revision is not None and _COMMIT_RE.match(revision):  # a commit never changes: a complete cache answers
        try:
            return _from_cache(repo_id, revision, s, why="pinned commit", need_manifest=True)
        except KvplanInputError:
            pass
    from huggingface_hub import HfApi
    try:
        info = HfApi(endpoint=s.endpoint).model_info(repo_id, revision=revision)
    except Exception as e:
        if _is_network_error(e):
            try:
                return _from_cache(repo_id, revision, s, why="the Hub is unreachable")
            except KvplanInputError:
                raise _hub_error(e, repo_id, revision, s) from None
        raise _hub_error(e, repo_id, revision, s) from None
    commit = str(info.sha or "")
    names = sorted(str(x.rfilename) for x in (info.siblings or ()))
    if not _COMMIT_RE.match(commit):
        raise KvplanInputError(f"the Hub at {s.endpoint} gave no commit sha for {repo_id}.",
                               "Check HF_ENDPOINT points to a Hugging Face Hub (or mirror).")
    _check_config(repo_id, revision, names)
    manifest = {"files": [n for n in names if n in SMALL_FILES or (n.endswith(".safetensors") and "/" not in n)]}
    _write_json(_kv_dir(s, repo_id, commit) / "manifest.json", manifest)
    folder = _download(repo_id, revision, commit, [n for n in SMALL_FILES if n in names], s)
    return _model(repo_id, revision, commit, folder, manifest["files"], s)


def _anchor(names: list[str] | tuple[str, ...]) -> str:
    """The config file a revision is resolved by: config.json, else a Mistral-format params.json."""
    return "config.json" if "config.json" in names or "params.json" not in names else "params.json"


def _check_config(repo_id: str, revision: str | None, names: list[str]) -> None:
    if "config.json" in names or "params.json" in names:
        return
    rev = f" at revision {revision!r}" if revision else ""
    gguf = [n for n in names if n.endswith(".gguf")]
    shown = ", ".join((gguf or names)[:3]) + (", ..." if len(gguf or names) > 3 else "")
    raise KvplanInputError(
        f"{repo_id}{rev} has no config.json" + (f" (it holds {shown})" if names else " (it holds no files)")
        + ", so kvplan cannot read its layers.",
        "Pass the id of the original Transformers checkpoint (GGUF-only repos have no config.json), "
        "or a local config.json.")


def _download(repo_id: str, revision: str | None, commit: str, small: list[str], s: HubSettings) -> Path:
    """Fetch the small files into the library's cache. config.json (params.json in a Mistral-format
    repository without one) goes through the revision the user named, so the cache's refs map it to
    this commit (what offline runs resolve it by)."""
    from huggingface_hub import hf_hub_download
    folder: Path | None = None
    anchor = _anchor(small)
    for name in small:
        rev: str | None = revision if (name == anchor and revision is not None) else commit
        if name == anchor and revision is None:
            rev = None  # the default branch: the library records refs/main
        try:
            p = Path(hf_hub_download(repo_id, name, revision=rev, cache_dir=s.cache_dir, endpoint=s.endpoint))
        except Exception as e:
            raise _hub_error(e, repo_id, revision, s, filename=name) from None
        if name == anchor:
            folder = p.parent
            if folder.name != commit:  # the branch moved between the two requests: plan what config.json says
                raise KvplanInputError(f"{repo_id}: the revision {revision or 'main'!r} moved while kvplan read it "
                                       f"({commit[:12]} -> {folder.name[:12]}).", "Run the command again.")
    assert folder is not None
    return folder


def _from_cache(repo_id: str, revision: str | None, s: HubSettings, why: str,
                need_manifest: bool = False) -> HubModel:
    """Resolve from the cache alone (refs for a branch/tag, the snapshot folder for the files)."""
    p = _cached_config(repo_id, revision, s)
    if p is None:
        rev = f" at revision {revision!r}" if revision else ""
        if why == "HF_HUB_OFFLINE=1":
            raise KvplanInputError(
                f"{repo_id}{rev} is not in the Hugging Face cache {s.cache_dir}, and HF_HUB_OFFLINE=1 forbids "
                "downloading it.",
                f"Run `kvplan plan {repo_id}` once online to cache it (or `hf download {repo_id} config.json`), "
                "or unset HF_HUB_OFFLINE.") from None
        raise KvplanInputError(f"{repo_id}{rev} is not in the Hugging Face cache {s.cache_dir}.") from None
    folder, commit = p.parent, p.parent.name
    manifest = _read_json(_kv_dir(s, repo_id, commit) / "manifest.json")
    if isinstance(manifest, dict) and isinstance(manifest.get("files"), list):
        names = [str(n) for n in manifest["files"]]
    elif need_manifest:
        raise KvplanInputError(f"{repo_id}@{commit}: kvplan has not listed this commit's files yet.")
    else:  # cached by another tool: what the snapshot holds
        names = sorted(q.name for q in folder.iterdir() if q.name in SMALL_FILES or q.suffix == ".safetensors")
        if (folder / INDEX).is_file():
            try:
                wm = json.loads((folder / INDEX).read_text(encoding="utf-8")).get("weight_map", {})
                names = sorted(set(names) | {str(v) for v in wm.values()} if isinstance(wm, dict) else set(names))
            except (OSError, ValueError):
                pass
    return _model(repo_id, revision, commit, folder, names, s)


def _cached_config(repo_id: str, revision: str | None, s: HubSettings) -> Path | None:
    """config.json (else a Mistral-format params.json) of the revision, from the cache alone."""
    from huggingface_hub import hf_hub_download
    for name in ("config.json", "params.json"):
        try:
            return Path(hf_hub_download(repo_id, name, revision=revision, cache_dir=s.cache_dir,
                                        endpoint=s.endpoint, local_files_only=True))
        except Exception:
            continue
    return None


def _model(repo_id: str, revision: str | None, commit: str, folder: Path, names: list[str],
           s: HubSettings) -> HubModel:
    small = tuple(n for n in SMALL_FILES if n in names and (folder / n).is_file())
    shards = set(n for n in names if n.endswith(".safetensors") and "/" not in n)
    if INDEX in small:
        from kvplan.ingest.hf_config import load_json
        wm = load_json(folder / INDEX, "safetensors index").get("weight_map", {})
        if not isinstance(wm, dict):
            raise KvplanInputError(f"{repo_id}: {INDEX} weight_map is not an object.",
                                   "Fix the index file in the repo.")
        named = {str(v) for v in wm.values()}
        missing = sorted(named - shards)
        if missing:
            raise KvplanInputError(f"{repo_id}: {INDEX} names shard(s) the repository does not hold: "
                                   f"{', '.join(missing[:3])}.", "Check --revision, or report the broken index "
                                                                 "upstream.")
        shards |= named
    return HubModel(repo_id=repo_id, revision=revision, commit=commit, folder=folder, small_files=small,
                    safetensors=tuple(sorted(shards)), settings=s)


def prefetch(ids: list[tuple[str, str | None]], offline: bool | None = None, workers: int = 8) -> None:
    """Resolve several (id, revision) pairs concurrently (lint); errors surface again when each is used."""
    todo = sorted(set(ids), key=lambda x: (x[0], x[1] or ""))
    if not todo:
        return
    from concurrent.futures import ThreadPoolExecutor

    def one(item: tuple[str, str | None]) -> None:
        try:
            m = resolve(item[0], item[1], offline=offline)
            for src in m.sources():  # headers and scales too: they are most of the requests
                from kvplan.ingest.safetensors import scales_from_sources
                scales_from_sources([src])
        except Exception:
            pass

    with ThreadPoolExecutor(max_workers=min(workers, len(todo))) as ex:
        list(ex.map(one, todo))
