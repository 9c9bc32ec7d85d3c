"""A Llama-style decoder in plain torch, split into the cost model's ops, over a paged KV cache.

The harness times these functions one by one and the builtin engine runs them in
sequence, so what calibration measures is exactly what the engine executes. Weights are
random (normal, std 0.02; never zeros, whose products some kernels shortcut), at the
model's real shapes. Dense models only (no MoE routing).

Op to function (per decoder layer unless noted)::

    embed          embed(ids)                         once per step
    norm           add_norm(x, delta, w)              x2 per layer: residual add + RMSNorm (fused, as vLLM does)
    qkv_proj       qkv_proj(x, layer, positions)      fused Q/K/V projection + rotary
    attn_prefill   attn_prefill(...)                  one chunk: write its K/V, causal attention over cache + chunk
    attn_decode    attn_decode(...)                   a batch: write one K/V each, attention over each cache
    o_proj         o_proj(x, layer)
    mlp_gate_up    mlp_gate_up(x, layer)              fused gate+up (or up) projection
    mlp_act        mlp_act(x)                         SiLU(gate) x up (GELU for an ungated MLP)
    mlp_down       mlp_down(x, layer)
    lm_head        lm_head(x)                         final norm, logits, greedy token; once per step
    (attn_packed)  attn_packed(...)                   a whole step's attention as one masked call (profile only)

The KV cache is ``num_blocks x block_size`` token slots per layer; a sequence's token at
position p lives in slot ``block_table[p // block_size] * block_size + p % block_size``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from calibration.device import Device, import_torch, torch_dtype
from simulator.config.specs import ModelSpec
from simulator.kv.pool import ceil_div

ROPE_THETA = 500_000.0
RMS_EPS = 1e-5


def _sdpa_supports_gqa() -> bool:
    torch = import_torch()
    q = torch.zeros(1, 2, 1, 4)
    k = torch.zeros(1, 1, 1, 4)
    try:
        torch.nn.functional.scaled_dot_product_attention(q, k, k, enable_gqa=True)
    except (TypeError, RuntimeError):
        return False
    return True


@dataclass(slots=True)
class Layer:
    """One decoder layer's weights and KV cache."""

    input_norm: Any
    w_qkv: Any
    b_qkv: Any
    w_o: Any
    post_norm: Any
    w_gate_up: Any
    w_down: Any
    k_cache: Any
    v_cache: Any


def check_buildable(spec: ModelSpec) -> None:
    """ValueError naming what ``TorchModel`` cannot build: MoE routing, Gated DeltaNet layers."""
    if spec.is_moe:
        raise ValueError(f"{spec.name}: calibration supports dense models; MoE routing is not implemented")
    if spec.num_linear_layers:
        raise ValueError(
            f"{spec.name}: calibration times full-attention layers; Gated DeltaNet layers are not implemented"
        )


class TorchModel:
    """The weights of ``spec`` (``num_layers`` of them built) and the op functions over them."""

    def __init__(
        self,
        spec: ModelSpec,
        device: Device,
        dtype: str,
        num_kv_blocks: int,
        block_size: int,
        num_layers: int | None = None,
        seed: int = 0,
        share_kv_cache: bool = False,
    ) -> None:
        check_buildable(spec)
        torch = import_torch()
        self.torch = torch
        self.F = torch.nn.functional
        self.spec = spec
        self.device = device
        self.dtype = torch_dtype(dtype)
        self.block_size = block_size
        self.num_kv_blocks = num_kv_blocks
        self.num_slots = num_kv_blocks * block_size
        h, q, kv = spec.hidden_size, spec.q_size, spec.kv_size
        self.num_heads, self.num_kv_heads, self.head_dim = spec.num_attention_heads, spec.num_kv_heads, spec.head_dim
        self.scale = 1.0 / math.sqrt(spec.head_dim)
        self.gqa = _sdpa_supports_gqa()
        self._gen = torch.Generator(device=device.torch_device).manual_seed(seed)
        up = 2 if spec.gated_mlp else 1
        self.embed_w = self._rand(spec.vocab_size, h)
        self.layers: list[Layer] = []
        shared_kv: tuple[Any, Any] | None = None
        for _ in range(spec.num_layers if num_layers is None else num_layers):
            if shared_kv is None or not share_kv_cache:
                shared_kv = (
                    self._rand(self.num_slots, self.num_kv_heads, self.head_dim, std=1.0),
                    self._rand(self.num_slots, self.num_kv_heads, self.head_dim, std=1.0),
                )
            self.layers.append(
                Layer(
                    input_norm=self._ones(h),
                    w_qkv=self._rand(q + 2 * kv, h),
                    b_qkv=self._rand(q + 2 * kv) if spec.qkv_bias else None,
                    w_o=self._rand(h, q),
                    post_norm=self._ones(h),
                    w_gate_up=self._rand(up * spec.intermediate_size, h),
                    w_down=self._rand(h, spec.intermediate_size),
                    k_cache=shared_kv[0],
                    v_cache=shared_kv[1],
                )
            )
        self.final_norm = self._ones(h)
        self.lm_head_w = self.embed_w if spec.tie_word_embeddings else self._rand(spec.vocab_size, h)
        inv = 1.0 / (ROPE_THETA ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim))
        self._inv_freq = inv.to(device.torch_device)

    def _rand(self, *shape: int, std: float = 0.02) -> Any:
        t = self.torch.randn(*shape, generator=self._gen, device=self.device.torch_device, dtype=self.torch.float32)
        return (t * std).to(self.dtype)

    def _ones(self, n: int) -> Any:
        # norm weights near one, not exactly one: no op should see constant data
        return (1.0 + self._rand(n)).to(self.dtype)

    def weight_bytes(self) -> int:
        """Bytes of every weight tensor built (KV cache excluded)."""
        tensors = [self.embed_w, self.final_norm]
        if self.lm_head_w is not self.embed_w:
            tensors.append(self.lm_head_w)
        for layer in self.layers:
            tensors += [layer.input_norm, layer.w_qkv, layer.w_o, layer.post_norm, layer.w_gate_up, layer.w_down]
            if layer.b_qkv is not None:
                tensors.append(layer.b_qkv)
        return sum(t.numel() * t.element_size() for t in tensors)

    # -- inputs -------------------------------------------------------------------------

    def tensor(self, values: list[int]) -> Any:
        return self.torch.tensor(values, dtype=self.torch.long, device=self.device.torch_device)

    def rotary(self, positions: Any) -> tuple[Any, Any]:
        """(cos, sin) of shape [tokens, head_dim / 2] for integer ``positions``."""
        freqs = positions.to(self.torch.float32)[:, None] * self._inv_freq[None, :]
        return freqs.cos().to(self.dtype), freqs.sin().to(self.dtype)

    def random_hidden(self, num_tokens: int) -> Any:
        return self._rand(num_tokens, self.spec.hidden_size, std=1.0)

    # -- the ops ------------------------------------------------------------------------

    def embed(self, ids: Any, weight: Any = None) -> Any:
        return self.F.embedding(ids, self.embed_w if weight is None else weight)

    def rms_norm(self, x: Any, weight: Any) -> Any:
        xf = x.float()
        xf = xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + RMS_EPS)
        return xf.to(self.dtype) * weight

    def add_norm(self, x: Any, delta: Any, weight: Any) -> tuple[Any, Any]:
        """(x + delta, RMSNorm of it): the residual add belongs to the norm op (vLLM fuses them)."""
        if delta is not None:
            x = x + delta
        return x, self.rms_norm(x, weight)

    def _rope(self, x: Any, cos: Any, sin: Any) -> Any:
        x1, x2 = x[..., : self.head_dim // 2], x[..., self.head_dim // 2 :]
        c, s = cos[:, None, :], sin[:, None, :]
        return self.torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)

    def qkv_proj(self, x: Any, layer: Layer, cos: Any, sin: Any) -> tuple[Any, Any, Any]:
        """Q [T, heads, d], K and V [T, kv_heads, d], rotary applied to Q and K."""
        qkv = self.F.linear(x, layer.w_qkv, layer.b_qkv)
        q_size, kv_size = self.spec.q_size, self.spec.kv_size
        q = qkv[:, :q_size].view(-1, self.num_heads, self.head_dim)
        k = qkv[:, q_size : q_size + kv_size].view(-1, self.num_kv_heads, self.head_dim)
        v = qkv[:, q_size + kv_size :].view(-1, self.num_kv_heads, self.head_dim)
        return self._rope(q, cos, sin), self._rope(k, cos, sin), v

    def _sdpa(self, q: Any, k: Any, v: Any, mask: Any = None, causal: bool = False) -> Any:
        """q [B, H, L, d], k/v [B, KVH, S, d] -> [B, H, L, d]."""
        if self.num_heads != self.num_kv_heads:
            if self.gqa:
                return self.F.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, is_causal=causal, scale=self.scale, enable_gqa=True
                )
            group = self.num_heads // self.num_kv_heads
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        return self.F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=self.scale)

    def attn_prefill(self, q: Any, k: Any, v: Any, layer: Layer, slots: Any, num_cached: int) -> Any:
        """One chunk of ``n`` new tokens over ``num_cached`` cached ones: [n, heads * d].

        ``slots`` holds the cache slots of all ``num_cached + n`` positions; the chunk's
        K/V are written to the last ``n`` of them first.
        """
        n = q.shape[0]
        layer.k_cache[slots[num_cached:]] = k
        layer.v_cache[slots[num_cached:]] = v
        keys = layer.k_cache[slots] if num_cached else k
        values = layer.v_cache[slots] if num_cached else v
        qh = q.transpose(0, 1).unsqueeze(0)
        kh = keys.transpose(0, 1).unsqueeze(0)
        vh = values.transpose(0, 1).unsqueeze(0)
        if num_cached:
            pos_q = self.torch.arange(n, device=q.device)[:, None] + num_cached
            mask = self.torch.arange(num_cached + n, device=q.device)[None, :] <= pos_q
            out = self._sdpa(qh, kh, vh, mask=mask)
        else:
            out = self._sdpa(qh, kh, vh, causal=True)
        return out[0].transpose(0, 1).reshape(n, -1)

    def attn_decode(self, q: Any, k: Any, v: Any, layer: Layer, new_slots: Any, slot_table: Any, mask: Any) -> Any:
        """One new token for each of ``b`` sequences: [b, heads * d].

        ``new_slots`` [b] receive the new K/V; ``slot_table`` [b, max_context] lists each
        sequence's slots (padded), ``mask`` [b, 1, 1, max_context] marks the real ones.
        """
        b = q.shape[0]
        layer.k_cache[new_slots] = k
        layer.v_cache[new_slots] = v
        keys = layer.k_cache[slot_table].transpose(1, 2)  # [b, kv_heads, ctx, d]
        values = layer.v_cache[slot_table].transpose(1, 2)
        out = self._sdpa(q.unsqueeze(2), keys, values, mask=mask)
        return out.reshape(b, -1)

    def attn_packed(self, q: Any, keys: Any, values: Any, mask: Any) -> Any:
        """All ``T`` packed queries against all packed keys of a step under an additive mask [T, KV]: [T, heads * d].

        The layout of attention that takes no per-sequence lengths (transformers'
        ``paged|sdpa``): its cost grows with T x KV whatever the sequences are.
        """
        group = self.num_heads // self.num_kv_heads
        # such implementations copy K/V out to every query head first (no GQA-aware kernel)
        qh = q.transpose(0, 1).unsqueeze(0)
        kh = keys.transpose(0, 1).repeat_interleave(group, dim=0).unsqueeze(0)
        vh = values.transpose(0, 1).repeat_interleave(group, dim=0).unsqueeze(0)
        out = self.F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, scale=self.scale)
        return out[0].transpose(0, 1).reshape(q.shape[0], -1)

    def decode_inputs(self, block_tables: list[list[int]], context_lens: list[int]) -> tuple[Any, Any, Any]:
        """(new_slots, slot_table, mask) for decode sequences whose newest token is at context_len - 1.

        Only the block tables cross from Python; slots are expanded on the device.
        """
        torch, bs = self.torch, self.block_size
        width_blocks = max(len(t) for t in block_tables)
        padded = [t + [0] * (width_blocks - len(t)) for t in block_tables]
        tables = self.tensor([b for row in padded for b in row]).view(len(padded), width_blocks)
        offsets = torch.arange(bs, device=tables.device)
        slot_table = (tables[:, :, None] * bs + offsets).reshape(len(padded), width_blocks * bs)
        lens = self.tensor(context_lens)
        positions = torch.arange(width_blocks * bs, device=tables.device)[None, :]
        visible = positions < lens[:, None]
        slot_table = slot_table.masked_fill(~visible, 0)
        new_slots = slot_table.gather(1, (lens - 1)[:, None])[:, 0]
        return new_slots, slot_table, visible[:, None, None, :]

    def chunk_slots(self, block_table: list[int], num_tokens: int) -> Any:
        """Cache slots of positions 0 .. num_tokens - 1 of a sequence with ``block_table``."""
        blocks = self.tensor(block_table[: ceil_div(num_tokens, self.block_size)])
        offsets = self.torch.arange(self.block_size, device=blocks.device)
        return (blocks[:, None] * self.block_size + offsets).reshape(-1)[:num_tokens]

    def o_proj(self, x: Any, layer: Layer) -> Any:
        return self.F.linear(x, layer.w_o)

    def mlp_gate_up(self, x: Any, layer: Layer) -> Any:
        return self.F.linear(x, layer.w_gate_up)

    def mlp_act(self, x: Any) -> Any:
        if not self.spec.gated_mlp:
            return self.F.gelu(x)
        gate, up = x.chunk(2, dim=-1)
        return self.F.silu(gate) * up

    def mlp_down(self, x: Any, layer: Layer) -> Any:
        return self.F.linear(x, layer.w_down)

    def lm_head(self, x: Any, weight: Any = None) -> Any:
        """Greedy next tokens [rows] for hidden states [rows, hidden] (final norm included)."""
        w = self.lm_head_w if weight is None else weight
        logits = self.F.linear(self.rms_norm(x, self.final_norm), w)
        return logits.argmax(dim=-1)
