"""Layer 4: the discrete-event cluster simulator's event loop (compiled with numba).

State lives in preallocated numpy arrays indexed by request id and machine id; there are no
per-request Python objects. Iteration times come from tables precomputed by `run.py` (the
performance model is evaluated once per machine class, never inside the loop).

Model (SPLITWISE.md §4, and the reference simulator's documented behaviour):
- Machines run iteration-level batching. A batch of decodes runs *contiguous* iterations until its
  first decode finishes; a task arriving with room in the batch cuts the run at the next iteration
  boundary, so new work joins at boundaries. A batch with a prompt runs one iteration.
- Batch selection order: starved tasks (preempted ≥ max_preemptions times), waiting prompts (FCFS,
  ≤ max_batch_tokens; a lone prompt may exceed it), preempted decodes, the previous batch's decodes,
  other waiting decodes. Decodes of the previous batch that no longer fit are preempted (their KV
  stays resident). Every task still waiting when an iteration starts counts one more preemption.
- Admission needs memory: a prompt reserves KV for p + 1 tokens, a decode for its output tokens.
- Chunked prefill (a design's `BatchPolicy.CHUNKED`, on the mixed pool — every machine of a
  baseline): a token budget per iteration, decodes first, prompts chunked FCFS; see _start_chunked.
- Cluster scheduler: baselines JSQ on pending tokens; Splitwise designs pick a prompt machine (least
  pending tokens; "full" when it has a queue and pending + p > prompt_full_tokens) and a token
  machine (least committed memory; full when it would reach capacity), borrowing from the opposite
  pool into a mixed pool when a pool is full; a mixed machine returns to its pool when idle; with no
  pair the request runs wholly on the least-loaded machine.
- KV transfer after the prompt: needs room on the token machine (retried every memory_retry_s);
  its duration per request is precomputed (serialized or layer-wise).
Ties in time are broken: transfers, then machine runs (lowest machine id), then arrivals.

Every per-event choice is O(log machines): the next machine run to complete, the next transfer, and
the scheduler's least-pending / least-memory machine of each pool come from tournament trees
(`_tree_set`) that are updated when a key changes, never from a scan. A tree keeps in each node the
smaller of its children and the left one on ties, so its root is the *lowest-index* minimum —
exactly what a first-to-last scan with a strict `<` returns — and results do not depend on which
of the two is used (tests/unit/sim/test_des_per_request.py pins per-request results).

An iteration start reads the requests of a congested machine's queue only where a pass needs
them: waiting prompts and preempted decodes are counted per queue (pass 2 is skipped without
prompts; the preempted are the queue's last entries, so pass 3 reads only them), the selected
leave by their marked slots, and the preemption that everyone still waiting counts is one counter
per machine (`_wait_insert`), not a write to every waiting request. The commonest iteration
start of a fleet — a token machine's run of decodes ends while only new decodes wait — is one
pass over its batch: it keeps the batch's order and admits the queue's first decodes as the
passes would. A finished prompt's transfer takes its first step (start, or wait for memory) at
once rather than as a later event at the same time (nothing else reads that memory in between).

The large arrays read at random — request rows, machines' queues, the per-request outputs — are
allocated by the caller with numpy (`signature.work_arrays`), whose large allocations are advised
for transparent huge pages: at fleet scale (840k request rows, 54 MB) 4 kB pages would make most of
those reads a TLB miss (7,000 req/s on 2,000 machines ran in about 0.9× the time).

With failure checks (`signature.KernelArgs`), the run stops as soon as enough requests exceed an
SLO's bound that its percentile is certain to (`_count_failures`; run.failure_checks sizes them).

Its arguments and results are spelled once, as `signature.KernelArgs` / `KernelResult`. The kernel
polls `stop[0]` every `STOP_POLL_EVENTS` events and returns STATUS_INTERRUPTED when it is set
(run.py sets it when the waiting main thread is interrupted; the kernel releases the GIL).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from splitplan.sim.des.signature import (
    REQUEST_ROW_WORDS,
    STATUS_DEADLOCK,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_OK,
    STATUS_UNSTABLE,
    STOP_POLL_EVENTS,
)

INF = math.inf

# request stages
S_NEW, S_PWAIT, S_PRUN, S_XFER, S_TWAIT, S_TRUN, S_DONE = 0, 1, 2, 3, 4, 5, 6
# pools
P_PROMPT, P_TOKEN, P_MIXED = 0, 1, 2

_N_POOLS = 3


@nb.njit(cache=True)
def _tree_build(v, ix, off, size):
    # internal nodes of the tree stored at v[off : off + 2·size] from its leaves
    for node in range(size - 1, 0, -1):
        lc = off + 2 * node
        if v[lc] <= v[lc + 1]:
            v[off + node] = v[lc]
            ix[off + node] = ix[lc]
        else:
            v[off + node] = v[lc + 1]
            ix[off + node] = ix[lc + 1]


@nb.njit(cache=True)
def _tree_new(n_trees, size):
    # n_trees tournament trees of `size` leaves (a power of two), every leaf INF
    v = np.full(n_trees * 2 * size, INF)
    ix = np.zeros(n_trees * 2 * size, np.int32)
    for k in range(n_trees):
        off = k * 2 * size
        for j in range(size):
            ix[off + size + j] = j
        _tree_build(v, ix, off, size)
    return v, ix


@nb.njit(cache=True)
def _tree_set(v, ix, off, size, j, value, to_root=False):
    # leaf j := value; climb while the winner of a node changes (left wins ties: lowest index).
    # A tree is a function of its leaves, so a leaf set to the value it holds changes nothing.
    # `to_root`: recompute every node up to the root without that check (the same tree). Where
    # an update changes the winner most of the way up, as in the mixed-pool replay's trees of a
    # few levels (`_prompt_replay._mixed`), skipping the check made that replay 18 % faster; on
    # the DES's trees of thousands of machines, where most updates stop early, it cost 2–3 %.
    node = size + j
    if v[off + node] == value:
        return
    v[off + node] = value
    node >>= 1
    while node >= 1:
        lc = off + 2 * node
        if v[lc] <= v[lc + 1]:
            nv = v[lc]
            ni = ix[lc]
        else:
            nv = v[lc + 1]
            ni = ix[lc + 1]
        o = off + node
        if not to_root and v[o] == nv and ix[o] == ni:
            break
        v[o] = nv
        ix[o] = ni
        node >>= 1


@nb.njit(cache=True)
def _tree_grow(v, ix, size, used):
    # one tree with twice the leaves, the first `used` copied
    nv, nix = _tree_new(1, 2 * size)
    for j in range(used):
        nv[2 * size + j] = v[size + j]
    _tree_build(nv, nix, 0, 2 * size)
    return nv, nix


@nb.njit(cache=True)
def _pool_min(v, ix, pl, size):
    # lowest-index machine of pool pl with the least key (-1: pool empty)
    o = pl * 2 * size + 1
    if v[o] == INF:
        return -1
    return ix[o]


@nb.njit(cache=True)
def _any_min(v, ix, size):
    # lowest-index machine with the least key over all pools
    best = -1
    bv = INF
    for pl in range(_N_POOLS):
        o = pl * 2 * size + 1
        if v[o] == INF:
            continue
        if best < 0 or v[o] < bv or (v[o] == bv and ix[o] < best):
            best = ix[o]
            bv = v[o]
    return best


# machine-state fields: floats (mf) and integers (mint), one row per machine
F_RUN_START = 0
F_RUN_END = 1
F_DUR = 2
F_MEM = 3
F_SCHED_MEM = 4
F_SCHED_PEND = 5
F_BUSY = 6
F_BATCH_TIME = 7
_NF = 8
I_WAIT_N = 0
I_BATCH_N = 1
I_BATCH_TOK = 2
I_BATCH_NP = 3
I_N_ITER = 4
I_PAUSED = 5
I_POOL = 6
I_ITERS = 7
I_WAIT_NPW = 8  # waiting prompts in the machine's queue (pass 2 is skipped when there are none)
I_WAIT_NBLK = 9  # preempted (blocked) decodes in the queue: they are its last entries (pass 3)
I_WAIT_CMP = 10  # iteration starts that counted a preemption for everyone waiting (see _wait_insert)
_NI = 11


# request state: one 64-byte record per request (index = request id), aligned to a cache line, so
# an event touches one line per request of a batch. Read as 16 int32 (rq) or as 8 float64 (rf, the
# same bytes): the floats KV bytes of the prompt and of the decode in rf columns 0 and 1 (int32
# columns 0-3), the integer fields in int32 columns 4-15. No byte is read in both forms. Arrival and
# transfer times are read from the kernel's input arrays, TTFT, E2E and prompt start written to the
# output arrays (once per request each).
Q_KVP = 0
Q_KVT = 1
R_STAGE = 4
R_GEN = 5
R_PREEMPT = 6
R_KEY0 = 7
R_BLOCKED = 8
R_MARK = 9  # the epoch (iteration start) that selected the task; 32-bit, see EPOCH_WRAP
R_RESV = 10
R_PM = 11
R_TM = 12
R_P = 13
R_OTOK = 14
R_PDONE = 15  # prompt tokens computed, counting the running chunk (chunked prefill; 0 otherwise)
_NR = REQUEST_ROW_WORDS  # int32 columns: 64 bytes
EPOCH_WRAP = (1 << 31) - 1  # marks are cleared and epochs restart at 1 before int32 overflows


@nb.njit(cache=True)
def _aligned_rows(buf, rows, cols):
    # `buf` (≥ rows·cols items + 64 bytes) as a zeroed C-contiguous (rows, cols) array whose data
    # starts on a 64-byte boundary
    off = ((-buf.ctypes.data) % 64) // buf.itemsize
    out = buf[off : off + rows * cols].reshape((rows, cols))
    out[:] = 0
    return out


@nb.njit(cache=True)
def _aligned_zeros(rows, cols, dtype):
    # the same for a small array the kernel allocates itself
    return _aligned_rows(np.empty(rows * cols + 64, dtype), rows, cols)


@nb.njit(cache=True)
def _wait_insert(wait, mint, m, r, rq, arr):
    # into machine m's queue, ordered by (key, arrival), after equal ones
    n = mint[m, I_WAIT_N]
    k = rq[r, R_KEY0]
    a = arr[r]
    pos = n
    while pos > 0:
        q = wait[pos - 1, m]
        if rq[q, R_KEY0] < k or (rq[q, R_KEY0] == k and arr[q] <= a):
            break
        wait[pos, m] = q
        pos -= 1
    wait[pos, m] = r
    mint[m, I_WAIT_N] = n + 1
    # Everyone still waiting when an iteration starts counts one more preemption: rather than
    # touching every waiting request, the machine counts those iteration starts (I_WAIT_CMP) and
    # a waiting request holds its count less the machine's at its arrival; the count is restored
    # when it leaves the queue (or when the simulation ends with it waiting).
    rq[r, R_PREEMPT] -= mint[m, I_WAIT_CMP]
    if rq[r, R_STAGE] == S_PWAIT:
        mint[m, I_WAIT_NPW] += 1
    if rq[r, R_BLOCKED]:
        mint[m, I_WAIT_NBLK] += 1


@nb.njit(cache=True)
def _to_pool(m, pool, mint, mf, pt_v, pt_i, mt_v, mt_i, S, S2):
    # machine m leaves its pool's scheduler trees (pending tokens, committed memory) for `pool`'s:
    # borrowed into the mixed pool, or back to its own when idle
    old = mint[m, I_POOL]
    _tree_set(pt_v, pt_i, old * S2, S, m, INF)
    _tree_set(mt_v, mt_i, old * S2, S, m, INF)
    mint[m, I_POOL] = pool
    _tree_set(pt_v, pt_i, pool * S2, S, m, mf[m, F_SCHED_PEND])
    _tree_set(mt_v, mt_i, pool * S2, S, m, mf[m, F_SCHED_MEM])


@nb.njit(cache=True)
def _preempt_unkept(m, epoch, wait_cap, wait, batch, mint, rq, arr):
    # machine m's previous-batch decodes that the new iteration did not take join its queue as
    # preempted (their KV stays), each counting a preemption; a full queue stops the run
    for j in range(mint[m, I_BATCH_N]):
        r = batch[j, m]
        if rq[r, R_MARK] != epoch:
            rq[r, R_BLOCKED] = True
            rq[r, R_STAGE] = S_TWAIT
            rq[r, R_PREEMPT] += 1
            rq[r, R_KEY0] = rq[r, R_PREEMPT]
            if mint[m, I_WAIT_N] >= wait_cap:
                return STATUS_UNSTABLE
            _wait_insert(wait, mint, m, r, rq, arr)
    return STATUS_OK


@nb.njit(cache=True)
def _decode_done(r, m, t, rq, rf, mf, arr, e2e):
    # request r's last token on machine m at time t: its E2E, and its prompt and decode KV freed
    e2e[r] = t - arr[r]
    rq[r, R_STAGE] = S_DONE
    mf[m, F_MEM] -= rf[r, Q_KVP] + rf[r, Q_KVT]
    mf[m, F_SCHED_MEM] -= rf[r, Q_KVP] + rf[r, Q_KVT]
    mf[m, F_SCHED_PEND] -= 1.0


@nb.njit(cache=True, inline="always")  # called per request in the hot loop: no call, no refcounts
def _count_failures(r, done, value, rq, crow, chk, chk_bad, first, failed):
    # request r's TTFT (done False) or E2E (done True) is `value`: count it against the failure
    # checks of its metrics (signature.KernelArgs); the first check to reach its need goes to
    # failed[0] (−1 until one does), which stops the run at the next event. `crow[r]`
    # holds the request's reference TTFT, TBT, E2E and its TTFT, so the checks read one cache line.
    # Checks come in groups of one metric and kind, bounds ascending: a value under a bound is
    # under the rest of its group, which is skipped (most requests read one bound per group).
    chk_metric, chk_slow, chk_scale, chk_need, chk_next = chk
    n_chk = chk_metric.shape[0]
    if n_chk == 0 or r < first:
        return
    if not done:
        crow[r, 3] = value
    k = 0
    while k < n_chk:
        mtr = chk_metric[k]
        if (mtr != 0) != done:
            k = chk_next[k]
            continue
        v = (value - crow[r, 3]) / (rq[r, R_OTOK] + 1.0) if mtr == 1 else value
        bound = chk_scale[k] * crow[r, mtr] if chk_slow[k] else chk_scale[k]
        if v > bound:
            chk_bad[k] += 1
            if failed[0] < 0 and chk_bad[k] >= chk_need[k]:
                failed[0] = k
            k += 1
        else:
            k = chk_next[k]


@nb.njit(cache=True, inline="always")  # once per request in the hot loop
def _transfer_step(x, r, t, xfer_s, retry_s, cap, cls, mf, rf, rq, xf_time, xf_inflight):
    # transfer slot x (request r) not in flight at time t: it starts once the token machine has
    # room for the prompt's KV (arriving xfer_s[r] later), else it tries again retry_s later
    b = rq[r, R_TM]
    if mf[b, F_MEM] + rf[r, Q_KVP] > cap[cls[b]]:
        xf_time[x] = t + retry_s
        return
    mf[b, F_MEM] += rf[r, Q_KVP]
    xf_inflight[x] = True
    xf_time[x] = t + xfer_s[r]


@nb.njit(cache=True)
def _need(r, m, rq, rf, reserve_decode):
    # KV memory a waiting task needs to start: a prompt its p + 1 tokens (plus its decode's when
    # reserving on the same machine), a decode its output tokens unless reserved with its prompt
    if rq[r, R_STAGE] == S_PWAIT:
        if reserve_decode and rq[r, R_TM] == m:
            return rf[r, Q_KVP] + rf[r, Q_KVT]
        return rf[r, Q_KVP]
    if rq[r, R_RESV]:
        return 0.0
    return rf[r, Q_KVT]


@nb.njit(cache=True)
def _iteration_time(c, bt, nd, npr, ctx, ptab, ttab, tctx, mtab, mctx):
    # bt: batch tokens (prompt tokens + decodes); nd: decodes; npr: prompts; ctx: KV context of the
    # decodes. ptab[c, 0] times a lone prompt, ptab[c, 1] a batch of several.
    if nd == 0:
        if npr > 1:
            return ptab[c, 1, bt]
        return ptab[c, 0, bt]
    if nd == bt:
        return ttab[c, nd] + tctx[c] * ctx
    return mtab[c, bt] + mctx[c] * ctx


@nb.njit(cache=True)
def _chunked_time(c, chunk_tok, nd, npr, dctx, pre, ptab, ttab, tctx, mtab, mctx):
    # An iteration of `npr` prompt chunks totalling `chunk_tok` tokens whose KV prefixes total
    # `pre` tokens, plus `nd` decodes with `dctx` tokens of KV context. The prefix is costed like a
    # decode's context (reading its KV once, the protocol's affine context term); the attention
    # FLOPs of the chunk's tokens against the prefix are not modelled separately. Without prefix it
    # is exactly the mixed-batching iteration time.
    d = _iteration_time(c, chunk_tok + nd, nd, npr, dctx + pre, ptab, ttab, tctx, mtab, mctx)
    if nd == 0 and npr > 0:
        d += mctx[c] * pre
    return d


@nb.njit(cache=True)
def _start_chunked(
    m,
    t,
    epoch,
    max_batch,
    budget,
    decode_first,
    reserve_decode,
    wait_cap,
    cap,
    cls,
    wait,
    batch,
    newb,
    rq,
    rf,
    arr,
    pstart,
    mf,
    mint,
    ptab,
    ttab,
    tctx,
    mtab,
    mctx,
    stats,
):
    """Start an iteration on machine m under chunked prefill (Sarathi-style); returns a status.

    Every iteration has a budget of `budget` tokens. With `decode_first`, running decodes take one
    token each first (the previous batch's, then preempted ones, then new ones that fit in memory),
    and the rest of the budget goes to prompts FCFS: a prompt already started (its KV is resident)
    continues, then new prompts, the last one cut to a chunk that fills the budget. Without
    `decode_first` prompts fill the budget first. A partial prompt holds the KV of its whole prompt
    from its first chunk on (reserved then, like a mixed-batching prompt), so memory is accounted
    across its iterations. Decodes that do not fit are preempted as in mixed batching (KV stays).
    The caller updates the run-end tree (mf[m, F_RUN_END] is set here; INF for an empty batch).
    """
    c = cls[m]
    capm = cap[c]
    nbn = 0
    bt = 0  # prompt-chunk tokens + decodes
    ct = 0  # prompt-chunk tokens
    memloc = mf[m, F_MEM]
    for phase in range(2):
        if (phase == 0) == decode_first:
            # decodes, one token each: the previous batch's, then preempted, then new ones
            for j in range(mint[m, I_BATCH_N]):
                r = batch[j, m]
                if nbn == max_batch or bt + 1 > budget:
                    break
                rq[r, R_MARK] = epoch
                newb[nbn] = r
                nbn += 1
                bt += 1
            for i in range(mint[m, I_WAIT_N]):
                r = wait[i, m]
                if rq[r, R_STAGE] != S_TWAIT or not rq[r, R_BLOCKED] or rq[r, R_MARK] == epoch:
                    continue
                if nbn == max_batch or bt + 1 > budget:
                    break
                rq[r, R_MARK] = epoch
                newb[nbn] = r
                nbn += 1
                bt += 1
            for i in range(mint[m, I_WAIT_N]):
                r = wait[i, m]
                if rq[r, R_STAGE] != S_TWAIT or rq[r, R_BLOCKED] or rq[r, R_MARK] == epoch:
                    continue
                if nbn == max_batch or bt + 1 > budget:
                    break
                need = _need(r, m, rq, rf, reserve_decode)
                if need + memloc > capm:
                    break
                rq[r, R_MARK] = epoch
                newb[nbn] = r
                nbn += 1
                bt += 1
                memloc += need
        else:
            # prompts FCFS: started ones first (their KV is resident), then new ones
            for started in (True, False):
                for i in range(mint[m, I_WAIT_N]):
                    r = wait[i, m]
                    if rq[r, R_STAGE] != S_PWAIT or (rq[r, R_PDONE] > 0) != started or rq[r, R_MARK] == epoch:
                        continue
                    if nbn == max_batch or bt >= budget:
                        break
                    need = 0.0
                    if not started:
                        need = _need(r, m, rq, rf, reserve_decode)
                        if need + memloc > capm:
                            break
                    piece = min(rq[r, R_P] - rq[r, R_PDONE], budget - bt)
                    rq[r, R_MARK] = epoch
                    newb[nbn] = r
                    nbn += 1
                    bt += piece
                    ct += piece
                    memloc += need
    # the previous batch's decodes that were not kept are preempted (their KV stays)
    if _preempt_unkept(m, epoch, wait_cap, wait, batch, mint, rq, arr) != STATUS_OK:
        return STATUS_UNSTABLE
    # remove the selected tasks from the queue; everyone left waiting counts a preemption
    w = 0
    npw = 0
    nblk = 0
    for i in range(mint[m, I_WAIT_N]):
        r = wait[i, m]
        if rq[r, R_MARK] == epoch:
            rq[r, R_PREEMPT] += mint[m, I_WAIT_CMP]  # leaves the queue: its own count again
            continue
        wait[w, m] = r
        w += 1
        npw += rq[r, R_STAGE] == S_PWAIT
        nblk += rq[r, R_BLOCKED] != 0
    mint[m, I_WAIT_N] = w
    mint[m, I_WAIT_NPW] = npw
    mint[m, I_WAIT_NBLK] = nblk
    mint[m, I_WAIT_CMP] += 1  # one more preemption for everyone left waiting
    npr = 0
    nd = 0
    pre = 0.0
    ctx = 0.0
    kmin = 1 << 62
    left = budget - (bt - ct)  # the prompt tokens each chunk got, handed out again in batch order
    for j in range(nbn):
        r = newb[j]
        batch[j, m] = r
        s = rq[r, R_STAGE]
        if s == S_PWAIT:
            done = rq[r, R_PDONE]
            if done == 0:
                mf[m, F_MEM] += rf[r, Q_KVP]
                if reserve_decode and rq[r, R_TM] == m:
                    mf[m, F_MEM] += rf[r, Q_KVT]
                    rq[r, R_RESV] = True
                pstart[r] = t
            piece = min(rq[r, R_P] - done, left)
            left -= piece
            rq[r, R_PDONE] = done + piece
            rq[r, R_STAGE] = S_PRUN
            pre += done
            npr += 1
        else:
            if s == S_TWAIT:
                if rq[r, R_BLOCKED]:
                    rq[r, R_BLOCKED] = False
                elif not rq[r, R_RESV]:
                    mf[m, F_MEM] += rf[r, Q_KVT]
                rq[r, R_STAGE] = S_TRUN
            ctx += rq[r, R_P] + rq[r, R_GEN]
            nd += 1
            rem = rq[r, R_OTOK] - rq[r, R_GEN]
            if rem < kmin:
                kmin = rem
    mint[m, I_BATCH_N] = nbn
    mint[m, I_BATCH_TOK] = bt
    mint[m, I_BATCH_NP] = npr
    mint[m, I_PAUSED] = False
    if nbn == 0:
        mf[m, F_RUN_END] = INF
        return STATUS_OK
    d = _chunked_time(c, ct, nd, npr, ctx, pre, ptab, ttab, tctx, mtab, mctx)
    kk = 1 if npr > 0 else kmin
    mf[m, F_DUR] = d
    mint[m, I_N_ITER] = kk
    mf[m, F_RUN_START] = t
    mf[m, F_RUN_END] = t + d * kk
    # policy statistics: largest prompt-chunk tokens of an iteration, longest iteration with a
    # prompt chunk, iterations with a prompt chunk
    if npr > 0:
        stats[0] = max(stats[0], float(ct))
        stats[1] = max(stats[1], d)
        stats[2] += 1.0
    return STATUS_OK


@nb.njit(cache=True, nogil=True)
def simulate_kernel(
    arr,
    p,
    otok,
    kvp,
    kvt,
    xfer_s,
    cls,
    tag,
    baseline,
    cap,
    weights,
    ptab,
    ttab,
    tctx,
    mtab,
    mctx,
    max_batch,
    max_tokens,
    max_preempt,
    prompt_full,
    retry_s,
    max_backlog_s,
    wait_cap,
    prompt_interrupts,
    reserve_decode,
    chunked,
    chunk_budget,
    decode_first,
    ref,
    chk_metric,
    chk_slow,
    chk_scale,
    chk_need,
    chk_next,
    first_counted,
    work_rq,
    work_wait,
    work_chk,
    out_ttft,
    out_e2e,
    out_pstart,
    stop,
):
    # chunked: machines of the mixed pool (all machines of a baseline) run chunked prefill with a
    # budget of chunk_budget tokens per iteration (see _start_chunked); its statistics are returned.
    n = arr.shape[0]
    M = cls.shape[0]
    # ---- request state: one cache line per request (R_* / Q_* above); outputs in their own arrays
    rq = _aligned_rows(work_rq, n, _NR)
    rf = rq.view(np.float64)
    for r in range(n):
        rf[r, Q_KVP] = kvp[r]
        rf[r, Q_KVT] = kvt[r]
        rq[r, R_PM] = -1
        rq[r, R_TM] = -1
        rq[r, R_P] = p[r]
        rq[r, R_OTOK] = otok[r]
    ttft = out_ttft  # NaN-filled by the caller (signature.work_arrays)
    e2e = out_e2e
    pstart = out_pstart
    # ---- machine state: one row per machine (a machine's fields share cache lines, which keeps
    # large fleets fast), its queue and batch as columns (queue heads of all machines contiguous)
    mf = _aligned_zeros(M, _NF, np.float64)
    mint = _aligned_zeros(M, _NI, np.int32)
    for m in range(M):
        mf[m, F_RUN_END] = INF
    # only entries below a machine's count are ever read: np.empty leaves the pages of unused
    # queue depth untouched (np.zeros would write them all — 130 MB at 4,000 machines)
    wait = work_wait[: wait_cap * M].reshape((wait_cap, M))
    batch = np.empty((max_batch, M), np.int32)
    for m in range(M):
        mf[m, F_MEM] = weights[cls[m]]
        mf[m, F_SCHED_MEM] = weights[cls[m]]
        mint[m, I_POOL] = tag[m]
    # ---- tournament trees (module docstring): next run end per machine; per pool, the machines'
    # pending tokens (pt) and committed memory (mt), INF for machines outside the pool
    S = 1
    while S < M:
        S *= 2
    S2 = 2 * S
    rt_v, rt_i = _tree_new(1, S)
    pt_v, pt_i = _tree_new(_N_POOLS, S)
    mt_v, mt_i = _tree_new(_N_POOLS, S)
    for m in range(M):
        _tree_set(pt_v, pt_i, mint[m, I_POOL] * S2, S, m, mf[m, F_SCHED_PEND])
        _tree_set(mt_v, mt_i, mint[m, I_POOL] * S2, S, m, mf[m, F_SCHED_MEM])
    SX = 64  # transfer slots in the transfer tree (doubles when full)
    xt_v, xt_i = _tree_new(1, SX)
    newb = np.empty(max_batch, np.int32)
    qmark = np.zeros(wait_cap + max_batch, np.int32)  # the epoch that took a queue slot (this machine)
    stats = np.zeros(3)  # chunked prefill: see _start_chunked
    # ---- transfers in flight or waiting for memory
    xf_rid = np.zeros(n, np.int64)
    xf_time = np.zeros(n)
    xf_inflight = np.zeros(n, np.bool_)
    xf_n = 0
    chk_bad = np.zeros(chk_metric.shape[0], np.int64)
    chk = (chk_metric, chk_slow, chk_scale, chk_need, chk_next)
    crow = _aligned_rows(work_chk, work_chk.shape[0] // 4 - 2, 4)  # see _count_failures
    if chk_metric.shape[0]:
        for r in range(n):
            crow[r, 0] = ref[r, 0]
            crow[r, 1] = ref[r, 1]
            crow[r, 2] = ref[r, 2]
    failed = np.full(1, -1, np.int64)  # the failure check that decided the run (STATUS_FAILED)
    epoch = 0
    pool_moves = 0
    events = 0
    status = STATUS_OK
    next_arr = 0
    guard = 0
    t = 0.0

    # ------------------------------------------------------------------ helpers (inlined loops)
    while True:
        # ---- stability guard: the oldest request must have started each phase within the bound
        while guard < next_arr and arr[guard] < t - max_backlog_s:
            s = rq[guard, R_STAGE]
            fresh_decode = s == S_TWAIT and rq[guard, R_GEN] == 0 and not rq[guard, R_BLOCKED]
            if s == S_PWAIT or fresh_decode or s == S_XFER:
                status = STATUS_UNSTABLE
                break
            guard += 1
        if status != STATUS_OK:
            break
        if failed[0] >= 0:
            status = STATUS_FAILED
            break
        if (events & (STOP_POLL_EVENTS - 1)) == 0 and stop[0] != 0:
            status = STATUS_INTERRUPTED
            break
        # ---- next event
        t_arr = arr[next_arr] if next_arr < n else INF
        t_m = rt_v[1]
        mi = rt_i[1] if t_m < INF else -1
        t_x = xt_v[1]
        xi = xt_i[1] if t_x < INF else -1
        if t_x == INF and t_m == INF and t_arr == INF:
            break
        events += 1
        # ============================================================ transfer event
        if t_x <= t_m and t_x <= t_arr:
            t = t_x
            r = xf_rid[xi]
            a = rq[r, R_PM]
            b = rq[r, R_TM]
            if not xf_inflight[xi]:
                # waiting for memory on the token machine
                _transfer_step(xi, r, t, xfer_s, retry_s, cap, cls, mf, rf, rq, xf_time, xf_inflight)
                _tree_set(xt_v, xt_i, 0, SX, xi, xf_time[xi])
                continue
            # transfer complete: remove from list (the last slot moves into its place)
            xf_n -= 1
            xf_rid[xi] = xf_rid[xf_n]
            xf_time[xi] = xf_time[xf_n]
            xf_inflight[xi] = xf_inflight[xf_n]
            _tree_set(xt_v, xt_i, 0, SX, xi, xf_time[xi])
            _tree_set(xt_v, xt_i, 0, SX, xf_n, INF)
            mf[a, F_MEM] -= rf[r, Q_KVP]
            mf[a, F_SCHED_MEM] -= rf[r, Q_KVP]
            _tree_set(mt_v, mt_i, mint[a, I_POOL] * S2, S, a, mf[a, F_SCHED_MEM])
            if rq[r, R_OTOK] == 0:
                e2e[r] = t - arr[r]
                _count_failures(r, True, e2e[r], rq, crow, chk, chk_bad, first_counted, failed)
                rq[r, R_STAGE] = S_DONE
                mf[b, F_MEM] -= rf[r, Q_KVP]
                mf[b, F_SCHED_MEM] -= rf[r, Q_KVP]
                mf[b, F_SCHED_PEND] -= 1.0
                _tree_set(mt_v, mt_i, mint[b, I_POOL] * S2, S, b, mf[b, F_SCHED_MEM])
                _tree_set(pt_v, pt_i, mint[b, I_POOL] * S2, S, b, mf[b, F_SCHED_PEND])
                wake = b
            else:
                rq[r, R_STAGE] = S_TWAIT
                rq[r, R_KEY0] = 0
                rq[r, R_PREEMPT] = 0
                if mint[b, I_WAIT_N] >= wait_cap:
                    status = STATUS_UNSTABLE
                    break
                _wait_insert(wait, mint, b, r, rq, arr)
                wake = -1
                # task arrival on the token machine
                if mint[b, I_BATCH_N] == 0:
                    if mf[b, F_MEM] + rf[r, Q_KVT] <= cap[cls[b]]:
                        wake = b
                elif mint[b, I_BATCH_N] < max_batch and mint[b, I_BATCH_TOK] + 1 <= max_tokens:
                    if not mint[b, I_PAUSED] and mint[b, I_BATCH_NP] == 0:
                        mint[b, I_PAUSED] = True
                        k = math.floor((t - mf[b, F_RUN_START]) / mf[b, F_DUR]) + 1
                        mint[b, I_N_ITER] = k
                        mf[b, F_RUN_END] = mf[b, F_RUN_START] + k * mf[b, F_DUR]
                        _tree_set(rt_v, rt_i, 0, S, b, mf[b, F_RUN_END])
            # the freed prompt-side memory may unblock an idle machine
            if mint[a, I_BATCH_N] == 0 and mint[a, I_WAIT_N] > 0:
                m = a
            elif wake >= 0:
                m = wake
            else:
                continue
            if mint[m, I_BATCH_N] != 0:
                continue
            # fall through to start an iteration on machine m (below)
        # ============================================================ machine run completes
        elif t_m <= t_arr:
            t = t_m
            m = mi
            k = mint[m, I_N_ITER]
            mf[m, F_BUSY] += t - mf[m, F_RUN_START]
            mint[m, I_ITERS] += k
            mf[m, F_BATCH_TIME] += mint[m, I_BATCH_N] * (t - mf[m, F_RUN_START])
            n_wait = mint[m, I_WAIT_N]
            if (
                mint[m, I_BATCH_NP] == 0
                and not (chunked and mint[m, I_POOL] == P_MIXED)
                and (
                    n_wait == 0
                    or (
                        mint[m, I_WAIT_NPW] == 0
                        and mint[m, I_WAIT_NBLK] == 0
                        and rq[wait[0, m], R_PREEMPT] + mint[m, I_WAIT_CMP] < max_preempt
                    )
                )
            ):
                # A run of decodes ends and only new decodes wait (none starved, preempted or a
                # prompt): the five admission passes below would select this batch less its
                # finished decodes, in the same order (pass 4 keeps every one: the batch only
                # shrinks), then the queue's first decodes while their KV fits (pass 5; passes 1-3
                # take nothing) — so one loop completes the run and sizes the next one (context
                # and run length in batch order), and the admitted join at the end.
                keep = 0
                ctx = 0.0
                kmin = 1 << 62
                for j in range(mint[m, I_BATCH_N]):
                    r = batch[j, m]
                    g = rq[r, R_GEN] + k
                    rq[r, R_GEN] = g
                    if g >= rq[r, R_OTOK]:
                        _decode_done(r, m, t, rq, rf, mf, arr, e2e)
                        _count_failures(r, True, e2e[r], rq, crow, chk, chk_bad, first_counted, failed)
                    else:
                        batch[keep, m] = r
                        keep += 1
                        ctx += rq[r, R_P] + g
                        rem = rq[r, R_OTOK] - g
                        if rem < kmin:
                            kmin = rem
                _tree_set(pt_v, pt_i, mint[m, I_POOL] * S2, S, m, mf[m, F_SCHED_PEND])
                if not baseline:
                    _tree_set(mt_v, mt_i, mint[m, I_POOL] * S2, S, m, mf[m, F_SCHED_MEM])
                if n_wait > 0:
                    # pass 5 on a queue of new decodes: in order while they fit; those taken
                    # leave the queue (their own preemption count again), everyone left counts one
                    cmp = mint[m, I_WAIT_CMP]
                    memloc = mf[m, F_MEM]
                    capm = cap[cls[m]]
                    taken = 0
                    while taken < n_wait and keep < max_batch and (keep == 0 or keep + 1 <= max_tokens):
                        r = wait[taken, m]
                        need = _need(r, m, rq, rf, reserve_decode)
                        if need + memloc > capm:
                            break
                        memloc += need
                        taken += 1
                        rq[r, R_PREEMPT] += cmp
                        if not rq[r, R_RESV]:
                            mf[m, F_MEM] += rf[r, Q_KVT]
                        rq[r, R_STAGE] = S_TRUN
                        batch[keep, m] = r
                        keep += 1
                        ctx += rq[r, R_P] + rq[r, R_GEN]
                        rem = rq[r, R_OTOK] - rq[r, R_GEN]
                        if rem < kmin:
                            kmin = rem
                    if taken > 0:
                        for i in range(taken, n_wait):
                            wait[i - taken, m] = wait[i, m]
                        mint[m, I_WAIT_N] = n_wait - taken
                    mint[m, I_WAIT_CMP] = cmp + 1
                mint[m, I_BATCH_N] = keep
                mint[m, I_BATCH_TOK] = keep
                mint[m, I_PAUSED] = False
                if keep == 0:
                    mf[m, F_RUN_END] = INF
                    _tree_set(rt_v, rt_i, 0, S, m, INF)
                    if mint[m, I_WAIT_N] == 0 and mint[m, I_POOL] == P_MIXED and tag[m] != P_MIXED:
                        _to_pool(m, tag[m], mint, mf, pt_v, pt_i, mt_v, mt_i, S, S2)
                    continue
                d = _iteration_time(cls[m], keep, keep, 0, ctx, ptab, ttab, tctx, mtab, mctx)
                mf[m, F_DUR] = d
                mint[m, I_N_ITER] = kmin
                mf[m, F_RUN_START] = t
                mf[m, F_RUN_END] = t + d * kmin
                _tree_set(rt_v, rt_i, 0, S, m, mf[m, F_RUN_END])
                continue
            keep = 0
            for j in range(mint[m, I_BATCH_N]):
                r = batch[j, m]
                if rq[r, R_STAGE] == S_PRUN:
                    if 0 < rq[r, R_PDONE] < rq[r, R_P]:
                        # a chunk of a longer prompt: its KV stays, the rest waits for a budget
                        rq[r, R_STAGE] = S_PWAIT
                        if mint[m, I_WAIT_N] >= wait_cap:
                            status = STATUS_UNSTABLE
                            break
                        _wait_insert(wait, mint, m, r, rq, arr)
                        continue
                    ttft[r] = t - arr[r]
                    _count_failures(r, False, ttft[r], rq, crow, chk, chk_bad, first_counted, failed)
                    mf[m, F_SCHED_PEND] -= rq[r, R_P]
                    if rq[r, R_TM] == m:
                        if rq[r, R_OTOK] == 0:
                            e2e[r] = ttft[r]
                            _count_failures(r, True, e2e[r], rq, crow, chk, chk_bad, first_counted, failed)
                            rq[r, R_STAGE] = S_DONE
                            mf[m, F_MEM] -= rf[r, Q_KVP]
                            mf[m, F_SCHED_MEM] -= rf[r, Q_KVP] + rf[r, Q_KVT]
                            mf[m, F_SCHED_PEND] -= 1.0
                        else:
                            rq[r, R_STAGE] = S_TWAIT
                            rq[r, R_KEY0] = 0
                            rq[r, R_PREEMPT] = 0
                            if mint[m, I_WAIT_N] >= wait_cap:
                                status = STATUS_UNSTABLE
                                break
                            _wait_insert(wait, mint, m, r, rq, arr)
                    else:
                        rq[r, R_STAGE] = S_XFER
                        if xf_n == SX:
                            xt_v, xt_i = _tree_grow(xt_v, xt_i, SX, xf_n)
                            SX *= 2
                        # The transfer's first event (at t, before any other machine run at t)
                        # is taken here: between now and then only this machine's state changes,
                        # and the token machine's memory is read by nothing else at t, so it
                        # starts, or waits for memory, exactly as it would then — one tree update
                        # and one trip through the loop less per request. Counted as an event.
                        events += 1
                        xf_rid[xf_n] = r
                        xf_inflight[xf_n] = False
                        _transfer_step(
                            xf_n, r, t, xfer_s, retry_s, cap, cls, mf, rf, rq, xf_time, xf_inflight
                        )
                        _tree_set(xt_v, xt_i, 0, SX, xf_n, xf_time[xf_n])
                        xf_n += 1
                else:
                    rq[r, R_GEN] += k
                    if rq[r, R_GEN] >= rq[r, R_OTOK]:
                        _decode_done(r, m, t, rq, rf, mf, arr, e2e)
                        _count_failures(r, True, e2e[r], rq, crow, chk, chk_bad, first_counted, failed)
                    else:
                        batch[keep, m] = r
                        keep += 1
            if status != STATUS_OK:
                break
            _tree_set(pt_v, pt_i, mint[m, I_POOL] * S2, S, m, mf[m, F_SCHED_PEND])
            if not baseline:  # baselines choose by pending tokens only
                _tree_set(mt_v, mt_i, mint[m, I_POOL] * S2, S, m, mf[m, F_SCHED_MEM])
            mint[m, I_BATCH_N] = keep
            mf[m, F_RUN_END] = INF  # the iteration started below sets it (and its tree leaf) again
            # fall through to start the next iteration on m
        # ============================================================ arrival
        else:
            t = t_arr
            r = next_arr
            next_arr += 1
            if baseline:
                best = _any_min(pt_v, pt_i, S)
                rq[r, R_PM] = best
                rq[r, R_TM] = best
                mf[best, F_SCHED_PEND] += rq[r, R_P] + 1.0
                mf[best, F_SCHED_MEM] += rf[r, Q_KVP] + rf[r, Q_KVT]
                _tree_set(pt_v, pt_i, mint[best, I_POOL] * S2, S, best, mf[best, F_SCHED_PEND])
            else:
                need_t = rf[r, Q_KVP] + rf[r, Q_KVT]
                a = -1
                for want in (P_PROMPT, P_MIXED):
                    best = _pool_min(pt_v, pt_i, want, S)
                    if best >= 0 and not (
                        mint[best, I_WAIT_N] > 0 and mf[best, F_SCHED_PEND] + rq[r, R_P] > prompt_full
                    ):
                        a = best
                        break
                b = -1
                for want in (P_TOKEN, P_MIXED):
                    best = _pool_min(mt_v, mt_i, want, S)
                    if best >= 0 and not (mf[best, F_SCHED_MEM] + need_t >= cap[cls[best]]):
                        b = best
                        break
                if a < 0:
                    best = _pool_min(pt_v, pt_i, P_TOKEN, S)
                    if best >= 0:
                        _to_pool(best, P_MIXED, mint, mf, pt_v, pt_i, mt_v, mt_i, S, S2)
                        pool_moves += 1
                        a = best
                if b < 0:
                    best = _pool_min(mt_v, mt_i, P_PROMPT, S)
                    if best >= 0:
                        _to_pool(best, P_MIXED, mint, mf, pt_v, pt_i, mt_v, mt_i, S, S2)
                        pool_moves += 1
                        b = best
                if a < 0 or b < 0:
                    best = _any_min(pt_v, pt_i, S)
                    a = best
                    b = best
                rq[r, R_PM] = a
                rq[r, R_TM] = b
                if a != b:
                    mf[a, F_SCHED_MEM] += rf[r, Q_KVP]
                    mf[b, F_SCHED_MEM] += need_t
                else:
                    mf[a, F_SCHED_MEM] += need_t
                mf[a, F_SCHED_PEND] += rq[r, R_P]
                mf[b, F_SCHED_PEND] += 1.0
                _tree_set(pt_v, pt_i, mint[a, I_POOL] * S2, S, a, mf[a, F_SCHED_PEND])
                _tree_set(mt_v, mt_i, mint[a, I_POOL] * S2, S, a, mf[a, F_SCHED_MEM])
                if b != a:
                    _tree_set(pt_v, pt_i, mint[b, I_POOL] * S2, S, b, mf[b, F_SCHED_PEND])
                    _tree_set(mt_v, mt_i, mint[b, I_POOL] * S2, S, b, mf[b, F_SCHED_MEM])
            m = rq[r, R_PM]
            rq[r, R_STAGE] = S_PWAIT
            if mint[m, I_WAIT_N] >= wait_cap:
                status = STATUS_UNSTABLE
                break
            _wait_insert(wait, mint, m, r, rq, arr)
            if mint[m, I_BATCH_N] == 0:
                if mf[m, F_MEM] + rf[r, Q_KVP] > cap[cls[m]]:
                    continue
                # fall through: start an iteration on m
            else:
                if mint[m, I_BATCH_N] < max_batch and mint[m, I_BATCH_TOK] + rq[r, R_P] <= max_tokens:
                    do_pause = True
                elif mint[m, I_BATCH_NP] < mint[m, I_BATCH_N] and (
                    prompt_interrupts
                    or (mint[m, I_BATCH_TOK] - (mint[m, I_BATCH_N] - mint[m, I_BATCH_NP])) + rq[r, R_P]
                    <= max_tokens
                ):
                    do_pause = True
                else:
                    do_pause = False
                if do_pause and not mint[m, I_PAUSED] and mint[m, I_BATCH_NP] == 0:
                    mint[m, I_PAUSED] = True
                    k = math.floor((t - mf[m, F_RUN_START]) / mf[m, F_DUR]) + 1
                    mint[m, I_N_ITER] = k
                    mf[m, F_RUN_END] = mf[m, F_RUN_START] + k * mf[m, F_DUR]
                    _tree_set(rt_v, rt_i, 0, S, m, mf[m, F_RUN_END])
                continue

        # ================================================================ start an iteration on m
        epoch += 1
        if epoch == EPOCH_WRAP:
            for r in range(n):
                rq[r, R_MARK] = 0
            qmark[:] = 0
            epoch = 1
        if chunked and mint[m, I_POOL] == P_MIXED:
            status = _start_chunked(
                m,
                t,
                epoch,
                max_batch,
                chunk_budget,
                decode_first,
                reserve_decode,
                wait_cap,
                cap,
                cls,
                wait,
                batch,
                newb,
                rq,
                rf,
                arr,
                pstart,
                mf,
                mint,
                ptab,
                ttab,
                tctx,
                mtab,
                mctx,
                stats,
            )
            if status != STATUS_OK:
                break
            _tree_set(rt_v, rt_i, 0, S, m, mf[m, F_RUN_END])
            if (
                mint[m, I_BATCH_N] == 0
                and mint[m, I_WAIT_N] == 0
                and mint[m, I_POOL] == P_MIXED
                and tag[m] != P_MIXED
            ):
                _to_pool(m, tag[m], mint, mf, pt_v, pt_i, mt_v, mt_i, S, S2)
            continue
        c = cls[m]
        capm = cap[c]
        nbn = 0
        bt = 0
        memloc = mf[m, F_MEM]
        # Every pass that takes a waiting task marks its queue slot (qmark), so the selected tasks
        # leave the queue without reading the requests of those that stay (see the removal below).
        n_wait = mint[m, I_WAIT_N]
        cmp = mint[m, I_WAIT_CMP]
        first_taken = n_wait
        # pass 1: starved tasks, in queue order
        for i in range(n_wait):
            r = wait[i, m]
            if rq[r, R_PREEMPT] + cmp < max_preempt:
                break
            if nbn == max_batch:
                break
            tpi = rq[r, R_P] if rq[r, R_STAGE] == S_PWAIT else 1
            if nbn > 0 and bt + tpi > max_tokens:
                break
            if rq[r, R_MARK] == epoch:
                continue
            if rq[r, R_BLOCKED]:
                rq[r, R_MARK] = epoch
                qmark[i] = epoch
                first_taken = min(first_taken, i)
                newb[nbn] = r
                nbn += 1
                bt += tpi
                continue
            need = _need(r, m, rq, rf, reserve_decode)
            if need + memloc <= capm:
                rq[r, R_MARK] = epoch
                qmark[i] = epoch
                first_taken = min(first_taken, i)
                newb[nbn] = r
                nbn += 1
                bt += tpi
                memloc += need
        # pass 2: waiting prompts, FCFS (none in the queue: nothing to do)
        for i in range(n_wait if mint[m, I_WAIT_NPW] > 0 else 0):
            r = wait[i, m]
            if rq[r, R_STAGE] != S_PWAIT:
                continue
            if nbn == max_batch:
                break
            if nbn > 0 and bt + rq[r, R_P] > max_tokens:
                break
            if rq[r, R_MARK] == epoch:
                continue
            need = _need(r, m, rq, rf, reserve_decode)
            if need + memloc <= capm:
                rq[r, R_MARK] = epoch
                qmark[i] = epoch
                first_taken = min(first_taken, i)
                newb[nbn] = r
                nbn += 1
                bt += rq[r, R_P]
                memloc += need
            else:
                break
        # pass 3: preempted decodes — the queue's last entries: the queue is ordered by (key,
        # arrival) and a preempted decode's key is its preemption count (≥ 1), every other
        # waiting task's is 0
        for i in range(n_wait - mint[m, I_WAIT_NBLK], n_wait):
            r = wait[i, m]
            if not rq[r, R_BLOCKED]:
                continue
            if nbn == max_batch or (nbn > 0 and bt + 1 > max_tokens):
                break
            if rq[r, R_MARK] == epoch:
                continue
            rq[r, R_MARK] = epoch
            qmark[i] = epoch
            first_taken = min(first_taken, i)
            newb[nbn] = r
            nbn += 1
            bt += 1
        # pass 4: the previous batch's decodes (only this pass takes them: n_out are left out)
        n_out = mint[m, I_BATCH_N]
        for j in range(mint[m, I_BATCH_N]):
            r = batch[j, m]
            if nbn == max_batch or (nbn > 0 and bt + 1 > max_tokens):
                break
            if rq[r, R_MARK] == epoch:
                continue
            rq[r, R_MARK] = epoch
            newb[nbn] = r
            nbn += 1
            bt += 1
            n_out -= 1
        # pass 5: other waiting tasks in queue order (the admission steps of pass 1 are spelled out
        # again on purpose: a shared helper measured about 2x slower in the compiled loop)
        for i in range(n_wait):
            r = wait[i, m]
            if nbn == max_batch:
                break
            if rq[r, R_MARK] == epoch:
                continue
            tpi = rq[r, R_P] if rq[r, R_STAGE] == S_PWAIT else 1
            if nbn > 0 and bt + tpi > max_tokens:
                break
            if rq[r, R_BLOCKED]:
                rq[r, R_MARK] = epoch
                qmark[i] = epoch
                first_taken = min(first_taken, i)
                newb[nbn] = r
                nbn += 1
                bt += tpi
                continue
            need = _need(r, m, rq, rf, reserve_decode)
            if need + memloc <= capm:
                rq[r, R_MARK] = epoch
                qmark[i] = epoch
                first_taken = min(first_taken, i)
                newb[nbn] = r
                nbn += 1
                bt += tpi
                memloc += need
            else:
                break
        # The previous batch's decodes that were not kept are preempted into the queue (their KV
        # stays), the selected tasks leave it, and everyone left waiting counts a preemption. The
        # queue overflowing while the preempted are added stops the run as unstable, with the
        # selected tasks still in the queue and nobody's count raised.
        if n_out > 0 and n_wait + n_out - 1 >= wait_cap:
            status = _preempt_unkept(m, epoch, wait_cap, wait, batch, mint, rq, arr)
            break
        # remove the selected tasks: only the slots from the first one taken on move
        w = first_taken
        for i in range(first_taken, n_wait):
            if qmark[i] == epoch:
                r = wait[i, m]
                rq[r, R_PREEMPT] += cmp  # leaves the queue: its own count again
                if rq[r, R_STAGE] == S_PWAIT:
                    mint[m, I_WAIT_NPW] -= 1
                if rq[r, R_BLOCKED]:
                    mint[m, I_WAIT_NBLK] -= 1
                continue
            wait[w, m] = wait[i, m]
            w += 1
        mint[m, I_WAIT_N] = w
        mint[m, I_WAIT_CMP] = cmp + 1  # one more preemption for everyone left waiting
        # the preempted join the queue by (key, arrival) — where they would have had they joined
        # before the selected left (the queue stays sorted) — and count this preemption and the
        # one of the iteration start, like everyone waiting
        for j in range(mint[m, I_BATCH_N] if n_out > 0 else 0):
            r = batch[j, m]
            if rq[r, R_MARK] != epoch:
                rq[r, R_BLOCKED] = True
                rq[r, R_STAGE] = S_TWAIT
                rq[r, R_PREEMPT] += 2
                rq[r, R_KEY0] = rq[r, R_PREEMPT] - 1
                _wait_insert(wait, mint, m, r, rq, arr)
        nprompt = 0
        ctx = 0.0
        kmin = 1 << 62
        for j in range(nbn):
            r = newb[j]
            batch[j, m] = r
            s = rq[r, R_STAGE]
            if s == S_PWAIT:
                rq[r, R_STAGE] = S_PRUN
                mf[m, F_MEM] += rf[r, Q_KVP]
                if reserve_decode and rq[r, R_TM] == m:
                    mf[m, F_MEM] += rf[r, Q_KVT]
                    rq[r, R_RESV] = True
                pstart[r] = t
                nprompt += 1
            else:
                if s == S_TWAIT:
                    if rq[r, R_BLOCKED]:
                        rq[r, R_BLOCKED] = False
                    elif not rq[r, R_RESV]:
                        mf[m, F_MEM] += rf[r, Q_KVT]
                    rq[r, R_STAGE] = S_TRUN
                if rq[r, R_STAGE] == S_TRUN:
                    ctx += rq[r, R_P] + rq[r, R_GEN]
                    rem = rq[r, R_OTOK] - rq[r, R_GEN]
                    if rem < kmin:
                        kmin = rem
        mint[m, I_BATCH_N] = nbn
        mint[m, I_BATCH_TOK] = bt
        mint[m, I_BATCH_NP] = nprompt
        mint[m, I_PAUSED] = False
        if nbn == 0:
            mf[m, F_RUN_END] = INF
            _tree_set(rt_v, rt_i, 0, S, m, INF)
            if mint[m, I_WAIT_N] == 0 and mint[m, I_POOL] == P_MIXED and tag[m] != P_MIXED:
                _to_pool(m, tag[m], mint, mf, pt_v, pt_i, mt_v, mt_i, S, S2)
            continue
        d = _iteration_time(c, bt, nbn - nprompt, nprompt, ctx, ptab, ttab, tctx, mtab, mctx)
        kk = 1 if nprompt > 0 else kmin
        mf[m, F_DUR] = d
        mint[m, I_N_ITER] = kk
        mf[m, F_RUN_START] = t
        mf[m, F_RUN_END] = t + d * kk
        _tree_set(rt_v, rt_i, 0, S, m, mf[m, F_RUN_END])

    if status == STATUS_OK:
        for r in range(n):
            if rq[r, R_STAGE] != S_DONE:
                status = STATUS_DEADLOCK
                break
    for m in range(M):  # requests still waiting: their own preemption counts
        for i in range(mint[m, I_WAIT_N]):
            rq[wait[i, m], R_PREEMPT] += mint[m, I_WAIT_CMP]
    busy = mf[:, F_BUSY].copy()
    iters = mint[:, I_ITERS].astype(np.int64)
    batch_time = mf[:, F_BATCH_TIME].copy()
    pm = rq[:, R_PM].astype(np.int64)
    tm = rq[:, R_TM].astype(np.int64)
    preempt = rq[:, R_PREEMPT].astype(np.int64)
    out = (status, ttft, e2e, pstart, pm, tm, preempt, busy, iters, batch_time, pool_moves, events, t)
    return (*out, stats, failed[0])
