"""Layer 4: a Splitwise design's prompt pool and mixed pool, replayed request by request (numba).

Why a replay and not a queue formula: a prompt machine's TTFT follows from three DES rules that
no closed form of the M/G/c family holds together — the scheduler sends a prompt to the machine
with the fewest pending tokens (the running prompts' included, not what is left of them), a
machine runs its queued prompts FCFS packed up to the batch-token cap in one iteration, and a
machine whose queue is non-empty and whose pending tokens would pass `prompt_full_tokens` is
"full", so the prompt overflows to the mixed pool. Queue formulas read the TTFT P90 high at one
to three prompt machines and the P99 low at seven and more, and every correction of one side
cost the other (docs/background.md). The pool's dynamics depend on nothing but the arrivals and
the prompt sizes as long as nothing couples it to the token side (a prompt machine borrowed by a
full token pool, or a prompt machine's memory held by transfers that wait for token-machine
memory: neither happens where a design meets its SLOs), so replaying the workload's own requests
gives the DES's TTFTs themselves, with no constant (`replay_prompt_pool`). It costs
O(requests · log machines) per (prompt machines, rate) pair, once per pair (a P × T grid has P
of them).

The prompts it overflows are replayed on the mixed pool the same way (`replay_mixed_pools`), with
each borrowed token machine's decodes reduced to how long its batch takes to drain: that sets how
many token machines are away from new decodes, and whether the pool ends up borrowing every one,
the moment from which the DES sends new decodes to the mixed machines and never gets them back.
The overflowed prompts were a calibrated share of an M/G/c queue's overflow and a calibrated wait
before (five constants, `analytic.Calibration`'s docstring).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from splitplan.sim.des.engine import _tree_new, _tree_set
from splitplan.sim.des.run import MIN_ITERATION_S

INF = math.inf


@nb.njit(cache=True)
def _replay(arrival_s, prompt_tokens, machines, full_tokens, max_tokens, max_batch, lone_s, several_s):
    n = len(arrival_s)
    size = 1
    while size < machines:
        size *= 2
    pend_v, pend_i = _tree_new(1, size)  # pending tokens: the scheduler's least-loaded machine
    run_v, run_i = _tree_new(1, size)  # end of each machine's running iteration (INF: idle)
    for m in range(machines):
        _tree_set(pend_v, pend_i, 0, size, m, 0.0)
    pending = np.zeros(machines)
    head = np.full(machines, -1, np.int64)  # the machine's FCFS queue as a linked list
    tail = np.full(machines, -1, np.int64)
    queued = np.zeros(machines, np.int64)
    run_first = np.full(machines, -1, np.int64)  # the running batch: run_n requests from run_first
    run_n = np.zeros(machines, np.int64)
    nxt = np.full(n, -1, np.int64)
    ttft_s = np.full(n, np.nan)
    overflowed = np.zeros(n, np.bool_)
    i = 0
    while True:
        t_run = run_v[1]
        t_arr = arrival_s[i] if i < n else INF
        if t_run == INF and t_arr == INF:
            break
        if t_run <= t_arr:  # machine runs first at equal times, as in the DES
            m = run_i[1]
            t = t_run
            r = run_first[m]
            for _ in range(run_n[m]):
                ttft_s[r] = t - arrival_s[r]
                pending[m] -= prompt_tokens[r]
                r = nxt[r]
            run_n[m] = 0
            _tree_set(pend_v, pend_i, 0, size, m, pending[m])
        else:
            t = t_arr
            r = i
            i += 1
            m = pend_i[1]
            p = prompt_tokens[r]
            if queued[m] > 0 and pending[m] + p > full_tokens:
                overflowed[r] = True  # every prompt machine is full: the mixed pool takes it
                continue
            pending[m] += p
            _tree_set(pend_v, pend_i, 0, size, m, pending[m])
            if tail[m] >= 0:
                nxt[tail[m]] = r
            else:
                head[m] = r
            tail[m] = r
            queued[m] += 1
            if run_n[m] > 0:
                continue
        # start the next iteration on m: its queued prompts FCFS up to the batch-token cap (a lone
        # prompt may exceed it) and the batch-size cap
        k = 0
        tokens = 0
        r = head[m]
        first = r
        while r >= 0 and k < max_batch and (k == 0 or tokens + prompt_tokens[r] <= max_tokens):
            tokens += prompt_tokens[r]
            k += 1
            r = nxt[r]
        if k == 0:
            _tree_set(run_v, run_i, 0, size, m, INF)
            continue
        head[m] = r
        if r < 0:
            tail[m] = -1
        queued[m] -= k
        run_first[m] = first
        run_n[m] = k
        d = several_s[tokens] if k > 1 else lone_s[tokens]
        _tree_set(run_v, run_i, 0, size, m, t + d)
    return ttft_s, overflowed


def replay_prompt_pool(
    arrival_s: np.ndarray,
    prompt_tokens: np.ndarray,
    machines: int,
    full_tokens: float,
    max_batch_tokens: int,
    max_batch_size: int,
    lone_s: np.ndarray,
    several_s: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per request (arrival order): its TTFT in the prompt pool (NaN where it overflowed) and
    whether it overflowed. `lone_s[k]` / `several_s[k]` time an iteration of k prompt tokens run
    by one prompt / by several (the DES's tables, long enough for the largest prompt)."""
    return _replay(
        np.ascontiguousarray(arrival_s, dtype=np.float64),
        np.ascontiguousarray(prompt_tokens, dtype=np.int64),
        int(machines),
        float(full_tokens),
        int(max_batch_tokens),
        int(max_batch_size),
        np.ascontiguousarray(lone_s, dtype=np.float64),
        np.ascontiguousarray(several_s, dtype=np.float64),
    )


def prompt_time_table(perf, tokens: np.ndarray, prompts: int) -> np.ndarray:
    """The DES's prompt-iteration times over `tokens` (one prompt, or `prompts` ≥ 2 of them),
    floored where an extrapolated profile curve would not be positive."""
    return np.maximum(np.asarray(perf.prompt_time_s(tokens, prompts), dtype=np.float64), MIN_ITERATION_S)


_QUEUE = 64  # prompts a mixed machine's queue holds at most in `_mixed` (more are run as if queued)


@nb.njit(cache=True, inline="always")
def _young_drain(age, batch, lengths, weight):
    """The iterations a token machine needs to drain its batch when the decodes it holds are at
    most `age` iterations old (the trace starts empty): the 1/(n + 1) upper quantile of what is
    left of a resident decode, n the batch then. A resident decode's lengths come as equal strata
    of the length-biased distribution (`lengths`, increasing, none zero), so the decodes that
    arrived over the last `age` iterations and are left x or more iterations each weigh
    min(max(L − x, 0), age) / L; `weight` holds the prefix sums of 1/L. Long past every decode
    it is the steady drain
    (`analytic._SplitContext._longest_decode`)."""
    k = len(lengths)
    if k == 0:
        return 0.0

    def mass(x, lo, hi):  # Σ min(max(L − x, 0), age) / L over the strata, by the prefix sums
        # lo, hi: where x and x + age fall among the strata (L ≤ x: nothing left; L ≥ x + age: age each)
        middle = (hi - lo) - x * (weight[hi] - weight[lo])  # Σ (L − x) / L
        return middle + (age * (weight[k] - weight[hi]) if hi < k else 0.0)

    mass0 = mass(0.0, 0, _first_at_least(lengths, age, 0, k, False))
    if mass0 <= 0.0:
        return 0.0
    target = mass0 / (batch * mass0 / k + 1.0)  # the batch, filled for `age`: batch · mass0 / k
    lo, hi = 0.0, lengths[k - 1]
    # both searches are monotone in x: each searches only between its results at lo and hi
    below_lo, below_hi, aged_lo, aged_hi = 0, k, 0, k
    for _ in range(20):  # to a millionth of the longest decode
        x = 0.5 * (lo + hi)
        below = _first_at_least(lengths, x, below_lo, below_hi, True)
        aged = _first_at_least(lengths, x + age, aged_lo, aged_hi, False)
        if mass(x, below, aged) > target:
            lo, below_lo, aged_lo = x, below, aged
        else:
            hi, below_hi, aged_hi = x, below, aged
    return 0.5 * (lo + hi)


@nb.njit(cache=True, inline="always")
def _first_at_least(values, v, i, j, strictly):
    """np.searchsorted(values, v, side="right" if strictly else "left") of an increasing array,
    known to lie in i … j: the first index whose value is above v (strictly) or at least v."""
    while i < j:
        m = (i + j) >> 1
        if values[m] > v or (not strictly and values[m] == v):
            j = m
        else:
            i = m + 1
    return i


@nb.njit(cache=True)
def _mixed(
    arrival_s,
    prompt_tokens,
    service_s,
    machines,
    drain_s,
    full_tokens,
    end_s,
    ttft_s,
    cut,
    away_now,
    tau_s,
    batch,
    lengths,
    output_tokens,
    stay,
    stall_s,
):
    """One point's mixed pool (`replay_mixed_pools`); writes each prompt's TTFT into `ttft_s`, and
    into `stall_s` (where it is not empty) each kept decode's stall, and returns (the token machines
    away on average until every one is borrowed, when that happens, the most away at once, the
    prompts replayed, the borrowings before every machine is away, and their first prompts'
    iteration time in total).

    A mixed machine's pending tokens are its prompts' (and one per decode it still holds, which
    this replay does not follow: a machine holding only decodes is the least pending, as the kept
    decode's is in the DES): the least pending is the one with the fewest prompt tokens
    queued, the lowest-numbered on ties. O(prompts · log machines): tournament trees hold the mixed
    machines by their queued tokens, by when their running prompt ends, and by when they fall idle
    and go back to the token pool. A machine's idle time only grows while it is borrowed, so the
    last tree holds the time it would fall idle as of its borrowing, a lower bound, and a machine
    found at the top with a later time is moved there: the machines still go back in the order
    of their idle times, with one update per borrowing rather than one per prompt."""
    size = 1
    while size < machines:
        size *= 2
    pend_v, pend_i = _tree_new(1, size)  # mixed machines by their queued prompt tokens (INF: not mixed)
    done_v, done_i = _tree_new(1, size)  # … by when their running prompt ends (INF: none)
    back_v, back_i = _tree_new(1, size)  # … by when they fall idle
    spare = np.arange(machines - 1, -1, -1)  # token machines not borrowed (the lowest number last)
    n_spare = machines
    since = np.zeros(machines)
    drain_end = np.zeros(machines)  # when its batch has drained (pushed back by the prompts it runs)
    last_end = np.zeros(machines)  # when its last prompt ends
    q_end = np.zeros((machines, _QUEUE))  # its queued and running prompts' ends, FCFS, and tokens
    q_tok = np.zeros((machines, _QUEUE))
    q_head = np.zeros(machines, np.int64)
    q_len = np.zeros(machines, np.int64)
    q_sum = np.zeros(machines)
    own = np.full(machines, -1, np.int64)  # the prompt whose own decode it runs (-1: none) …
    own_end = np.zeros(machines)  # … and when that decode ends (pushed back by the prompts it runs)
    stays = 0.0  # borrowings whose own decode stays, owed (a running sum of `stay`)
    away_s = 0.0  # ∫ machines away dt, up to the absorption
    absorbed_at = INF
    most = 0  # machines away at once, at most
    replayed = len(arrival_s)
    borrowings = 0  # token machines borrowed while another is left …
    first_s = 0.0  # … and the time of the prompt each one was borrowed for
    weight = np.zeros(len(lengths) + 1)  # prefix sums of 1/L (`_young_drain`)
    for j in range(len(lengths)):
        weight[j + 1] = weight[j] + 1.0 / lengths[j]
    steady = _young_drain(INF, batch, lengths, weight)
    top = lengths[len(lengths) - 1] if len(lengths) else 0.0
    probes = len(away_now)  # the machines away at (g + ½) / probes of end_s, g = 0 … probes − 1
    g = 0
    for i in range(len(arrival_s) + 1):
        t = arrival_s[i] if i < len(arrival_s) else INF  # (the last pass reads the probes left)
        while True:  # the probes due before t, then t itself: the state at each
            probe = g < probes and (g + 0.5) * end_s / probes <= t
            x = (g + 0.5) * end_s / probes if probe else t
            if x < INF:  # the state at x (the last pass, at no time, reads only the probes left)
                # the prompts that end by x leave their machines' queues, then (before the
                # absorption) the mixed machines idle by x go back to the token pool
                while done_v[1] <= x:
                    m = done_i[1]
                    q_sum[m] -= q_tok[m, q_head[m]]
                    q_head[m] = (q_head[m] + 1) % _QUEUE
                    q_len[m] -= 1
                    if q_len[m] == 0:
                        q_sum[m] = 0.0
                    _tree_set(
                        done_v, done_i, 0, size, m, q_end[m, q_head[m]] if q_len[m] > 0 else INF, to_root=True
                    )
                    _tree_set(pend_v, pend_i, 0, size, m, q_sum[m], to_root=True)
                while absorbed_at == INF and back_v[1] <= x:
                    m = back_i[1]
                    idle = max(drain_end[m], last_end[m], own_end[m])
                    if idle > back_v[1]:  # its key was set when it was borrowed: a lower bound
                        _tree_set(back_v, back_i, 0, size, m, idle, to_root=True)
                        continue
                    away_s += idle - since[m]
                    _tree_set(pend_v, pend_i, 0, size, m, INF, to_root=True)
                    _tree_set(back_v, back_i, 0, size, m, INF, to_root=True)
                    own[m] = -1
                    spare[n_spare] = m
                    n_spare += 1
            if not probe:
                break
            away_now[g] = machines - n_spare if absorbed_at == INF else machines
            g += 1
        if i == len(arrival_s) or (cut and absorbed_at < INF):
            replayed = min(i, replayed)  # (past an absorption the caller takes the TTFTs elsewhere)
            break
        p = prompt_tokens[i]
        best = pend_i[1] if pend_v[1] < INF else -1
        # the least-pending mixed machine takes it unless it is full (a queue, and its pending
        # tokens would pass the cap); else a token machine is borrowed while one is left
        fresh = False  # a token machine borrowed for it, with another left
        if (best < 0 or (q_len[best] > 0 and q_sum[best] + p > full_tokens)) and n_spare > 0:
            n_spare -= 1
            best = spare[n_spare]
            since[best] = t
            age = t / tau_s
            # older than the longest decode: every search in `_young_drain` is the steady one's
            young = _young_drain(age, batch, lengths, weight) / steady if steady > 0.0 and age <= top else 1.0
            drain_end[best] = t + drain_s * young
            last_end[best] = t
            most = max(most, machines - n_spare)
            if n_spare == 0:
                absorbed_at = t  # no token machine left: new decodes go to the mixed ones
            else:
                borrowings += 1
                first_s += service_s[i]
                fresh = True
        start = max(t, last_end[best])
        end = start + service_s[i]
        ttft_s[i] = end - t
        last_end[best] = end
        drain_end[best] += service_s[i]
        if own[best] >= 0 and start < own_end[best]:  # it stalls the machine's own decode
            stall_s[own[best]] += service_s[i]
            own_end[best] += service_s[i]
        if fresh and len(stall_s):
            stays += stay
            if stays >= 1.0:
                stays -= 1.0
                own[best] = i
                stall_s[i] = 0.0
                own_end[best] = end + max(output_tokens[i] - 1.0, 0.0) * tau_s
        if q_len[best] < _QUEUE:
            j = (q_head[best] + q_len[best]) % _QUEUE
            q_end[best, j] = end
            q_tok[best, j] = p
            q_len[best] += 1
            q_sum[best] += p
            if q_len[best] == 1:
                _tree_set(done_v, done_i, 0, size, best, end, to_root=True)
        _tree_set(pend_v, pend_i, 0, size, best, q_sum[best], to_root=True)
        if absorbed_at == INF and back_v[size + best] == INF:  # (later prompts only push it back)
            _tree_set(back_v, back_i, 0, size, best, max(drain_end[best], end, own_end[best]), to_root=True)
    if absorbed_at < INF:
        away_now[g:] = machines
    stop = min(end_s, absorbed_at)
    for m in range(machines):
        if pend_v[size + m] < INF:  # still borrowed
            away_s += max(min(max(drain_end[m], last_end[m], own_end[m]), stop) - since[m], 0.0)
    return away_s / max(stop, 1e-300), absorbed_at, most, replayed, borrowings, first_s


@nb.njit(cache=True)
def _mixed_points(
    pair,
    scale,
    machines,
    drain_s,
    end_s,
    first,
    arrival_s,
    prompt_tokens,
    service_s,
    full_tokens,
    cut,
    probes,
    tau_s,
    batch,
    lengths,
    output_tokens,
    stay,
):
    n = len(pair)
    offsets = np.zeros(n + 1, np.int64)
    for k in range(n):
        offsets[k + 1] = offsets[k] + first[pair[k] + 1] - first[pair[k]]
    ttft_s = np.empty(offsets[n])
    away = np.empty(n)
    absorbed_at = np.empty(n)
    most = np.empty(n, np.int64)
    replayed = np.empty(n, np.int64)
    borrowings = np.empty(n, np.int64)
    first_s = np.empty(n)
    away_now = np.zeros((n, probes))
    stall_s = np.full(offsets[n] if len(stay) else 0, np.nan)
    for k in range(n):
        a, b = first[pair[k]], first[pair[k] + 1]
        away[k], absorbed_at[k], most[k], replayed[k], borrowings[k], first_s[k] = _mixed(
            arrival_s[a:b] * scale[k],
            prompt_tokens[a:b],
            service_s[a:b],
            machines[k],
            drain_s[k],
            full_tokens,
            end_s[k],
            ttft_s[offsets[k] : offsets[k + 1]],
            cut,
            away_now[k],
            tau_s[k] if len(tau_s) else 1.0,
            batch[k] if len(batch) else 0.0,
            lengths,
            output_tokens[a:b],
            stay[k] if len(stay) else 0.0,
            stall_s[offsets[k] : offsets[k + 1]] if len(stay) else stall_s,
        )
    return ttft_s, offsets, away, absorbed_at, most, replayed, borrowings, first_s, away_now, stall_s


def replay_mixed_pools(
    pair: np.ndarray,
    scale: np.ndarray,
    machines: np.ndarray,
    drain_s: np.ndarray,
    end_s: np.ndarray,
    first: np.ndarray,
    arrival_s: np.ndarray,
    prompt_tokens: np.ndarray,
    service_s: np.ndarray,
    full_tokens: float,
    *,
    until_absorbed: bool = False,
    probes: int = 0,
    young: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    own: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
]:
    """The prompts a split design's prompt pool overflowed, replayed on the mixed pool the DES
    borrows token machines into, at many points at once.

    Point k replays the overflowed prompts of pair[k] — rows first[pair[k]] … first[pair[k] + 1]
    of `arrival_s` (arrival order, at the workload's own rate: times are multiplied by scale[k]),
    `prompt_tokens` and `service_s` (each one's iteration on a token machine) — on machines[k]
    token machines. Returns every replayed prompt's TTFT (point k's at offsets[k] … offsets[k + 1]),
    the offsets, and per point the token machines away on average until every one is borrowed,
    when that happens (inf: never) and the most away at once (below machines[k]: the replay is
    the same with any more machines). With `probes`, last: the machines away at each of that many
    times (g + ½)·end_s[k] / probes (all of them once every one is borrowed), for the batch a
    decode meets over time (`analytic._SplitContext._batch_over_time`).

    The DES's rules, with a mixed machine's decodes reduced to their drain: an overflowed prompt
    goes to the mixed machine with the fewest pending prompt tokens unless that one is full (a
    queue, and its pending tokens would pass `full_tokens`); else a token machine is borrowed, as
    long as one is left. A mixed machine runs its prompts FCFS (the caller adds the wait for the
    running decode iteration to the prompts that found it running no prompt), and returns to the
    token pool once idle: its prompts done and its batch drained, drain_s[k] after it was borrowed
    plus the prompt time it ran. With `young` = (τ, N, lengths) per point — the decode iteration,
    the steady batch, a resident decode's length strata — a machine borrowed at t drains
    drain_s[k] × `_young_drain`(t / τ) / `_young_drain`(∞): its decodes arrived since the trace
    began. Once every token machine is borrowed, new decodes go to the mixed
    machines, and this replay keeps the pool mixed to the trace's end (end_s[k]) for the
    overflowed prompts' TTFTs; the decodes' stalls follow the DES's periods instead, which end
    when a mixed machine falls idle (`analytic._SplitContext._all_mixed`).
    With `until_absorbed` a replay stops there; the sixth array returned says how many prompts
    each point replayed (the TTFTs of the others are left unset). The last two give, per point,
    how many times a token machine was borrowed while another was left, and the iteration time of
    the prompts each was borrowed for, in total: the decodes a borrowed machine holds wait that
    prompt out (`analytic._SplitContext._borrowed_stalls`).

    With `own` = (output tokens per prompt, as `prompt_tokens`; a share per point), that share of
    the borrowings (a running sum, so the same ones at every call) keep their prompt's decode, as
    the DES does where the token machine it borrows is idle (`analytic._SplitContext.
    _kept_decodes`): the decode runs its output tokens less one at young's iteration τ from the
    prompt's end, the machine stays mixed until it ends, and each overflowed prompt the machine
    starts before then stalls it for that prompt's whole iteration. The tenth array returned
    holds each kept decode's stall, laid out as the TTFTs (NaN: the decode left the machine;
    empty without `own`).
    """
    if own is not None and young is None:
        raise ValueError("the kept decodes (own) iterate at young's decode iteration: pass young too")
    return _mixed_points(
        np.ascontiguousarray(pair, dtype=np.int64),
        np.ascontiguousarray(scale, dtype=np.float64),
        np.ascontiguousarray(machines, dtype=np.int64),
        np.ascontiguousarray(drain_s, dtype=np.float64),
        np.ascontiguousarray(end_s, dtype=np.float64),
        np.ascontiguousarray(first, dtype=np.int64),
        np.ascontiguousarray(arrival_s, dtype=np.float64),
        np.ascontiguousarray(prompt_tokens, dtype=np.float64),
        np.ascontiguousarray(service_s, dtype=np.float64),
        float(full_tokens),
        bool(until_absorbed),
        int(probes),
        *(
            (np.zeros(0), np.zeros(0), np.zeros(0))
            if young is None
            else tuple(np.ascontiguousarray(a, dtype=np.float64) for a in young)
        ),
        *(
            (np.zeros(0), np.zeros(0))
            if own is None
            else tuple(np.ascontiguousarray(a, dtype=np.float64) for a in own)
        ),
    )
