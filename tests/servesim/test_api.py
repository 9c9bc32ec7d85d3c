import pandas as pd

import servesim


def test_public_api_builds_runs_and_returns_tables():
    cfg = servesim.scenario(
        model="llama-3.1-8b",
        hardware="h100-sxm",
        workload={"num_requests": 40, "arrival": {"kind": "poisson", "rate_per_s": 2}},
    )
    result = servesim.run(cfg)
    assert result.summary["completed"] == 40
    assert isinstance(result.requests, pd.DataFrame) and len(result.requests) == 40
    assert {"ttft_s", "tpot_s", "e2el_s", "status"} <= set(result.requests.columns)


def test_run_result_round_trips_through_a_run_folder(tmp_path):
    result = servesim.run(servesim.scenario(workload={"num_requests": 20}))
    result.write(tmp_path / "run")
    again = servesim.RunResult.load(tmp_path / "run")
    assert again.summary == result.summary
    pd.testing.assert_frame_equal(again.requests, result.requests)
