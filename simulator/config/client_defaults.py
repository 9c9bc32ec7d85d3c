"""The client path's measured defaults (``ClientConfig``'s, where their sources are given), in a module that imports
nothing: the cost models read them too (simulator/cost/eager.py subtracts them from a measured TTFT), and
``simulator.config.schema`` imports the cost models."""

INGEST_DELAY_S = 4e-3
"""A request's way from the client to the engine's queue, besides tokenising (tenstorrent/tt-inference-server#190)."""

TOKENIZE_S_PER_TOKEN = 1.1e-6
"""Tokenising a prompt, seconds per token (HuggingFace tokenizers, one sequence: charlesxu.io/parallel-tokenizer)."""
