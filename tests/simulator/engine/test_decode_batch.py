"""The decode batch's totals against stepping each request by hand."""

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine.decode_batch import DecodeBatch
from simulator.request import Request, State


def decoding(rid, prompt, output, generated, block_size, spare_blocks=0, last_s=0.0):
    """A running request that has emitted ``generated`` tokens and holds the blocks its KV needs (plus spares)."""
    r = Request(rid, 0.0, prompt, output)
    r.state = State.RUNNING
    r.num_generated_tokens = generated
    r.num_computed_tokens = prompt + generated - 1
    r.last_token_s = last_s
    return r, -(-r.num_computed_tokens // block_size) + spare_blocks


@settings(max_examples=200, deadline=None)
@given(
    bs=st.integers(1, 8),
    specs=st.lists(
        st.tuples(st.integers(1, 40), st.integers(2, 30), st.integers(0, 1), st.integers(0, 6)), min_size=1, max_size=6
    ),
    windows=st.lists(st.integers(1, 12), min_size=1, max_size=8),
)
def test_windows_match_stepping_each_request(bs, specs, windows):
    requests = []
    for i, (prompt, output, reserve, join_step) in enumerate(specs):
        spare = -(-(prompt + output) // bs) if reserve else 0  # reserving policies hold the whole output
        r, blocks = decoding(i, prompt, output, 1, bs, spare)
        requests.append((join_step, r, blocks))
    shadow = {id(r): (r.num_computed_tokens, b) for _, r, b in requests}
    batch = DecodeBatch(bs)
    pending = sorted(requests, key=lambda jrb: jrb[0])
    clock = 0.0
    for i, k in enumerate(windows):
        while pending and pending[0][0] <= batch.step:
            _, r, blocks = pending.pop(0)
            assert batch.add(r, blocks)
        if not len(batch):
            break
        k = min(k, batch.steps_to_finish())
        members = [r for _, r, _ in requests if r in batch]
        # by hand: per step, every member computes one token and takes a block when its KV outgrows its blocks
        expected_growth, total = [], 0
        for _ in range(k):
            for r in members:
                c, b = shadow[id(r)]
                c += 1
                if c > b * bs:
                    b += 1
                    total += 1
                shadow[id(r)] = (c, b)
            expected_growth.append(total)
        assert (batch.new_blocks(k) or [0] * k) == expected_growth
        assert batch.context_tokens() == sum(shadow[id(r)][0] - k for r in members)
        _, finished = batch.advance(k, clock + 1, clock + k)
        clock += k
        for r in finished:
            batch.materialize(r)
            batch.remove(r)
            assert r.num_generated_tokens == r.num_output_tokens
            assert r.num_computed_tokens == shadow[id(r)][0]
        if i % 2:  # counters are brought up to date only when asked, however many windows ran since
            for r in members:
                if r in batch:
                    assert batch.materialize(r) == shadow[id(r)][0] == r.num_computed_tokens
                    assert r.num_generated_tokens < r.num_output_tokens and r.last_token_s == clock
