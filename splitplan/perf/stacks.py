"""Layer 2: serving stacks — named calibrations of the physical model, stored as TOML with provenance.

A stack file (data/perf/<name>.toml, or <catalog dir>/perf/<name>.toml of a user catalog, which
wins) holds the StackParams of one serving stack, optional refinements for one (GPU type, model)
the stack's data measured, and where the numbers came from:

    schema_version = 1
    name = "kernels"
    description = "…"
    fitted = true
    [provenance]            # source file, its sha256, rows fitted, selection, date, command
    [params]                # StackParams fields
    [refine."<gpu>"."<model>"]   # optional: some StackParams fields for that GPU × model

`--perf` resolves, in order: "analytic" (the shipped calibrated roofline), a stack name, a stack
file (.toml), a profile CSV (interpolated as the reference simulator does) or a measurement CSV
(a stack fitted to it on first use).
"""

from __future__ import annotations

import datetime as _dt
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from splitplan._io import check_output_folder, make_output_folder, read_text_file, write_text_atomic
from splitplan._paths import data_dir
from splitplan.catalog._load import register_cache, user_catalog_dirs
from splitplan.errors import InputError
from splitplan.perf.physical import StackParams

STACK_SCHEMA_VERSION = 1
# The stack search, simulate and heatmap use when no --perf is given (see docs/background.md).
DEFAULT_STACK = "tensorrt-llm"


@dataclass(frozen=True, slots=True)
class Stack:
    name: str
    params: StackParams
    description: str = ""
    fitted: bool = True
    provenance: dict[str, object] = field(default_factory=dict)
    refine: dict[tuple[str, str], StackParams] = field(default_factory=dict)
    path: str = ""

    def params_for(self, gpu: str, model: str) -> StackParams:
        """The stack's parameters for one (GPU, model): its own refinement, else the refinement of
        a GPU with the same compute die (equal dense fp16 and fp8 peaks: H200 runs H100's kernels,
        with more and faster memory), else the shared fit."""
        if (gpu, model) in self.refine:
            return self.refine[gpu, model]
        sibling = _same_die(gpu, [g for g, m in self.refine if m == model])
        return self.refine[sibling, model] if sibling else self.params

    def to_toml(self) -> str:
        prov = self.provenance
        lines = [
            f"# Serving stack {self.name!r} of the physical performance model (splitplan/perf/physical.py).",
        ]
        if self.description:
            lines.append(f"# {self.description}")
        if prov.get("command"):
            lines.append(f"# regenerate with: {prov['command']}")
        lines += [
            f"schema_version = {STACK_SCHEMA_VERSION}",
            f"name = {_q(self.name)}",
            f"description = {_q(self.description)}",
            f"fitted = {'true' if self.fitted else 'false'}",
            "",
            "[provenance]",
            *(f"{k} = {_value(v)}" for k, v in prov.items()),
            "",
            "[params]",
            *(f"{k} = {v:.6g}" for k, v in self.params.to_dict().items()),
        ]
        for (gpu, model), p in sorted(self.refine.items()):
            base = self.params.to_dict()
            lines += ["", f"[refine.{_q(gpu)}.{_q(model)}]"]
            lines += [f"{k} = {v:.6g}" for k, v in p.to_dict().items() if v != base[k]]
        return "\n".join(lines) + "\n"


def _q(s: str) -> str:
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    return _q(str(v))


def _params_from(d: object, where: str, base: dict[str, float] | None = None) -> StackParams:
    if not isinstance(d, dict):
        raise InputError(f"{where} must be a table")
    known = set(StackParams.names())
    unknown = sorted(set(d) - known)
    if unknown:
        hint = (
            " (knee_tokens became knee_elements, in per-GPU shard elements = tokens × hidden / TP:"
            " refit the stack with its command)"
            if "knee_tokens" in unknown
            else ""
        )
        raise InputError(f"{where}: unknown stack parameter(s) {', '.join(unknown)}{hint}")
    vals: dict[str, float] = dict(base or {})
    for k, v in d.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InputError(f"{where}: {k} must be a number, got {v!r}")
        vals[k] = float(v)
    try:
        return StackParams(**vals)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None


@register_cache  # a --catalog folder's stack may replace a file read before (catalog.clear_caches)
@cache
def load_stack_file(path: str) -> Stack:
    """A stack file, checked as the catalog files are: its `schema_version` must be the one this
    version writes (another would be read with the wrong meaning), and [params] must give every
    parameter (a file written by `perf fit` does; one missing would silently take its datasheet
    default and mix it into a fit). [refine] tables give only what differs from [params]."""
    p = Path(path)
    text = read_text_file(p, "stack file")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"stack file {p} is not valid TOML: {exc}") from None
    if "params" not in doc:
        raise InputError(f"{p} is not a stack file (no [params] table)")
    version = doc.get("schema_version")
    if isinstance(version, bool) or version != STACK_SCHEMA_VERSION:
        raise InputError(
            f"stack file {p}: schema_version must be {STACK_SCHEMA_VERSION}, got {version!r} "
            "(refit the stack with the command in its provenance)"
        )
    if isinstance(doc["params"], dict):
        missing = [k for k in StackParams.names() if k not in doc["params"]]
        if missing:
            raise InputError(
                f"stack file {p} [params]: missing {', '.join(missing)} "
                "(a stack gives every parameter; refit it with the command in its provenance)"
            )
    name = str(doc.get("name", p.stem))
    params = _params_from(doc["params"], f"{p} [params]")
    refine: dict[tuple[str, str], StackParams] = {}
    ref = doc.get("refine", {})
    if not isinstance(ref, dict):
        raise InputError(f"{p}: [refine] must be a table")
    for gpu, per_model in ref.items():
        if not isinstance(per_model, dict):
            raise InputError(f"{p}: [refine.{gpu}] must be a table of models")
        for model, d in per_model.items():
            refine[str(gpu), str(model)] = _params_from(d, f"{p} [refine.{gpu}.{model}]", params.to_dict())
    prov = doc.get("provenance", {})
    return Stack(
        name=name,
        params=params,
        description=str(doc.get("description", "")),
        fitted=bool(doc.get("fitted", True)),
        provenance=dict(prov) if isinstance(prov, dict) else {},
        refine=refine,
        path=str(p),
    )


def _stack_dirs() -> list[Path]:

    # later user folders override earlier ones, and all override the shipped stacks
    return [d / "perf" for d in reversed(user_catalog_dirs())] + [data_dir() / "perf"]


def find_stack(name: str) -> Path | None:
    """The file of stack `name` (a user catalog's first, then the shipped one), None if none."""
    for d in _stack_dirs():
        f = d / f"{name}.toml"
        if f.is_file():
            return f
    return None


def list_stacks() -> list[str]:
    names: set[str] = set()
    for d in _stack_dirs():
        if d.is_dir():
            for f in d.glob("*.toml"):
                try:
                    load_stack_file(str(f))
                except InputError:
                    continue  # not a stack file (e.g. the analytic coefficients)
                names.add(f.stem)
    return sorted(names)


def load_stack(name_or_path: str | Path) -> Stack:
    s = str(name_or_path)
    if s.endswith(".toml") or "/" in s:
        return load_stack_file(str(Path(s).resolve()))
    f = find_stack(s)
    if f is None:
        known = ", ".join(["analytic", *list_stacks()])
        raise InputError(
            f"unknown performance stack {s!r} (known: {known}; or give a profile CSV or stack file)"
        )
    return load_stack_file(str(f))


def save_stack(stack: Stack, out_dir: str | Path) -> Path:
    """Write `stack` as <out_dir>/perf/<name>.toml (where --catalog out_dir finds it), atomically.
    `out_dir` is the `out` of `perf_fit`, checked there before the fit and again here."""
    perf_dir = check_output_folder(Path(out_dir) / "perf", "`out`")
    path = perf_dir / f"{stack.name}.toml"
    make_output_folder(perf_dir, "`out`")
    write_text_atomic(path, stack.to_toml())
    return path


def today() -> str:
    return _dt.datetime.now(_dt.UTC).date().isoformat()


def datasheet_stack() -> Stack:
    """The `datasheet` stack: no fit, the documented StackParams defaults."""
    return Stack(
        name="datasheet",
        params=StackParams(),
        fitted=False,
        description=(
            "no fit: documented default efficiencies of datasheet peaks (StackParams defaults), "
            "for a GPU nobody has measured"
        ),
        provenance={
            "source": "none: the defaults documented in splitplan/perf/physical.py (StackParams)",
            "rows": 0,
            "command": "python -m splitplan.perf.stacks data",
        },
    )


if __name__ == "__main__":  # python -m splitplan.perf.stacks DIR: (re)write DIR/perf/datasheet.toml
    import sys

    print(save_stack(datasheet_stack(), sys.argv[1] if len(sys.argv) > 1 else "data"))


def _same_die(gpu: str, candidates: list[str]) -> str | None:
    from splitplan.catalog import get_gpu
    from splitplan.errors import CatalogError

    try:
        me = get_gpu(gpu)
        for name in sorted(candidates):
            other = get_gpu(name)
            if other.fp16_flops == me.fp16_flops and other.fp8_flops == me.fp8_flops:
                return name
    except CatalogError:
        return None
    return None
