"""Builders of the shipped files (demo databases, figures, screenshots, findings checks) and the
helpers they and the benchmarks share; imported by tests and benchmarks, never by the product."""
