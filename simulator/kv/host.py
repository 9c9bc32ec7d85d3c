"""Host memory that holds the KV of requests swapped out of the device (vLLM's swap space)."""

from __future__ import annotations

from simulator.request import Request


class HostPool:
    """Blocks of host memory holding the KV of requests swapped out of the device (``Request.num_host_blocks``)."""

    def __init__(self, num_blocks: int) -> None:
        self.num_total_blocks = num_blocks
        self.num_free_blocks = num_blocks

    def store(self, req: Request, num_blocks: int) -> None:
        assert num_blocks <= self.num_free_blocks and req.num_host_blocks == 0
        self.num_free_blocks -= num_blocks
        req.num_host_blocks = num_blocks

    def load(self, req: Request) -> int:
        """Release ``req``'s host blocks (its KV goes back to the device); returns how many."""
        n = req.num_host_blocks
        req.num_host_blocks = 0
        self.num_free_blocks += n
        assert self.num_free_blocks <= self.num_total_blocks, "host blocks freed twice"
        return n
