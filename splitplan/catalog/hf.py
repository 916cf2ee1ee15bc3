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

from splitplan._io import write_text_atomic
from splitplan.catalog._load import SCHEMA_VERSION
from splitplan.catalog.models import ModelSpec
from splitplan.errors import CatalogError, InputError

_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float8_e4m3fn": 1}


def model_entry_from_hf(path: str | Path, name: str | None = None) -> tuple[str, dict[str, Any]]:
    """(catalog name, entry fields) from a config.json; the entry is validated as a ModelSpec."""
    p = Path(path)
    try:
        cfg = json.loads(p.read_text())
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(cfg, dict):
        raise InputError(f"{path}: a config.json holds one JSON object")
    cfg = {**cfg.get("text_config", {}), **cfg} if isinstance(cfg.get("text_config"), dict) else cfg

    def need(key: str) -> int:
        v = cfg.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise InputError(f"{path}: {key} must be a positive integer (is it a decoder-only LLM config?)")
        return v

    def opt(key: str, default: int) -> int:
        v = cfg.get(key)
        return default if v is None else int(v)

    layers, hidden, heads, vocab = (
        need(k) for k in ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
    )
    kv_heads = opt("num_key_value_heads", heads)
    head_dim = opt("head_dim", hidden // heads)
    experts = opt("num_local_experts", opt("n_routed_experts", 1))
    per_token = opt("num_experts_per_tok", 1) if experts > 1 else 1
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

    dtype = str(cfg.get("torch_dtype", "bfloat16"))
    label = (name or _default_name(cfg, p)).strip().lower()
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
        "dtype_bytes": _DTYPE_BYTES.get(dtype, 2),
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
    a name the file already has is refused."""
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    path = d / "models.toml"
    text = f"schema_version = {SCHEMA_VERSION}\n"
    if path.is_file():
        text = path.read_text()
        try:
            existing = tomllib.loads(text).get("model", {})
        except tomllib.TOMLDecodeError as exc:
            raise CatalogError(f"{path} is not a valid catalog file: {exc}") from None
        if name in {k.lower() for k in existing}:
            raise InputError(f"{path} already has model {name!r}: remove it there or give another --name")
    write_text_atomic(path, text.rstrip("\n") + "\n\n" + entry_toml(name, entry))
    return path
