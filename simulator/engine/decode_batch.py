"""A steady decode batch kept as totals, so a fast-forward window costs nothing per request.

While every running request of an engine decodes one token per step, they all advance
together. ``DecodeBatch`` does not touch their counters step by step or window by
window: it numbers the batch's decode steps and remembers, per request, the step at
which its counters were last brought up to date (``materialize``). What planning a
window needs is kept as totals, updated only when a request joins or finishes:

- the step at which each request emits its last token (a heap: the first one ends the window);
- the computed tokens of the whole batch (every step adds one per request);
- when requests need new KV blocks: a request holding ``b`` blocks with ``c`` tokens
  computed needs one at the batch's step ``s + b block_size - c + 1`` (``s`` the current
  step), then one every ``block_size`` steps, so requests are counted by that step
  modulo ``block_size``;
- how many requests emitted their last token when (the first inter-token gaps of the
  next window);
- the KV blocks the requests still lack to hold their whole sequence (``blocks_to_completion``: a
  TensorRT-LLM plan's GUARANTEED_NO_EVICT test), less one at each block a member takes.

The engine materializes a request when it finishes, and all of them before anything else
reads or changes the running requests (a policy planning a step, an invariant check).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from itertools import accumulate, count

from simulator.kv.pool import Holding
from simulator.request import Request


def blocks_lacking(req: Request, block_size: int, held: int) -> int:
    """KV blocks ``req``, holding ``held``, still lacks to hold prompt plus output (a plain pool's ``num_new_blocks``
    of its whole sequence)."""
    lack = -(-(req.num_prompt_tokens + req.num_output_tokens) // block_size) - held
    return lack if lack > 0 else 0


def is_decoding(req: Request) -> bool:
    """Its next step computes one token, the one it sampled last (no prompt or recompute in progress)."""
    c, p = req.num_computed_tokens, req.num_prompt_tokens
    return c >= p and p + req.num_generated_tokens - c == 1


class DecodeBatch:
    """The running requests of one engine while they only decode (``block_size``: the KV pool's)."""

    __slots__ = (
        "_context",
        "_cross",
        "_finish",
        "_order",
        "_owe",
        "_owed",
        "_phase",
        "base",
        "block_size",
        "emitted",
        "last_end_s",
        "step",
    )

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.step = 0  # decode steps the batch has run
        self.last_end_s: float | None = None  # when the latest of them ended
        # request -> step at which its counters were current (its size: the members, read without a call)
        self.base: dict[Request, int] = {}
        self._phase: dict[Request, int | None] = {}  # step (mod block_size) of its block growth, None: never
        self._finish: list[tuple[int, int, Request]] = []  # heap of (step of its last token, join order, request)
        self._order = count()
        self._cross = [0] * block_size  # requests that take a new block at steps of each residue
        self._context = 0  # sum of (computed - base): the batch's computed tokens are this + len x step
        self._owe: dict[Request, tuple[int, int]] = {}  # request -> (step it joined, blocks it lacked to completion)
        self._owed = 0  # blocks the members lack to hold their whole sequences, now (``blocks_to_completion``)
        self.emitted: dict[float, int] = {}  # time of a request's latest token -> requests

    def __len__(self) -> int:
        return len(self.base)

    def __contains__(self, req: Request) -> bool:
        return req in self.base

    def add(self, req: Request, num_blocks: int) -> bool:
        """Take in a running request, holding ``num_blocks`` KV blocks, whose counters are current and whose next
        step is a decode.

        Returns False (and takes nothing) when its block growth does not follow the
        batch's model: it would first need a block more than ``block_size`` steps ahead
        yet before it finishes.
        """
        bs = self.block_size
        s = self.step
        c = req.num_computed_tokens
        finish = s + req.num_output_tokens - req.num_generated_tokens
        first = s + num_blocks * bs - c + 1  # the step that first needs a block it lacks
        if first > finish:
            phase = None  # holds all the KV it will need (reserved at admission)
        elif first <= s + bs:
            phase = first % bs
            self._cross[phase] += 1
        else:
            return False
        self.base[req] = s
        self._phase[req] = phase
        heapq.heappush(self._finish, (finish, next(self._order), req))
        self._context += c - s
        lack = blocks_lacking(req, bs, num_blocks)
        self._owe[req] = (s, lack)
        self._owed += lack
        t = req.last_token_s
        assert t is not None, "a decoding request has emitted a token"
        self.emitted[t] = self.emitted.get(t, 0) + 1
        return True

    @classmethod
    def of(
        cls, running: Sequence[Request], block_size: int, num_blocks: Callable[[Request], int]
    ) -> DecodeBatch | None:
        """A batch of ``running``, or None unless every request's next step is a decode that the batch can model."""
        for r in reversed(running):  # newest first: a prompt still in progress is usually the last admitted
            c, p = r.num_computed_tokens, r.num_prompt_tokens
            if not (c >= p and p + r.num_generated_tokens - c == 1):  # is_decoding, inlined
                return None
        batch = cls(block_size)
        # ``add`` for each request in order, inlined (the batch is built after every step that was not a window)
        bs = block_size
        base, phases, heap, order, cross, emitted, owe = (
            batch.base,
            batch._phase,
            batch._finish,
            batch._order,
            batch._cross,
            batch.emitted,
            batch._owe,
        )
        context = owed = 0
        push = heapq.heappush
        for req in running:
            c = req.num_computed_tokens
            finish = req.num_output_tokens - req.num_generated_tokens  # the batch's step is 0
            held = num_blocks(req)
            first = held * bs - c + 1
            if first > finish:
                phase = None
            elif first <= bs:
                phase = first % bs
                cross[phase] += 1
            else:
                return None
            base[req] = 0
            phases[req] = phase
            push(heap, (finish, next(order), req))
            context += c
            lack = -(-(req.num_prompt_tokens + req.num_output_tokens) // bs) - held  # blocks_lacking, inlined
            lack = lack if lack > 0 else 0
            owe[req] = (0, lack)
            owed += lack
            t = req.last_token_s
            assert t is not None, "a decoding request has emitted a token"
            emitted[t] = emitted.get(t, 0) + 1
        batch._context = context
        batch._owed = owed
        return batch

    # -- planning ------------------------------------------------------------------------

    def steps_to_finish(self) -> int:
        """Steps until the first request emits its last token (it does in that step)."""
        return self._finish[0][0] - self.step

    def context_tokens(self) -> int:
        """Tokens the requests have computed, summed over the batch."""
        return self._context + len(self.base) * self.step

    def new_blocks(self, num_steps: int) -> list[int] | None:
        """Blocks the batch has newly taken after each of its next ``num_steps`` steps; None if none."""
        cross = self._cross
        if not any(cross):
            return None
        start = (self.step + 1) % self.block_size
        cycle = cross[start:] + cross[:start]  # the next block_size steps, in order
        if num_steps > len(cycle):
            cycle *= -(-num_steps // len(cycle))
        return list(accumulate(cycle[:num_steps]))

    def blocks_to_completion(self) -> int:
        """KV blocks the members lack to hold their whole sequences (prompt and output), summed, as a pool counting
        plain blocks would tell each one now (their counters need not be current)."""
        return self._owed

    def _taken(self, num_steps: int) -> int:
        """Blocks the members take in the batch's next ``num_steps`` steps (for a caller of ``advance`` that has not
        counted them: the engine's have, the window's growth or the members' crossings at release)."""
        cross, bs = self._cross, self.block_size
        whole, part = divmod(num_steps, bs)
        taken = whole * sum(cross) if whole else 0
        start = self.step + 1
        for t in range(start, start + part):
            taken += cross[t % bs]
        return taken

    def leads(self, order: Sequence[Request]) -> bool:
        """Whether the members are the first ``len(self)`` requests of ``order`` (a sequence of distinct requests)."""
        m = len(self.base)
        return 0 < m <= len(order) and all(map(self.base.__contains__, order[:m]))

    def num_crossing_next(self) -> int:
        """Members that take a new KV block in the batch's next step (counters and blocks current)."""
        return self._cross[(self.step + 1) % self.block_size]

    # -- running -------------------------------------------------------------------------

    def advance(
        self, num_steps: int, first_end_s: float, end_s: float, taken: int | None = None
    ) -> tuple[dict[float, int], list[Request]]:
        """Run ``num_steps`` steps, the first ending at ``first_end_s``, the last at ``end_s`` (``taken``: the KV blocks
        the members take in them, where the caller has counted them already: ``new_blocks``' last, or 0 for none).

        Returns the first step's inter-token gaps pooled by value (each request's runs from
        its latest token) and the requests that emitted their last token in the last step
        (still members: the caller materializes and removes them).
        """
        gaps: dict[float, int] = {}
        for t, n in self.emitted.items():
            gap = first_end_s - t
            gaps[gap] = gaps.get(gap, 0) + n
        if self._owed:
            self._owed -= self._taken(num_steps) if taken is None else taken
        self.step += num_steps
        self.last_end_s = end_s
        finished = []
        heap = self._finish
        while heap and heap[0][0] == self.step:
            finished.append(heapq.heappop(heap)[2])
        assert not heap or heap[0][0] > self.step, "a window ran past a request's last token"
        left = len(self.base) - len(finished)
        self.emitted = {end_s: left} if left else {}
        return gaps, finished

    def materialize(self, req: Request) -> int:
        """Bring ``req``'s counters up to date; returns the KV tokens it must hold (blocks are the caller's)."""
        d = self.step - self.base[req]
        c = req.num_computed_tokens
        if d:
            c += d
            req.num_computed_tokens = c
            req.num_generated_tokens += d
            req.last_token_s = self.last_end_s
            self.base[req] = self.step
        return c

    def count_plain_step(self, end_s: float) -> None:
        """A plain step ending at ``end_s`` decoded every member once, advancing their counters itself (and their
        KV blocks: a member that crossed a block boundary took its block at the step its phase says); the
        members that emitted their last token have left the running requests and leave the batch."""
        self.step += 1
        step = self.step
        if self._owed:
            self._owed -= self._cross[step % self.block_size]
        self.last_end_s = end_s
        base = self.base
        for r in base:
            base[r] = step
        heap = self._finish
        while heap and heap[0][0] == step:
            self.remove(heapq.heappop(heap)[2])
        left = len(base)
        self.emitted = {end_s: left} if left else {}

    def materialize_all(self, requests: Sequence[Request]) -> list[tuple[Request, int]]:
        """``materialize`` every member among ``requests``, in order; returns each with the KV tokens it must hold."""
        base = self.base
        step = self.step
        last = self.last_end_s
        out = []
        for req in requests:
            b = base.get(req)
            if b is None:
                continue
            c = req.num_computed_tokens
            if b != step:
                d = step - b
                c += d
                req.num_computed_tokens = c
                req.num_generated_tokens += d
                req.last_token_s = last
                base[req] = step
            out.append((req, c))
        return out

    def catch_up(self, requests: Sequence[Request], held: dict[int, Holding]) -> None:
        """``materialize_all`` and a counted pool's ``settle_growth_all`` in one pass: every member among ``requests``
        brought up to date, and its holding in ``held`` (the pool's, by request id) grown to its computed tokens."""
        base = self.base
        step = self.step
        last = self.last_end_s
        bs = self.block_size
        for req in requests:
            b = base.get(req)
            if b is None:
                continue
            c = req.num_computed_tokens
            if b != step:
                d = step - b
                c += d
                req.num_computed_tokens = c
                req.num_generated_tokens += d
                req.last_token_s = last
                base[req] = step
            h = held.get(req.request_id)
            if c > (h.num_kv_tokens if h is not None else 0):
                assert h is not None
                h.num_blocks = -(-c // bs)
                h.num_kv_tokens = c

    def remove(self, req: Request) -> None:
        """Take out a materialized request (it finished)."""
        phase = self._phase.pop(req)
        joined, lack = self._owe.pop(req)
        if phase is not None:
            self._cross[phase] -= 1
            bs = self.block_size  # the blocks it took since it joined: one at each step of its phase
            lack -= (self.step - phase) // bs - (joined - phase) // bs
        self._owed -= lack
        self._context -= req.num_computed_tokens - self.base.pop(req)

    def check(self, running: list[Request], num_blocks: Callable[[Request], int]) -> None:
        """Assert the totals against the requests (all materialized, all running requests members)."""
        assert set(self.base) == set(running), "the decode batch is not the running batch"
        s, bs = self.step, self.block_size
        assert all(b == s for b in self.base.values()), "a member is not materialized"
        assert self._context == sum(r.num_computed_tokens - s for r in running)
        finish = sorted((f, r.request_id) for f, _, r in self._finish)
        assert finish == sorted((s + r.num_output_tokens - r.num_generated_tokens, r.request_id) for r in running)
        cross = [0] * bs
        for r in running:
            first = s + num_blocks(r) * bs - r.num_computed_tokens + 1  # the next step that needs a block
            phase = self._phase[r]
            if phase is None:
                assert first > s + r.num_output_tokens - r.num_generated_tokens, "a member's growth is not counted"
            else:
                assert s < first <= s + bs and first % bs == phase, "a member's growth is counted at the wrong steps"
                cross[phase] += 1
        assert cross == self._cross, "block growth counts disagree with the members"
        lacking = sum(blocks_lacking(r, bs, num_blocks(r)) for r in running)
        assert self._owed == lacking, "the members' blocks to completion are miscounted"
