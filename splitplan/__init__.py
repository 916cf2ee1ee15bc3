"""splitplan — capacity planning for phase-split LLM inference clusters.

The library API lives in `splitplan.api`; this module stays import-light (no optuna, pyarrow,
scipy.optimize or joblib at import time).
"""

from splitplan._version import __version__
from splitplan.errors import (
    CatalogError,
    InputError,
    ModelDoesNotFitError,
    SplitplanError,
)

__all__ = [
    "CatalogError",
    "InputError",
    "ModelDoesNotFitError",
    "SplitplanError",
    "__version__",
]
