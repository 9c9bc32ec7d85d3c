"""Bytes per element of the precisions a scenario names (a module of its own, so the command line's
parsers can list them without importing the simulator)."""

# Bytes per cached K or V element of each kv_cache.dtype ("auto" keeps the model's).
KV_CACHE_DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "fp8": 1.0}
