"""One engine: the ``StepExecutor`` that owns its queues and KV pool and carries out each
step (``executor``), the SimPy loop that drives it (``loop``), and the fast-forward seam
that runs many decode steps in one event (``fast_forward``, over ``decode_batch``)."""
