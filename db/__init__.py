"""Results store: typed models, engine setup, migrations, SQL views and the shared query functions.

Knows rows, not GPUs: imports nothing from `kernels`, `farm` or `dashboard`.
"""
