"""`splitplan catalog`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from splitplan.api import CatalogListing


def print_listing(listing: CatalogListing, json_out: bool = False) -> None:
    """Print the catalog listing (api.catalog) as tables or one JSON document. In 80 columns the
    sources are numbered notes under each table (`--wide`: in the table)."""
    from splitplan.cli._common import console, print_json, wide
    from splitplan.report.render import make_table

    if json_out:
        print_json(listing.to_json())
        return
    con = console()
    full = wide()
    sources: dict[str, int] = {}  # 80 columns: each source once, as a numbered note under its table

    def src(text: str) -> str:
        if full:
            return text
        return f"[{sources.setdefault(text, len(sources) + 1)}]"

    def table(title: str, cols: list[str], rows: list[list[str]], wrap: tuple[int, ...]) -> None:
        keep = tuple(i for i in range(len(cols)) if i not in wrap)
        text = tuple(i for i, c in enumerate(cols) if c in ("source", "from", "GPU", "kind"))
        con.print(make_table(title, cols, rows, right_from=1, no_wrap=keep, left=text, wide=full))
        if sources:
            from rich.markup import escape

            for text_, n in sources.items():
                con.print(escape(f"[{n}] {text_}"))
            sources.clear()
        con.print()

    table(
        "GPUs",
        ["name", "memory GB", "HBM TB/s", "fp16 TFLOP/s", "fp8 TFLOP/s", "TDP W", "source", "from"],
        [
            [
                g.name,
                f"{g.memory_bytes / 1e9:.0f}",
                f"{g.hbm_bytes_per_s / 1e12:.2f}",
                f"{g.fp16_flops / 1e12:.0f}",
                "—" if g.fp8_flops is None else f"{g.fp8_flops / 1e12:.0f}",
                f"{g.tdp_w:.0f}",
                src(g.source),
                _origin("gpu", g.name),
            ]
            for g in listing.gpus
        ],
        wrap=(),
    )
    table(
        "Machine types",
        ["name", "GPU", "GPUs", "$/h", "power kW", "link GB/s", "source", "from"],
        [
            [
                m.name,
                m.gpu.name,
                str(m.gpus),
                f"{m.cost_usd_per_h:.2f}",
                f"{m.rated_power_kw:.2f}",
                f"{m.interconnect_bytes_per_s / 1e9:.0f}",
                src(m.source),
                _origin("machine", m.name),
            ]
            for m in listing.machines
        ],
        wrap=(),
    )
    rows = []
    for spec in listing.models:
        rows.append(
            [
                spec.name,
                str(spec.layers),
                str(spec.hidden),
                f"{spec.heads}/{spec.kv_heads}",
                f"{spec.params / 1e9:.1f}",
                f"{spec.active_params / 1e9:.1f}" if spec.is_sparse else "",
                f"{spec.weight_bytes / 1e9:.0f}",
                f"{spec.kv_bytes_per_token / 1024:.0f}",
                _origin("model", spec.name),
            ]
        )
    cols = ["name", "layers", "hidden", "heads/kv", "params B", "active B", "weights GB", "KV KiB/token"]
    table("Models", [*cols, "from"], rows, wrap=())
    table(
        "Designs",
        ["name", "kind", "prompt pool", "token pool"],
        [
            [d.name, d.kind, d.prompt.name, "(same machines)" if d.is_baseline else d.token.name]
            for d in listing.designs
        ],
        wrap=(3,),
    )


def _origin(kind: str, name: str) -> str:
    from splitplan.catalog import entry_origin

    where = entry_origin(kind, name)
    if where == "shipped":
        return where
    from splitplan.cli._common import wide

    # 80 columns: the user catalog's file name (`--wide`, `--json`: its whole path)
    return f"user: {where if wide() else Path(where).name}"


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
    from splitplan.cli._logging import note

    imported = api.catalog_import_hf(config, name, out)
    entry_name, entry, path = imported.name, imported.entry, imported.path
    for text in imported.notes:  # on stderr (hidden by --quiet): the printed entry stays clean TOML
        note(text)
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
