"""Every workload kind says how many requests it sends when no stop is given (issue 32).

A sessions workload with neither ``num_sessions`` nor ``duration_s`` ran 100 sessions, a number
stated nowhere a user reads (the class docstring at most). The default stays (scenarios rely on
it) and is stated in the count field's description, which the reference is generated from;
this test fails for a workload kind whose unstated default the validator fills in.
"""

from __future__ import annotations

import pytest

from workloads.config import WORKLOAD_KINDS

MINIMAL = {
    "synthetic": {},
    "trace": {"source": "t.csv"},
    "sessions": {
        "turns": {"kind": "fixed", "count": 1},
        "user_tokens": {"kind": "fixed", "tokens": 10},
        "output_tokens": {"kind": "fixed", "tokens": 10},
    },
    "closed_loop": {"concurrency": 2},
}


def test_every_kind_is_covered():
    assert set(MINIMAL) == set(WORKLOAD_KINDS)


@pytest.mark.parametrize("kind", list(WORKLOAD_KINDS))
def test_the_count_a_workload_sends_without_a_stop_is_stated(kind):
    model = WORKLOAD_KINDS[kind]
    count_field = "num_sessions" if "num_sessions" in model.model_fields else "num_requests"
    field = model.model_fields[count_field]
    workload = model.model_validate(MINIMAL[kind])
    count = getattr(workload, f"resolved_{count_field}", getattr(workload, count_field))
    if field.default is not None:  # a default in the field itself, shown with it
        assert count == field.default
        return
    description = field.description or ""
    if count is None:  # the whole source (a trace)
        assert "None: every request" in description, description
    else:
        assert f"With neither: {count:,} " in description, description
    if "duration_s" in model.model_fields:
        assert "None:" in (model.model_fields["duration_s"].description or "")
