"""A loopback HTTP server that speaks enough of the Hugging Face Hub's file API for the real
`huggingface_hub` client (tests and bench/bench_hub.py point HF_ENDPOINT at it; no network).

Endpoints, as the Hub answers them:
  GET  /api/models/{repo}[/revision/{rev}]         model info: sha, siblings, private, gated
  GET  /api/models/{repo}/tree/{rev}[/{path}]      file listing
  HEAD /{repo}/resolve/{rev}/{file}                X-Repo-Commit, ETag / X-Linked-Etag, X-Linked-Size, Content-Length
  GET  /{repo}/resolve/{rev}/{file}                the bytes; `Range: bytes=a-b` -> 206 with Content-Range
Errors carry the headers huggingface_hub's `hf_raise_for_status` maps to its exceptions:
  404 X-Error-Code: RepoNotFound | RevisionNotFound | EntryNotFound, 401 for a private repo without
  a valid token, 403 X-Error-Code: GatedRepo for a gated repo the token was not granted.

Every request and the body bytes served are counted (`requests`, `bytes_served`), so tests can
assert how much a plan moved.
"""
from __future__ import annotations

import hashlib
import json
import re
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin", ".gguf")


@dataclass
class Repo:
    repo_id: str
    commits: dict[str, dict[str, Path]] = field(default_factory=dict)
    """commit sha -> repo file name -> file on disk."""
    refs: dict[str, str] = field(default_factory=dict)
    """branch or tag -> commit sha."""
    private: bool = False
    gated: bool = False
    granted: set[str] = field(default_factory=set)
    """Tokens that may read a private or gated repo."""


def commit_sha(repo_id: str, files: dict[str, Path], salt: str = "") -> str:
    h = hashlib.sha1(f"{repo_id}\n{salt}".encode())
    for name in sorted(files):
        p = files[name]
        h.update(f"{name}:{p.stat().st_size}\n".encode())
        if p.stat().st_size < 1 << 20:
            h.update(p.read_bytes())
    return h.hexdigest()


class FakeHub:
    """The repos served, and what was asked for."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status)
        self.bytes_served = 0
        self._lock = threading.Lock()
        self._etags: dict[Path, str] = {}
        self.server: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    # ---- building repos
    def add(self, repo_id: str, folder: Path, *, branch: str = "main", tags: tuple[str, ...] = (),
            private: bool = False, gated: bool = False, granted: tuple[str, ...] = ()) -> str:
        """Serve every file of `folder` as a new commit of `repo_id` on `branch`; returns its sha."""
        files = {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}
        repo = self.repos.setdefault(repo_id, Repo(repo_id))
        repo.private, repo.gated, repo.granted = private, gated, set(granted) | repo.granted
        sha = commit_sha(repo_id, files, salt=str(len(repo.commits)))
        repo.commits[sha] = files
        repo.refs[branch] = sha
        for t in tags:
            repo.refs[t] = sha
        return sha

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self.bytes_served = 0

    def count(self, method: str | None = None, contains: str = "") -> int:
        return sum(1 for m, p, _ in self.requests if (method is None or m == method) and contains in p)

    # ---- serving
    def start(self) -> str:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out at once (no delayed-ACK stalls)

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                hub._handle(self, head=True)

            def do_GET(self) -> None:
                hub._handle(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def _etag(self, p: Path) -> str:
        if p not in self._etags:
            if p.suffix in LFS_SUFFIXES:  # LFS: the Hub's etag is the sha256 of the content; a stable stand-in
                self._etags[p] = hashlib.sha256(f"{p}:{p.stat().st_size}".encode()).hexdigest()
            else:  # git blob sha1
                data = p.read_bytes()
                self._etags[p] = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        return self._etags[p]

    def _send(self, h: BaseHTTPRequestHandler, status: int, body: bytes = b"", headers: dict | None = None,
              head: bool = False, content_type: str = "application/json") -> None:
        # counted before any byte goes out: a client that has its answer finds its request
        # already counted (counted after the write, the server thread could add a request to
        # the counts a test had just reset, under load)
        with self._lock:
            self.requests.append((h.command, h.path, status))
            if not head:
                self.bytes_served += len(body)
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        for k, v in (headers or {}).items():
            h.send_header(k, str(v))
        if "Content-Length" not in (headers or {}):
            h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head and body:
            h.wfile.write(body)

    def _error(self, h: BaseHTTPRequestHandler, status: int, code: str | None, message: str, head: bool,
               extra: dict | None = None) -> None:
        headers = {"X-Error-Message": message, **(extra or {})}
        if code:
            headers["X-Error-Code"] = code
        self._send(h, status, json.dumps({"error": message}).encode(), headers, head)

    def _auth(self, h: BaseHTTPRequestHandler, repo: Repo) -> str | None:
        auth = h.headers.get("Authorization", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        return token

    def _handle(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        path = urlsplit(h.path).path
        m = re.match(r"^/api/models/([^/]+/[^/]+)(?:/(revision|tree)/([^/]+)(?:/(.*))?)?$", path)
        if m:
            return self._api(h, unquote(m.group(1)), m.group(2), unquote(m.group(3) or ""), unquote(m.group(4) or ""),
                             head)
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if m:
            return self._resolve(h, unquote(m.group(1)), unquote(m.group(2)), unquote(m.group(3)), head)
        self._error(h, 404, None, "Not found", head)

    def _repo_rev(self, h: BaseHTTPRequestHandler, repo_id: str, rev: str, head: bool,
                  files: bool) -> tuple[Repo, str] | None:
        repo = self.repos.get(repo_id)
        token = self._auth(h, repo) if repo else None
        if repo is None or (repo.private and token not in repo.granted):
            status = 401 if token is None else 404  # the Hub: anonymous -> 401, a token that cannot see it -> 404
            self._error(h, status, "RepoNotFound", "Repository not found", head)
            return None
        if files and repo.gated and token not in repo.granted:
            self._error(h, 403, "GatedRepo", f"Access to model {repo_id} is restricted and you are not in the "
                                             "authorized list.", head)
            return None
        sha = repo.refs.get(rev) or (rev if rev in repo.commits else None)
        if sha is None:
            self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
            return None
        return repo, sha

    def _api(self, h: BaseHTTPRequestHandler, repo_id: str, kind: str | None, rev: str, sub: str, head: bool) -> None:
        got = self._repo_rev(h, repo_id, rev or "main", head, files=False)
        if got is None:
            return
        repo, sha = got
        files = repo.commits[sha]
        if kind == "tree":
            prefix = sub.strip("/")
            entries = [{"type": "file", "oid": self._etag(p), "size": p.stat().st_size, "path": n}
                       for n, p in sorted(files.items()) if not prefix or n.startswith(prefix + "/")]
            return self._send(h, 200, json.dumps(entries).encode(), head=head)
        doc = {"_id": hashlib.md5(repo_id.encode()).hexdigest()[:24], "id": repo_id, "modelId": repo_id,
               "sha": sha, "private": repo.private, "gated": "manual" if repo.gated else False, "disabled": False,
               "tags": [], "downloads": 0, "likes": 0, "library_name": "transformers",
               "siblings": [{"rfilename": n} for n in sorted(files)]}
        self._send(h, 200, json.dumps(doc).encode(), head=head)

    def _resolve(self, h: BaseHTTPRequestHandler, repo_id: str, rev: str, name: str, head: bool) -> None:
        got = self._repo_rev(h, repo_id, rev, head, files=True)
        if got is None:
            return
        repo, sha = got
        p = repo.commits[sha].get(name)
        if p is None:
            return self._error(h, 404, "EntryNotFound", f"{name} does not exist on {rev!r}", head,
                               {"X-Repo-Commit": sha})
        size = p.stat().st_size
        etag = self._etag(p)
        headers: dict[str, object] = {"X-Repo-Commit": sha, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        if p.suffix in LFS_SUFFIXES:
            headers["X-Linked-Etag"] = f'"{etag}"'
            headers["X-Linked-Size"] = size
        rng = h.headers.get("Range")
        start, end, status = 0, size - 1, 200
        if rng:
            mr = re.match(r"^bytes=(\d*)-(\d*)$", rng.strip())
            if not mr or (not mr.group(1) and not mr.group(2)):
                return self._error(h, 416, None, "bad range", head, {"Content-Range": f"bytes */{size}"})
            if mr.group(1):
                start = int(mr.group(1))
                end = min(int(mr.group(2)), size - 1) if mr.group(2) else size - 1
            else:  # suffix range
                start = max(0, size - int(mr.group(2)))
            if start >= size or start > end:
                return self._error(h, 416, None, "range not satisfiable", head, {"Content-Range": f"bytes */{size}"})
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        n = end - start + 1 if size else 0
        headers["Content-Length"] = n
        if head:
            return self._send(h, status, b"", headers, head=True, content_type="application/octet-stream")
        with p.open("rb") as f:
            f.seek(start)
            body = f.read(n)
        self._send(h, status, body, headers, content_type="application/octet-stream")


# ---------------------------------------------------------------------------------- test checkpoints
def write_safetensors(path: Path, tensors: list[tuple[str, str, list[int], list[float] | None]]) -> None:
    """A real safetensors file: (name, dtype, shape, values) in data order. Tensors without values are
    zeros left as a hole in a sparse file, so a many-GB dummy weight costs no disk and no time."""
    size = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "I8": 1, "U8": 1}
    header: dict[str, dict] = {}
    off = 0
    spans = []
    for name, dt, shape, values in tensors:
        n = size[dt]
        for s in shape:
            n *= s
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        spans.append((off, dt, values))
        off += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    base = 8 + len(raw)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for start, dt, values in spans:
            if values is not None:
                f.seek(base + start)
                code = {"F32": "f", "F16": "e"}[dt]
                f.write(struct.pack(f"<{len(values)}{code}", *values))
        f.truncate(base + off)


def fp8_checkpoint(folder: Path, config_dir: Path, *, layers: int | None = None, weight_bytes: int = 1 << 30,
                   shards: int = 1) -> Path:
    """A ModelOpt FP8 checkpoint from a config folder that has config.json + hf_quant_config.json:
    calibrated k/v scales per layer (0.02 + layer / 1000), and a `weight_bytes` dummy weight in every
    shard sitting between the scales (read by range requests, it must never be fetched)."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((config_dir / "config.json").read_text())
    if layers is not None:
        cfg["num_hidden_layers"] = layers
    n = int(cfg["num_hidden_layers"])
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    (folder / "hf_quant_config.json").write_text((config_dir / "hf_quant_config.json").read_text())
    per = -(-n // shards)
    weight_map: dict[str, str] = {}
    for s in range(shards):
        name = "model.safetensors" if shards == 1 else f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        idx = list(range(s * per, min(n, (s + 1) * per)))
        ts: list[tuple[str, str, list[int], list[float] | None]] = []
        for i in idx[:-1]:
            ts += [(f"model.layers.{i}.self_attn.k_proj.k_scale", "F32", [], [0.02 + i / 1000]),
                   (f"model.layers.{i}.self_attn.v_proj.v_scale", "F32", [], [0.03 + i / 1000])]
        ts.append((f"model.layers.{idx[0]}.mlp.down_proj.weight", "F8_E4M3", [weight_bytes], None))
        i = idx[-1]
        ts += [(f"model.layers.{i}.self_attn.k_proj.k_scale", "F32", [], [0.02 + i / 1000]),
               (f"model.layers.{i}.self_attn.v_proj.v_scale", "F32", [], [0.03 + i / 1000])]
        write_safetensors(folder / name, ts)
        for t in ts:
            weight_map[t[0]] = name
    if shards > 1:
        index = {"metadata": {"total_size": shards * weight_bytes}, "weight_map": dict(sorted(weight_map.items()))}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return folder


# ---------------------------------------------------------------------------------- pytest fixture
try:
    import pytest
except ImportError:  # pragma: no cover - bench/bench_hub.py imports this module without pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:
    @pytest.fixture(name="fake_hub")
    def fake_hub_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
        """A FakeHub on a loopback port with HF_ENDPOINT and HF_HOME (an empty cache) pointed at it,
        online (HF_HUB_OFFLINE=0) and without a token. Use `go_offline` to flip HF_HUB_OFFLINE=1."""
        hub = FakeHub()
        url = hub.start()
        point_env_at(monkeypatch, url, tmp_path / "hf-home", offline=False)
        try:
            yield hub
        finally:
            hub.stop()
            _clear_memo()


def _clear_memo() -> None:
    from kvplan.ingest import hub as hub_mod
    hub_mod._MEMO.clear()


def point_env_at(monkeypatch: pytest.MonkeyPatch, url: str, home: Path, offline: bool) -> None:
    """HF_* for this test (kvplan.ingest.hub reads them when it resolves; huggingface_hub's
    import-time copy of HF_HUB_OFFLINE follows too)."""
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    go_offline(monkeypatch, offline)


def go_offline(monkeypatch: pytest.MonkeyPatch, offline: bool = True) -> None:
    from huggingface_hub import constants
    monkeypatch.setenv("HF_HUB_OFFLINE", "1" if offline else "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
    _clear_memo()
