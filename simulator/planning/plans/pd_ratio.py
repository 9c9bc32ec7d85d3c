"""Sizing a disaggregated candidate pool by pool: the prefill:decode ratio the target needs.

Copying a given P:D cluster sizes both pools together (2P:4D is two copies of 1P:2D);
``servesim plan --pd-ratio`` sizes each pool for the target instead, so the answer can be
any ratio (3P:5D). For a candidate with one prefill and one decode group:

1. the capacity of one prefill replica, ``mu_P``: the max load of a cluster of one prefill
   replica and ``k_D`` decode replicas within the TTFT bound (the prefill side's), and of
   one decode replica, ``mu_D``: ``k_P`` prefill replicas and one decode replica within the
   TPOT and end-to-end bounds; each searched per replicate like any candidate. The other
   pool must not be what limits: ``k_D`` starts at twice the candidate's own decode:prefill
   ratio (likewise ``k_P``), and a search is run again with ``HEADROOM_TARGET`` times the
   measured ratio when the other pool had less than ``HEADROOM`` times the load it served
   (at most ``MAX_ROUNDS`` rounds);
2. ``P = ceil(target / mu_P)`` and ``D = ceil(target / mu_D)`` (the figures' replicas rule);
3. the deployment ``P`` prefill + ``D`` decode replicas is simulated whole at the target;
   where a bound is missed, one more replica goes where it is short (TPOT, end-to-end:
   decode; TTFT or a growing queue: the pool with less capacity, as a first token also waits
   for its KV to reach a decode replica), up to ``MAX_EXTRA_REPLICAS`` rounds.

With independent pools this is the ratio theory gives: each pool's replicas are the target
over one replica's capacity (tested with constant-cost pools whose capacities are known).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from simulator.config.scenario import validate_scenario
from simulator.planning.search.steady import SloTargets

HEADROOM = 1.25  # the other pool's capacity over the load it served, at least, for a pool's search to count
HEADROOM_TARGET = 1.5  # the ratio a repeated search gives the other pool
MAX_ROUNDS = 3
MAX_EXTRA_REPLICAS = 3


@dataclass(frozen=True, slots=True)
class Pools:
    """The prefill and decode groups of a disaggregated scenario: their indices and counts."""

    prefill: int
    decode: int
    prefill_count: int
    decode_count: int


def pd_pools(config: dict[str, Any]) -> Pools | None:
    """The pools of a scenario with exactly one prefill and one decode group; None for any other scenario."""
    cfg = validate_scenario(config)
    if cfg.groups is None:
        return None
    roles = [g.role for g in cfg.groups]
    if sorted(roles) != ["decode", "prefill"]:
        return None
    p, d = roles.index("prefill"), roles.index("decode")
    return Pools(p, d, cfg.groups[p].count, cfg.groups[d].count)


def with_counts(config: dict[str, Any], pools: Pools, prefill: int, decode: int) -> dict[str, Any]:
    """``config`` with ``prefill`` prefill and ``decode`` decode replicas (the other groups' fields kept)."""
    groups = [dict(g) for g in config["groups"]]
    groups[pools.prefill]["count"] = prefill
    groups[pools.decode]["count"] = decode
    return config | {"groups": groups}


def pool_slo(slo: SloTargets, pool: str) -> SloTargets:
    """The bounds a pool's own search judges: TTFT for prefill; TPOT and end-to-end latency for decode."""
    if pool == "prefill":
        return replace(slo, tpot_p99_ms=None, e2el_p99_ms=None)
    return replace(slo, ttft_p99_ms=None)


def helper_count(own: int, other: int, ratio: float | None) -> int:
    """Replicas of the other pool in a pool's search: twice the candidate's ratio first, then
    ``HEADROOM_TARGET`` times the measured capacity ratio (``ratio``: one of this pool's replicas over
    one of the other's)."""
    if ratio is None:
        return max(1, math.ceil(2 * other / own))
    return max(1, math.ceil(HEADROOM_TARGET * ratio))


def enough(helpers: int, served_per_s: float, helper_capacity_per_s: float) -> bool:
    """Whether ``helpers`` replicas of capacity ``helper_capacity_per_s`` had ``HEADROOM`` over the load served."""
    return served_per_s <= 0 or helpers * helper_capacity_per_s >= HEADROOM * served_per_s


def bump(held: dict[str, bool], stable: bool, prefill_capacity: float, decode_capacity: float) -> tuple[int, int]:
    """Extra (prefill, decode) replicas after the deployment missed at its operating point.

    ``held`` says which bounds held; the capacities are each pool's replicas times one
    replica's max load. A missed TPOT or E2E bound alone is the decode pool's. A missed TTFT
    or a growing queue can be either pool's (a prompt's first token waits for its KV to reach
    a decode replica): the pool with less capacity gets the replica, both on a tie.
    """
    if held.get("ttft", True) and stable:
        return (0, 1) if not (held.get("tpot", True) and held.get("e2el", True)) else (0, 0)
    if prefill_capacity < decode_capacity:
        return 1, 0
    if decode_capacity < prefill_capacity:
        return 0, 1
    return 1, 1
