"""Benchmarks, one module each: ``.venv/bin/python -m benchmarks.<name>``.

Each starts what it needs, stops it afterwards, prints readable figures and, as its last
line, one JSON object with its figures, the baseline's from the same run and their ratio
(DESIGN.md section 10). Packages only benchmarks need are in the ``bench`` extra:
``make bench-deps``. A benchmark with a curve or a distribution also writes its JSON and
its PNG (drawn by ``perso.plots``) side by side in ``--out`` (``.perso/bench/<name>/``).
"""
