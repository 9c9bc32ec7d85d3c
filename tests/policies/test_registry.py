import pytest

from policies import BATCH_POLICIES, Registry


def test_duplicate_name_raises():
    reg = Registry("thing")
    reg.register("a")(object)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a")(object)


def test_unknown_name_lists_known_ones():
    reg = Registry("thing")
    reg.register("b")(object)
    reg.register("a")(object)
    with pytest.raises(ValueError, match="unknown thing 'c'; known: a, b"):
        reg.get("c")


def test_builtin_policies_registered():
    assert {"vllm", "no_kv_cache"} <= set(BATCH_POLICIES.names())
