"""`splitplan catalog`."""

from __future__ import annotations

from typing import Annotated

import typer


def catalog_command(
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """List GPUs, machine types, models and designs with cost and power."""
    from splitplan import api
    from splitplan.cli._common import console, print_json

    listing = api.catalog()
    if json_out:
        print_json(listing.to_json())
        return
    from rich.table import Table

    con = console()
    t = Table(title="GPUs")
    for col in ("name", "memory GB", "HBM TB/s", "fp16 TFLOP/s", "TDP W", "source"):
        t.add_column(col)
    for g in listing.gpus:
        t.add_row(
            g.name,
            f"{g.memory_bytes / 1e9:.0f}",
            f"{g.hbm_bytes_per_s / 1e12:.2f}",
            f"{g.fp16_flops / 1e12:.0f}",
            f"{g.tdp_w:.0f}",
            g.source,
        )
    con.print(t)
    t = Table(title="Machine types")
    for col in ("name", "GPU", "GPUs", "$/h", "power kW", "link GB/s", "source"):
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
        )
    con.print(t)
    t = Table(title="Models")
    for col in ("name", "layers", "hidden", "heads/kv", "params B", "weights GB", "KV KiB/token"):
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
        )
    con.print(t)
    t = Table(title="Designs")
    for col in ("name", "kind", "prompt pool", "token pool"):
        t.add_column(col)
    for d in listing.designs:
        t.add_row(d.name, d.kind, d.prompt.name, "(same machines)" if d.is_baseline else d.token.name)
    con.print(t)


def register(app: typer.Typer) -> None:
    app.command("catalog")(catalog_command)
