"""A DES verdict stopped early (Decision.complete False) travels through the store and the cache as
what it is: kept by searches that stop runs too, re-simulated for one that needs the whole run."""

from __future__ import annotations

import math

from splitplan.search.evaluate import Decision
from splitplan.search.grid import CachedEvaluator
from splitplan.search.store import _decode, _encode


def test_the_store_keeps_whether_a_run_went_to_the_end():
    cut = Decision(meets=False, margin=-0.5000001, binding="tbt_p90", complete=False)
    back = _decode(_encode(cut))
    assert back == cut
    assert not back.complete
    assert math.isnan(back.measured_margin)
    whole = Decision(meets=True, margin=0.2, binding="ttft_p99")
    assert _decode(_encode(whole)).complete
    old = _encode(whole)
    del old["complete"]  # a store written before runs could stop
    assert _decode(old).complete


class _Inner:
    def __init__(self) -> None:
        self.calls: list[float | None] = []

    def screen(self, *a, **k):  # pragma: no cover - not used
        raise AssertionError

    def decide(self, design, prompt, token, rate_scale=1.0, *, stop_below_headroom=None):
        self.calls.append(stop_below_headroom)
        return Decision(
            meets=False, margin=-0.9 if stop_below_headroom is None else stop_below_headroom,
            binding="tbt_p90", complete=stop_below_headroom is None,
        )  # fmt: skip


class _Design:
    name = "d"

    class prompt:
        instance_name, power_cap = "a", 1.0

    class token:
        instance_name, power_cap = "b", 1.0


def test_a_cache_reruns_a_stopped_verdict_only_for_a_caller_that_needs_the_whole_run():
    inner = _Inner()
    stopping = CachedEvaluator(inner=inner, space="s", stop_below_headroom=-0.5)
    d = stopping.decide(_Design, 3, 2, 1.0)
    assert not d.complete
    assert inner.calls == [-0.5]
    assert stopping.decide(_Design, 3, 2, 1.0) is d
    assert inner.calls == [-0.5]
    whole = CachedEvaluator(inner=inner, space="s", known=dict(stopping.known))
    e = whole.decide(_Design, 3, 2, 1.0)
    assert e.complete
    assert e.margin == -0.9
    assert inner.calls == [-0.5, None]
    again = CachedEvaluator(inner=inner, space="s", known=dict(whole.known), stop_below_headroom=-0.5)
    assert again.decide(_Design, 3, 2, 1.0) is e
    assert len(inner.calls) == 2
