"""The nine SLO percentiles (`splitplan.slo.percentiles`) and the evaluator's per-row ones
(`splitplan.slo.row_percentiles`) are numpy's linear-method percentiles to the bit, whatever the
values, save where numpy's lerp makes a NaN of infinities: at a whole rank beside an infinite
neighbour, or between two equal infinite ones, the percentile is the rank's value (numpy:
inf · 0 and inf − inf)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from splitplan.slo import PERCENTILES, SLO_KEYS, percentiles, row_percentiles

finite_or_inf = st.floats(allow_nan=False, allow_infinity=True, width=64)
with_nan = st.floats(allow_nan=True, allow_infinity=True, width=64)


def _numpy(values: np.ndarray, pcts=PERCENTILES) -> list[float]:
    """numpy's linear method from a sort, save where its lerp makes a NaN of infinities: at a
    whole rank the percentile is that rank's value, and between two equal values it is that value
    (numpy: inf · 0 and inf − inf give NaN); numpy's own where any value is NaN."""
    with np.errstate(invalid="ignore", over="ignore"):  # b − a of ±1.8e308 overflows in numpy too
        numpy_own = [float(v) for v in np.percentile(values, pcts)]
    if np.isnan(values).any():
        return numpy_own
    ranked = np.sort(values)
    want = []
    for q, own in zip(pcts, numpy_own, strict=True):
        virtual = q / 100 * (len(values) - 1)
        k = int(np.floor(virtual))
        gamma = virtual - k
        a, b = ranked[k], ranked[min(k + 1, len(values) - 1)]
        if not np.isnan(own):
            want.append(own)  # numpy's to the bit wherever it has a number
        elif gamma == 0.0 or a == b:
            want.append(float(a))
        else:
            want.append(own)  # −inf to +inf: no number between
    return want


@settings(max_examples=400, deadline=None)
@given(
    arrays(np.float64, st.integers(1, 400), elements=finite_or_inf),
    arrays(np.float64, st.integers(1, 400), elements=with_nan),
)
def test_the_nine_percentiles_are_numpys_to_the_bit(values, nan_values) -> None:
    with np.errstate(invalid="ignore", over="ignore"):  # (numpy's own, for rows holding NaN)
        got = percentiles(values, nan_values, values[::-1])
    want = _numpy(values) + _numpy(nan_values) + _numpy(values[::-1])
    assert np.array_equal([got[k] for k in SLO_KEYS], want, equal_nan=True)


def test_neighbouring_extremes_overflow_to_numpys_infinity_without_a_warning() -> None:
    """b − a of the largest floats overflows: the percentile is numpy's −inf, and no warning
    (which this suite turns into an error) escapes the selection."""
    values = np.array([-1.7e308, 1.7e308])
    got = row_percentiles(values[None, :], (50.0, 90.0))
    assert np.array_equal(got[:, 0], _numpy(values, (50.0, 90.0)))
    assert np.all(np.isneginf(got))


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


@settings(max_examples=300, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 300)), elements=finite_or_inf),
    st.lists(st.floats(0, 100), min_size=1, max_size=6),
)
def test_row_percentiles_are_numpys_on_every_row(values, pcts) -> None:
    # any percentiles, in any order and repeated: each selects above the previous pivot and reads
    # its upper neighbour up to the next one (ties, repeats, 0 and 100 exercise each path)
    got = row_percentiles(values, tuple(pcts))
    want = np.array([_numpy(row, tuple(pcts)) for row in values]).T
    assert np.array_equal(got, want, equal_nan=True)
    in_place = values.copy()
    assert np.array_equal(row_percentiles(in_place, tuple(pcts), overwrite=True), got, equal_nan=True)
    assert np.array_equal(np.sort(in_place, axis=1), np.sort(values, axis=1))  # the same values, moved


def test_a_nan_in_a_row_ranks_last() -> None:
    # NaNs partition last, above every value (the SLO percentiles hand a row with one to numpy,
    # which propagates it): rank 2.5 of six is 3.5 here, rank 5 the NaN
    row = np.array([[4.0, np.nan, 1.0, 3.0, 2.0, 5.0]])
    assert np.array_equal(row_percentiles(row, (0, 50, 100)), [[1.0], [3.5], [np.nan]], equal_nan=True)
