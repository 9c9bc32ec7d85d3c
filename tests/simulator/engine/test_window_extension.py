"""A fast-forward window cut by an arrival runs one more step (``FastForward.extends``, ``wait_next``) on an engine
that plans one step ahead, where the plan at the cut step's end would open a window of that one step.

The extended window must give what the one-step window gave, bit for bit: request and step rows, pooled ITLs in
their order, and the time-weighted levels (the summary); and the plain path's results, as every fast path must.
"""

import math

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings

from simulator.build import build
from simulator.config.scenario import validate_scenario
from tests.simulator.engine.test_engine_properties import clusters, scenarios
from tests.simulator.engine.test_fast_forward import all_ties, tie_free


def run(cfg, stream=None, *, fast_forward=True, extend=True, plans_ahead=True):
    sim = build(cfg, stream=stream, fast_forward=fast_forward)
    for engine in sim.engines:
        engine._plans_ahead = plans_ahead  # a constant cost model has no cpu_overlap: set as the roofline would
        engine._may_extend = engine._may_extend and extend
    return sim, sim.run()


def assert_bit_identical(a, b):
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)
    pd.testing.assert_frame_equal(a.steps, b.steps, check_exact=True)
    np.testing.assert_array_equal(a.itl_values_s, b.itl_values_s)
    np.testing.assert_array_equal(a.itl_counts, b.itl_counts)
    for key, value in a.summary.items():
        other = b.summary[key]
        assert other == value or (isinstance(value, float) and math.isnan(value) and math.isnan(other)), key


def assert_extension_changes_nothing(cfg, stream=None):
    _, extended = run(cfg, stream)
    _, one_step = run(cfg, stream, extend=False)
    assert_bit_identical(extended, one_step)
    return extended


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tie_free(scenarios()))
def test_extended_windows_are_the_one_step_windows_on_random_scenarios(case):
    assert_extension_changes_nothing(*case)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(all_ties(scenarios()))
def test_extended_windows_are_the_one_step_windows_on_ties(case):
    cfg, stream = case
    extended = assert_extension_changes_nothing(cfg, stream)
    # whole-second steps and arrivals: the plain path planning one step ahead agrees bit for bit
    _, plain = run(cfg, stream, fast_forward=False)
    pd.testing.assert_frame_equal(extended.requests, plain.requests, check_exact=True)
    pd.testing.assert_frame_equal(extended.steps, plain.steps, check_exact=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tie_free(clusters()))
def test_extended_windows_are_the_one_step_windows_in_clusters(case):
    assert_extension_changes_nothing(*case)


def test_the_default_scenario_extends_windows_and_changes_nothing():
    cfg = validate_scenario({"workload": {"num_requests": 300}})
    extended = assert_extension_changes_nothing(cfg)
    sim, _ = run(cfg)
    steps_extended = sim.engines[0].fast_forward.num_extended
    assert steps_extended > 50  # most arrivals cut a window whose next step the engine runs unplanned
    _, plain = run(cfg, fast_forward=False)
    pd.testing.assert_frame_equal(extended.requests, plain.requests, check_exact=True)
    pd.testing.assert_frame_equal(extended.steps, plain.steps, check_exact=True)


def priced_run(cfg, forget_tail: bool) -> tuple[object, int]:
    """A run of ``cfg`` (one-step windows planned, not run as a cut window's last step) and the decode steps it
    priced; ``forget_tail``: every window prices all its steps."""
    calls = []
    sim = build(cfg)
    priced = sim.engines[0].fast_forward.cost_model.decode_step_times

    def counted(n, contexts):
        calls.append(len(contexts))
        return priced(n, contexts)

    for engine in sim.engines:
        engine.fast_forward.cost_model = type("Counted", (), {"decode_step_times": staticmethod(counted)})()
        engine._may_extend = False
        if forget_tail:
            ff, advance = engine.fast_forward, engine.fast_forward.advance

            def forgetting(window, k, ff=ff, advance=advance):
                finished = advance(window, k)
                ff._tail = None
                return finished

            ff.advance = forgetting
    return sim.run(), sum(calls)


def test_the_steps_a_cut_window_priced_are_taken_by_the_next_and_change_nothing():
    """The durations of a cut window's unrun steps price the next window's first steps (a pure function of the
    batch size and computed tokens): the same floats as pricing them again, on one engine and on several."""
    for replicas in (1, 3):
        cfg = validate_scenario({"replicas": replicas, "workload": {"num_requests": 300}})
        reused, priced_reusing = priced_run(cfg, forget_tail=False)
        again, priced_again = priced_run(cfg, forget_tail=True)
        assert_bit_identical(reused, again)
        assert priced_again > priced_reusing
