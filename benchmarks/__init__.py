"""hybridroute's benchmarks: one ``bench_*.py`` script per area, and the runner.

``python -m benchmarks`` (or ``hybridroute bench`` from a source checkout) runs every
``bench_*.py`` and prints one table; see :mod:`benchmarks._runner`. Each script also runs
on its own (``python benchmarks/bench_rules.py --help``).
"""
