"""The heatmap's one-design search space is the design itself, instances included (TP, weight and
KV precision per pool), so `heatmap --token-tp/--token-precision` maps the design it was given."""

from __future__ import annotations

import pytest

from splitplan.api._heatmap import _space
from splitplan.design import PAPER_DESIGNS, custom_design, get_design


@pytest.mark.parametrize("name", [n for n in PAPER_DESIGNS if not get_design(n).is_baseline])
def test_a_paper_design_s_space_is_that_design(name: str) -> None:
    d = get_design(name)
    assert _space(d, (1, 3), (1, 3)).design() == d


@pytest.mark.parametrize(
    "instances",
    [
        {"token_tp": 2},
        {"prompt_tp": 4, "token_precision": "fp8"},
        {"prompt_kv_precision": "fp8"},
        {"token_tp": 4, "token_precision": "fp8", "token_kv_precision": "fp16"},
    ],
)
def test_an_instance_design_s_space_keeps_its_instances(instances: dict[str, object]) -> None:
    d = custom_design("dgx-h100", "dgx-h100", **instances)  # type: ignore[arg-type]
    space = _space(d, (1, 3), (1, 3))
    assert space.design() == d
    assert (space.prompt.tps, space.token.tps) == ((d.prompt.tp,), (d.token.tp,))
