"""Prefix-block hashes: 64-bit mixing, chaining, and the repeat statistics of a hashed stream.

A prompt of ``L`` tokens cut into blocks of ``B`` tokens has ``ceil(L / B)`` blocks; block
``j`` covers tokens ``[j * B, min((j + 1) * B, L))`` and its *fill* is the number of tokens
it holds (``B`` except possibly for the last block). Every hash built here depends on the
block's fill, so a partial block never collides with the full block that extends it.

All arithmetic is on numpy ``uint64`` arrays and wraps modulo 2**64 (that is the point of
the mixer); results are returned as ``int64`` with the same bits.
"""

from __future__ import annotations

import hashlib

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_CHAIN_SEED = np.uint64(0x5EED5EED5EED5EED)


def mix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser applied elementwise: a bijection of uint64 with good avalanche."""
    z = np.asarray(x, dtype=np.uint64) + _GOLDEN  # a new array, updated in place below (large inputs)
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= _MUL1
        z ^= z >> np.uint64(27)
        z *= _MUL2
        z ^= z >> np.uint64(31)
    return z


def combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """An order-sensitive 64-bit combination of ``a`` and ``b`` (elementwise)."""
    return mix64(mix64(a) ^ np.asarray(b, dtype=np.uint64))


def block_fills(num_prompt_tokens: np.ndarray, offsets: np.ndarray, block_tokens: int) -> np.ndarray:
    """The fill of every block in a CSR layout: ``block_tokens`` except for a partial last block.

    ``offsets`` has one more entry than ``num_prompt_tokens``; request i owns entries
    ``offsets[i]:offsets[i + 1]``, which must number ``ceil(num_prompt_tokens[i] / block_tokens)``.
    """
    counts = np.diff(offsets)
    position = np.arange(int(offsets[-1]), dtype=np.int64) - np.repeat(offsets[:-1], counts)
    start = position * block_tokens
    return np.minimum(block_tokens, np.repeat(num_prompt_tokens, counts) - start)


def num_blocks(num_prompt_tokens: np.ndarray, block_tokens: int) -> np.ndarray:
    """``ceil(num_prompt_tokens / block_tokens)`` per request."""
    return -(-np.asarray(num_prompt_tokens, dtype=np.int64) // block_tokens)


def chain(keys: np.ndarray, fills: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Chained hashes: ``h[k] = combine(h[k - 1], combine(keys[k], fills[k]))`` within each request.

    ``keys`` are per-block identifiers in CSR layout (``offsets``); the result has the same
    layout. Equal k-th results mean equal keys and fills at positions 0..k (up to 64-bit
    collisions), whatever the keys meant: chaining is what makes a single hash stand for
    a whole prefix.

    Vectorised across requests: one numpy pass per block position, over the requests that
    still have a block there.
    """
    counts = np.diff(offsets).astype(np.int64)
    out = np.empty(len(keys), dtype=np.uint64)
    if len(keys) == 0:
        return out.view(np.int64)
    block = combine(keys.astype(np.uint64), fills.astype(np.uint64))
    order = np.argsort(-counts, kind="stable")  # requests with the most blocks first
    sorted_counts = counts[order]
    state = np.full(len(counts), _CHAIN_SEED, dtype=np.uint64)
    for k in range(int(sorted_counts[0])):
        active = order[: int(np.searchsorted(-sorted_counts, -k, side="left"))]
        idx = offsets[active] + k
        state[active] = combine(state[active], block[idx])
        out[idx] = state[active]
    return out.view(np.int64)


def repeat_stats(hash_values: np.ndarray) -> tuple[int, int]:
    """(number of block references, number of distinct blocks) of a stream's hashes.

    With chained hashes every reference after a block's first one would hit in an
    unbounded prefix cache, so the repeat fraction is ``1 - distinct / references``
    whatever the order of the requests.
    """
    return len(hash_values), len(np.unique(hash_values))


def text_key(text: str) -> int:
    """A stable 64-bit key of a string (the same in every process, unlike ``hash()``), as int64."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)
