"""Layer 3 — workloads: what arrives (arrival times, prompt and output sizes)."""

from splitplan.workload.arrivals import ARRIVALS, gamma_arrivals, poisson_arrivals, replay_arrivals
from splitplan.workload.base import Workload
from splitplan.workload.generate import make_workload, sample_requests, splitwise_sim_trace
from splitplan.workload.presets import PRESETS, Preset, get_preset, list_presets
from splitplan.workload.readers import BadRow, TraceRead, read_trace, scan_trace, write_trace

__all__ = [
    "ARRIVALS",
    "PRESETS",
    "BadRow",
    "Preset",
    "TraceRead",
    "Workload",
    "gamma_arrivals",
    "get_preset",
    "list_presets",
    "make_workload",
    "poisson_arrivals",
    "read_trace",
    "replay_arrivals",
    "sample_requests",
    "scan_trace",
    "splitwise_sim_trace",
    "write_trace",
]
