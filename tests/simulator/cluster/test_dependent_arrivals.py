"""Requests sent after an earlier one ends (multi-turn sessions, closed-loop users)."""

import numpy as np

from tests.conftest import make_config, run_checked
from workloads import RequestStream


def test_child_arrives_think_time_after_parent_finishes(by_id):
    # A (4, 2) at 0: prefill [0,1], decode [1,2] -> finishes @2. B follows A after 0.5 s think: sent @2.5.
    stream = RequestStream(
        np.array([0.0, np.nan]),
        np.array([4, 10]),
        np.array([2, 1]),
        session_id=np.array([7, 7]),
        parent=np.array([-1, 0]),
        think_s=np.array([0.0, 0.5]),
        priority=np.array([0, 1]),
    )
    # (the priority policy, as the stream carries priorities: the others refuse them)
    r = by_id(run_checked(make_config(policy={"kind": "priority"}), stream))
    assert r.loc[0, "finished_s"] == 2.0
    assert r.loc[1, "arrival_s"] == 2.5 and r.loc[1, "first_token_s"] == 3.5
    assert r.loc[1, "session_id"] == 7 and r.loc[1, "parent"] == 0 and r.loc[1, "priority"] == 1


def test_child_of_rejected_parent_still_arrives(by_id):
    stream = RequestStream(
        np.array([0.0, np.nan]),
        np.array([5000, 10]),
        np.array([2, 1]),
        parent=np.array([-1, 0]),
        think_s=np.array([0.0, 1.0]),
    )
    r = by_id(run_checked(make_config(), stream))
    assert r.loc[0, "status"] == "rejected"
    assert r.loc[1, "arrival_s"] == 1.0 and r.loc[1, "status"] == "finished"
