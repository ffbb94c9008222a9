"""Read side: the queries that the `farm` CLI and the dashboard share.

Each function takes an open Connection (the caller owns its lifecycle) and returns a pandas
DataFrame (unless said otherwise) whose column types are the same from SQLite and PostgreSQL:
integers as Int64, timestamps as UTC datetimes, booleans as boolean. Filters take one value or a
list of values; None means no filter (db.queries.select).

One job a module, every public name also here:
- select: a view by name and the filters; frames: rows as typed DataFrames (db.fetch reads the cursor);
- winners: the tie rule every best row follows;
- tables: the views' rows as the tables and commands list them (results, best configs, vs cuBLAS,
  accuracy, sweeps, environments) and what `farm export-best` writes (export_best);
- splitk and grouping: the split-K and grouping analyses (db.splitk_rule holds the split-K baseline);
- fidelity: eager time, trusted energy, timing regimes;
- runs: two runs of a study compared; compare: the regression gate that judges them (`farm compare`);
  counts: the CLI's summary and the filter options;
- pages: what the dashboard's pages ask beyond the views.
The writer's resume query, done_keys, is on the write side (db.writes).
"""

from db.fetch import fetch
from db.queries.compare import DEFAULT_THRESHOLD, Judgement, judge, newest_shared_pair
from db.queries.counts import filter_options, most_first, summary
from db.queries.fidelity import (
    DETAIL_COLUMNS,
    ENERGY_COLUMNS,
    measurement_details,
    timing_regimes,
    trusted_energy,
)
from db.queries.frames import frame, iter_view, normalize, view_frame
from db.queries.grouping import GAIN_KEY, grouping_effect, grouping_gain
from db.queries.pages import (
    count_results,
    gpu_peaks,
    interpreter_gpus,
    shape_options,
    shape_sizes,
    throttled_share,
)
from db.queries.runs import (
    RUN_POINT,
    RUN_POINT_COLUMNS,
    RunComparison,
    compare_runs,
    default_comparison,
    sweep_gpus,
)
from db.queries.select import SHAPE_ORDER, Filter, Range, Shape, conditions, view
from db.queries.splitk import SPLITK_KINDS, splitk_best, splitk_curve, splitk_eager, splitk_speedup
from db.queries.tables import (
    OBJECTIVES,
    accuracy,
    best_configs,
    environments,
    export_best,
    results,
    sweeps,
    vs_cublas,
)
from db.queries.winners import WINNER_ORDER, eager_ms, eager_of, rank_winners, winner_order
from db.splitk_rule import SIDES, STREAM_K

__all__ = [
    "DEFAULT_THRESHOLD",
    "DETAIL_COLUMNS",
    "ENERGY_COLUMNS",
    "GAIN_KEY",
    "OBJECTIVES",
    "RUN_POINT",
    "RUN_POINT_COLUMNS",
    "SHAPE_ORDER",
    "SIDES",
    "SPLITK_KINDS",
    "STREAM_K",
    "WINNER_ORDER",
    "Filter",
    "Judgement",
    "Range",
    "RunComparison",
    "Shape",
    "accuracy",
    "best_configs",
    "compare_runs",
    "conditions",
    "count_results",
    "default_comparison",
    "eager_ms",
    "eager_of",
    "environments",
    "export_best",
    "fetch",
    "filter_options",
    "frame",
    "gpu_peaks",
    "grouping_effect",
    "grouping_gain",
    "interpreter_gpus",
    "iter_view",
    "judge",
    "measurement_details",
    "most_first",
    "newest_shared_pair",
    "normalize",
    "rank_winners",
    "results",
    "shape_options",
    "shape_sizes",
    "splitk_best",
    "splitk_curve",
    "splitk_eager",
    "splitk_speedup",
    "summary",
    "sweep_gpus",
    "sweeps",
    "throttled_share",
    "timing_regimes",
    "trusted_energy",
    "view",
    "view_frame",
    "vs_cublas",
    "winner_order",
]
