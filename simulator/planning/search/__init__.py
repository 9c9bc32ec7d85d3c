"""The rate search: the largest load one deployment serves under the SLOs, its bounds and its pruning.

What a plan asks of one candidate, without the plan around it; built on ``points``.

- ``settings``, ``slo``: what a plan is asked (SLOs, target, replicates, how each point is simulated).
- ``load``: the load a workload is searched in (requests/s, sessions/s, closed-loop users) and its bounds.
- ``steady``: steady-state statistics of one run (warm-up excluded, queue-growth check).
- ``early_stop``: a point stopped once its SLO verdict cannot change.
- ``rates``: the maximum feasible rate by doubling then bisection, and the guided search.
- ``bound``: the analytic capacity bound of a deployment (no simulation); ``estimate``: the mean-field
  guess the search starts from; ``maxima``: maxima over integers from a geometric grid.
- ``prune``: the probe that shows a candidate dearer than a known deployment.
- ``evaluate``: the worker tasks (search a candidate, probe a load, simulate given rates).
"""
