"""Layouts: the best deployment on N GPUs (``servesim plan --gpus N``), the planner's second question.

Where ``plans`` asks "the cheapest deployment for this load", this asks "the most goodput per GPU
on these N GPUs": every layout of N GPUs (aggregated replicas of one TP, or disaggregated
prefill and decode pools with their own TP and counts) under vLLM's batch limits and token
budgets, priced step by step with the simulator's own cost model, the Pareto front of
tokens/s/GPU against tokens/s/user under the SLOs, and the best layouts checked by simulation.
Built on ``search`` and ``points``.

- ``space``: the layouts of N GPUs and the settings searched (TP degrees, batch limits, token budgets).
- ``analytic``: a layout's operating points from its step times (mean-field steady state).
- ``best``: the question validated, answered and checked, and its result.
"""
