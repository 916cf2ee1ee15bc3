"""Layer 5 — search: the best configuration of each design that meets all nine SLOs.

`run_search(problem, evaluator)` is the entry point; `SearchProblem` describes what to search,
`SimEvaluator` binds the analytic screen and the DES to a scenario, `Runner` says where tasks run
and `PointStore` keeps finished DES verdicts so an interrupted search resumes.
"""

from splitplan.search.context import SearchContext, SpaceGrid
from splitplan.search.evaluate import Decision, Evaluator, Screen, SimEvaluator, scale_rate
from splitplan.search.grid import PointKey
from splitplan.search.objective import Engine, Method, Objective, best_index, rank_key
from splitplan.search.parallel import Runner
from splitplan.search.problem import (
    DesignSpace,
    PoolSpace,
    SearchProblem,
    named_budget,
    paper_space,
)
from splitplan.search.result import DecidedBy, DesignResult, PointRecord, SearchOutcome, point_columns
from splitplan.search.run import SearchInterrupted, run_search
from splitplan.search.store import PointStore, scenario_fingerprint

__all__ = [
    "DecidedBy",
    "Decision",
    "DesignResult",
    "DesignSpace",
    "Engine",
    "Evaluator",
    "Method",
    "Objective",
    "PointKey",
    "PointRecord",
    "PointStore",
    "PoolSpace",
    "Runner",
    "Screen",
    "SearchContext",
    "SearchInterrupted",
    "SearchOutcome",
    "SearchProblem",
    "SimEvaluator",
    "SpaceGrid",
    "best_index",
    "named_budget",
    "paper_space",
    "point_columns",
    "rank_key",
    "run_search",
    "scale_rate",
    "scenario_fingerprint",
]
