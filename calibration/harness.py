"""``calibrate()``: measure every op of the cost model on a device and write a profile.

1. Check the model fits in the device's free memory (ValueError otherwise).
2. Build one decoder layer (plus embedding and LM head) at the model's real shapes with
   random weights, over a paged KV cache large enough for the grid, and time each op at
   every grid point and held-out point (``calibration.timing``).
3. Build the whole model and run real engine steps (``BuiltinEngine``): their wall time
   minus the ops' interpolated time is the fixed per-step overhead, fitted as
   ``step_s + per_seq_s x sequences``; the activation peak of the largest step and the
   weights' bytes give the memory besides the KV cache.
4. Measure the device's peak matmul rate and copy bandwidths (the fallback roofline's
   hardware), choose per op the interpolation space that reproduces the held-out points
   best, and record the fit errors.

``calibrate_with_tables`` also times the bare GEMMs of the QKV projection and the LM head (the
profile's ops include the rotary embedding, and the final norm and argmax) and returns every linear
layer's GEMM series for ``calibration.tables`` (the table set the ``silicon`` model reads).
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.optimize import nnls

from calibration import HARNESS_VERSION
from calibration.device import (
    DTYPE_BYTES,
    Device,
    free_memory_bytes,
    import_torch,
    last_level_cache_bytes,
    peak_rss_bytes,
    reset_peak_rss,
    resolve_device,
    rss_bytes,
    total_memory_bytes,
    versions,
)
from calibration.engine import BuiltinEngine, StepRecord, make_requests
from calibration.grid import grid_spec, held_out_pairs, held_out_values
from calibration.model import TorchModel, check_buildable
from calibration.quality import NOISE_BOUND, LoadMeter, assess, measure_points
from calibration.tables import GEMM_OPS, GemmSeries, gemm_shapes
from calibration.timing import CpuTimer, CudaTimer, Timing, make_timer
from policies.batching.hf_fifo import HfFifoParams, HfFifoPolicy
from simulator.config.specs import HardwareSpec, ModelSpec
from simulator.cost.profile import (
    COUNT_OPS,
    MODEL_SCOPE_OPS,
    OP_AXES,
    PROFILE_SCHEMA_VERSION,
    CalibrationProfile,
    DeviceInfo,
    GridSpec,
    MemoryProfile,
    OpFitError,
    OpTable,
    ProfilePoint,
    ProfileQuality,
    StepOverhead,
)
from simulator.cost.profiled import ProfiledCostModel, ProfiledParams, interpolator
from simulator.kv.pool import ceil_div

BLOCK_SIZE = 16
PASSES = 3  # interleaved passes over each op's grid
ProgressFn = Callable[[int, int], None]


def spec_for_dtype(spec: ModelSpec, dtype: str) -> ModelSpec:
    """``spec`` with weight and KV bytes of ``dtype`` (the model as it is measured: unquantized)."""
    nbytes = DTYPE_BYTES[dtype]
    return ModelSpec.model_validate(
        spec.model_dump() | {"weight_bytes": nbytes, "kv_cache_bytes": nbytes, "quantization": None}
    )


# -- the grid of op measurements ------------------------------------------------------------


def _op_points(grid: GridSpec) -> dict[str, tuple[list[tuple[int, ...]], list[tuple[int, ...]]]]:
    """Per op: (grid points, held-out points)."""
    out: dict[str, tuple[list[tuple[int, ...]], list[tuple[int, ...]]]] = {}
    tokens = [(t,) for t in grid.num_tokens]
    tokens_held = [(t,) for t in held_out_values(grid.num_tokens)]
    for op in COUNT_OPS:
        if op == "lm_head":
            out[op] = ([(s,) for s in grid.sampled_tokens], [(s,) for s in held_out_values(grid.sampled_tokens)])
        else:
            out[op] = (tokens, tokens_held)
    out["attn_prefill"] = (
        [(n, c) for n in grid.prefill_new_tokens for c in grid.prefill_cached_tokens],
        held_out_pairs(grid.prefill_new_tokens, grid.prefill_cached_tokens),
    )
    out["attn_packed"] = (
        [(t, kv) for t in grid.packed_tokens for kv in grid.packed_kv_tokens],
        held_out_pairs(grid.packed_tokens, grid.packed_kv_tokens),
    )
    out["attn_decode"] = (
        [(b, c) for b in grid.decode_seqs for c in grid.decode_context_tokens],
        held_out_pairs(grid.decode_seqs, grid.decode_context_tokens),
    )
    return out


def _cache_tokens(grid: GridSpec) -> int:
    decode = max(grid.decode_seqs) * (max(grid.decode_context_tokens) + BLOCK_SIZE)
    prefill = max(grid.prefill_new_tokens) + max(grid.prefill_cached_tokens) + BLOCK_SIZE
    return max(decode, prefill)


def rotation_copies(weight_bytes: float, cache_bytes: float, limit: int = 16) -> int:
    """Copies of a weight to cycle through so that each call reads it from memory, not from cache.

    In an engine a layer's weights come back only after every other layer has run, long
    evicted from the last-level cache; timing one op on the same weights again and again
    would serve them from cache. Cycling through copies worth twice the cache avoids that.
    """
    return max(1, min(limit, math.ceil(2 * cache_bytes / max(weight_bytes, 1.0))))


class _OpBench:
    """Builds the inputs of one op call at a grid point and returns the call to time.

    Per-layer ops cycle through ``model.layers`` (copies sharing one KV cache), model-scope
    ops through copies of the embedding and LM head, so weights come from memory.
    """

    def __init__(self, model: TorchModel, seed: int, cache_bytes: float) -> None:
        self.m = model
        self.rng = np.random.default_rng(seed)
        self._next_layer = itertools.cycle(model.layers).__next__
        vocab_bytes = model.spec.vocab_size * model.spec.hidden_size * model.embed_w.element_size()
        copies = rotation_copies(vocab_bytes, cache_bytes)
        self._next_embed = itertools.cycle(
            [model.embed_w] + [model._rand(*model.embed_w.shape) for _ in range(copies - 1)]
        ).__next__
        self._next_head = itertools.cycle(
            [model.lm_head_w] + [model._rand(*model.lm_head_w.shape) for _ in range(copies - 1)]
        ).__next__

    def _blocks(self, num_tokens: int) -> list[int]:
        """A random (scattered, like a used cache) block table for ``num_tokens`` tokens."""
        need = ceil_div(num_tokens, self.m.block_size)
        return self.rng.permutation(self.m.num_kv_blocks)[:need].tolist()

    def call(self, op: str, at: tuple[int, ...]) -> Callable[[], Any]:
        m, nxt = self.m, self._next_layer
        spec = m.spec
        if op == "attn_prefill":
            n, c = at
            q = m._rand(n, m.num_heads, m.head_dim, std=1.0)
            k = m._rand(n, m.num_kv_heads, m.head_dim, std=1.0)
            v = m._rand(n, m.num_kv_heads, m.head_dim, std=1.0)
            slots = m.chunk_slots(self._blocks(n + c), n + c)
            return lambda: m.attn_prefill(q, k, v, nxt(), slots, c)
        if op == "attn_decode":
            b, ctx = at
            tables = [self._blocks(ctx) for _ in range(b)]
            inputs = m.decode_inputs(tables, [ctx] * b)
            q = m._rand(b, m.num_heads, m.head_dim, std=1.0)
            k = m._rand(b, m.num_kv_heads, m.head_dim, std=1.0)
            v = m._rand(b, m.num_kv_heads, m.head_dim, std=1.0)
            return lambda: m.attn_decode(q, k, v, nxt(), *inputs)
        if op == "attn_packed":
            t, kv = at
            q = m._rand(t, m.num_heads, m.head_dim, std=1.0)
            keys = m._rand(kv, m.num_kv_heads, m.head_dim, std=1.0)
            values = m._rand(kv, m.num_kv_heads, m.head_dim, std=1.0)
            torch = m.torch
            rows = torch.arange(t, device=q.device)[:, None] + max(kv - t, 0)
            visible = torch.arange(kv, device=q.device)[None, :] <= rows
            mask = torch.zeros(t, kv, dtype=m.dtype, device=q.device).masked_fill(~visible, float("-inf"))
            return lambda: m.attn_packed(q, keys, values, mask)
        (t,) = at
        x = m.random_hidden(t)
        if op == "embed":
            ids = m.tensor(self.rng.integers(0, spec.vocab_size, size=t).tolist())
            return lambda: m.embed(ids, self._next_embed())
        if op == "lm_head":
            return lambda: m.lm_head(x, self._next_head())
        if op == "norm":
            delta = m.random_hidden(t)

            def norms() -> Any:
                layer = nxt()
                return m.add_norm(x, delta, layer.input_norm), m.add_norm(x, delta, layer.post_norm)

            return norms
        if op == "qkv_proj":
            cos, sin = m.rotary(m.tensor(list(range(t))))
            return lambda: m.qkv_proj(x, nxt(), cos, sin)
        if op == "o_proj":
            xa = m._rand(t, spec.q_size, std=1.0)
            return lambda: m.o_proj(xa, nxt())
        if op == "mlp_gate_up":
            return lambda: m.mlp_gate_up(x, nxt())
        if op == "mlp_act":
            up = 2 if spec.gated_mlp else 1
            g = m._rand(t, up * spec.intermediate_size, std=1.0)
            return lambda: m.mlp_act(g)
        if op == "mlp_down":
            xi = m._rand(t, spec.intermediate_size, std=1.0)
            return lambda: m.mlp_down(xi, nxt())
        raise AssertionError(f"no benchmark for op {op!r}")

    def bare_gemm(self, op: str, num_tokens: int) -> Callable[[], Any]:
        """The bare GEMM of ``qkv_proj`` (no bias, no rotary) or ``lm_head`` (no norm, no argmax)."""
        m = self.m
        x, linear = m.random_hidden(num_tokens), m.F.linear
        if op == "qkv_proj":
            nxt = self._next_layer
            return lambda: linear(x, nxt().w_qkv)
        if op == "lm_head":
            return lambda: linear(x, self._next_head())
        raise AssertionError(f"{op!r} is timed as the profile's op")


def _point(at: tuple[int, ...], t: Timing, noisy: bool = False) -> ProfilePoint:
    return ProfilePoint(
        at=at,
        median_s=max(t.median_s, 1e-9),
        iqr_s=t.iqr_s,
        num_repeats=t.num_repeats,
        kernel_s=t.kernel_s,
        noisy=noisy,
    )


# -- fits -----------------------------------------------------------------------------------


def _rel_errors(table: OpTable, space: str, points: list[ProfilePoint]) -> list[float]:
    f = interpolator(table, space)  # type: ignore[arg-type]
    errors = []
    for p in points:
        predicted = f(p.at)
        if predicted is not None:
            errors.append(abs(predicted - p.median_s) / p.median_s)
    return errors


def fit_tables(
    tables: dict[str, OpTable], held_out: dict[str, tuple[ProfilePoint, ...]]
) -> tuple[dict[str, OpTable], dict[str, OpFitError]]:
    """Choose each op's interpolation space by its held-out error; return the tables and their fit errors."""
    chosen: dict[str, OpTable] = {}
    fits: dict[str, OpFitError] = {}
    for name, table in tables.items():
        held = list(held_out.get(name, ()))
        best_space, best = "log", None
        for space in ("log", "linear"):
            errors = _rel_errors(table, space, held)
            if errors and (best is None or np.mean(errors) < np.mean(best)):
                best_space, best = space, errors
        table = OpTable.model_validate(table.model_dump() | {"space": best_space})
        chosen[name] = table
        grid_errors = _rel_errors(table, best_space, list(table.points))
        fits[name] = OpFitError(
            grid_max_rel_error=max(grid_errors),
            held_out_mean_rel_error=float(np.mean(best)) if best else None,
            held_out_max_rel_error=float(np.max(best)) if best else None,
            num_held_out=len(best or []),
        )
    return chosen, fits


def fit_overhead(cost: ProfiledCostModel, steps: list[StepRecord]) -> tuple[float, float, list[float], list[float]]:
    """Least-squares ``step_s + per_seq_s x seqs`` (both >= 0) for measured minus predicted op time.

    ``cost`` must carry no overhead of its own. Returns (step_s, per_seq_s, measured, predicted ops).
    """
    measured = np.array([s.end_s - s.start_s for s in steps])
    predicted = np.array([cost.step_time(s.shape()).total_s for s in steps])
    seqs = np.array([s.shape().num_seqs for s in steps], dtype=float)
    (a, b), _ = nnls(np.column_stack([np.ones_like(seqs), seqs]), measured - predicted)
    return float(a), float(b), measured.tolist(), predicted.tolist()


# -- device figures -------------------------------------------------------------------------


def measure_hardware(device: Device, name: str, memory_bytes: float) -> HardwareSpec:
    """Peak matmul rate, copy bandwidth and host-link figures measured on ``device``.

    One device cannot measure a peer link: the interconnect is recorded as the host link.
    """
    torch = import_torch()
    timer = make_timer(device, quick=True)
    n = 4096 if device.is_cuda else 1024
    dt_mm = torch.bfloat16 if device.is_cuda else torch.float32
    a = torch.randn(n, n, device=device.torch_device, dtype=dt_mm)
    b = torch.randn(n, n, device=device.torch_device, dtype=dt_mm)
    flops = 2 * n**3 / timer.time(lambda: a @ b).median_s
    elems = (256 if device.is_cuda else 32) * 2**20 // 4
    src = torch.randn(elems, device=device.torch_device)
    bw = 2 * src.numel() * 4 / timer.time(src.clone).median_s
    if device.is_cuda:
        host = torch.randn(elems, pin_memory=True)
        link_bw = host.numel() * 4 / timer.time(lambda: host.to(device.torch_device, non_blocking=False)).median_s
        tiny = torch.randn(16, pin_memory=True)
        link_lat = timer.time(lambda: tiny.to(device.torch_device)).median_s
    else:
        link_bw, link_lat = bw / 2, timer.time(lambda: src[:16].clone()).median_s
    return HardwareSpec(
        name=name,
        flops_per_s=flops,
        memory_bytes=memory_bytes,
        memory_bandwidth_bytes_per_s=bw,
        interconnect_bandwidth_bytes_per_s=link_bw,
        interconnect_latency_s=link_lat,
        host_link_bandwidth_bytes_per_s=link_bw,
        host_link_latency_s=link_lat,
    )


def check_fits(spec: ModelSpec, device: Device, extra_bytes: float) -> None:
    """ValueError when the weights plus ``extra_bytes`` do not fit in the device's free memory."""
    need = spec.weight_bytes_total() + extra_bytes
    free = free_memory_bytes(device)
    if need > 0.95 * free:
        gib = 2**30
        raise ValueError(
            f"{spec.name} does not fit on {device.name}: its weights take {spec.weight_bytes_total() / gib:.1f} GiB "
            f"and calibration needs {extra_bytes / gib:.1f} GiB more, but only {free / gib:.1f} GiB are free; "
            "use a smaller dtype, a smaller model or a device with more memory"
        )


# -- the whole calibration ------------------------------------------------------------------


MIN_CONTEXT_TOKENS = 8  # the overhead runs need a prompt and two output tokens (a decode step after the prefill)


def _overhead_runs(grid: GridSpec, max_context_tokens: int) -> list[tuple[int, int, int]]:
    """(sequences, prompt tokens, output tokens) of the engine runs that measure the step overhead,
    within the model's maximum context (ValueError naming it when that is too short)."""
    if max_context_tokens < MIN_CONTEXT_TOKENS:
        raise ValueError(
            f"the model's maximum context ({max_context_tokens} tokens, config.json max_position_embeddings) "
            f"is too short to time engine steps: calibration needs at least {MIN_CONTEXT_TOKENS}"
        )
    seqs = sorted({1, *(b for b in grid.decode_seqs if b <= 64)})
    picks = sorted({seqs[0], seqs[len(seqs) // 2], seqs[-1]})
    output = min(12, max_context_tokens // 4)
    prompt = min(64, max(grid.prefill_new_tokens), max_context_tokens - output)
    return [(b, prompt, output) for b in picks]


BARE_GEMM_OPS = ("qkv_proj", "lm_head")  # GEMM ops whose profile op does more than the GEMM


def calibrate(
    spec: ModelSpec,
    device_kind: str,
    dtype: str,
    grid_name: str = "quick",
    num_threads: int | None = None,
    progress: ProgressFn | None = None,
    seed: int = 0,
    timer: CpuTimer | CudaTimer | None = None,
) -> CalibrationProfile:
    """Measure ``spec`` on the device and return its profile (see the module docstring).

    ``timer`` replaces the device's op timer (tests inject noise with it).
    """
    return _calibrate(spec, device_kind, dtype, grid_name, num_threads, progress, seed, timer, bare_gemms=False)[0]


def calibrate_with_tables(
    spec: ModelSpec,
    device_kind: str,
    dtype: str,
    grid_name: str = "quick",
    num_threads: int | None = None,
    progress: ProgressFn | None = None,
    seed: int = 0,
    timer: CpuTimer | CudaTimer | None = None,
) -> tuple[CalibrationProfile, tuple[GemmSeries, ...]]:
    """``calibrate``, and every linear layer's GEMM times at the grid's token counts (for
    ``calibration.tables.write_table_set``)."""
    return _calibrate(spec, device_kind, dtype, grid_name, num_threads, progress, seed, timer, bare_gemms=True)


def _calibrate(
    spec: ModelSpec,
    device_kind: str,
    dtype: str,
    grid_name: str,
    num_threads: int | None,
    progress: ProgressFn | None,
    seed: int,
    timer: CpuTimer | CudaTimer | None,
    bare_gemms: bool,
) -> tuple[CalibrationProfile, tuple[GemmSeries, ...]]:
    check_buildable(spec)  # before the device and memory checks: what no device would change
    torch = import_torch()
    device = resolve_device(device_kind, num_threads)
    torch.manual_seed(seed)
    run_spec = spec_for_dtype(spec, dtype)
    grid = grid_spec(grid_name, device.kind, run_spec.max_context_tokens)
    dsize = DTYPE_BYTES[dtype]
    # memory the runtime holds before anything of ours exists (CUDA context, torch itself on a CPU)
    if device.is_cuda:
        torch.cuda.init()
        free, total = torch.cuda.mem_get_info(device.torch_device)
        runtime_bytes = float(total - free)
    else:
        runtime_bytes = rss_bytes()
    cache_tokens = _cache_tokens(grid)
    layer_bytes = (run_spec.attention_params_per_layer() + run_spec.mlp_params_per_layer()) * dsize
    kv_bytes = 2 * cache_tokens * run_spec.kv_size * dsize
    act_tokens = max(grid.num_tokens)
    act_bytes = act_tokens * (4 * run_spec.hidden_size + 3 * run_spec.intermediate_size) * dsize * 4
    cache_bytes = last_level_cache_bytes(device)
    copies = rotation_copies(run_spec.q_size * run_spec.hidden_size * dsize, cache_bytes)
    vocab_bytes = run_spec.vocab_size * run_spec.hidden_size * dsize
    vocab_copies = rotation_copies(vocab_bytes, cache_bytes)
    # the one-layer op model (its weight copies, KV cache, the embedding and LM head copies) on top of
    # the whole model's weights: a bound, since the op model is freed before the whole model is built
    logits_bytes = act_tokens * run_spec.vocab_size * dsize if bare_gemms else 0.0  # the bare LM head at every m
    check_fits(
        run_spec,
        device,
        copies * layer_bytes + kv_bytes + act_bytes + 2 * vocab_copies * vocab_bytes + logits_bytes,
    )

    if timer is None:
        timer = make_timer(device, quick=grid_name == "quick", passes=PASSES)
    points = _op_points(grid)
    overhead_runs = _overhead_runs(grid, run_spec.max_context_tokens)
    bare_ops = BARE_GEMM_OPS if bare_gemms else ()
    total_work = PASSES * sum(len(g) + len(h) for g, h in points.values()) + len(overhead_runs) + 2
    total_work += PASSES * len(grid.num_tokens) * len(bare_ops)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total_work)

    # 2. the ops, on one layer
    op_model = TorchModel(
        run_spec, device, dtype, ceil_div(cache_tokens, BLOCK_SIZE), BLOCK_SIZE, copies, seed, share_kv_cache=True
    )
    bench = _OpBench(op_model, seed, cache_bytes)
    tables: dict[str, OpTable] = {}
    held_out: dict[str, tuple[ProfilePoint, ...]] = {}
    noisy_points: list[str] = []
    num_points = 0
    load = LoadMeter().start()
    with torch.inference_mode():
        for op, (grid_points, held_points) in points.items():
            calls = {at: bench.call(op, at) for at in [*grid_points, *held_points]}
            # interleaved passes (see timing.pooled), noisy points measured again (see calibration.quality)
            timings, noisy = measure_points(calls, timer.time, PASSES, tick)
            del calls
            noisy_points += [f"{op}@{','.join(map(str, at))}" for at in sorted(noisy)]
            num_points += len(timings)
            measured = [_point(at, timings[at], at in noisy) for at in grid_points]
            scope = "model" if op in MODEL_SCOPE_OPS else "layer"
            tables[op] = OpTable(axes=OP_AXES[op], scope=scope, points=tuple(measured))
            held_out[op] = tuple(_point(at, timings[at], at in noisy) for at in held_points)
        bare_points: dict[str, tuple[ProfilePoint, ...]] = {}
        for op in bare_ops:
            calls = {(t,): bench.bare_gemm(op, t) for t in grid.num_tokens}
            timings, noisy = measure_points(calls, timer.time, PASSES, tick)
            del calls
            bare_points[op] = tuple(_point(at, timings[at], at in noisy) for at in sorted(timings))
    del op_model, bench
    if device.is_cuda:
        torch.cuda.empty_cache()
    tables, fits = fit_tables(tables, held_out)

    # 3. the whole model: weights, activation peak, per-step overhead of real engine steps
    loop_tokens = max(b * (p + o + BLOCK_SIZE) for b, p, o in overhead_runs)
    num_blocks = ceil_div(max(loop_tokens, act_tokens + BLOCK_SIZE), BLOCK_SIZE)
    with torch.inference_mode():
        full = TorchModel(run_spec, device, dtype, num_blocks, BLOCK_SIZE, seed=seed + 1)
        weight_bytes = float(full.weight_bytes())
        activation_bytes = _activation_peak(full, device, act_tokens)
        tick()
        steps: list[StepRecord] = []
        for b, prompt, output in overhead_runs:
            policy = HfFifoPolicy(HfFifoParams(max_num_seqs=b, max_num_batched_tokens=max(b * prompt, b)))
            engine = BuiltinEngine(full, policy, run_spec.max_context_tokens)
            engine.run(make_requests([0.0] * b, [prompt] * b, [output] * b, run_spec.vocab_size, seed))
            steps += engine.steps[1:]  # the first step of a run pays one-off costs (allocator, caches)
            tick()
    memory_total = total_memory_bytes(device)
    hardware = measure_hardware(device, device.name, memory_total)
    tick()

    torch_version, cuda_version = versions()
    draft = CalibrationProfile(
        schema_version=PROFILE_SCHEMA_VERSION,
        harness_version=HARNESS_VERSION,
        created_utc=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        device=DeviceInfo(
            kind=device.kind,
            name=device.name,
            num_threads=device.num_threads,
            torch_version=torch_version,
            cuda_version=cuda_version,
            timer=timer.label,
        ),
        dtype=dtype,  # type: ignore[arg-type]
        model=run_spec,
        hardware=hardware,
        grid=grid,
        ops=tables,
        held_out=held_out,
        overhead=StepOverhead(step_s=0.0, per_seq_s=0.0, num_steps=max(1, len(steps))),
        memory=MemoryProfile(
            device_memory_bytes=memory_total,
            weight_bytes=weight_bytes,
            activation_peak_bytes=activation_bytes,
            activation_tokens=act_tokens,
            runtime_bytes=runtime_bytes,
        ),
        fit=fits,
    )
    bare = ProfiledCostModel(
        ProfiledParams(step_overhead_s=0.0, per_seq_overhead_s=0.0), run_spec, hardware, 1, profile=draft
    )
    step_s, per_seq_s, measured, predicted_ops = fit_overhead(bare, steps)
    seqs = [s.shape().num_seqs for s in steps]
    step_errors = [
        abs(p + step_s + per_seq_s * n - m) / m for m, p, n in zip(measured, predicted_ops, seqs, strict=True)
    ]
    other_cores = load.other_cores()
    quality = ProfileQuality(
        noise_bound=NOISE_BOUND,
        num_points=num_points,
        num_noisy_points=len(noisy_points),
        other_cores=other_cores,
        warnings=tuple(
            assess(num_points, noisy_points, {op: f.held_out_mean_rel_error for op, f in fits.items()}, other_cores)
        ),
    )
    profile = CalibrationProfile.model_validate(
        draft.model_dump()
        | {
            "overhead": StepOverhead(step_s=step_s, per_seq_s=per_seq_s, num_steps=len(steps)).model_dump(),
            "step_fit_mean_rel_error": float(np.mean(step_errors)) if step_errors else None,
            "quality": quality.model_dump(),
        }
    )
    shapes = gemm_shapes(run_spec)
    gemms = tuple(GemmSeries(op, *shapes[op], bare_points.get(op, tables[op].points)) for op in GEMM_OPS if bare_gemms)
    return profile, gemms


def _activation_peak(model: TorchModel, device: Device, num_tokens: int) -> float:
    """Extra memory at the peak of one prefill step of ``num_tokens`` tokens through the whole model."""
    torch = import_torch()
    policy = HfFifoPolicy(HfFifoParams(max_num_seqs=1, max_num_batched_tokens=num_tokens))
    engine = BuiltinEngine(model, policy, model.spec.max_context_tokens)
    (req,) = make_requests([0.0], [num_tokens], [1], model.spec.vocab_size)
    engine.submit(req, 0.0)
    if device.is_cuda:
        device.synchronize()
        torch.cuda.reset_peak_memory_stats(device.torch_device)
        before = torch.cuda.memory_allocated(device.torch_device)
        engine.step(time.perf_counter)
        device.synchronize()
        return float(torch.cuda.max_memory_allocated(device.torch_device) - before)
    reset_peak_rss()
    before = rss_bytes()
    engine.step(time.perf_counter)
    return max(0.0, peak_rss_bytes() - before)
