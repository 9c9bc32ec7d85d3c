"""Cost models kept across the load points a process simulates (``shared_cost_models``).

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

import contextlib
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import simulator.build
from simulator.cost.shape import CostModel

MAX_MODELS = 16

_models: OrderedDict[tuple[Any, ...], CostModel] = OrderedDict()


def _key(params: Any, model: Any, hardware: Any, tp: int, pp: int, ep: int, dp_attention: int) -> tuple[Any, ...]:
    return (*(x.model_dump_json() for x in (params, model, hardware)), tp, pp, ep, dp_attention)


@contextlib.contextmanager
def shared_cost_models() -> Iterator[None]:
    """While open, ``simulator.build.build`` takes its cost models from this process's kept ones (one per
    parameters, model, hardware, tp, pp, ep and attention data parallelism), making the missing ones.

    For one ``build`` call at a time in the process (a plan's task; tasks do not run threads)."""
    make = simulator.build.make_cost_model

    def kept(
        params: Any,
        model: Any,
        hardware: Any,
        tp: int = 1,
        pp: int = 1,
        profile: Any = None,
        ep: int = 1,
        dp_attention: int = 1,
    ) -> CostModel:
        if profile is not None:
            return make(params, model, hardware, tp, pp, profile, ep, dp_attention)
        key = _key(params, model, hardware, tp, pp, ep, dp_attention)
        cost = _models.get(key)
        if cost is None:
            cost = _models[key] = make(params, model, hardware, tp, pp, None, ep, dp_attention)
            while len(_models) > MAX_MODELS:
                _models.popitem(last=False)
        _models.move_to_end(key)
        return cost

    simulator.build.make_cost_model = kept
    try:
        yield
    finally:
        simulator.build.make_cost_model = make
