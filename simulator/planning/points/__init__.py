"""What every planning question is made of: one simulated point, and the arithmetic around it.

Lowest floor of ``planning``; imports nothing of the other subpackages.

- ``overrides``: dotted-path overrides applied to a raw scenario mapping, re-validated whole.
- ``keys``: the content hash of a resolved point config (the resume key).
- ``executors``: where points run: in-process, a local process pool, or Ray tasks.
- ``store``: atomic JSON and Parquet writes, and the sweep's one-file-per-point store.
- ``stats``: confidence intervals (t and percentile bootstrap) and replicate seeds.
- ``capacity``: GPUs, replicas and cost of a deployment; the seam for a cluster-level check.
- ``pareto``: the Pareto frontier of two minimized figures.
"""
