"""Reliability and security under faults, load and hostile input (issue 6).

The same machinery serves the CI subset (``tests/test_reliability_*.py``, small
parameters) and the stress run (``python -m bench.stress.run``, which writes
``bench/out/stress.json`` and prints the figures quoted in ``docs/reliability.md``).
"""
