"""A DES verdict stopped early (Decision.complete False) travels through the store and the cache as
what it is: kept by searches that stop runs no earlier, re-simulated for one that needs the whole
run or a lower bound."""

from __future__ import annotations

import math

import numpy as np

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
        # a stopped run's margin lies just under its bound (sim.des.simulate_des)
        cut = None if stop_below_headroom is None else float(np.nextafter(stop_below_headroom, -np.inf))
        return Decision(
            meets=False, margin=-0.9 if cut is None else cut,
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


def test_a_cache_reruns_a_stopped_verdict_for_a_caller_with_a_lower_bound_only():
    inner = _Inner()
    first = CachedEvaluator(inner=inner, space="s", stop_below_headroom=-0.1)
    d = first.decide(_Design, 3, 2, 1.0)
    assert d.answers(-0.1)
    assert d.answers(0.0)
    assert not d.answers(-0.3)
    assert not d.answers(None)
    higher = CachedEvaluator(inner=inner, space="s", known=dict(first.known), stop_below_headroom=-0.05)
    assert higher.decide(_Design, 3, 2, 1.0) is d
    assert inner.calls == [-0.1]
    lower = CachedEvaluator(inner=inner, space="s", known=dict(first.known), stop_below_headroom=-0.3)
    e = lower.decide(_Design, 3, 2, 1.0)
    assert inner.calls == [-0.1, -0.3]
    assert e.margin < -0.3
    assert not e.complete
    assert lower.fresh
    assert lower.known[next(iter(lower.known))] is e


def _cut(bound: float) -> Decision:
    """A run stopped at `bound`: its margin just under it (sim.des.simulate_des)."""
    return Decision(
        meets=False, margin=float(np.nextafter(bound, -np.inf)), binding="tbt_p90", complete=False
    )


def test_the_store_keeps_the_verdict_that_tells_most():
    from splitplan.search.store import PointStore

    store = PointStore()
    first, lower = _cut(-0.1), _cut(-0.4)
    whole = Decision(meets=False, margin=-0.6, binding="tbt_p90")
    store.put("k", first)
    store.put("k", first)
    assert store.get("k") is first
    store.put("k", lower)  # stopped at a lower bound: tells more
    assert store.get("k") is lower
    store.put("k", first)  # a higher bound tells less: kept as is
    assert store.get("k") is lower
    store.put("k", whole)
    assert store.get("k") is whole
    store.put("k", lower)  # nothing tells more than a run to the end
    assert store.get("k") is whole
    assert whole.refines(first)
    assert lower.refines(first)
    assert not first.refines(lower)
    assert not lower.refines(whole)
    assert not whole.refines(whole)


def test_a_storage_reopened_holds_the_verdict_that_replaced_a_stopped_one(tmp_path):
    # a resumed search reads the settled verdict, not the stopped one it replaced
    from splitplan.search.store import PointStore

    url = f"sqlite:///{tmp_path / 'points.db'}"
    first = _cut(-0.1)
    whole = Decision(meets=False, margin=-0.3, binding="tbt_p90")
    store = PointStore(url, fingerprint="f")
    store.put("k", first)
    store.put("k", whole)
    again = PointStore(url, fingerprint="f")
    assert again.get("k") == whole
