"""`splitplan catalog`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from splitplan.api import CatalogListing


def print_listing(listing: CatalogListing, json_out: bool = False) -> None:
    """Print the catalog listing (api.catalog) as tables or one JSON document."""
    from splitplan.cli._common import console, print_json

    if json_out:
        print_json(listing.to_json())
        return
    from rich.table import Table

    con = console()
    t = Table(title="GPUs")
    for col in ("name", "memory GB", "HBM TB/s", "fp16 TFLOP/s", "fp8 TFLOP/s", "TDP W", "source", "from"):
        t.add_column(col)
    for g in listing.gpus:
        t.add_row(
            g.name,
            f"{g.memory_bytes / 1e9:.0f}",
            f"{g.hbm_bytes_per_s / 1e12:.2f}",
            f"{g.fp16_flops / 1e12:.0f}",
            "—" if g.fp8_flops is None else f"{g.fp8_flops / 1e12:.0f}",
            f"{g.tdp_w:.0f}",
            g.source,
            _origin("gpu", g.name),
        )
    con.print(t)
    t = Table(title="Machine types")
    for col in ("name", "GPU", "GPUs", "$/h", "power kW", "link GB/s", "source", "from"):
        t.add_column(col)
    for m in listing.machines:
        t.add_row(
            m.name,
            m.gpu.name,
            str(m.gpus),
            f"{m.cost_usd_per_h:.2f}",
            f"{m.rated_power_kw:.2f}",
            f"{m.interconnect_bytes_per_s / 1e9:.0f}",
            m.source,
            _origin("machine", m.name),
        )
    con.print(t)
    t = Table(title="Models")
    for col in ("name", "layers", "hidden", "heads/kv", "params B", "weights GB", "KV KiB/token", "from"):
        t.add_column(col)
    for spec in listing.models:
        active = f" ({spec.active_params / 1e9:.1f} active)" if spec.is_sparse else ""
        t.add_row(
            spec.name,
            str(spec.layers),
            str(spec.hidden),
            f"{spec.heads}/{spec.kv_heads}",
            f"{spec.params / 1e9:.1f}{active}",
            f"{spec.weight_bytes / 1e9:.0f}",
            f"{spec.kv_bytes_per_token / 1024:.0f}",
            _origin("model", spec.name),
        )
    con.print(t)
    t = Table(title="Designs")
    for col in ("name", "kind", "prompt pool", "token pool"):
        t.add_column(col)
    for d in listing.designs:
        t.add_row(d.name, d.kind, d.prompt.name, "(same machines)" if d.is_baseline else d.token.name)
    con.print(t)


def _origin(kind: str, name: str) -> str:
    from splitplan.catalog import entry_origin

    where = entry_origin(kind, name)
    return where if where == "shipped" else f"user: {where}"


def import_hf_command(
    config: Annotated[
        Path, typer.Argument(help="A Hugging Face config.json (a local file; nothing is downloaded).")
    ],
    name: Annotated[
        str | None, typer.Option(help="Catalog name of the model (default: the folder's name).")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="User catalog folder to add the entry to (its models.toml); default: print it."),
    ] = None,
) -> None:
    """Write a `models` entry from a Hugging Face config.json (parameter counts computed)."""
    from splitplan import api

    imported = api.catalog_import_hf(config, name, out)
    entry_name, entry, path = imported.name, imported.entry, imported.path
    if path is None:
        typer.echo(imported.toml, nl=False)
        return
    typer.echo(
        f"model {entry_name}: {entry['params'] / 1e9:.2f}B parameters ({entry['active_params'] / 1e9:.2f}B "
        f"active), computed from the architecture; written to {path}"
    )


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        name="catalog",
        help="List GPUs, machine types, models and designs; import models.",
        invoke_without_command=True,
        no_args_is_help=False,
    )
    group.callback(invoke_without_command=True)(_catalog_group)
    group.command("import-hf")(import_hf_command)
    app.add_typer(group, name="catalog")


def _catalog_group(
    ctx: typer.Context,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """List GPUs, machine types, models and designs with cost, power and where each entry comes from
    (shipped, or a user catalog given by --catalog DIR / $SPLITPLAN_CATALOG)."""
    from splitplan import api

    if ctx.invoked_subcommand is None:
        print_listing(api.catalog(), json_out=json_out)
