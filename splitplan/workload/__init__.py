"""Layer 2 — workloads: what arrives (arrival times, prompt and output sizes)."""

from splitplan.workload.base import Workload

__all__ = ["Workload"]
