"""Planning: parameter sweeps and capacity search over scenarios.

Mechanism only; the CLI faces are ``servesim sweep`` and ``servesim plan``.

- ``overrides``: dotted-path overrides applied to a raw scenario mapping, re-validated whole.
- ``grid``: the GRID file (a base scenario, a cartesian grid, explicit points).
- ``keys``: the content hash of a resolved point config (the resume key).
- ``executors``: where points run: in-process, a local process pool, or Ray tasks.
- ``store``: the sweep's on-disk store (one JSON file per finished point, a Parquet table).
- ``sweep``: running a grid, resuming, writing the table.
- ``stats``: confidence intervals (t and percentile bootstrap) and replicate seeds.
- ``capacity``: GPUs, replicas and cost; the seam for a cluster-level check.
- ``steady``: steady-state statistics of one run (warm-up excluded, queue-growth check).
- ``search``: the maximum feasible rate by doubling then bisection.
- ``settings``, ``candidates``, ``prices``: what a plan is asked (validated edges).
- ``evaluate``: the plan's worker tasks (search a candidate, simulate given rates).
- ``figures``, ``pareto``, ``plan``: a plan's figures with intervals, ranking and outputs.
"""
