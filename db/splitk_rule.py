"""The split-K baseline rule, defined once: which side of a split-K comparison a measurement is on.

A split (split_k > 1) is compared against the best unsplit row: split_k = 1 of a variant that has a
tile grid and does not split K its own way. On neither side:
- cuBLAS, a library with no blocks (`LIBRARY`);
- the stream-K variants (`STREAM_K`), which store split_k = 1 but split K themselves: reported beside
  split-K (db.queries' splitk_best, its streamk_ columns), never as its baseline. `streamk_hybrid`
  runs its full waves data-parallel and splits K only for the last partial wave, so it is a stream-K
  schedule too: on the H200's splitk preset it was the "unsplit" winner at 768x1024x32768, and below
  one tile per SM stream-K had been the baseline of every one of the demo's 12 split-K shapes (its
  speedups 0.99-1.55 against 4.38-6.91 over tiled).

Every summary, view and query that pairs a split with its baseline reads the fragments below: the
split_best summary (db.summaries) that the splitk_speedup view reads, SPLITK_OVER_ROWS (db.views),
db.queries' splitk_best, splitk_curve, splitk_eager and compare_runs. tests/db/test_one_rule.py fails
on a second copy. The frozen SQL of released revisions (db.views' VIEWS_0002 ... VIEWS_0005, the
migrations) keeps the rule of its revision as text.
"""

from __future__ import annotations

LIBRARY = ("cublas",)
STREAM_K = ("streamk", "streamk_hybrid")
# The variants on neither side: their rows never pair.
NO_SIDE = (*LIBRARY, *STREAM_K)
# The two sides of a comparison, baseline first.
SIDES = ("unsplit", "split")


def is_library(variant: str) -> bool:
    """A library baseline (no blocks, no split): what a search measures beside its candidates."""
    return variant in LIBRARY


def _listed(variants: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in variants)


def side_sql(table: str = "") -> str:
    """A row's side as SQL over `table`'s variant and split_k (unqualified without a table): 'unsplit',
    'split', 'streamk' (beside the comparison), or NULL (cuBLAS)."""
    variant, split_k = (f"{table}.variant", f"{table}.split_k") if table else ("variant", "split_k")
    return (
        f"CASE WHEN {variant} IN ({_listed(LIBRARY)}) THEN NULL "
        f"WHEN {variant} IN ({_listed(STREAM_K)}) THEN 'streamk' "
        f"WHEN {split_k} > 1 THEN 'split' ELSE 'unsplit' END"
    )


# A row on one of SIDES, as SQL over unqualified columns.
ON_A_SIDE = f"({side_sql()}) IN ({_listed(SIDES)})"
# The variants that may have a row on a side: a filter an index on variant can seek by (db.summaries
# lists a shape's variants from shape_best with it, so stream-K's rows are never read).
PAIRED_VARIANT = f"variant NOT IN ({_listed(NO_SIDE)})"
# 1 for a split row, 0 for an unsplit one (split_best's is_split).
IS_SPLIT = f"CASE WHEN ({side_sql()}) = 'split' THEN 1 ELSE 0 END"
