"""Embedded workload presets: compact empirical size distributions from the Azure 2023 LLM traces.

Each preset (data/presets/<name>.toml) holds a quantile table of prompt and output lengths (a few
hundred probability points, denser in the upper tail) and the observed rank correlation between the
two. Sampling uses a Gaussian copula: correlated normals → uniforms → each column's quantile function,
so both marginals and the prompt/output dependence are reproduced without shipping the trace.

Regenerate the tables from the original CSVs (CC-BY 4.0, Azure Public Dataset):

    python -m splitplan.workload.presets ../shared/data/azure-llm-2023 data/presets
"""

from __future__ import annotations

import math
import sys
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from splitplan._paths import data_dir
from splitplan.errors import InputError

PRESETS = {"coding": "AzureLLMInferenceTrace_code.csv", "conversation": "AzureLLMInferenceTrace_conv.csv"}
ATTRIBUTION = (
    "Derived from the Azure LLM inference traces 2023 (Azure Public Dataset, CC-BY 4.0): Patel, Choukse, "
    'Zhang, Shah, Goiri, Maleki, Bianchini. "Splitwise: Efficient generative LLM inference using phase '
    'splitting", ISCA 2024.'
)
REGENERATE = "python -m splitplan.workload.presets ../shared/data/azure-llm-2023 data/presets"


def probability_grid() -> npt.NDArray[np.float64]:
    """201 evenly spaced points plus a dense upper tail (P95…P100 every 0.05 %): 293 points."""
    return np.unique(np.round(np.concatenate([np.linspace(0, 1, 201), np.linspace(0.95, 1, 101)]), 6))


@dataclass(frozen=True, slots=True)
class Preset:
    """A named size distribution: quantile functions of both columns plus a copula correlation."""

    name: str
    probabilities: npt.NDArray[np.float64]
    prompt_quantiles: npt.NDArray[np.float64]
    output_quantiles: npt.NDArray[np.float64]
    copula_rho: float
    source_rows: int
    source: str
    attribution: str
    trace_quantiles: dict[str, float] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        p = self.probabilities
        if not (len(p) == len(self.prompt_quantiles) == len(self.output_quantiles) >= 2):
            raise InputError(f"preset {self.name!r}: quantile columns must have equal length ≥ 2")
        if p[0] != 0 or p[-1] != 1 or np.any(np.diff(p) <= 0):
            raise InputError(f"preset {self.name!r}: probabilities must rise strictly from 0 to 1")
        for col in (self.prompt_quantiles, self.output_quantiles):
            if np.any(np.diff(col) < 0) or col[0] < 1:
                raise InputError(f"preset {self.name!r}: quantiles must be non-decreasing and ≥ 1")
        if not -1 < self.copula_rho < 1:
            raise InputError(f"preset {self.name!r}: copula correlation must lie in (-1, 1)")

    def sample_sizes(
        self, n: int, rng: np.random.Generator
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """`n` (prompt_tokens, output_tokens) pairs drawn from the joint distribution.

        Rank-based joint sampling: the copula's correlated normals decide only the ranks; each column
        then takes one uniform from each of n equal strata. Marginal quantiles are thus reproduced to
        within 1/n even for small n (a few thousand requests), and the dependence follows the copula.
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise InputError(f"sample count must be an integer ≥ 0, got {n!r}")
        n = int(n)
        z = rng.standard_normal((2, n))
        rho = self.copula_rho
        z2 = rho * z[0] + math.sqrt(1.0 - rho * rho) * z[1]
        jitter = rng.random((2, n))
        u1 = (_ranks(z[0]) + jitter[0]) / n
        u2 = (_ranks(z2) + jitter[1]) / n
        prompt = np.rint(np.interp(u1, self.probabilities, self.prompt_quantiles)).astype(np.int64)
        output = np.rint(np.interp(u2, self.probabilities, self.output_quantiles)).astype(np.int64)
        return np.maximum(prompt, 1), np.maximum(output, 1)


def _ranks(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    r = np.empty(len(x), dtype=np.float64)
    r[np.argsort(x, kind="stable")] = np.arange(len(x), dtype=np.float64)
    return r


def list_presets() -> list[str]:
    return sorted(PRESETS)


@cache
def get_preset(name: str) -> Preset:
    """The embedded preset `name` ("coding" or "conversation")."""
    if name not in PRESETS:
        raise InputError(f"unknown workload preset {name!r}; choose from {', '.join(sorted(PRESETS))}")
    path = data_dir() / "presets" / f"{name}.toml"
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"preset {name!r}: cannot read {path.name} ({exc})") from None
    table = doc["quantiles"]
    return Preset(
        name=name,
        probabilities=np.asarray(table["probability"], dtype=np.float64),
        prompt_quantiles=np.asarray(table["prompt_tokens"], dtype=np.float64),
        output_quantiles=np.asarray(table["output_tokens"], dtype=np.float64),
        copula_rho=float(doc["copula_rho"]),
        source_rows=int(doc["source_rows"]),
        source=str(doc["source"]),
        attribution=str(doc["attribution"]),
        trace_quantiles={k: float(v) for k, v in doc.get("trace_quantiles", {}).items()},
    )


def build_preset_toml(
    name: str, prompt: npt.NDArray[np.int64], output: npt.NDArray[np.int64], source: str
) -> str:
    """The TOML text of a preset derived from a trace's two size columns."""
    from scipy.stats import spearmanr

    p = probability_grid()
    qp = np.quantile(prompt.astype(np.float64), p)
    qo = np.quantile(output.astype(np.float64), p)
    rs = float(spearmanr(prompt, output)[0])
    rho = 2.0 * math.sin(math.pi * rs / 6.0)  # Spearman → Gaussian-copula correlation

    def arr(values: npt.NDArray[np.float64], fmt: str) -> str:
        items = [format(float(v), fmt) for v in values]
        rows = [", ".join(items[i : i + 10]) for i in range(0, len(items), 10)]
        return "[\n  " + ",\n  ".join(rows) + ",\n]"

    tq = {
        f"{col}_p{q}": float(np.percentile(v, q))
        for col, v in (("prompt", prompt), ("output", output))
        for q in (50, 90, 99)
    }
    lines = [
        f"# Workload preset {name!r}: quantile table of prompt/output token counts.",
        f"# {ATTRIBUTION}",
        f"# Regenerate with: {REGENERATE}",
        f'name = "{name}"',
        f'source = "{source}"',
        f'attribution = "{ATTRIBUTION.replace(chr(34), chr(39))}"',
        f'regenerate = "{REGENERATE}"',
        f"source_rows = {len(prompt)}",
        f"spearman_rho = {rs:.6f}",
        f"copula_rho = {rho:.6f}",
        "",
        "[trace_quantiles]  # numpy linear percentiles of the source trace, for checks",
        *[f"{k} = {v:.2f}" for k, v in tq.items()],
        "",
        "[quantiles]",
        f"probability = {arr(p, '.6g')}",
        f"prompt_tokens = {arr(qp, '.2f')}",
        f"output_tokens = {arr(qo, '.2f')}",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """`python -m splitplan.workload.presets AZURE_DIR OUT_DIR`: rebuild both preset files."""
    from splitplan._io import write_text_atomic
    from splitplan.workload.readers import read_trace

    if len(argv) != 2:
        print(f"usage: {REGENERATE.replace('../shared/data/azure-llm-2023', 'AZURE_DIR')}", file=sys.stderr)
        return 2
    src, out = Path(argv[0]), Path(argv[1])
    for name, fname in PRESETS.items():
        wl = read_trace(src / fname)
        source = f"Azure LLM inference trace 2023, {fname}"
        text = build_preset_toml(name, wl.prompt_tokens, wl.output_tokens, source)
        write_text_atomic(out / f"{name}.toml", text)
        print(f"wrote {out / f'{name}.toml'} from {wl.n} rows")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
