"""Layer 1 — the catalog: GPUs, machine types, models (pure data, validated, frozen)."""

from splitplan.catalog._load import entry_origin, unknown_name, use_user_catalogs, user_catalog_dirs
from splitplan.catalog.hardware import (
    GpuSpec,
    Machine,
    MachineType,
    get_gpu,
    get_machine_type,
    list_gpus,
    list_machine_types,
    validate_power_cap,
)
from splitplan.catalog.models import ModelSpec, get_model, list_models

__all__ = [
    "GpuSpec",
    "Machine",
    "MachineType",
    "ModelSpec",
    "entry_origin",
    "get_gpu",
    "get_machine_type",
    "get_model",
    "list_gpus",
    "list_machine_types",
    "list_models",
    "unknown_name",
    "use_user_catalogs",
    "user_catalog_dirs",
    "validate_power_cap",
]
