"""Search: which points of a group (one dtype and shape) to measure, within a budget.

Strategies (farm/search/grid.py, random_order.py, tpe.py, model.py) answer `ask(n)` with points and
learn from `tell(point, ms)`; farm/source.py drives them in a sweep, farm/search/replay.py over stored
exhaustive sweeps. Torch-free and Ray-free: the driver imports this package; Optuna and scikit-learn
load only with the strategy that needs them.
"""

from farm.search.budget import Budget, parse_budget
from farm.search.group import Group, Strategy
from farm.search.observations import Observations, load_observations
from farm.search.strategies import STRATEGIES, make_strategy

__all__ = [
    "STRATEGIES",
    "Budget",
    "Group",
    "Observations",
    "Strategy",
    "load_observations",
    "make_strategy",
    "parse_budget",
]
