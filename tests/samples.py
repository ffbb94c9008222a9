"""What every test builds rows from: the sample environments (an H200 as the GPU visits saw it, an A100,
the interpreter as farm.gpu reports it), the one record builder, and the database writer. Defined in
tools/sample_db.py, which the dashboard benchmark uses too (benchmarks import no test helpers)."""

from tools.sample_db import (  # noqa: F401  (re-exported for the tests)
    A100,
    H200,
    H200_NODE2,
    INTERPRETER,
    SMOKE_SHAPES,
    Batch,
    big_db,
    build,
    interpreter_records,
    record,
)
