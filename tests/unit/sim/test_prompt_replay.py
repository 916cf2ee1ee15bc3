"""The mixed pool's replay (`_prompt_replay.replay_mixed_pools`): the DES's rules on small cases.

The prompt pool's replay is checked against the DES request by request in test_analytic.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from splitplan.sim._prompt_replay import replay_mixed_pools

CAP = 8192.0  # pending-token cap of a machine with a queue


def mixed(t, p, s, machines, drain_s, end_s=100.0, **kw):
    """One point: the prompts (arrival t, tokens p, service s) on `machines` token machines."""
    return mixed_over_time(t, p, s, machines, drain_s, end_s, **kw)[:-1]


def mixed_over_time(t, p, s, machines, drain_s, end_s=100.0, **kw):
    """`mixed`, and the machines away at the replay's probe times last."""
    t, p, s = (np.asarray(x, dtype=np.float64) for x in (t, p, s))
    ttft, off, away, absorbed, most, replayed, borrowings, first_s, away_now, _ = replay_mixed_pools(
        np.array([0]),
        np.array([1.0]),
        np.array([machines]),
        np.array([drain_s]),
        np.array([end_s]),
        np.array([0, len(t)]),
        t,
        p,
        s,
        CAP,
        **kw,
    )
    return (
        ttft[off[0] : off[1]],
        float(away[0]),
        float(absorbed[0]),
        int(most[0]),
        int(replayed[0]),
        int(borrowings[0]),
        float(first_s[0]),
        away_now[0],
    )


def random_overflow(seed: int, n: int):
    """n overflowed prompts over 100 s: arrivals, 200–8,000 tokens, 0.15 s per 1,000 tokens."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0.0, 100.0, n))
    p = rng.integers(200, 8000, n).astype(np.float64)
    return t, p, p / 8000.0 * 1.2


def test_small_prompts_queue_on_the_borrowed_machine_big_ones_borrow_another() -> None:
    # four 1,000-token prompts while the first runs: they fit under the cap, so they queue FCFS
    ttft, _, absorbed, most, _, borrowings, first_s = mixed(
        [0, 0.1, 0.2, 0.3], [1000] * 4, [1.0, 2.0, 2.0, 2.0], machines=5, drain_s=2.0
    )
    assert most == 1
    np.testing.assert_allclose(ttft, [1.0, 2.9, 4.8, 6.7])
    assert absorbed == np.inf
    # one borrowing, for the first prompt: its decodes wait that one out
    assert (borrowings, first_s) == (1, 1.0)
    # 6,000-token prompts: a second one would pass the cap behind the first, so each borrows
    ttft, _, _, most, _, borrowings, first_s = mixed(
        [0, 0.1, 0.2], [6000] * 3, [1.0, 1.5, 2.0], machines=5, drain_s=2.0
    )
    assert most == 3
    np.testing.assert_allclose(ttft, [1.0, 1.5, 2.0])
    assert (borrowings, first_s) == (3, pytest.approx(4.5))


def test_a_borrowed_machine_returns_once_drained_and_idle() -> None:
    # borrowed at 0: its prompt ends at 1 and its batch drains 5 s plus the prompt's 1 s later
    ttft, away, absorbed, most, _, borrowings, _ = mixed(
        [0.0, 10.0], [6000] * 2, [1.0] * 2, machines=2, drain_s=5.0, end_s=20.0
    )
    np.testing.assert_allclose(ttft, [1.0, 1.0])
    assert most == 1  # back in the token pool at 6, borrowed again at 10
    assert borrowings == 2
    assert absorbed == np.inf
    assert away == pytest.approx((6.0 + 6.0) / 20.0)  # away over [0, 6] and [10, 16]


def test_every_machine_borrowed_absorbs_the_token_pool() -> None:
    t, p, s = [0.0, 0.1, 0.2, 5.0], [6000] * 4, [1.0] * 4
    ttft, away, absorbed, most, replayed, borrowings, first_s = mixed(t, p, s, machines=2, drain_s=50.0)
    assert absorbed == pytest.approx(0.1)  # the second prompt borrows the last token machine
    # the borrowing that takes the last machine is not counted: from then on decodes run on the
    # mixed machines (`_all_mixed`), not on a machine that was taken from them
    assert (borrowings, first_s) == (1, 1.0)
    assert most == 2
    assert ttft[2] == pytest.approx(1.0 - 0.2 + 1.0)  # no machine left: it queues behind the first
    assert away == pytest.approx((0.1 + 0.0) / 0.1)  # one machine away over [0, 0.1]
    # until_absorbed: the replay stops at the absorption (the caller takes the rest elsewhere)
    stopped = mixed(t, p, s, machines=2, drain_s=50.0, until_absorbed=True)[4]
    assert stopped == 2
    assert replayed == len(t)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_replay_that_never_borrows_every_machine_is_the_same_with_more(seed: int) -> None:
    """What lets points with more token machines share one replay (`_SplitContext._mixed_pool`)."""
    t, p, s = random_overflow(seed, 400)
    ttft, away, absorbed, most, _, borrowings, first_s = mixed(t, p, s, machines=256, drain_s=4.0)
    assert most < 256
    assert absorbed == np.inf
    for machines in (most + 1, most + 7):
        got = mixed(t, p, s, machines=machines, drain_s=4.0)
        np.testing.assert_array_equal(got[0], ttft)
        assert got[1:4] == (away, absorbed, most)
        assert got[5:] == (borrowings, first_s)
    # with as many machines as it borrowed at once, the pool is absorbed
    assert mixed(t, p, s, machines=most, drain_s=4.0)[2] < np.inf


def test_the_machines_away_are_read_at_each_probe_time() -> None:
    """The count the evaluator's decode batch follows through the trace
    (`_SplitContext._batch_over_time`): borrowed over [0, 6] and [10, 16] of a 20 s trace, read at
    the middle of each of 20 one-second steps; the rest of the replay does not change."""
    args = ([0.0, 10.0], [6000] * 2, [1.0] * 2)
    *rest, away_now = mixed_over_time(*args, machines=2, drain_s=5.0, end_s=20.0, probes=20)
    want = np.zeros(20)
    want[0:6] = want[10:16] = 1.0
    np.testing.assert_array_equal(away_now, want)
    without = mixed(*args, machines=2, drain_s=5.0, end_s=20.0)
    np.testing.assert_array_equal(rest[0], without[0])
    assert rest[1] == pytest.approx(without[1], rel=1e-12)
    assert rest[2:] == list(without[2:])


@pytest.mark.parametrize("seed", [0, 1])
def test_the_machines_away_over_time_average_to_the_time_away(seed: int) -> None:
    t, p, s = random_overflow(seed, 300)
    *rest, away_now = mixed_over_time(t, p, s, machines=64, drain_s=4.0, probes=4000)
    assert away_now.max() == rest[3]  # the most away at once
    assert rest[2] == np.inf  # never absorbed
    assert float(away_now.mean()) == pytest.approx(rest[1], rel=0.01)
    # once every machine is borrowed the count is all of them from then on
    *rest, away_now = mixed_over_time(t, p, s, machines=2, drain_s=50.0, probes=100, until_absorbed=True)
    absorbed = rest[2]
    at = (np.arange(100) + 0.5) * 100.0 / 100
    assert np.all(away_now[at >= absorbed] == 2)
    assert np.all(away_now[at < absorbed] < 2)


def test_a_machine_borrowed_early_holds_young_decodes_and_drains_sooner() -> None:
    """At the trace's start the token machines' decodes are young: what is left of the longest
    is shorter than in the steady state (`_young_drain`). Borrowed at 0 a machine returns once its
    prompt ends; borrowed long after, it drains for drain_s (here every decode is 100 iterations
    of a 0.05 s step: 5 s)."""
    young = (np.array([0.05]), np.array([10.0]), np.full(16, 100.0))
    args = ([0.0], [6000], [1.0])
    assert mixed(*args, machines=2, drain_s=5.0, end_s=20.0, young=young)[1] == pytest.approx(1.0 / 20.0)
    assert mixed([30.0], [6000], [1.0], machines=2, drain_s=5.0, end_s=40.0, young=young)[1] == pytest.approx(
        6.0 / 40.0, rel=1e-6
    )
    assert mixed(*args, machines=2, drain_s=5.0, end_s=20.0)[1] == pytest.approx(6.0 / 20.0)


def mixed_own(t, p, s, o, stay, machines=4, end_s=20.0, tau_s=0.1):
    """One point whose borrowed machines keep a share `stay` of their prompts' decodes (o output
    tokens each, τ = tau_s): the TTFTs, the time away, each prompt's own decode's stall (NaN: its
    decode left the machine) and the borrowings."""
    t, p, s, o = (np.asarray(x, dtype=np.float64) for x in (t, p, s, o))
    ttft, off, away, _, _, _, borrowings, _, _, stall = replay_mixed_pools(
        np.array([0]),
        np.array([1.0]),
        np.array([machines]),
        np.array([0.0]),  # idle token machines: no batch to drain
        np.array([end_s]),
        np.array([0, len(t)]),
        t,
        p,
        s,
        CAP,
        young=(np.array([tau_s]), np.array([0.0]), np.full(16, 10.0)),
        own=(o, np.array([stay])),
    )
    return ttft[off[0] : off[1]], float(away[0]), stall[off[0] : off[1]], int(borrowings[0])


def test_a_borrowed_machine_keeps_its_prompts_decode_and_later_prompts_stall_it() -> None:
    """Where a token machine is idle the DES's scheduler borrows it for an overflowed prompt and
    sends that request's decode to it as well: the decode stays, and the machine stays in the
    mixed pool until it ends, taking the next overflowed prompts, which stall it."""
    args = ([0.0, 1.5], [6000, 1000], [1.0, 0.5], [11, 5])
    ttft, away, stall, borrowings = mixed_own(*args, stay=1.0)
    # the decode runs 1.0 → 2.0 (ten iterations of 0.1 s after the prompt's token); the second
    # prompt lands on its machine at 1.5 and stalls it for its 0.5 s: back at 2.5
    np.testing.assert_allclose(ttft, [1.0, 0.5])
    np.testing.assert_array_equal(stall, [0.5, np.nan])
    assert (borrowings, away) == (1, pytest.approx(2.5 / 20.0))
    # with every decode sent to a token machine the borrowed one returns at 1.0 and the second
    # prompt borrows again
    ttft, away, stall, borrowings = mixed_own(*args, stay=0.0)
    np.testing.assert_allclose(ttft, [1.0, 0.5])
    assert np.isnan(stall).all()
    assert (borrowings, away) == (2, pytest.approx(1.5 / 20.0))


def test_a_share_of_the_borrowings_keeps_its_decodes_in_a_fixed_rotation() -> None:
    """A share of one half: every second borrowing keeps its decode (a running sum, so the same
    inputs keep the same decodes)."""
    t = [0.0, 5.0, 10.0, 15.0]
    _, _, stall, borrowings = mixed_own(t, [6000] * 4, [1.0] * 4, [3] * 4, stay=0.5)
    assert borrowings == 4
    np.testing.assert_array_equal(stall, [np.nan, 0.0, np.nan, 0.0])


def test_the_kept_decodes_need_the_decode_iteration() -> None:
    with pytest.raises(ValueError, match="young"):
        replay_mixed_pools(
            *(np.array([0]), np.array([1.0]), np.array([2]), np.array([0.0]), np.array([9.0])),
            *(np.array([0, 1]), np.array([0.0]), np.array([6000.0]), np.array([1.0]), CAP),
            own=(np.array([3.0]), np.array([1.0])),
        )
