"""The nine SLO percentiles (`splitplan.slo.percentiles`) are numpy's linear-method percentiles to
the bit, whatever the values: the fast path (one partition per percentile) and numpy's own."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from splitplan.slo import PERCENTILES, SLO_KEYS, percentiles

finite_or_inf = st.floats(allow_nan=False, allow_infinity=True, width=64)
with_nan = st.floats(allow_nan=True, allow_infinity=True, width=64)


def _numpy(values: np.ndarray) -> list[float]:
    with np.errstate(invalid="ignore"):
        return [float(v) for v in np.percentile(values, PERCENTILES)]


@settings(max_examples=400, deadline=None)
@given(
    arrays(np.float64, st.integers(1, 400), elements=finite_or_inf),
    arrays(np.float64, st.integers(1, 400), elements=with_nan),
)
def test_the_nine_percentiles_are_numpys_to_the_bit(values, nan_values) -> None:
    with np.errstate(invalid="ignore"):
        got = percentiles(values, nan_values, values[::-1])
    want = _numpy(values) + _numpy(nan_values) + _numpy(values[::-1])
    assert np.array_equal([got[k] for k in SLO_KEYS], want, equal_nan=True)


def test_ties_and_a_rank_shared_by_two_percentiles() -> None:
    # nine values: P90 and P99 fall between the same two ranks (7.2 and 7.92)
    for values in (np.array([3.0, 1, 4, 1, 5, 9, 2, 6, 5]), np.repeat([0.5, np.inf], [7, 2])):
        with np.errstate(invalid="ignore"):
            got = percentiles(values, values, values)
        assert np.array_equal([got[k] for k in SLO_KEYS], _numpy(values) * 3, equal_nan=True)


def test_large_arrays_with_unfinished_requests() -> None:
    rng = np.random.default_rng(7)
    for n in (1_000, 100_003):
        values = rng.lognormal(size=n)
        values[rng.random(n) < 0.02] = np.inf  # a DES result's unfinished requests
        with np.errstate(invalid="ignore"):  # −inf − −inf, as in numpy's own
            got = percentiles(values, values * 2.0, -values)
        want = _numpy(values) + _numpy(values * 2.0) + _numpy(-values)
        assert np.array_equal([got[k] for k in SLO_KEYS], want, equal_nan=True)
