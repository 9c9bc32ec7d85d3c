"""Planning: parameter sweeps and capacity search over scenarios.

Mechanism only; the CLI faces are ``servesim sweep``, ``servesim compare`` and ``servesim plan``.
Subpackages by concept, lowest floor first (each imports only those below it):

- ``points``: one simulated point: overrides, keys, executors, store, intervals, GPUs and cost.
- ``sweeps``: grids and comparisons of points.
- ``search``: the rate search of one deployment, its analytic bounds and its pruning.
- ``plans``: the cheapest deployment for a load: candidates searched, sized, ranked.
- ``layouts``: the best deployment on N GPUs: every layout's operating points, their Pareto front, checked.
"""
