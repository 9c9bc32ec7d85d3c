"""Random valid scenarios and the invariants every run of one must keep (the fuzz test and benchmarks/fuzz.py)."""
