"""Cost models kept across the load points a process simulates (``kept_cost_model``).

``build`` makes a cost model per replica group for every run: a silicon model reads its tables again (about
0.025 s, 8% of a 2,000-request point of ``benchmarks/bench_plan.py``) and starts with empty memos. A plan's
worker simulates many points of one deployment (its searches, operating points, curve), and step times are pure
functions of the batch shape (``build`` already shares one model among a group's replicas and engines for that
reason; ``costs.CostModels`` among the bounds), so one model per deployment, kept by the process, gives the same
floats, read from memos already filled: the points of a search or a curve run about 20% faster. A profiled
group's model is never kept (it counts its own lookups and fallbacks, which a run reports); at most
``MAX_MODELS`` are kept, the least recently used dropped.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from simulator.build import make_cost_model
from simulator.cost.shape import CostModel

MAX_MODELS = 16

_models: OrderedDict[tuple[Any, ...], CostModel] = OrderedDict()


def _key(params: Any, model: Any, hardware: Any, tp: int, pp: int, ep: int, dp_attention: int) -> tuple[Any, ...]:
    return (*(x.model_dump_json() for x in (params, model, hardware)), tp, pp, ep, dp_attention)


def kept_cost_model(
    params: Any,
    model: Any,
    hardware: Any,
    tp: int = 1,
    pp: int = 1,
    profile: Any = None,
    ep: int = 1,
    dp_attention: int = 1,
) -> CostModel:
    """``make_cost_model``'s model, kept by this process for the next build of the same parameters, model,
    hardware, tp, pp, ep and attention data parallelism (``build``'s ``cost_model_for``); a profiled one is made
    anew every time."""
    if profile is not None:
        return make_cost_model(params, model, hardware, tp, pp, profile, ep, dp_attention)
    key = _key(params, model, hardware, tp, pp, ep, dp_attention)
    cost = _models.get(key)
    if cost is None:
        cost = _models[key] = make_cost_model(params, model, hardware, tp, pp, None, ep, dp_attention)
        while len(_models) > MAX_MODELS:
            _models.popitem(last=False)
    _models.move_to_end(key)
    return cost
