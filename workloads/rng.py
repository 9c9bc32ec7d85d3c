"""Random streams: one numpy Generator per purpose, all derived from the run's seed.

Streams are keyed by a fixed integer per purpose (not spawned in order), so adding a new
stream never changes the numbers an existing one draws.
"""

from __future__ import annotations

import enum

import numpy as np


class Stream(enum.IntEnum):
    """Purposes: ARRIVALS (request or session start times), LENGTHS (token counts), ROUTING,
    SESSIONS (turn and tool-call counts, system prompt choice), CLASSES (request classes),
    SAMPLING (which trace rows to replay), THINK (think and tool times), DECODE_ROUTING (the
    decode pool's router of a disaggregated cluster), SPECULATION (accepted proposals of speculative
    decoding, one stream per replica and engine)."""

    ARRIVALS = 0
    LENGTHS = 1
    ROUTING = 2
    SESSIONS = 3
    CLASSES = 4
    SAMPLING = 5
    THINK = 6
    DECODE_ROUTING = 7
    SPECULATION = 8


def rng_for(seed: int, stream: Stream, *keys: int) -> np.random.Generator:
    """The generator of ``stream`` for a run seeded with ``seed`` (``keys`` split it, e.g. per replica)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(int(stream), *keys)))
