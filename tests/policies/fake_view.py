"""A hand-made ``ReplicaView`` for policy unit tests: blocks of ``block_size`` tokens, held per request id."""

from __future__ import annotations

from simulator.request import Request, State


class FakeView:
    """A replica a test lays out by hand: its queues, free blocks, and the blocks each request holds."""

    def __init__(self, waiting=(), running=(), free=100, total=100, block_size=16, max_model_len=4096, role="mixed"):
        self.waiting, self.running = list(waiting), list(running)
        self.role = role
        self.num_steps = 0
        self.num_free_blocks, self.num_total_blocks = free, total
        self.block_size, self.max_model_len = block_size, max_model_len
        self.blocks: dict[int, int] = {}  # request id -> blocks held
        self.swapped: set[int] = set()
        self.hits: dict[int, int] = {}  # request id -> cached prefix tokens

    @property
    def num_running(self):
        return len(self.running)

    def num_new_blocks(self, req, num_kv_tokens):
        return max(0, -(-num_kv_tokens // self.block_size) - self.blocks.get(req.request_id, 0))

    def num_freeable_blocks(self, req):
        return self.blocks.get(req.request_id, 0)

    def prefix_hit_tokens(self, req):
        return self.hits.get(req.request_id, 0)

    def is_swapped(self, req):
        return req.request_id in self.swapped


def running_request(view: FakeView, rid, prompt, computed, generated=0, blocks=None, output=100, priority=0):
    """A running request holding the blocks its computed tokens need (or ``blocks``), recorded in ``view``."""
    r = Request(rid, 0.0, prompt, output, priority)
    r.state, r.num_computed_tokens, r.num_generated_tokens = State.RUNNING, computed, generated
    r.enqueued_s = 0.0
    view.blocks[rid] = -(-computed // view.block_size) if blocks is None else blocks
    return r
