"""`splitplan catalog` as a library function."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from splitplan.catalog import (
    GpuSpec,
    MachineType,
    ModelSpec,
    entry_origin,
    list_gpus,
    list_machine_types,
    list_models,
    user_catalog_dirs,
)
from splitplan.design import SEARCH_DESIGNS, Design, get_design


@dataclass(frozen=True, slots=True)
class CatalogListing:
    gpus: list[GpuSpec]
    machines: list[MachineType]
    models: list[ModelSpec]
    designs: list[Design]

    def to_json(self) -> dict[str, object]:
        return {
            "gpus": [
                {
                    "name": g.name,
                    "memory_bytes": g.memory_bytes,
                    "hbm_bytes_per_s": g.hbm_bytes_per_s,
                    "fp16_flops": g.fp16_flops,
                    "tdp_w": g.tdp_w,
                    "fp8_flops": g.fp8_flops,
                    "source": g.source,
                    "origin": entry_origin("gpu", g.name),
                }
                for g in self.gpus
            ],
            "machines": [
                {
                    "name": m.name,
                    "gpu": m.gpu.name,
                    "gpus": m.gpus,
                    "cost_usd_per_h": m.cost_usd_per_h,
                    "power_kw": m.rated_power_kw,
                    "memory_bytes": m.memory_bytes,
                    "interconnect_bytes_per_s": m.interconnect_bytes_per_s,
                    "tp_choices": list(m.tp_choices),
                    "source": m.source,
                    "origin": entry_origin("machine", m.name),
                }
                for m in self.machines
            ],
            "models": [
                {
                    "name": m.name,
                    "layers": m.layers,
                    "hidden": m.hidden,
                    "heads": m.heads,
                    "kv_heads": m.kv_heads,
                    "head_dim": m.head_dim,
                    "params": m.params,
                    "active_params": m.active_params,
                    "dtype_bytes": m.dtype_bytes,
                    "weight_bytes": m.weight_bytes,
                    "kv_bytes_per_token": m.kv_bytes_per_token,
                    "experts": m.experts,
                    "experts_per_token": m.experts_per_token,
                    "mla_kv_dim": m.mla_kv_dim,
                    "source": m.source,
                    "origin": entry_origin("model", m.name),
                }
                for m in self.models
            ],
            "designs": [
                {
                    "name": d.name,
                    "kind": d.kind,
                    "prompt_machine": d.prompt.name,
                    "token_machine": d.token.name,
                    "prompt_power_cap": d.prompt.power_cap,
                    "token_power_cap": d.token.power_cap,
                }
                for d in self.designs
            ],
            "user_catalogs": [str(p) for p in user_catalog_dirs()],
        }


def catalog() -> CatalogListing:
    """Everything the catalog knows: GPUs, machine types, models, the named designs."""
    return CatalogListing(
        gpus=list_gpus(),
        machines=list_machine_types(),
        models=list_models(),
        designs=[get_design(n) for n in SEARCH_DESIGNS],
    )


@dataclass(frozen=True, slots=True)
class ImportedModel:
    """A `models` entry made from a Hugging Face config.json, and where it was written (if anywhere)."""

    name: str
    entry: dict[str, Any]
    toml: str
    path: Path | None
    # what of the architecture the entry does not model (sliding-window attention), also in its source
    notes: tuple[str, ...] = ()


def catalog_import_hf(
    config: str | Path, name: str | None = None, out: str | Path | None = None
) -> ImportedModel:
    """The `models` entry of a Hugging Face config.json (parameter counts computed); with `out`,
    added to that user catalog folder's models.toml."""
    from splitplan.catalog.hf import add_to_catalog, entry_toml, read_hf_config

    entry_name, entry, notes = read_hf_config(Path(config), name)
    path = None if out is None else add_to_catalog(Path(out), entry_name, entry)
    return ImportedModel(entry_name, entry, entry_toml(entry_name, entry), path, notes)
