"""Sweeps: every point of a grid simulated, and policies compared on one workload.

The engines of ``servesim sweep`` and ``servesim compare``; built on ``points``.

- ``grid``: the GRID file (a base scenario, a cartesian grid, explicit points).
- ``sweep``: running a grid, resuming from the store, writing the table.
- ``compare``: variants of one scenario run on the same generated requests.
"""
