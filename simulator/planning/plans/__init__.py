"""Plans: the cheapest deployment for a load (``servesim plan``): candidates searched, sized, priced, ranked.

Built on ``search`` and ``points``.

- ``prices``, ``candidates``: the candidates file and the GPU prices.
- ``outcome``: a candidate, its outcome, and the executor plumbing of a plan's stages.
- ``figures``: a candidate's figures with intervals (capacity, replicas, cost, operating point).
- ``stages``: the stages both searches share (capacity figures, operating points).
- ``curves``: the capacity curves, their loads moved to runs the plan already has.
- ``guided``, ``pruning``: the default search, the likely cheapest first, and what it prunes.
- ``pd_ratio``, ``pools``: disaggregated candidates sized pool by pool (``--pd-ratio``).
- ``prepare``: the plan's inputs validated, resolved and priced before anything runs.
- ``plan``: a plan run (``execute_plan``, ``execute_load_curve``).
- ``result``: the ranking, plan.json and the tables.
"""
