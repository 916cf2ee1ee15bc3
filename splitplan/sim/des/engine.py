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
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

INF = math.inf

# request stages
S_NEW, S_PWAIT, S_PRUN, S_XFER, S_TWAIT, S_TRUN, S_DONE = 0, 1, 2, 3, 4, 5, 6
# pools
P_PROMPT, P_TOKEN, P_MIXED = 0, 1, 2

STATUS_OK, STATUS_UNSTABLE, STATUS_DEADLOCK = 0, 1, 2


@nb.njit(cache=True)
def _wait_insert(wait, wait_n, m, r, key0, arr):
    n = wait_n[m]
    k = key0[r]
    a = arr[r]
    pos = n
    while pos > 0:
        q = wait[m, pos - 1]
        if key0[q] < k or (key0[q] == k and arr[q] <= a):
            break
        wait[m, pos] = q
        pos -= 1
    wait[m, pos] = r
    wait_n[m] = n + 1


@nb.njit(cache=True)
def _need(r, m, stage, kvp, kvt, tm, resv, reserve_decode):
    # KV memory a waiting task needs to start: a prompt its p + 1 tokens (plus its decode's when
    # reserving on the same machine), a decode its output tokens unless reserved with its prompt
    if stage[r] == S_PWAIT:
        if reserve_decode and tm[r] == m:
            return kvp[r] + kvt[r]
        return kvp[r]
    if resv[r]:
        return 0.0
    return kvt[r]


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
    tag,
    pool,
    wait,
    wait_n,
    batch,
    batch_n,
    batch_tok,
    batch_np,
    stage,
    blocked,
    mark,
    preempt,
    key0,
    resv,
    pstart,
    arr,
    mem,
    p,
    gen,
    otok,
    kvp,
    kvt,
    tm,
    pdone,
    pchunk,
    ptab,
    ttab,
    tctx,
    mtab,
    mctx,
    dur,
    n_iter,
    run_start,
    run_end,
    paused,
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
    """
    c = cls[m]
    capm = cap[c]
    nbn = 0
    bt = 0  # prompt-chunk tokens + decodes
    ct = 0  # prompt-chunk tokens
    memloc = mem[m]
    newb = np.empty(max_batch, np.int64)
    for phase in range(2):
        if (phase == 0) == decode_first:
            # decodes, one token each: the previous batch's, then preempted, then new ones
            for j in range(batch_n[m]):
                r = batch[m, j]
                if nbn == max_batch or bt + 1 > budget:
                    break
                mark[r] = epoch
                newb[nbn] = r
                nbn += 1
                bt += 1
            for i in range(wait_n[m]):
                r = wait[m, i]
                if stage[r] != S_TWAIT or not blocked[r] or mark[r] == epoch:
                    continue
                if nbn == max_batch or bt + 1 > budget:
                    break
                mark[r] = epoch
                newb[nbn] = r
                nbn += 1
                bt += 1
            for i in range(wait_n[m]):
                r = wait[m, i]
                if stage[r] != S_TWAIT or blocked[r] or mark[r] == epoch:
                    continue
                if nbn == max_batch or bt + 1 > budget:
                    break
                need = _need(r, m, stage, kvp, kvt, tm, resv, reserve_decode)
                if need + memloc > capm:
                    break
                mark[r] = epoch
                newb[nbn] = r
                nbn += 1
                bt += 1
                memloc += need
        else:
            # prompts FCFS: started ones first (their KV is resident), then new ones
            for started in (True, False):
                for i in range(wait_n[m]):
                    r = wait[m, i]
                    if stage[r] != S_PWAIT or (pdone[r] > 0) != started or mark[r] == epoch:
                        continue
                    if nbn == max_batch or bt >= budget:
                        break
                    need = 0.0
                    if not started:
                        need = _need(r, m, stage, kvp, kvt, tm, resv, reserve_decode)
                        if need + memloc > capm:
                            break
                    piece = min(p[r] - pdone[r], budget - bt)
                    mark[r] = epoch
                    newb[nbn] = r
                    nbn += 1
                    bt += piece
                    ct += piece
                    pchunk[r] = piece
                    memloc += need
    # the previous batch's decodes that were not kept are preempted (their KV stays)
    for j in range(batch_n[m]):
        r = batch[m, j]
        if mark[r] != epoch:
            blocked[r] = True
            stage[r] = S_TWAIT
            preempt[r] += 1
            key0[r] = preempt[r]
            if wait_n[m] >= wait_cap:
                return STATUS_UNSTABLE
            _wait_insert(wait, wait_n, m, r, key0, arr)
    # remove the selected tasks from the queue; everyone left waiting counts a preemption
    w = 0
    for i in range(wait_n[m]):
        r = wait[m, i]
        if mark[r] == epoch:
            continue
        preempt[r] += 1
        wait[m, w] = r
        w += 1
    wait_n[m] = w
    npr = 0
    nd = 0
    pre = 0.0
    ctx = 0.0
    kmin = 1 << 62
    for j in range(nbn):
        r = newb[j]
        batch[m, j] = r
        s = stage[r]
        if s == S_PWAIT:
            if pdone[r] == 0:
                mem[m] += kvp[r]
                if reserve_decode and tm[r] == m:
                    mem[m] += kvt[r]
                    resv[r] = True
                pstart[r] = t
            stage[r] = S_PRUN
            pre += pdone[r]
            npr += 1
        else:
            if s == S_TWAIT:
                if blocked[r]:
                    blocked[r] = False
                elif not resv[r]:
                    mem[m] += kvt[r]
                stage[r] = S_TRUN
            ctx += p[r] + gen[r]
            nd += 1
            rem = otok[r] - gen[r]
            if rem < kmin:
                kmin = rem
    batch_n[m] = nbn
    batch_tok[m] = bt
    batch_np[m] = npr
    paused[m] = False
    if nbn == 0:
        run_end[m] = INF
        if wait_n[m] == 0 and pool[m] == P_MIXED:
            pool[m] = tag[m]
        return STATUS_OK
    d = _chunked_time(c, ct, nd, npr, ctx, pre, ptab, ttab, tctx, mtab, mctx)
    kk = 1 if npr > 0 else kmin
    dur[m] = d
    n_iter[m] = kk
    run_start[m] = t
    run_end[m] = t + d * kk
    # policy statistics: largest prompt-chunk tokens of an iteration, longest iteration with a
    # prompt chunk, iterations with a prompt chunk
    if npr > 0:
        stats[0] = max(stats[0], float(ct))
        stats[1] = max(stats[1], d)
        stats[2] += 1.0
    return STATUS_OK


@nb.njit(cache=True)
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
    chunked=False,
    chunk_budget=512,
    decode_first=True,
    policy_stats=None,
):
    # chunked: machines of the mixed pool (all machines of a baseline) run chunked prefill with a
    # budget of chunk_budget tokens per iteration (see _start_chunked); policy_stats (float[3], out)
    # receives its statistics.
    n = arr.shape[0]
    M = cls.shape[0]
    # ---- request state
    stage = np.zeros(n, np.int64)
    gen = np.zeros(n, np.int64)
    preempt = np.zeros(n, np.int64)
    key0 = np.zeros(n, np.int64)
    blocked = np.zeros(n, np.bool_)
    mark = np.zeros(n, np.int64)
    resv = np.zeros(n, np.bool_)  # decode KV reserved when the prompt started (same machine)
    pm = np.full(n, -1, np.int64)
    tm = np.full(n, -1, np.int64)
    ttft = np.full(n, np.nan)
    e2e = np.full(n, np.nan)
    pstart = np.full(n, np.nan)
    pdone = np.zeros(n, np.int64)  # prompt tokens already computed (chunked prefill)
    pchunk = p.copy()  # prompt tokens of the running iteration (the whole prompt unless chunked)
    stats = np.zeros(3) if policy_stats is None else policy_stats
    # ---- machine state
    wait = np.zeros((M, wait_cap), np.int64)
    wait_n = np.zeros(M, np.int64)
    batch = np.zeros((M, max_batch), np.int64)
    batch_n = np.zeros(M, np.int64)
    batch_tok = np.zeros(M, np.int64)
    batch_np = np.zeros(M, np.int64)  # prompts in batch
    run_start = np.zeros(M)
    run_end = np.full(M, INF)
    dur = np.zeros(M)
    n_iter = np.zeros(M, np.int64)
    paused = np.zeros(M, np.bool_)
    mem = np.zeros(M)
    sched_mem = np.zeros(M)
    sched_pend = np.zeros(M)
    pool = np.zeros(M, np.int64)
    busy = np.zeros(M)
    iters = np.zeros(M, np.int64)
    batch_time = np.zeros(M)  # Σ batch size × time (for mean batch size)
    for m in range(M):
        mem[m] = weights[cls[m]]
        sched_mem[m] = weights[cls[m]]
        pool[m] = tag[m]
    # ---- transfers in flight or waiting for memory
    xf_rid = np.zeros(n, np.int64)
    xf_time = np.zeros(n)
    xf_inflight = np.zeros(n, np.bool_)
    xf_n = 0
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
            s = stage[guard]
            if s == S_PWAIT or (s == S_TWAIT and gen[guard] == 0 and not blocked[guard]) or s == S_XFER:
                status = STATUS_UNSTABLE
                break
            guard += 1
        if status != STATUS_OK:
            break
        # ---- next event
        t_arr = arr[next_arr] if next_arr < n else INF
        mi = -1
        t_m = INF
        for m in range(M):
            if run_end[m] < t_m:
                t_m = run_end[m]
                mi = m
        xi = -1
        t_x = INF
        for j in range(xf_n):
            if xf_time[j] < t_x:
                t_x = xf_time[j]
                xi = j
        if t_x == INF and t_m == INF and t_arr == INF:
            break
        events += 1
        # ============================================================ transfer event
        if t_x <= t_m and t_x <= t_arr:
            t = t_x
            r = xf_rid[xi]
            a = pm[r]
            b = tm[r]
            if not xf_inflight[xi]:
                # waiting for memory on the token machine
                if mem[b] + kvp[r] > cap[cls[b]]:
                    xf_time[xi] = t + retry_s
                    continue
                mem[b] += kvp[r]
                xf_inflight[xi] = True
                xf_time[xi] = t + xfer_s[r]
                continue
            # transfer complete: remove from list
            xf_n -= 1
            xf_rid[xi] = xf_rid[xf_n]
            xf_time[xi] = xf_time[xf_n]
            xf_inflight[xi] = xf_inflight[xf_n]
            mem[a] -= kvp[r]
            sched_mem[a] -= kvp[r]
            if otok[r] == 0:
                e2e[r] = t - arr[r]
                stage[r] = S_DONE
                mem[b] -= kvp[r]
                sched_mem[b] -= kvp[r]
                sched_pend[b] -= 1.0
                wake = b
            else:
                stage[r] = S_TWAIT
                key0[r] = 0
                preempt[r] = 0
                if wait_n[b] >= wait_cap:
                    status = STATUS_UNSTABLE
                    break
                _wait_insert(wait, wait_n, b, r, key0, arr)
                wake = -1
                # task arrival on the token machine
                if batch_n[b] == 0:
                    if mem[b] + kvt[r] <= cap[cls[b]]:
                        wake = b
                elif batch_n[b] < max_batch and batch_tok[b] + 1 <= max_tokens:
                    if not paused[b] and batch_np[b] == 0:
                        paused[b] = True
                        k = math.floor((t - run_start[b]) / dur[b]) + 1
                        n_iter[b] = k
                        run_end[b] = run_start[b] + k * dur[b]
            # the freed prompt-side memory may unblock an idle machine
            if batch_n[a] == 0 and wait_n[a] > 0:
                m = a
            elif wake >= 0:
                m = wake
            else:
                continue
            if batch_n[m] != 0:
                continue
            # fall through to start an iteration on machine m (below)
        # ============================================================ machine run completes
        elif t_m <= t_arr:
            t = t_m
            m = mi
            k = n_iter[m]
            busy[m] += t - run_start[m]
            iters[m] += k
            batch_time[m] += batch_n[m] * (t - run_start[m])
            keep = 0
            for j in range(batch_n[m]):
                r = batch[m, j]
                if stage[r] == S_PRUN:
                    if pdone[r] + pchunk[r] < p[r]:
                        # a chunk of a longer prompt: its KV stays, the rest waits for a budget
                        pdone[r] += pchunk[r]
                        stage[r] = S_PWAIT
                        if wait_n[m] >= wait_cap:
                            status = STATUS_UNSTABLE
                            break
                        _wait_insert(wait, wait_n, m, r, key0, arr)
                        continue
                    ttft[r] = t - arr[r]
                    sched_pend[m] -= p[r]
                    if tm[r] == m:
                        if otok[r] == 0:
                            e2e[r] = ttft[r]
                            stage[r] = S_DONE
                            mem[m] -= kvp[r]
                            sched_mem[m] -= kvp[r] + kvt[r]
                            sched_pend[m] -= 1.0
                        else:
                            stage[r] = S_TWAIT
                            key0[r] = 0
                            preempt[r] = 0
                            if wait_n[m] >= wait_cap:
                                status = STATUS_UNSTABLE
                                break
                            _wait_insert(wait, wait_n, m, r, key0, arr)
                    else:
                        stage[r] = S_XFER
                        xf_rid[xf_n] = r
                        xf_time[xf_n] = t
                        xf_inflight[xf_n] = False
                        xf_n += 1
                else:
                    gen[r] += k
                    if gen[r] >= otok[r]:
                        e2e[r] = t - arr[r]
                        stage[r] = S_DONE
                        mem[m] -= kvp[r] + kvt[r]
                        sched_mem[m] -= kvp[r] + kvt[r]
                        sched_pend[m] -= 1.0
                    else:
                        batch[m, keep] = r
                        keep += 1
            if status != STATUS_OK:
                break
            batch_n[m] = keep
            run_end[m] = INF
            # fall through to start the next iteration on m
        # ============================================================ arrival
        else:
            t = t_arr
            r = next_arr
            next_arr += 1
            if baseline:
                best = 0
                for q in range(1, M):
                    if sched_pend[q] < sched_pend[best]:
                        best = q
                pm[r] = best
                tm[r] = best
                sched_pend[best] += p[r] + 1.0
                sched_mem[best] += kvp[r] + kvt[r]
            else:
                need_t = kvp[r] + kvt[r]
                a = -1
                for want in (P_PROMPT, P_MIXED):
                    best = -1
                    for q in range(M):
                        if pool[q] == want and (best < 0 or sched_pend[q] < sched_pend[best]):
                            best = q
                    if best >= 0 and not (wait_n[best] > 0 and sched_pend[best] + p[r] > prompt_full):
                        a = best
                        break
                b = -1
                for want in (P_TOKEN, P_MIXED):
                    best = -1
                    for q in range(M):
                        if pool[q] == want and (best < 0 or sched_mem[q] < sched_mem[best]):
                            best = q
                    if best >= 0 and not (sched_mem[best] + need_t >= cap[cls[best]]):
                        b = best
                        break
                if a < 0:
                    best = -1
                    for q in range(M):
                        if pool[q] == P_TOKEN and (best < 0 or sched_pend[q] < sched_pend[best]):
                            best = q
                    if best >= 0:
                        pool[best] = P_MIXED
                        pool_moves += 1
                        a = best
                if b < 0:
                    best = -1
                    for q in range(M):
                        if pool[q] == P_PROMPT and (best < 0 or sched_mem[q] < sched_mem[best]):
                            best = q
                    if best >= 0:
                        pool[best] = P_MIXED
                        pool_moves += 1
                        b = best
                if a < 0 or b < 0:
                    best = 0
                    for q in range(1, M):
                        if sched_pend[q] < sched_pend[best]:
                            best = q
                    a = best
                    b = best
                pm[r] = a
                tm[r] = b
                if a != b:
                    sched_mem[a] += kvp[r]
                    sched_mem[b] += need_t
                else:
                    sched_mem[a] += need_t
                sched_pend[a] += p[r]
                sched_pend[b] += 1.0
            m = pm[r]
            stage[r] = S_PWAIT
            if wait_n[m] >= wait_cap:
                status = STATUS_UNSTABLE
                break
            _wait_insert(wait, wait_n, m, r, key0, arr)
            if batch_n[m] == 0:
                if mem[m] + kvp[r] > cap[cls[m]]:
                    continue
                # fall through: start an iteration on m
            else:
                if batch_n[m] < max_batch and batch_tok[m] + p[r] <= max_tokens:
                    do_pause = True
                elif batch_np[m] < batch_n[m] and (
                    prompt_interrupts or (batch_tok[m] - (batch_n[m] - batch_np[m])) + p[r] <= max_tokens
                ):
                    do_pause = True
                else:
                    do_pause = False
                if do_pause and not paused[m] and batch_np[m] == 0:
                    paused[m] = True
                    k = math.floor((t - run_start[m]) / dur[m]) + 1
                    n_iter[m] = k
                    run_end[m] = run_start[m] + k * dur[m]
                continue

        # ================================================================ start an iteration on m
        epoch += 1
        if chunked and pool[m] == P_MIXED:
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
                tag,
                pool,
                wait,
                wait_n,
                batch,
                batch_n,
                batch_tok,
                batch_np,
                stage,
                blocked,
                mark,
                preempt,
                key0,
                resv,
                pstart,
                arr,
                mem,
                p,
                gen,
                otok,
                kvp,
                kvt,
                tm,
                pdone,
                pchunk,
                ptab,
                ttab,
                tctx,
                mtab,
                mctx,
                dur,
                n_iter,
                run_start,
                run_end,
                paused,
                stats,
            )
            if status != STATUS_OK:
                break
            continue
        c = cls[m]
        capm = cap[c]
        nbn = 0
        bt = 0
        memloc = mem[m]
        newb = np.empty(max_batch, np.int64)
        # pass 1: starved tasks, in queue order
        for i in range(wait_n[m]):
            r = wait[m, i]
            if preempt[r] < max_preempt:
                break
            if nbn == max_batch:
                break
            tpi = p[r] if stage[r] == S_PWAIT else 1
            if nbn > 0 and bt + tpi > max_tokens:
                break
            if mark[r] == epoch:
                continue
            if blocked[r]:
                mark[r] = epoch
                newb[nbn] = r
                nbn += 1
                bt += tpi
                continue
            need = _need(r, m, stage, kvp, kvt, tm, resv, reserve_decode)
            if need + memloc <= capm:
                mark[r] = epoch
                newb[nbn] = r
                nbn += 1
                bt += tpi
                memloc += need
        # pass 2: waiting prompts, FCFS
        for i in range(wait_n[m]):
            r = wait[m, i]
            if stage[r] != S_PWAIT:
                continue
            if nbn == max_batch:
                break
            if nbn > 0 and bt + p[r] > max_tokens:
                break
            if mark[r] == epoch:
                continue
            need = _need(r, m, stage, kvp, kvt, tm, resv, reserve_decode)
            if need + memloc <= capm:
                mark[r] = epoch
                newb[nbn] = r
                nbn += 1
                bt += p[r]
                memloc += need
            else:
                break
        # pass 3: preempted decodes
        for i in range(wait_n[m]):
            r = wait[m, i]
            if not blocked[r]:
                continue
            if nbn == max_batch or (nbn > 0 and bt + 1 > max_tokens):
                break
            if mark[r] == epoch:
                continue
            mark[r] = epoch
            newb[nbn] = r
            nbn += 1
            bt += 1
        # pass 4: the previous batch's decodes
        for j in range(batch_n[m]):
            r = batch[m, j]
            if nbn == max_batch or (nbn > 0 and bt + 1 > max_tokens):
                break
            if mark[r] == epoch:
                continue
            mark[r] = epoch
            newb[nbn] = r
            nbn += 1
            bt += 1
        # pass 5: other waiting tasks in queue order (the admission steps of pass 1 are spelled out
        # again on purpose: a shared helper measured about 2x slower in the compiled loop)
        for i in range(wait_n[m]):
            r = wait[m, i]
            if nbn == max_batch:
                break
            if mark[r] == epoch:
                continue
            tpi = p[r] if stage[r] == S_PWAIT else 1
            if nbn > 0 and bt + tpi > max_tokens:
                break
            if blocked[r]:
                mark[r] = epoch
                newb[nbn] = r
                nbn += 1
                bt += tpi
                continue
            need = _need(r, m, stage, kvp, kvt, tm, resv, reserve_decode)
            if need + memloc <= capm:
                mark[r] = epoch
                newb[nbn] = r
                nbn += 1
                bt += tpi
                memloc += need
            else:
                break
        # preempt old-batch decodes that were not kept
        for j in range(batch_n[m]):
            r = batch[m, j]
            if mark[r] != epoch:
                blocked[r] = True
                stage[r] = S_TWAIT
                preempt[r] += 1
                key0[r] = preempt[r]
                if wait_n[m] >= wait_cap:
                    status = STATUS_UNSTABLE
                    break
                _wait_insert(wait, wait_n, m, r, key0, arr)
        if status != STATUS_OK:
            break
        # remove the selected tasks from the queue; everyone left waiting counts a preemption
        w = 0
        for i in range(wait_n[m]):
            r = wait[m, i]
            if mark[r] == epoch:
                continue
            preempt[r] += 1
            wait[m, w] = r
            w += 1
        wait_n[m] = w
        nprompt = 0
        ctx = 0.0
        kmin = 1 << 62
        for j in range(nbn):
            r = newb[j]
            batch[m, j] = r
            s = stage[r]
            if s == S_PWAIT:
                stage[r] = S_PRUN
                mem[m] += kvp[r]
                if reserve_decode and tm[r] == m:
                    mem[m] += kvt[r]
                    resv[r] = True
                pstart[r] = t
                nprompt += 1
            else:
                if s == S_TWAIT:
                    if blocked[r]:
                        blocked[r] = False
                    elif not resv[r]:
                        mem[m] += kvt[r]
                    stage[r] = S_TRUN
                if stage[r] == S_TRUN:
                    ctx += p[r] + gen[r]
                    rem = otok[r] - gen[r]
                    if rem < kmin:
                        kmin = rem
        batch_n[m] = nbn
        batch_tok[m] = bt
        batch_np[m] = nprompt
        paused[m] = False
        if nbn == 0:
            run_end[m] = INF
            if wait_n[m] == 0 and pool[m] == P_MIXED:
                pool[m] = tag[m]
            continue
        d = _iteration_time(c, bt, nbn - nprompt, nprompt, ctx, ptab, ttab, tctx, mtab, mctx)
        kk = 1 if nprompt > 0 else kmin
        dur[m] = d
        n_iter[m] = kk
        run_start[m] = t
        run_end[m] = t + d * kk

    if status == STATUS_OK:
        for r in range(n):
            if stage[r] != S_DONE:
                status = STATUS_DEADLOCK
                break
    return (status, ttft, e2e, pstart, pm, tm, preempt, busy, iters, batch_time, pool_moves, events, t)
