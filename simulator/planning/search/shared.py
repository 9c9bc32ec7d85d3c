"""Cost models kept across the load points a process simulates (``kept_cost_model``).

``build`` makes a cost model per replica group for every run: a silicon model reads its tables again (about
0.025 s, 8% of a 2,000-request point of ``benchmarks/bench_plan.py``) and starts with empty memos. A plan's
worker simulates many points of one deployment (its searches, operating points, curve), and step times are pure
functions of the batch shape (``build`` already shares one model among a group's replicas and engines for that
reason; ``costs.CostModels`` among the bounds), so one model per deployment, kept by the process in a
``CostModels`` of at most ``MAX_MODELS``, gives the same floats, read from memos already filled: the points of a
search or a curve run about 20% faster. A profiled group's model is never kept.
"""

from __future__ import annotations

from simulator.planning.search.costs import CostModels

MAX_MODELS = 16

_kept = CostModels(max_models=MAX_MODELS)
_models = _kept._models  # the kept models (a test clears them)
kept_cost_model = _kept.make
"""``make_cost_model``'s model, kept by this process for the next build of the same arguments (``build``'s
``cost_model_for``)."""
