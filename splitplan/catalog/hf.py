"""Layer 1: a `models` catalog entry from a Hugging Face `config.json` (a local file; nothing is
downloaded).

Parameter counts are computed from the architecture, not read from a model card: embeddings (and
an untied LM head), per layer the attention projections (grouped-query, with q/k/v biases where
the config has them, or DeepSeek's multi-head latent attention), a gated MLP (gate, up and down
projections — the Llama/Mistral/Qwen/DeepSeek family) or, in MoE layers, every routed expert plus
the router and any shared experts, and the RMSNorm weights. `active_params` counts the
`num_experts_per_tok` routed experts a token uses instead of all of them.

Mixture-of-experts families name the same facts differently, and each is read by its own keys:
the expert count (Mixtral's `num_local_experts`, DeepSeek's `n_routed_experts`, Qwen's
`num_experts`), which layers hold experts (DeepSeek's `first_k_dense_replace` and
`moe_layer_freq`, Qwen's `decoder_sparse_step` and `mlp_only_layers`, Llama 4's `moe_layers` or
`interleave_moe_layer_step`, whose dense layers are `intermediate_size_mlp` wide) and the shared
experts (DeepSeek's `n_shared_experts`, Qwen2-MoE's `shared_expert_intermediate_size`, Llama 4's
one per MoE layer). A config that names experts in keys none of these reads is refused: imported as
a dense model it would be a fraction of its size.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from splitplan._io import check_output_folder, make_output_folder, read_text_file, write_text_atomic
from splitplan.catalog._load import SCHEMA_VERSION
from splitplan.catalog.models import ModelSpec
from splitplan.errors import CatalogError, InputError

_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float8_e4m3fn": 1}
# Above any real architecture (layers, widths, vocabularies, experts), below what makes the
# parameter count overflow or the catalog's integers meaningless.
_MAX_SIZE = 10_000_000


def model_entry_from_hf(path: str | Path, name: str | None = None) -> tuple[str, dict[str, Any]]:
    """(catalog name, entry fields) from a config.json; see `read_hf_config`."""
    label, entry, _ = read_hf_config(path, name)
    return label, entry


def read_hf_config(path: str | Path, name: str | None = None) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    """(catalog name, entry fields, notes) from a config.json; the entry is validated as a ModelSpec,
    and the notes say what of the architecture the entry does not model (also kept in its source).

    Every field used is checked before any arithmetic: a whole number within bounds (JSON parsed by
    Python admits NaN, Infinity and 1e30, which would crash the count or write nonsense), KV heads
    dividing the attention heads, and a known `torch_dtype` (an unknown one would silently size
    the weights at 2 bytes a value)."""
    p = Path(path)
    if name is not None and not name.strip():
        raise InputError("`name` must not be empty (give a catalog name, or leave it out)")
    text = read_text_file(p, "config")
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise InputError(f"{path} is not a config.json: nested too deeply") from None
    if not isinstance(cfg, dict):
        raise InputError(f"{path}: a config.json holds one JSON object")
    cfg = {**cfg.get("text_config", {}), **cfg} if isinstance(cfg.get("text_config"), dict) else cfg

    def size(key: str, v: object, low: int) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= _MAX_SIZE:
            what = "a positive integer" if low else "an integer ≥ 0"
            raise InputError(f"{path}: {key} must be {what} up to {_MAX_SIZE:,}, got {v!r}")
        return v

    def need(key: str) -> int:
        v = cfg.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise InputError(f"{path}: {key} must be a positive integer (is it a decoder-only LLM config?)")
        return size(key, v, 1)

    def opt(key: str, default: int, low: int = 0) -> int:
        v = cfg.get(key)
        return default if v is None else size(key, v, low)

    layers, hidden, heads, vocab = (
        need(k) for k in ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
    )
    kv_heads = opt("num_key_value_heads", heads, 1)
    if heads % kv_heads:
        raise InputError(
            f"{path}: num_key_value_heads ({kv_heads}) must divide num_attention_heads ({heads})"
        )
    head_dim = opt("head_dim", hidden // heads, 1)

    def first(keys: tuple[str, ...], default: int, low: int = 0) -> int:
        return next((size(k, cfg[k], low) for k in keys if cfg.get(k) is not None), default)

    experts = first(("num_local_experts", "n_routed_experts", "num_experts"), 1, 1)
    _refuse_unread_experts(path, cfg, experts)
    per_token = first(("num_experts_per_tok", "experts_per_token"), 1, 1) if experts > 1 else 1
    ffn_expert = first(("moe_intermediate_size", "intermediate_size"), 0)
    ffn_dense = first(("intermediate_size_mlp", "intermediate_size"), 0)  # Llama 4: its dense layers
    moe_layers = _moe_layer_count(path, cfg, layers, size) if experts > 1 else 0
    dense_layers = layers - moe_layers
    if (experts > 1 and ffn_expert <= 0) or (dense_layers and ffn_dense <= 0):
        raise InputError(f"{path}: intermediate_size (or moe_intermediate_size) must be a positive integer")
    llama4 = str(cfg.get("model_type", "")).startswith("llama4")  # one shared expert per MoE layer
    shared = (1 if llama4 else opt("n_shared_experts", 0)) if experts > 1 else 0
    # Qwen2-MoE: one shared MLP of its own width, scaled by a one-output gate
    shared_wide = opt("shared_expert_intermediate_size", 0) if experts > 1 else 0
    kv_lora = opt("kv_lora_rank", 0)
    rope = opt("qk_rope_head_dim", 0)
    mla_kv_dim = kv_lora + rope if kv_lora else 0

    if mla_kv_dim:
        nope, v_dim, q_lora = (
            opt("qk_nope_head_dim", head_dim),
            opt("v_head_dim", head_dim),
            opt("q_lora_rank", 0),
        )
        q_head = nope + rope
        q = hidden * q_lora + q_lora + q_lora * heads * q_head if q_lora else hidden * heads * q_head
        kv = hidden * (kv_lora + rope) + kv_lora + kv_lora * heads * (nope + v_dim)
        attn = q + kv + heads * v_dim * hidden
    else:
        attn = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
        if cfg.get("attention_bias") or cfg.get("model_type") in ("qwen2", "qwen2_moe"):
            attn += heads * head_dim + 2 * kv_heads * head_dim
    mlp = 3 * hidden  # gate, up, down per intermediate unit
    embed = vocab * hidden * (1 if cfg.get("tie_word_embeddings") else 2)
    per_layer = attn + 2 * hidden
    routed = experts * mlp * ffn_expert if experts > 1 else 0
    moe = (
        routed
        + hidden * experts
        + shared * mlp * ffn_expert
        + (mlp * shared_wide + hidden if shared_wide else 0)
    )
    params = embed + hidden + layers * per_layer + dense_layers * mlp * ffn_dense + moe_layers * moe
    active = params - moe_layers * (experts - per_token) * mlp * ffn_expert if experts > 1 else params

    # newer transformers write `dtype`, older ones `torch_dtype`; neither: the usual bfloat16
    dtype = cfg.get("torch_dtype", cfg.get("dtype"))
    dtype = "bfloat16" if dtype is None else dtype
    if not isinstance(dtype, str) or dtype not in _DTYPE_BYTES:
        raise InputError(
            f"{path}: torch_dtype {dtype!r} is not one of {', '.join(_DTYPE_BYTES)} "
            "(edit the entry's dtype_bytes by hand for another)"
        )
    label = (name if name is not None else _default_name(cfg, p)).strip().lower()
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", label):
        raise InputError(f"model name {label!r} must be letters, digits, '.', '_' or '-' (give --name)")
    entry: dict[str, Any] = {
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "ffn_hidden": ffn_expert if experts > 1 else ffn_dense,
        "vocab": vocab,
        "params": float(params),
        "active_params": float(active),
        "dtype_bytes": _DTYPE_BYTES[dtype],
    }
    if experts > 1:
        entry.update(experts=experts, experts_per_token=per_token)
    if mla_kv_dim:
        entry["mla_kv_dim"] = mla_kv_dim
    entry["source"] = (
        f"{p.name} ({cfg.get('model_type', 'unknown type')}) via splitplan catalog import-hf; params and "
        "active_params computed from the architecture (gated MLP, all projections, norms)"
    )
    notes = tuple(n for n in (_local_attention_note(cfg),) if n)
    if notes:
        entry["source"] += "; " + "; ".join(notes)
    try:
        ModelSpec(name=label, **entry)
    except CatalogError as exc:
        raise InputError(f"{path}: {exc}") from None
    return label, entry, notes


def _local_attention_note(cfg: dict[str, Any]) -> str:
    """Layers that attend within a window cache at most that many tokens each; the catalog counts
    KV at full attention on every layer, which overstates the cache (a conservative plan)."""
    types, window, chunk = cfg.get("layer_types"), cfg.get("sliding_window"), cfg.get("attention_chunk_size")
    if isinstance(types, list) and types:
        local = sum(1 for t in types if isinstance(t, str) and ("sliding" in t or "chunk" in t))
        span = f"{window} tokens" if _positive_int(window) else "a window"
        what = f"{local} of {len(types)} layers (layer_types) attend within {span}" if local else ""
    elif _positive_int(chunk):
        what = f"the chunked-attention layers keep at most attention_chunk_size = {chunk} tokens"
    elif _positive_int(window) and cfg.get("use_sliding_window", True) is not False:
        what = f"sliding_window = {window}: layers keep at most {window} tokens"
    else:
        what = ""
    if not what:
        return ""
    return (
        f"KV cache counted at full attention on every layer, while {what}: beyond that context the "
        "entry overstates the KV per token, and the plan errs toward more machines"
    )


def _positive_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


# The mixture-of-experts keys read here (module docstring); another key about experts or MoE
# layers that is set would change the count, so it is refused rather than ignored.
_EXPERT_KEYS_READ = frozenset(
    {
        "num_local_experts",
        "n_routed_experts",
        "num_experts",
        "num_experts_per_tok",
        "experts_per_token",
        "moe_intermediate_size",
        "n_shared_experts",
        "shared_expert_intermediate_size",
        "moe_layer_freq",
        "moe_layers",
        "interleave_moe_layer_step",
    }
)


def _refuse_unread_experts(path: str | Path, cfg: dict[str, Any], experts: int) -> None:
    """A config whose experts the keys read here do not fully describe: counted as read, it would
    import a model of another size (a dense one, or experts on the wrong layers)."""

    def is_set(v: object) -> bool:
        return (isinstance(v, int) and not isinstance(v, bool) and v > 1) or (isinstance(v, list) and bool(v))

    unread = sorted(
        k
        for k, v in cfg.items()
        if ("expert" in k.lower() or "moe" in k.lower()) and k not in _EXPERT_KEYS_READ and is_set(v)
    )
    if unread:
        raise InputError(
            f"{path}: {', '.join(unread)}: expert settings import-hf does not read (it reads "
            f"{', '.join(sorted(_EXPERT_KEYS_READ))}); write the entry by hand"
        )
    per_token = [k for k in ("num_experts_per_tok", "experts_per_token") if is_set(cfg.get(k))]
    if experts == 1 and per_token:
        raise InputError(
            f"{path}: {per_token[0]} names routed experts, but no expert count (num_local_experts, "
            "n_routed_experts, num_experts): write the entry by hand"
        )


def _moe_layer_count(path: str | Path, cfg: dict[str, Any], layers: int, size: Any) -> int:
    """How many decoder layers hold the experts, by the config family's own rule."""
    listed = cfg.get("moe_layers")  # Llama 4 (newer configs): the layers, listed
    if listed is not None:
        if not isinstance(listed, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in listed
        ):
            raise InputError(f"{path}: moe_layers must be a list of layer indices below {layers}")
        return len(set(listed))
    dense_only = cfg.get("mlp_only_layers") or []  # Qwen: layers kept dense
    if not isinstance(dense_only, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in dense_only
    ):
        raise InputError(f"{path}: mlp_only_layers must be a list of layer indices")

    def read(key: str, default: int, low: int) -> int:
        return default if cfg.get(key) is None else size(key, cfg[key], low)

    first_dense = read("first_k_dense_replace", 0, 0)  # DeepSeek
    freq = read("moe_layer_freq", 1, 1)  # DeepSeek: every freq-th layer after them
    # Qwen's decoder_sparse_step and Llama 4's interleave_moe_layer_step: every step-th layer
    step = read("interleave_moe_layer_step", read("decoder_sparse_step", 1, 1), 1)
    return sum(
        1
        for i in range(layers)
        if i >= first_dense and i % freq == 0 and (i + 1) % step == 0 and i not in dense_only
    )


def _default_name(cfg: dict[str, Any], path: Path) -> str:
    origin = str(cfg.get("_name_or_path") or "").rstrip("/")
    return origin.rsplit("/", 1)[-1] if origin else path.resolve().parent.name


def entry_toml(name: str, entry: dict[str, Any]) -> str:
    """One `[model.NAME]` table in the shipped schema."""
    lines = [f'[model."{name}"]']
    for k, v in entry.items():
        if isinstance(v, str):
            lines.append(f"{k} = {json.dumps(v)}")
        elif isinstance(v, float):
            lines.append(f"{k} = {v:.6e}")
        else:
            lines.append(f"{k} = {v}")
    return "\n".join(lines) + "\n"


def add_to_catalog(folder: str | Path, name: str, entry: dict[str, Any]) -> Path:
    """Append the entry to `folder/models.toml` (created with the schema line if new), atomically;
    a name the file already has is refused. `folder` is the `out` of `catalog_import_hf`: a path
    that cannot be such a folder (a file, below a file, a URL) is one line, before anything is
    created."""
    d = check_output_folder(folder, "`out`")
    path = d / "models.toml"
    text = f"schema_version = {SCHEMA_VERSION}\n"
    if path.exists():
        text = read_text_file(path, "catalog file")
        try:
            existing = tomllib.loads(text).get("model", {})
        except tomllib.TOMLDecodeError as exc:
            raise CatalogError(f"{path} is not a valid catalog file: {exc}") from None
        if not isinstance(existing, dict):
            raise CatalogError(f"{path}: [model] must be a table of [model.NAME] tables")
        if name in {k.lower() for k in existing}:
            raise InputError(f"{path} already has model {name!r}: remove it there or give another --name")
    make_output_folder(d, "`out`")
    write_text_atomic(path, text.rstrip("\n") + "\n\n" + entry_toml(name, entry))
    return path
