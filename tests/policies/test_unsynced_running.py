"""Policies that read the running requests with the decode batch's counters behind (``running_unsynced``).

An engine keeping its decoding requests as a batch lets a plan list them stale: a member still wants one token, and
the batch gives its members' next blocks (``steady_decodes``) and the blocks they lack to completion
(``members_blocks_to_completion``) as totals. What reads a member's own counters or blocks (SGLang's retraction and
prefill memory check; TensorRT-LLM's GUARANTEED_NO_EVICT admission on a view without the total) must bring them
current first: the lagging view here refuses to tell a stale member's blocks. Each case plans once on a view whose
members are several steps behind and once on the same replica with every counter current, and the plans must agree.
"""

from __future__ import annotations

import pytest

from policies.batching.sarathi import SarathiParams, SarathiPolicy
from policies.batching.sglang import SglangParams, SglangPolicy
from policies.batching.trtllm import TrtllmParams, TrtllmPolicy
from simulator.request import Request, State
from tests.policies.fake_view import FakeView, running_request

LAG = 5  # decode steps the members' counters are behind


class LaggingView(FakeView):
    """A FakeView whose first ``members`` running requests are a decode batch with counters ``LAG`` steps behind."""

    def __init__(self, members: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.members = members
        self.current: dict[int, tuple[int, int, int]] = {}  # request id -> (computed, generated, blocks) now
        self.synced = False

    def lag(self) -> None:
        """Move the members' counters and blocks ``LAG`` decode steps back, remembering where they are now."""
        for r in self.running[: self.members]:
            self.current[r.request_id] = (r.num_computed_tokens, r.num_generated_tokens, self.blocks[r.request_id])
            r.num_computed_tokens -= LAG
            r.num_generated_tokens -= LAG
            self.blocks[r.request_id] = -(-r.num_computed_tokens // self.block_size)

    def num_new_blocks(self, req, num_kv_tokens):
        assert req.request_id not in self.current, "a stale member's blocks were read"
        return super().num_new_blocks(req, num_kv_tokens)

    def num_freeable_blocks(self, req):
        assert req.request_id not in self.current, "a stale member's blocks were read"
        return super().num_freeable_blocks(req)

    @property
    def running_unsynced(self):
        return self.running

    def steady_decodes(self, order):
        members = self.running[: self.members]
        if not members or [id(r) for r in order[: self.members]] != [id(r) for r in members]:
            return None
        need = 0
        for r in members:  # the batch's total: the blocks each member's next token takes, from its current state
            computed, _, blocks = self.current.get(r.request_id, (r.num_computed_tokens, 0, self.blocks[r.request_id]))
            need += max(0, -(-(computed + 1) // self.block_size) - blocks)
        return self.members, need

    def members_blocks_to_completion(self):
        total = 0
        for r in self.running[: self.members]:
            blocks = self.current[r.request_id][2] if r.request_id in self.current else self.blocks[r.request_id]
            total += max(0, -(-(r.num_prompt_tokens + r.num_output_tokens) // self.block_size) - blocks)
        return total

    def bring_up_to_date(self) -> None:
        for r in self.running[: self.members]:
            if r.request_id in self.current:
                computed, generated, blocks = self.current.pop(r.request_id)
                r.num_computed_tokens, r.num_generated_tokens = computed, generated
                self.blocks[r.request_id] = blocks
        self.synced = True


class LaggingViewWithoutTotal(LaggingView):
    """A view that cannot tell its members' blocks to completion as a total: a plan reads each, brought current."""

    members_blocks_to_completion = None


def _replica(view_cls, waiting_prompts, free, **kwargs):
    """Six decoding requests (blocks of 16 tokens; the odd ids' next token starts a new block), the waiting ones."""
    view = view_cls(free=free, total=400, **kwargs)
    for rid in range(6):
        computed = 16 * (13 + rid) + (0 if rid % 2 else 3)  # odd ids' next token starts a new block
        r = running_request(view, rid, prompt=100, computed=computed, generated=computed - 100 + 1, output=1_000)
        r.last_token_s = 0.0
        view.running.append(r)
    for i, prompt in enumerate(waiting_prompts):
        w = Request(100 + i, 0.0, prompt, 200)
        w.state = State.WAITING
        view.waiting.append(w)
    return view


def _plan_pair(policy_factory, waiting_prompts, free, lagging_cls=LaggingView):
    current = _replica(FakeView, waiting_prompts, free)
    lagging = _replica(lagging_cls, waiting_prompts, free, members=6)
    lagging.lag()
    plans = [policy_factory().plan_step(view, 0.0) for view in (current, lagging)]
    return plans, lagging


def _ids(plan):
    return (
        [(r.request_id, n) for r, n in plan.scheduled],
        [r.request_id for r in plan.preempt],
        [r.request_id for r, _ in plan.reject],
    )


@pytest.mark.parametrize(
    ("case", "waiting", "free", "synced"),
    [
        ("sglang decode, room for every token", (), 50, False),
        ("sglang decode, a retraction", (), 2, True),
        ("sglang prefill memory check", (300, 500), 40, True),
        # the members lack 318 blocks to completion (the batch's total: none read), the first waiting request 32: it is
        # admitted with 350 free and not with 349
        ("trtllm no-evict admission, room for every token", (300, 500), 350, False),
        ("trtllm no-evict admission", (300, 500), 349, False),
        ("trtllm no-evict admission, members read", (300, 500), 349, True),
        ("sarathi admission, room for every token", (300, 500), 60, False),
    ],
)
def test_a_plan_from_stale_members_is_the_plan_from_current_ones(case, waiting, free, synced):
    factory = {
        "sglang": lambda: SglangPolicy(SglangParams()),
        "trtllm": lambda: TrtllmPolicy(TrtllmParams()),
        "sarathi": lambda: SarathiPolicy(SarathiParams()),
    }[case.split()[0]]

    view_cls = LaggingViewWithoutTotal if case.endswith("members read") else LaggingView
    (on_current, on_lagging), lagging = _plan_pair(factory, waiting, free, view_cls)
    assert _ids(on_lagging) == _ids(on_current)
    assert lagging.synced == synced  # whether a member's own counters were read
    if case.endswith("room for every token"):
        assert [(r.request_id, n) for r, n in on_current.scheduled[:6]] == [(i, 1) for i in range(6)]
    if case.endswith("retraction"):
        assert on_current.preempt
    if case.startswith("trtllm"):  # the first waiting request fits the spare blocks exactly, the second does not
        assert len(on_current.scheduled) == 6 + (free == 350)
