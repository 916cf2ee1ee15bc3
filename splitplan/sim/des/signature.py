"""Layer 4: the compiled event loop's arguments and results, spelled once (no numba import here).

`KernelArgs` is the kernel's signature: run.py builds one per simulation and one for the warm-up,
both through `KernelArgs.frozen()`, so every call has the same argument types (read-only C arrays,
plain Python scalars) and numba compiles — or loads from its cache — a single specialization.
`KernelResult` names the tuple the kernel returns.
"""

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

STATUS_OK, STATUS_UNSTABLE, STATUS_DEADLOCK, STATUS_INTERRUPTED, STATUS_FAILED = 0, 1, 2, 3, 4
STOP_POLL_EVENTS = 4096  # events between two looks at the stop flag (a power of two; ~1 ms)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
# int32 words of one request's state row in the kernel (one 64-byte cache line)
REQUEST_ROW_WORDS = 16
# the kernel's writable arrays: its large working state and its per-request outputs
WORK_FIELDS = ("work_rq", "work_wait", "work_chk", "out_ttft", "out_e2e", "out_pstart")


def work_arrays(n_requests: int, n_machines: int, wait_cap: int, checks: bool) -> dict[str, np.ndarray]:
    """The kernel's writable arrays, allocated by numpy rather than inside the kernel: numpy
    advises allocations of 4 MB and more for transparent huge pages, and the kernel reads and writes
    request rows, queues and outputs at random (by request id, by machine), so with 4 kB pages most
    of those accesses at fleet scale would miss the TLB (7,000 req/s on 2,000 machines: 840k
    request rows, 54 MB). The outputs start NaN (not reached); the rest the kernel initializes.
    `checks`: the run has failure checks, whose per-request row (4 float64) `work_chk` holds."""
    return {
        "work_rq": np.empty(n_requests * REQUEST_ROW_WORDS + 16, np.int32),
        "work_wait": np.empty(wait_cap * n_machines, np.int32),
        "work_chk": np.empty(((n_requests if checks else 1) + 2) * 4, np.float64),
        "out_ttft": np.full(n_requests, np.nan),
        "out_e2e": np.full(n_requests, np.nan),
        "out_pstart": np.full(n_requests, np.nan),
    }


class KernelArgs(NamedTuple):
    """Everything `simulate_kernel` takes, in its order.

    Per request (index = request id): arrival time, prompt tokens, decode tokens after the first,
    KV bytes of the prompt (p + 1 tokens) and of the decode, KV transfer time. Per machine: class
    (0: prompt-pool hardware, 1: token-pool hardware) and starting pool (P_PROMPT, P_TOKEN,
    P_MIXED). Per class: KV capacity and weight bytes, iteration-time tables. Then scheduler and
    batching limits, the batch-formation policy (chunked prefill or not, its budget and order), the
    failure checks, and `stop`: the one writable array, a flag the kernel polls (nonzero: stop).

    Failure checks (none: the run goes to the end): check k counts the requests from
    `first_counted` on whose metric `chk_metric[k]` (0 TTFT, 1 TBT, 2 E2E) exceeds
    `chk_scale[k]` × `ref[r, metric]` (`chk_slow[k]` = 1: a slowdown limit on the request's own
    reference latency) or `chk_scale[k]` seconds (0: an absolute limit); the run stops with
    STATUS_FAILED once `chk_need[k]` of them do (run.py sizes the need so that the percentile is
    then certain to exceed the bound, whatever the rest of the run does).
    """

    arr: F64
    p: I64
    otok: I64
    kvp: F64
    kvt: F64
    xfer_s: F64
    cls: I64
    tag: I64
    baseline: bool
    cap: F64
    weights: F64
    ptab: F64
    ttab: F64
    tctx: F64
    mtab: F64
    mctx: F64
    max_batch: int
    max_tokens: int
    max_preempt: int
    prompt_full: float
    retry_s: float
    max_backlog_s: float
    wait_cap: int
    prompt_interrupts: bool
    reserve_decode: bool
    chunked: bool  # machines of the mixed pool run chunked prefill (BatchPolicy.CHUNKED)
    chunk_budget: int  # its token budget per iteration
    decode_first: bool  # its admission order: running decodes before prompt chunks
    ref: F64  # (requests, 3): reference TTFT, TBT and E2E per request (failure checks)
    chk_metric: I64
    chk_slow: I64
    chk_scale: F64
    chk_need: I64
    chk_next: I64  # the first check of the next group (one metric and kind, bounds ascending)
    first_counted: int  # the first request the percentiles count (arrivals from the warm-up on)
    work_rq: I32  # writable (WORK_FIELDS, `work_arrays`): request state rows, + 16 for alignment
    work_wait: I32  # machines' queues: wait_cap × machines
    work_chk: F64  # failure checks: a row of 4 per request (+ 8 for alignment), else 1 row
    out_ttft: F64  # per request, NaN where not reached: TTFT, E2E, prompt start (the results)
    out_e2e: F64
    out_pstart: F64
    stop: I64

    def frozen(self) -> "KernelArgs":
        """The same arguments in the one form the kernel is compiled for: every input array
        C-contiguous, of its declared dtype and read-only; scalars as plain bool/int/float; `stop`
        a writable int64 array of one element (a fresh one if it is not)."""
        out = []
        for name, value in zip(self._fields, self, strict=True):
            kind = _KINDS[name]
            if name in WORK_FIELDS:
                buf = np.asarray(value)
                want = np.int32 if kind == I32 else np.float64
                usable = buf.ndim == 1 and buf.flags.writeable and buf.flags.c_contiguous
                if buf.dtype != want or not usable:
                    raise ValueError(f"{name} must be a writable 1-D {np.dtype(want).name} array")
                out.append(buf)
            elif name == "stop":
                flag = np.asarray(value)
                if flag.dtype != np.int64 or flag.shape != (1,) or not flag.flags.writeable:
                    flag = np.zeros(1, np.int64)
                out.append(flag)
            elif kind in (F64, I64):
                dtype = np.float64 if kind == F64 else np.int64
                a = np.ascontiguousarray(value, dtype=dtype)
                if a.flags.writeable:
                    a = a.view()
                    a.flags.writeable = False
                out.append(a)
            else:
                out.append(kind(value))
        return KernelArgs(*out)  # type: ignore[arg-type]  # fields converted one by one above


_KINDS = dict(KernelArgs.__annotations__)


class KernelResult(NamedTuple):
    """What `simulate_kernel` returns, in its order."""

    status: int  # STATUS_*
    ttft_s: F64  # per request; NaN where not reached
    e2e_s: F64
    prompt_start_s: F64
    prompt_machine: I64
    token_machine: I64
    preemptions: I64
    busy_s: F64  # per machine
    iterations: I64
    batch_time: F64  # Σ batch size × time, per machine
    pool_moves: int
    events: int
    end_s: float
    policy_stats: F64  # chunked prefill: max chunk tokens, max chunk-iteration s, chunk iterations
    failed_check: int  # STATUS_FAILED: the check whose failures reached its need (else −1)
