"""Benchmarks and the retrieval-evaluation harness (``python -m bench.X`` from the repo root).

Nothing here is imported by the plugin; everything writes Hermes homes only
through Hermes's own APIs (``SessionDB``, ``hermes_cli.projects_db``).
"""
