"""Layer 1: a `models` catalog entry from a Hugging Face `config.json` (a local file; nothing is
downloaded).

Parameter counts are computed from the architecture, not read from a model card: embeddings (and
an untied LM head), per layer the attention projections (grouped-query, with q/k/v biases where
the config has them, or DeepSeek's multi-head latent attention), a gated MLP (gate, up and down
projections — the Llama/Mistral/Qwen/DeepSeek family) or, in MoE layers, every routed expert plus
the router and any shared experts, and the RMSNorm weights. `active_params` counts the
`num_experts_per_tok` routed experts a token uses instead of all of them.
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
    """(catalog name, entry fields) from a config.json; the entry is validated as a ModelSpec.

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
    experts = opt("num_local_experts", opt("n_routed_experts", 1, 1), 1)
    per_token = opt("num_experts_per_tok", 1, 1) if experts > 1 else 1
    ffn_dense = opt("intermediate_size", 0)
    ffn_expert = opt("moe_intermediate_size", ffn_dense)
    if (ffn_expert if experts > 1 else ffn_dense) <= 0:
        raise InputError(f"{path}: intermediate_size (or moe_intermediate_size) must be a positive integer")
    shared = opt("n_shared_experts", 0) if experts > 1 else 0
    dense_layers = layers if experts == 1 else min(layers, opt("first_k_dense_replace", 0))
    moe_layers = layers - dense_layers
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
        if cfg.get("attention_bias") or cfg.get("model_type") == "qwen2":
            attn += heads * head_dim + 2 * kv_heads * head_dim
    mlp = 3 * hidden  # gate, up, down per intermediate unit
    embed = vocab * hidden * (1 if cfg.get("tie_word_embeddings") else 2)
    per_layer = attn + 2 * hidden
    routed = experts * mlp * ffn_expert if experts > 1 else 0
    moe = routed + hidden * experts + shared * mlp * ffn_expert
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
    try:
        ModelSpec(name=label, **entry)
    except CatalogError as exc:
        raise InputError(f"{path}: {exc}") from None
    return label, entry


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
