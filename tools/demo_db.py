"""Build the demo databases that `farm dashboard` opens when there are no results of one's own.

    farm sweep --preset grouping --db grouping.db && farm sweep --preset grouping --db grouping.db --repeat
    farm sweep --preset splitk --db splitk.db
    python tools/demo_db.py grouping.db splitk.db [--llm LLM ...] [--out dashboard/demo]

writes one file (two with --llm):
- `h200.db`: every source merged with the farm's own `farm db merge` (db.merge), every run kept: the
  grouping preset's two runs (the second made with `--repeat`) sit side by side, so the Compare page
  and docs/findings.md read the run-to-run difference from the demo itself.
- `h200-llm.db`: the llm preset's sources merged (docs/findings.md section 3). A file of its own: four
  of its shapes are also on the grouping grid (1024 and 8192 tokens at 4096 x 4096 and 6144 x 4096),
  and its configs there (group_m 8 only, 4 stages) would change that grid's best configs.

All are VACUUMed and left in rollback-journal mode (journal_mode=DELETE): a WAL database needs its
-shm side file writable even to read, and an installed package or a read-only checkout has none.
After a new schema revision the dashboard refuses the old demo (tests/dashboard/test_dashboard_demo.py
says so): `python tools/demo_db.py --upgrade` migrates both files in place and compacts them again;
then `python tools/findings.py` says whether docs/findings.md's outputs still hold.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from db.engine import make_engine
from db.merge import merge
from db.schema import upgrade

DEMO = Path(__file__).resolve().parents[1] / "dashboard" / "demo"
MAX_BYTES = 10 * 2**20  # issue #11: the shipped demo stays under 10 MB


def compact(path: Path) -> int:
    """VACUUM `path`, switch it to a rollback journal; its size in bytes."""
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("VACUUM")
    conn.close()
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise SystemExit(f"{path} is {size / 2**20:.1f} MiB, over the {MAX_BYTES / 2**20:.0f} MiB limit")
    return size


def upgrade_in_place(path: Path) -> int:
    """Migrate `path` to this code's schema revision (views included), then compact it; its size."""
    engine = make_engine(str(path))
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    return compact(path)


def build(sources: list[Path], out: Path, llm: list[Path] = ()) -> dict[str, int]:
    out.mkdir(parents=True, exist_ok=True)
    names = ["h200.db"]
    with tempfile.TemporaryDirectory() as tmp:
        merged = Path(tmp) / "h200.db"
        print(merge([str(s) for s in _copies(sources, Path(tmp) / "main")], str(merged)))
        shutil.copyfile(merged, out / "h200.db")
        if llm:
            merged = Path(tmp) / "h200-llm.db"
            print(merge([str(s) for s in _copies(llm, Path(tmp) / "llm")], str(merged)))
            shutil.copyfile(merged, out / "h200-llm.db")
            names.append("h200-llm.db")
    return {name: compact(out / name) for name in names}


def _copies(sources: list[Path], folder: Path) -> list[Path]:
    """Copies: the sources may be read-only WAL files, which even a reader must be able to write beside."""
    folder.mkdir(parents=True, exist_ok=True)
    copies = []
    for src in sources:
        copy = folder / src.name
        shutil.copyfile(src, copy)
        copies.append(copy)
    return copies


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sources", nargs="*", type=Path, help="the sweeps' databases (grouping runs, split-K)")
    p.add_argument("--llm", nargs="+", type=Path, default=[], help="the llm preset's databases")
    p.add_argument("--out", type=Path, default=DEMO)
    p.add_argument(
        "--upgrade", action="store_true", help="migrate the databases in --out to this code's schema"
    )
    args = p.parse_args()
    if args.upgrade:
        sizes = {path.name: upgrade_in_place(path) for path in sorted(args.out.glob("*.db"))}
    elif args.sources:
        sizes = build(args.sources, args.out, args.llm)
    else:
        p.error("give the source databases (or --upgrade)")
    for name, size in sizes.items():
        print(f"{name:28} {size / 2**20:6.2f} MiB")


if __name__ == "__main__":
    main()
