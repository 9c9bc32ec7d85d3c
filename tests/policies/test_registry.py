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


def test_a_name_that_is_not_a_string_is_unknown_in_one_line():
    """A scenario file's kind written as a list or a mapping (`kind: [1]`) is refused as unknown, not a TypeError of
    an unhashable key (found by test_hostile_files's nesting mutation)."""
    from simulator.config.scenario import validate_scenario

    reg = Registry("thing")
    reg.register("a")(object)
    for name in ([1], {"a": 1}, 3, None):
        with pytest.raises(ValueError, match=r"unknown thing .*; known: a$"):
            reg.entry(name)
    with pytest.raises(ValueError, match=r"^policy: unknown batch policy \[\[1\]\]; known: .*vllm"):
        validate_scenario({"policy": {"kind": [[1]]}})


def test_builtin_policies_registered():
    assert {"vllm", "no_kv_cache"} <= set(BATCH_POLICIES.names())


def test_hardware_defaults_are_declared_and_present_together():
    from pydantic import BaseModel

    from policies.batching.registry import BatchTraits, _check_traits

    class Policy:
        def plan_step(self, view, now_s): ...

    class Plain(BaseModel):
        pass

    class PerGpu(BaseModel):
        def resolve_for_hardware(self, device_memory_bytes, device_name):
            return self

    with pytest.raises(TypeError, match="declare hardware_defaults but its parameters lack"):
        _check_traits("p", Policy, BatchTraits(hardware_defaults=True), Plain)
    with pytest.raises(TypeError, match="leave out hardware_defaults but its parameters have"):
        _check_traits("p", Policy, BatchTraits(), PerGpu)
    _check_traits("p", Policy, BatchTraits(hardware_defaults=True), PerGpu)
    assert {n for n in BATCH_POLICIES.names() if BATCH_POLICIES.entry(n).traits.hardware_defaults} == {"vllm", "sglang"}


def test_seats_before_transfer_are_declared_and_present_together():
    from policies.batching.registry import BatchTraits, _check_traits

    class Policy:
        def plan_step(self, view, now_s): ...

    class Seated(Policy):
        def decode_seats(self):
            return 1

    with pytest.raises(TypeError, match="declare seats_before_transfer but it lacks a decode_seats method"):
        _check_traits("p", Policy, BatchTraits(seats_before_transfer=True))
    with pytest.raises(TypeError, match="leave out seats_before_transfer but it has a decode_seats method"):
        _check_traits("p", Seated, BatchTraits())
    _check_traits("p", Seated, BatchTraits(seats_before_transfer=True))
    # TensorRT-LLM's generation server schedules DISAGG_GENERATION_INIT requests under max_batch_size
    seated = {n for n in BATCH_POLICIES.names() if BATCH_POLICIES.entry(n).traits.seats_before_transfer}
    assert seated == {"trtllm"}


def test_a_received_first_token_is_either_sampled_again_or_streamed_on_admission():
    from policies.batching.registry import BatchTraits, _check_traits

    class Policy:
        def plan_step(self, view, now_s): ...

    with pytest.raises(TypeError, match="both recomputes_first_token and first_token_at_admission"):
        _check_traits("p", Policy, BatchTraits(recomputes_first_token=True, first_token_at_admission=True))
    # vLLM samples it again on the decode replica; SGLang's decode server streams it from its prebuilt batch
    traits = {n: BATCH_POLICIES.entry(n).traits for n in BATCH_POLICIES.names()}
    assert {n for n, t in traits.items() if t.first_token_at_admission} == {"sglang"}
    assert {n for n, t in traits.items() if t.recomputes_first_token} == {"vllm"}
