"""`servesim explain`: the prefill / decode / KV-cache arithmetic, then what the simulator predicts.

The first part reproduces the course material this project grew from, exactly: a toy
attention whose cost is 2 x n^2 x d_model FLOPs with d_model = 64. The second part runs
the real simulator (cost model, SimPy replica) on one request for a chosen model and GPU,
with a KV cache (``vllm``) and without (``no_kv_cache``).
"""

from __future__ import annotations

import argparse

from rich.table import Table

from servesim import display

D_MODEL = 64
PROMPTS = (50, 100, 200, 400, 800)
COURSE_PROMPT, COURSE_OUTPUT = 100, 50


def attention_flops(n: int, d_model: int = D_MODEL) -> int:
    """Attention FLOPs of a full pass over n tokens, as the course counts them: 2 n^2 d."""
    return 2 * n * n * d_model


def generation_flops(prompt: int, output: int, d_model: int = D_MODEL) -> tuple[int, int]:
    """(without, with) a KV cache: step t (1..output) works on a sequence of prompt + t tokens.

    Without a cache each step recomputes attention over the whole sequence (2 L^2 d); with
    one, only the new token attends to the L cached ones (2 L d).
    """
    lengths = range(prompt + 1, prompt + output + 1)
    return sum(2 * L * L * d_model for L in lengths), sum(2 * L * d_model for L in lengths)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain",
        help="the prefill/decode/KV-cache arithmetic, and the simulator's prediction for it",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("--model", default="llama-3.1-8b", help="model preset for the simulated part")
    p.add_argument("--hardware", default="h100-sxm", help="hardware preset for the simulated part")
    p.add_argument("--prompt-tokens", type=int, default=COURSE_PROMPT)
    p.add_argument("--output-tokens", type=int, default=COURSE_OUTPUT)
    p.set_defaults(func=main)


def _simulate(model: str, hardware: str, policy: str, prompt: int, output: int):
    import numpy as np

    from simulator.build import build
    from simulator.config.scenario import validate_scenario
    from workloads import RequestStream

    cfg = validate_scenario({"model": model, "hardware": hardware, "policy": {"kind": policy}})
    stream = RequestStream(np.array([0.0]), np.array([prompt]), np.array([output]))
    return build(cfg, stream=stream).run()


def main(args: argparse.Namespace) -> int:
    from simulator.build import build
    from simulator.config.scenario import validate_scenario
    from simulator.config.specs import ModelSpec

    if args.prompt_tokens < 1 or args.output_tokens < 1:
        raise ValueError("--prompt-tokens and --output-tokens must be at least 1")
    out = display.stdout
    out.print(f"[bold]1. Prefill is quadratic[/bold]: attention FLOPs = 2 x n^2 x d_model, d_model = {D_MODEL}")
    t = Table(show_header=True)
    t.add_column("prompt tokens", justify="right")
    t.add_column("attention FLOPs", justify="right")
    for n in PROMPTS:
        t.add_row(str(n), f"{attention_flops(n):,}")
    out.print(t)
    out.print(
        f"Doubling the prompt 400 -> 800 multiplies the cost by {attention_flops(800) / attention_flops(400):.1f}x.\n"
    )

    without, with_cache = generation_flops(COURSE_PROMPT, COURSE_OUTPUT)
    out.print(
        f"[bold]2. Decode with and without a KV cache[/bold]: a {COURSE_PROMPT}-token prompt "
        f"generating {COURSE_OUTPUT} tokens"
    )
    out.print(f"  without a cache, each step recomputes the whole sequence (2 x len^2 x d): {without:,} FLOPs")
    out.print(f"  with a cache, each step computes one token against the cache (2 x len x d): {with_cache:,} FLOPs")
    out.print(f"  reduction: {without / with_cache:.1f}x\n")

    cfg = validate_scenario({"model": args.model, "hardware": args.hardware})
    sim = build(cfg)
    model_name = sim.resolved_config["model"]["name"]
    spec = ModelSpec.model_validate(sim.resolved_config["model"])
    per_token = spec.kv_bytes_per_token()  # MLA's latent; a hybrid model's full-attention layers only
    kv = sim.engines[0].kv
    window = ""
    if spec.is_mla:
        formula = "layers x (latent + rotary key) x bytes"
    elif spec.num_linear_layers:
        formula = f"2 x {spec.num_full_attention_layers} full-attention layers x kv_heads x head_dim x bytes"
    elif kv.windows:  # vLLM V1 keeps a sliding-window layer's keys for the window only
        full = spec.num_layers - spec.num_sliding_layers
        formula = f"2 x {full} full-attention layers x kv_heads x head_dim x bytes"
        per_token = spec.kv_bytes_per_token_per_gpu(1, windowed=True)
        window = (
            f" and, for each sequence, its {spec.num_sliding_layers} sliding-window layers' newest "
            f"{spec.sliding_window:,} tokens ({kv.window.per_seq:,} blocks)"
        )
    else:
        formula = "2 x layers x kv_heads x head_dim x bytes"
    blocks = kv.num_total_blocks
    tokens = blocks * kv.block_size
    out.print(
        f"[bold]3. The KV cache costs memory[/bold]: {model_name} stores {formula} "
        f"= {per_token:,.0f} bytes per token{window}; on {sim.resolved_config['hardware']['name']} "
        f"the cache holds {blocks:,} blocks = {tokens:,} tokens{' of its full layers' if window else ''}.\n"
    )

    out.print(
        f"[bold]4. What servesim predicts[/bold] for one request of {args.prompt_tokens} prompt and "
        f"{args.output_tokens} output tokens, {model_name} on {sim.resolved_config['hardware']['name']}:"
    )
    table = Table()
    for col in ("", "TTFT (ms)", "TPOT (ms)", "end-to-end (ms)", "steps"):
        table.add_column(col, justify="left" if not col else "right")
    e2e = {}
    for label, policy in (("with KV cache (vllm)", "vllm"), ("without KV cache (no_kv_cache)", "no_kv_cache")):
        s = _simulate(args.model, args.hardware, policy, args.prompt_tokens, args.output_tokens).summary
        e2e[policy] = s["mean_e2el_ms"]
        tpot = s["mean_tpot_ms"]
        table.add_row(
            label,
            f"{s['mean_ttft_ms']:.2f}",
            "-" if tpot is None else f"{tpot:.3f}",
            f"{s['mean_e2el_ms']:.2f}",
            str(s["num_steps"]),
        )
    out.print(table)
    out.print(
        f"Without the cache the request takes {e2e['no_kv_cache'] / e2e['vllm']:.2f}x as long: at this size "
        "decode steps are bound by reading the weights, so recomputation costs little until the "
        "sequence grows; the FLOP ratio above is the asymptote."
    )
    return 0
