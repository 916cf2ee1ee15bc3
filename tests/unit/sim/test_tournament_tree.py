"""The DES's tournament trees (`des.engine`): the root is the lowest-index least key, and an
update that stops where a node's winner is unchanged leaves the same tree as one that
recomputes every node to the root (`to_root`), whatever the order of updates."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from splitplan.sim.des.engine import _tree_new, _tree_set

INF = float("inf")


@given(
    size_log2=st.integers(0, 6),
    updates=st.lists(
        st.tuples(st.integers(0, 63), st.sampled_from([0.0, 1.0, 2.0, 2.5, 7.0, INF])), max_size=60
    ),
)
@settings(max_examples=200, deadline=None)
def test_both_ways_of_updating_keep_the_lowest_index_least_key_at_the_root(
    size_log2: int, updates: list[tuple[int, float]]
) -> None:
    size = 1 << size_log2
    v1, ix1 = _tree_new(1, size)
    v2, ix2 = _tree_new(1, size)
    leaves = np.full(size, INF)
    for j, value in updates:
        j %= size
        _tree_set(v1, ix1, 0, size, j, value)
        _tree_set(v2, ix2, 0, size, j, value, to_root=True)
        leaves[j] = value
        assert np.array_equal(v1, v2)
        assert np.array_equal(ix1, ix2)
        assert v1[1] == leaves.min()
        assert ix1[1] == int(np.argmin(leaves))  # the lowest index among equal keys
