"""Layer 7 — the Python twin of every CLI command: typed requests in, typed results out.

No printing and no typer here; the CLI renders what these return.
"""

from splitplan.api._catalog import CatalogListing, catalog

__all__ = ["CatalogListing", "catalog"]
