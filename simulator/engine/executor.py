"""The mechanics of one engine step, with no clock of its own: every method is told the time.

A ``StepExecutor`` owns an engine's queues and its KV pool, and is the ``ReplicaView`` its
batch policy plans from. It does everything a step involves except waiting for it:

- ``enqueue`` accepts or rejects a new request;
- ``carry_out`` applies a policy's plan before the step: rejections, preemptions (recompute
  or swap), admissions with prefix reuse, KV allocation;
- ``shape`` derives the step's work for the cost model;
- ``apply`` advances the counters after the step: emissions, completions, hand-offs of
  prefilled requests, frees and prefix-cache registration; it returns the requests that
  left (finished or handed off), in order;
- ``record`` writes the step's row; ``check`` asserts the invariants.

Disaggregation lives here too: a decode engine leases blocks for KV on its way
(``offer_transfer``, ``reserve_incoming``) and gives them to the request when it lands
(``accept_transferred``); a prefill engine frees a handed-off request's blocks once its
KV has left (``release_sent``).

The simulator's SimPy loop (``simulator.engine.loop``) and the builtin torch engine
(``calibration.engine``) drive the same executor, so they make the same decisions. What it writes to and keeps
between plans (``StepSink``, ``LazyRunning``, ``Carried``, ``DecisionLog``) is in ``simulator.engine.seams``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Literal

from policies.batching.registry import BatchTraits
from policies.interface import StepPlan
from simulator.cost.shape import BatchShape
from simulator.engine.seams import Carried, DecisionLog, LazyRunning, StepSink
from simulator.engine.speculation import Speculation
from simulator.kv.pool import KvPool, Lease
from simulator.request import Request, State, transition

Role = Literal["mixed", "prefill", "decode"]
_ACTIVE = frozenset({State.WAITING, State.PREEMPTED, State.RUNNING})  # a request in this engine's queues


class StepExecutor:
    """One engine's queues and KV pool, carrying out its batch policy's plans (a ``ReplicaView``)."""

    def __init__(
        self,
        kv: KvPool,
        traits: BatchTraits,
        sink: StepSink,
        max_model_len: int,
        *,
        replica_id: int = 0,
        engine_id: int = 0,
        role: Role = "mixed",
        block_bytes: float = 0.0,
        log: DecisionLog | None = None,
        speculation: Speculation | None = None,
    ) -> None:
        self.kv = kv
        self.speculation = speculation
        self.traits = traits
        self.sink = sink
        self.max_model_len = max_model_len
        self.replica_id = replica_id
        self.engine_id = engine_id
        self.role = role
        self.block_bytes = block_bytes  # per GPU: the tp GPUs move their shards in parallel
        self.log = log
        # what an allocation or a preemption would take, and swap state: the pool answers (bound here, one call less)
        self.num_new_blocks: Callable[[Request, int], int] = kv.num_new_blocks
        self.num_freeable_blocks: Callable[[Request], int] = kv.num_freeable_blocks
        self.prefix_hit_tokens: Callable[[Request], int] = kv.prefix_hit_tokens
        self.is_swapped: Callable[[Request], bool] = kv.is_swapped
        self.lazy: LazyRunning | None = None  # set by a fast-forward seam
        self._members: tuple[int, int, int] | None = None  # what ``lazy.release`` offered for the step under way
        self.waiting: deque[Request] = deque()
        self._running: list[Request] = []
        self.sending: list[Request] = []  # prompt done, KV on its way to a decode engine
        self.incoming: deque[Request] = deque()  # KV to receive once blocks are free
        self.receiving: dict[Request, Lease] = {}  # blocks leased, KV on its way here
        # prompt tokens of the requests waiting, running, or queued or leased for their KV here (a DP router's load):
        # counted as they come and go, as their sum over those queues would be (``check``)
        self.active_prompt_tokens = 0
        self.last_step_end_s: float | None = None
        self.num_swaps_out = 0
        self.num_steps = 0

    # -- ReplicaView ---------------------------------------------------------------------

    @property
    def running(self) -> list[Request]:
        """The running requests, oldest admission first, their counters current."""
        if self.lazy is not None:
            self.lazy.bring_up_to_date()
        return self._running

    @property
    def running_unsynced(self) -> list[Request]:
        """The running requests, oldest admission first, the fast-forward decode batch's members' counters possibly
        behind: a policy reads the members only through ``steady_decodes``, or after ``bring_up_to_date``."""
        return self._running

    def bring_up_to_date(self) -> None:
        """Bring the running requests' counters current (what reading ``running`` does)."""
        if self.lazy is not None:
            self.lazy.bring_up_to_date()

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_free_blocks(self) -> int:
        return self.kv.num_free_blocks

    @property
    def num_total_blocks(self) -> int:
        return self.kv.num_total_blocks

    @property
    def block_size(self) -> int:
        return self.kv.block_size

    # num_new_blocks, num_freeable_blocks, prefix_hit_tokens and is_swapped are the pool's own (set in __init__)

    def steady_decodes(self, order: list[Request]) -> tuple[int, int] | None:
        """(requests, KV blocks) when the first requests of ``order`` are every member of the fast-forward decode
        batch: each would compute one token, and together they take that many new blocks (``schedule_running`` gives
        them their tokens at once). None otherwise (then walk them, after ``bring_up_to_date``)."""
        return self.lazy.steady_decodes(order) if self.lazy is not None else None

    def members_blocks_to_completion(self) -> int | None:
        """The KV blocks the decode batch's members lack to hold prompt and output, summed (what
        ``num_new_blocks(r, prompt + output)`` gives each, their counters behind or not; a caller reads it where
        ``steady_decodes`` says they lead its list); None without a batch or over a pool not of plain blocks."""
        return self.lazy.blocks_to_completion() if self.lazy is not None else None

    @property
    def kv_capacity_tokens(self) -> int:
        """The most KV tokens one request can ever hold here (every block of the pool)."""
        return self.kv.num_total_blocks * self.kv.block_size

    @property
    def num_outstanding(self) -> int:
        """Requests here: waiting, running, sending their KV away, or leased/queued to receive it (a prefilled
        request holds its blocks here until its KV has left)."""
        return len(self.waiting) + len(self._running) + len(self.sending) + len(self.incoming) + len(self.receiving)

    @property
    def num_transfers(self) -> int:
        """KV transfers in progress or queued, in or out."""
        if not (self.sending or self.incoming or self.receiving):  # a mixed engine's, always (read every window)
            return 0
        return len(self.sending) + len(self.incoming) + len(self.receiving)

    def blocked_by_transfers(self) -> bool:
        """Waiting requests may sit on an idle engine only while KV transfers (in or out) are pending."""
        return bool(self.receiving or self.incoming or self.sending)

    # -- arrivals ------------------------------------------------------------------------

    def enqueue(self, req: Request, now_s: float) -> bool:
        """Queue a new request; False when it can never run here (it is rejected and recorded)."""
        req.replica_id = self.replica_id
        total = req.num_prompt_tokens + req.num_output_tokens
        if total > self.max_model_len:
            self.end(
                req,
                State.REJECTED,
                now_s,
                f"prompt + output of {total} tokens exceeds the max model length ({self.max_model_len})",
            )
            return False
        need = self.kv.blocks_for(total)
        if need > self.kv.num_total_blocks:
            self.end(
                req,
                State.REJECTED,
                now_s,
                f"needs {need} KV blocks for prompt + output but the cache holds {self.kv.num_total_blocks}",
            )
            return False
        transition(req, State.WAITING, now_s)
        self.waiting.append(req)
        self.active_prompt_tokens += req.num_prompt_tokens
        return True

    def end(self, req: Request, state: State, now_s: float, reason: str | None = None) -> None:
        if req.state in _ACTIVE:  # it was waiting or running here (not one refused on arrival)
            self.active_prompt_tokens -= req.num_prompt_tokens
        transition(req, state, now_s, reason)
        self.sink.request_done(req, now_s)
        if self.log is not None:
            self.log.end(req)

    # -- disaggregation ------------------------------------------------------------------

    def offer_transfer(self, req: Request) -> None:
        """A prefilled request wants to send its KV here: it queues for a lease."""
        req.replica_id = self.replica_id
        self.incoming.append(req)
        self.active_prompt_tokens += req.num_prompt_tokens

    def reserve_incoming(self, pending_blocks: int = 0, seats: int | None = None) -> list[Request]:
        """Lease blocks for queued transfers while they fit; returns the requests whose KV may now be sent.

        ``pending_blocks``: blocks the steps under way have taken but not yet handed out
        (mid fast-forward window). A lease covers the prompt's KV plus what admission will
        ask (the first decode token, or the whole output under a policy that reserves KV),
        so a received request can always be admitted: requests holding half of what they
        need must not wait on each other. ``seats``: under a policy that seats a request before
        its transfer (``BatchTraits.seats_before_transfer``), the most requests this engine holds
        running, received or receiving; a transfer waits for a free seat as well as for blocks.
        """
        reserved = []
        held = self.num_running + len(self.waiting) + len(self.receiving) if seats is not None else 0
        while self.incoming and (seats is None or held < seats):
            req = self.incoming[0]
            if self.traits.reserves_kv:
                kv_tokens = req.num_prompt_tokens + req.num_output_tokens
            elif self.traits.recomputes_first_token:  # its first step computes the last prompt token again
                kv_tokens = req.num_computed_tokens
            else:
                kv_tokens = req.num_computed_tokens + 1
            lease = self.kv.lease(kv_tokens, self.kv.num_free_blocks - pending_blocks)
            if lease is None:
                break
            self.incoming.popleft()
            self.receiving[req] = lease
            reserved.append(req)
            held += 1
        return reserved

    def accept_transferred(self, req: Request, now_s: float, landed_s: float | None = None) -> None:
        """The KV has arrived: the request queues for decoding, its first token reaches the client now, or, where
        the engine samples it again (``BatchTraits.recomputes_first_token``), at the end of the step that computes
        the last prompt token once more, or where it streams it on admission (``first_token_at_admission``), when
        a plan admits the request (``carry_out``). ``landed_s``: when the KV landed, where the engine takes the
        request in later (``Engine.accept_transferred``); its first token, where it comes with the KV, reached the
        client then."""
        lease = self.receiving.pop(req)
        self.kv.adopt(req, lease)
        transition(req, State.WAITING, now_s)
        if self.traits.recomputes_first_token:
            req.num_computed_tokens -= 1
            req.num_generated_tokens -= 1
        elif not self.traits.first_token_at_admission:
            req.first_token_s = req.last_token_s = now_s if landed_s is None else landed_s
        # Front of the queue: it holds its blocks and needs none to start, so nothing that waits
        # for free blocks may stand before it (that would be a deadlock).
        self.waiting.appendleft(req)

    def release_sent(self, req: Request) -> None:
        """The KV has left: free the blocks it occupied here."""
        self.sending.remove(req)
        self.kv.free(req)

    # -- one step ------------------------------------------------------------------------

    def carry_out(self, plan: StepPlan, now_s: float, carried: Carried) -> None:
        """Apply the plan's decisions before the step: reject, preempt, admit, allocate."""
        if self.log is not None:
            self.log.plan(plan)
        # members of the fast-forward decode batch opening the plan step together (None: walk every request)
        members = self._members = self.lazy.release(plan) if self.lazy is not None else None
        kv = self.kv
        for req, reason in plan.reject:
            self.waiting.remove(req)
            kv.free(req)  # a transferred request that cannot run here after all holds blocks
            if req.state is State.PREEMPTED:
                # Its client has its tokens so far: it ends FINISHED, short (vLLM V0's FINISHED_IGNORED, request.py).
                assert req.num_generated_tokens, f"request {req.request_id}: refused after a preemption, no token out"
                reason = f"ignored: {reason}; ended with {req.num_generated_tokens} of {req.num_output_tokens} tokens"
                self.end(req, State.FINISHED, now_s, reason)
            else:
                self.end(req, State.REJECTED, now_s, reason)
        for req in plan.preempt:
            self._running.remove(req)
            if plan.preemption_mode == "swap":
                kept = kv.swap_out(req)  # blocks kept in swap space, 0 when there is no room
            else:
                kv.free(req)
                kept = 0
            if kept:  # KV kept in host memory; counters unchanged
                carried.swap_bytes += kept * self.block_bytes
                carried.num_swaps += 1
                self.num_swaps_out += 1
            else:
                req.num_computed_tokens = 0  # recompute (or swap space exhausted): the KV is gone
            transition(req, State.PREEMPTED, now_s)
            # Preempted newest first, so the oldest ends in front; but behind requests that already
            # hold their KV (received by transfer), which need no free blocks to start.
            holding = 0
            while holding < len(self.waiting) and kv.num_blocks(self.waiting[holding]):
                holding += 1
            self.waiting.insert(holding, req)
        # admissions (the batch's members, opening the plan, run already)
        for req, _ in plan.scheduled if members is None else plan.scheduled[members[0] :]:
            if req.state is State.RUNNING:
                continue
            if self.waiting and self.waiting[0] is req:
                self.waiting.popleft()
            else:
                self.waiting.remove(req)
            first = req.first_scheduled_s is None
            transition(req, State.RUNNING, now_s)
            self._running.append(req)
            if self.traits.first_token_at_admission and req.first_token_s is None and req.num_generated_tokens:
                # a received request's first token, streamed as it joins the running batch
                req.first_token_s = req.last_token_s = now_s
            if (swapped := kv.swap_in(req)) > 0:
                carried.swap_bytes += swapped * self.block_bytes
                carried.num_swaps += 1
            elif req.num_computed_tokens == 0:
                # Reuse a cached prefix before any allocation below can evict it.
                tokens, reload_blocks = kv.acquire_prefix(req)
                req.num_computed_tokens = tokens
                if first:
                    req.num_cached_tokens = tokens
                if reload_blocks:
                    carried.swap_bytes += reload_blocks * self.block_bytes
                    carried.num_swaps += 1
        if plan.kv_tokens:  # reserved at admission: a request's KV is not its computed tokens
            kv_tokens = plan.kv_tokens
            for req, n in plan.scheduled:
                assert req.num_computed_tokens + n <= req.num_tokens, "plan computes beyond the sequence"
                kv.allocate(req, kv_tokens.get(req, req.num_computed_tokens + n))
        elif members is not None:
            kv.take_growth(members[1])  # the members' blocks are counts, settled when they are next brought current
            kv.allocate_step(plan.scheduled[members[0] :])
        else:
            kv.allocate_step(plan.scheduled)  # one pass, in plan order
        carried.num_preempted += len(plan.preempt)

    def shape(self, plan: StepPlan) -> BatchShape:
        """The step's work as the cost models see it."""
        prefill_new: list[int] = []
        prefill_cached: list[int] = []
        num_decode = 0
        decode_ctx = 0
        sampled = 0
        scheduled = plan.scheduled
        members = self._members
        if members is not None:  # decoding members: one token each, on their computed tokens
            num_decode = sampled = members[0]
            decode_ctx = members[2] + members[0]
            scheduled = scheduled[members[0] :]
        for req, n in scheduled:
            computed = req.num_computed_tokens
            # A decode computes the one token sampled last step; a 1-token chunk of a prompt
            # (or of a recompute) is prefill work, even though it costs the same.
            if n == 1 and computed >= req.num_prompt_tokens:
                num_decode += 1
                decode_ctx += computed + 1
            else:
                prefill_new.append(n)
                prefill_cached.append(computed)
            if computed + n == req.num_tokens:
                sampled += 1
        return BatchShape(tuple(prefill_new), tuple(prefill_cached), num_decode, decode_ctx, sampled)

    def apply(self, plan: StepPlan, now_s: float) -> list[Request]:
        """Advance counters after the step ending at ``now_s``; returns the requests that left, in order.

        A request leaves by finishing (recorded here) or, on a prefill engine, by handing off
        its prompt's KV (state TRANSFERRING: the caller sends it to a decode engine).
        """
        prev_end = self.last_step_end_s
        num_regular_gaps = 0  # emissions whose previous token came at the end of the previous step
        sink = self.sink
        kv = self.kv
        hand_off = self.role == "prefill"
        left: list[Request] = []
        irregular: dict[float, int] = {}  # gaps not starting at the previous step's end, pooled by value
        spec = self.speculation
        num_extra = 0
        commit = kv.commit if kv.commits else None
        if kv.windows:  # the prompt chunks' window blocks beyond a sequence's decode bound return to the pool
            kv.end_step()
        scheduled = plan.scheduled
        if self._members is not None:  # the members' tokens, counted by the decode batch
            assert self.lazy is not None
            scheduled = scheduled[self._members[0] :]
            self._members = None
            num_regular_gaps, gap, count, finished = self.lazy.step_members(now_s)
            if gap is not None:
                irregular[gap] = count
            for req in finished:
                self._running.remove(req)
                kv.free(req)
                self.end(req, State.FINISHED, now_s)
                left.append(req)
        for req, n in scheduled:
            verified = spec is not None and n == 1 and req.num_computed_tokens >= req.num_prompt_tokens
            req.num_computed_tokens += n
            if commit is not None:
                commit(req)
            if req.num_computed_tokens == req.num_tokens:
                req.num_generated_tokens += 1
                if verified:
                    num_extra += self._accept(req)
                if req.first_token_s is None:
                    if hand_off and req.num_output_tokens > 1:
                        # The first token travels with the KV; the client sees it when decoding starts (a decode
                        # engine that samples it again, BatchTraits.recomputes_first_token, drops it on arrival).
                        self._running.remove(req)
                        self.active_prompt_tokens -= req.num_prompt_tokens
                        transition(req, State.TRANSFERRING, now_s)
                        self.sending.append(req)
                        left.append(req)
                        if self.log is not None:
                            self.log.hand_off(req)
                        continue
                    req.first_token_s = now_s
                elif req.last_token_s == prev_end:
                    num_regular_gaps += 1
                else:
                    gap = now_s - req.last_token_s
                    irregular[gap] = irregular.get(gap, 0) + 1
                req.last_token_s = now_s
                if req.num_generated_tokens == req.num_output_tokens:
                    self._running.remove(req)
                    kv.free(req)
                    self.end(req, State.FINISHED, now_s)
                    left.append(req)
                    continue
            if plan.discard_kv:
                kv.free(req)
                req.num_computed_tokens = 0
        if num_extra:
            sink.extra_tokens(num_extra)
        for gap, count in irregular.items():
            sink.itl(gap, count)
        if num_regular_gaps:
            sink.itl(now_s - prev_end, num_regular_gaps)
        self.last_step_end_s = now_s
        if self.lazy is not None:
            self.lazy.join(plan.scheduled)
        return left

    def _accept(self, req: Request) -> int:
        """A verified decode keeps the proposals accepted beyond its own token (those the output still
        needs and the free blocks can hold); returns how many."""
        assert self.speculation is not None
        extra = min(self.speculation.accepted(), req.num_output_tokens - req.num_generated_tokens)
        kv = self.kv
        while extra and kv.num_new_blocks(req, req.num_computed_tokens + extra) > kv.num_free_blocks:
            extra -= 1  # vLLM reserves the proposals' slots before the step; without room, fewer are kept
        if extra:
            kv.allocate(req, req.num_computed_tokens + extra)
            req.num_computed_tokens += extra
            req.num_generated_tokens += extra
            kv.commit(req)
        return extra

    def record(self, start_s: float, duration_s: float, shape: BatchShape, carried: Carried) -> None:
        """Write the step's row (after ``apply`` and any leases it made room for)."""
        self.sink.step(
            self.replica_id,
            self.engine_id,
            start_s,
            duration_s,
            len(self._running),
            len(self.waiting),
            shape.num_new_tokens - shape.num_decode_seqs,
            shape.num_decode_seqs,
            self.kv.num_used_blocks,
            self.kv.num_cached_blocks,
            carried.num_preempted,
            carried.num_swaps,
            self.num_transfers,
        )
        self.num_steps += 1

    # -- invariants ----------------------------------------------------------------------

    def check(self) -> None:
        """Assert the executor's invariants (tests call this after every step)."""
        running, waiting = self.running, self.waiting
        queues = (*running, *waiting, *self.sending, *self.incoming, *self.receiving)
        ids = [id(r) for r in queues]
        assert len(ids) == len(set(ids)), "a request is in two queues"
        active = (*running, *waiting, *self.incoming, *self.receiving)
        assert self.active_prompt_tokens == sum(r.num_prompt_tokens for r in active), "active prompt tokens miscounted"
        kv = self.kv
        kv.check([*running, *self.sending, *waiting], self.receiving.values())
        bs = kv.block_size
        reserves = self.traits.reserves_kv
        for r in running:
            assert r.state is State.RUNNING
            blocks, kv_tokens = kv.num_blocks(r), kv.num_kv_tokens(r)
            assert blocks == -(-kv_tokens // bs), "blocks do not match the KV tokens held"
            assert kv_tokens >= r.num_computed_tokens, "running request lacks KV for its tokens"
            if not reserves:
                assert kv_tokens == r.num_computed_tokens, "running request holds KV it does not use"
            assert r.num_generated_tokens < r.num_output_tokens
            assert not kv.is_swapped(r)
        for r in waiting:
            assert r.state in (State.WAITING, State.PREEMPTED)
            if blocks := kv.num_blocks(r):  # arrived by KV transfer, with room for its first decode step
                kv_tokens = kv.num_kv_tokens(r)
                assert blocks == -(-kv_tokens // bs) and kv_tokens > r.num_computed_tokens
                # its first token came with the KV, or comes from the step computing the last prompt token again
                assert (r.first_token_s is None) == (
                    (self.traits.recomputes_first_token and r.is_prefill) or self.traits.first_token_at_admission
                )
            elif kv.is_swapped(r):
                assert kv.num_swapped_blocks(r) == -(-r.num_computed_tokens // bs), "swapped KV does not match tokens"
            else:
                assert r.num_computed_tokens == 0, "a queued request kept computed tokens without KV"
        for r in self.sending:
            assert r.state is State.TRANSFERRING and r.num_computed_tokens == r.num_prompt_tokens
        for r in self.incoming:
            assert r not in self.receiving
