"""Layer 4 — the discrete-event cluster simulator (the engine every other answer is judged by)."""

from splitplan.sim.des.run import (
    link_bytes_per_s,
    run_kernel,
    sigterm_raises_keyboard_interrupt,
    simulate_des,
    transfer_times_s,
)

__all__ = [
    "link_bytes_per_s",
    "run_kernel",
    "sigterm_raises_keyboard_interrupt",
    "simulate_des",
    "transfer_times_s",
]
