"""The step-time fast paths equal the plain computation, float for float: ``step_time`` (memoized parts, no op
objects) against ``breakdown`` (every op priced and summed by ``_total``) and against a fresh model pricing each
shape alone, and ``decode_step_times`` (the windows' steps at once) against ``step_time``; with the same lookups and
fallbacks counted, in the same order. Roofline and silicon models; dense, MoE, MLA, DSA and Gated DeltaNet; tp, ep,
pp, eager."""

from __future__ import annotations

import random

import pytest

from simulator.config.presets import resolve_hardware, resolve_model
from simulator.cost import BatchShape
from simulator.cost.roofline import RooflineCostModel, RooflineParams
from simulator.cost.silicon import SiliconCostModel, SiliconParams

LLAMA_8B = resolve_model("llama-3.1-8b")
LLAMA_70B = resolve_model("llama-3.1-70b")
QWEN_MOE = resolve_model("Qwen/Qwen3-30B-A3B")
DSV3 = resolve_model("deepseek-ai/DeepSeek-V3")
GLM5 = resolve_model("zai-org/GLM-5")
QWEN35 = resolve_model("Qwen/Qwen3.5-397B-A17B")  # Gated DeltaNet layers beside full attention
H100, H200, B200 = (resolve_hardware(name) for name in ("h100-sxm", "h200", "b200"))
OVERLAP = RooflineParams(cpu_overlap=True)
EAGER = RooflineParams(cpu_overlap=True, eager_host_s_per_layer=1e-4)

# (label, cost model kind, model, hardware, tp, pp, ep, roofline params)
CASES = [
    ("llama-8b h100", "silicon", LLAMA_8B, H100, 1, 1, 1, OVERLAP),
    ("llama-8b h100 serial", "silicon", LLAMA_8B, H100, 1, 1, 1, RooflineParams()),
    ("llama-70b h200 tp4", "silicon", LLAMA_70B, H200, 4, 1, 1, OVERLAP),
    ("llama-70b h200 tp2 pp2", "silicon", LLAMA_70B, H200, 2, 2, 1, OVERLAP),
    ("qwen-moe h200 tp4 ep4", "silicon", QWEN_MOE, H200, 4, 1, 4, OVERLAP),
    ("dsv3 h200 tp8 eager", "silicon", DSV3, H200, 8, 1, 1, EAGER),
    ("glm5 b200 tp8", "silicon", GLM5, B200, 8, 1, 1, OVERLAP),
    ("qwen3.5 b200 tp8", "silicon", QWEN35, B200, 8, 1, 1, OVERLAP),
    ("qwen3.5 h100 tp8 ep8 serial", "silicon", QWEN35, H100, 8, 1, 8, RooflineParams()),
    ("llama-8b roofline", "roofline", LLAMA_8B, H100, 1, 1, 1, OVERLAP),
    ("qwen-moe roofline ep4", "roofline", QWEN_MOE, H200, 4, 1, 4, RooflineParams()),
    ("dsv3 roofline eager", "roofline", DSV3, H200, 8, 1, 1, EAGER),
    ("glm5 roofline", "roofline", GLM5, B200, 8, 1, 1, OVERLAP),
    ("qwen3.5 roofline tp4", "roofline", QWEN35, H200, 4, 1, 1, OVERLAP),
]


def make(kind, model, hardware, tp, pp, ep, roofline):
    if kind == "silicon":
        return SiliconCostModel(SiliconParams(roofline=roofline), model, hardware, tp, pp, ep)
    return RooflineCostModel(roofline, model, hardware, tp, pp, ep)


def shapes(seed: int, count: int) -> list[BatchShape]:
    """Mixed, prefill-only and decode-only steps, with rows and chunks that repeat and decode totals that do not."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        chunks = rng.choice([0, 1, 1, 1, 2, 3])
        new = tuple(rng.choice([1, 7, 64, 500, 2048, rng.randint(1, 8192)]) for _ in range(chunks))
        cached = tuple(rng.choice([0, 0, 16, rng.randint(0, 20000)]) for _ in range(chunks))
        decode = rng.choice([0, 1, 3, 8, 32, rng.randint(1, 600)]) if chunks else rng.randint(1, 600)
        context = decode * rng.randint(1, 6000) + rng.randint(0, decode)
        sampled = decode + sum(rng.random() < 0.7 for _ in new)
        out.append(BatchShape(new, cached, decode, context, sampled))
    return out


def counts(model):
    return (model.num_lookups, list(model.fallbacks.items())) if isinstance(model, SiliconCostModel) else None


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_step_time_equals_the_sum_of_the_breakdown_and_a_fresh_models(case):
    _, *spec = case
    fast, plain = make(*spec), make(*spec)
    steps = list(dict.fromkeys(shapes(sum(map(ord, case[0])), 300)))
    for i, shape in enumerate(steps):
        step = fast.step_time(shape)
        reference = plain.breakdown(shape)
        assert step.total_s == reference.total_s, shape
        assert step.stage_s == reference.stage_s, shape
        if i % 30 == 0:
            assert step.total_s == make(*spec).step_time(shape).total_s, shape
    assert counts(fast) == counts(plain)  # every shape differs: each is priced once, and counted
    again = make(*spec)  # the shapes in another order: the parts are remembered by other steps first
    for shape in reversed(steps):
        assert again.step_time(shape).total_s == fast.step_time(shape).total_s, shape


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_decode_step_times_equal_step_time_of_each_step(case):
    _, *spec = case
    windows, single, plain = make(*spec), make(*spec), make(*spec)
    rng = random.Random(7)
    num_steps = 0
    for n in (1, 2, 3, 8, 16, 17, 100, 255, 256, 600):
        start = n * rng.choice([1, 20, 900, 3000, 20000, 200000])
        for count in (1, 5, 40):
            contexts = [start + n * k + count for k in range(count)]
            if count == 40:
                rng.shuffle(contexts)  # not growing: the segment walk goes both ways
            got = windows.decode_step_times(n, contexts)
            shapes = [BatchShape(num_decode_seqs=n, decode_context_tokens=c, num_sampled_tokens=n) for c in contexts]
            assert got == [single.step_time(shape).total_s for shape in shapes], (n, contexts)
            assert got == [plain.breakdown(shape).total_s for shape in shapes], (n, contexts)
            num_steps += count
    if isinstance(windows, SiliconCostModel):  # decode attention counted once a step, as step_time counts it
        assert windows.num_lookups == num_steps
        assert windows.fallbacks["attn_decode"] == plain.fallbacks["attn_decode"]
