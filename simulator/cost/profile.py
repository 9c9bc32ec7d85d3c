"""The calibration profile: what ``servesim calibrate`` measured, in the format the simulator reads.

A profile holds, for one model on one device and dtype, the measured time of every op of
the cost model's decomposition (``OP_NAMES``) over a grid of shapes, the fixed per-step
overhead of a real decode loop, and the device memory used besides the KV cache. It is
plain JSON validated by the pydantic models below (frozen, ``extra="forbid"``), versioned
by ``schema_version``: a reader refuses a version it does not know instead of guessing.

Version 2 added, all optional so that version-1 files still load unchanged: each point's
``noisy`` flag (its spread stayed above ``NOISE_REL_SPREAD`` after the harness's repeats),
``quality`` (the noise bound, the machine's load from other processes during the
measurement), ``engine`` (a whole-step fit of a real engine: op-time scale and per-step,
per-sequence, per-token and per-key overheads, with its held-out error, the engine and its
version) and ``calibration_wall_s``. ``quality_warnings`` turns a profile into the warning
lines that ``calibrate`` prints and ``run``/``validate`` repeat.

Op tables are rectilinear grids: every combination of the axis values is measured once.
Times are per decoder layer for ``scope == "layer"`` ops (the cost model multiplies by
the layer count) and per step for ``scope == "model"`` ops (embedding, LM head).
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from simulator.cost.shape import OP_NAMES
from simulator.files import read_text
from simulator.specs import HardwareSpec, ModelSpec
from simulator.validation import format_validation_error

PROFILE_SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)

# -- when a profile is not to be trusted (see quality_warnings) -------------------------------
# A point's spread: interquartile range over median of its pooled repeats. Quiet CPU timings of
# these ops stay within a few percent; another process on the measured cores pushes them to
# 20-100 %. The harness repeats a point until its spread is within this bound or it has run
# MAX_PASSES passes; a point still above it is marked noisy.
NOISE_REL_SPREAD = 0.10
# An op is noisy when the typical (median) spread of its points exceeds this. A point above
# NOISE_REL_SPREAD alone says little on a shared or virtual machine, whose speed drifts by
# 10-40 % between passes even when no other process runs (the 2-core development VM: 0.1-0.4
# typical spread per op, quiet, either thread count); with another process on one of its two
# cores and torch on both, the typical spread is 0.6-1.1 and the times 3-9x too slow.
NOISY_OP_SPREAD = 0.5
HELD_OUT_LIMIT = 0.25  # an op's mean error on held-out points (quiet machines reach 2-13 %)
ENGINE_HELD_OUT_LIMIT = 0.20  # the engine fit's mean error on held-out steps, per step kind
MATERIAL_SHARE = 0.05  # ops below this share of a reference step's time are not worth a warning
BUSY_SPARE_CORES = 0.25  # busy: other processes used this much more than the cores left idle

# The axes each measured op is tabulated over, and whether its time is per layer or per step.
OP_AXES: dict[str, tuple[str, ...]] = {
    "embed": ("num_tokens",),
    "qkv_proj": ("num_tokens",),
    "attn_prefill": ("num_new_tokens", "num_cached_tokens"),
    "attn_decode": ("num_seqs", "context_tokens"),
    "o_proj": ("num_tokens",),
    "mlp_gate_up": ("num_tokens",),
    "mlp_act": ("num_tokens",),
    "mlp_down": ("num_tokens",),
    "norm": ("num_tokens",),
    "lm_head": ("num_tokens",),
    # all of a step's tokens against all of its keys under a block mask, in one call: the
    # layout of attention kernels that take no per-sequence lengths (transformers' paged|sdpa);
    # the profiled model uses it instead of attn_prefill/attn_decode when told the engine does
    "attn_packed": ("num_tokens", "kv_tokens"),
}
MODEL_SCOPE_OPS = frozenset({"embed", "lm_head"})
# ops that are a function of one count (tokens; sampled rows for the LM head)
COUNT_OPS = tuple(op for op, axes in OP_AXES.items() if axes == ("num_tokens",))
# ModelSpec fields that change what a profile measured (the name and max context do not).
_SHAPE_FIELDS = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "gated_mlp",
    "num_experts",
    "num_experts_per_token",
    "vocab_size",
    "tie_word_embeddings",
    "qkv_bias",
    "weight_bytes",
    "quantization",
    "kv_cache_bytes",
)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ProfilePoint(_Frozen):
    """One measured grid point: the op's time at coordinates ``at`` (one per axis)."""

    at: tuple[int, ...] = Field(description="Coordinates on the op's axes, in axis order.")
    median_s: float = Field(gt=0, description="Median wall time of the repeats, seconds.")
    iqr_s: float = Field(ge=0, description="Interquartile range of the repeats, seconds (the spread).")
    num_repeats: int = Field(ge=1, description="Timed repeats behind the median.")
    kernel_s: float | None = Field(
        None, ge=0, description="Device kernel time per call from the torch profiler (CUDA only), seconds."
    )
    noisy: bool = Field(
        False, description="Its spread (iqr / median) stayed above the noise bound after the harness's repeats."
    )

    @property
    def rel_spread(self) -> float:
        """Interquartile range over median."""
        return self.iqr_s / self.median_s


class OpTable(_Frozen):
    """Measured times of one op over a rectilinear grid."""

    axes: tuple[str, ...] = Field(description="Names of the grid axes (see OP_AXES).")
    scope: Literal["layer", "model"] = Field(description="Time per decoder layer, or once per step.")
    space: Literal["log", "linear"] = Field(
        "log", description="Interpolate log time over log coordinates, or time over coordinates."
    )
    points: tuple[ProfilePoint, ...] = Field(min_length=1, description="The measured points.")

    @model_validator(mode="after")
    def _check_grid(self) -> OpTable:
        for p in self.points:
            if len(p.at) != len(self.axes):
                raise ValueError(f"point {p.at} has {len(p.at)} coordinates for axes {self.axes}")
            if any(c < 0 for c in p.at):
                raise ValueError(f"point {p.at} has a negative coordinate")
        coords = [p.at for p in self.points]
        if len(set(coords)) != len(coords):
            raise ValueError("duplicate grid points")
        full = set(itertools.product(*self.axis_values()))
        if full != set(coords):
            raise ValueError(f"points do not form a full grid over {self.axes} ({len(full) - len(coords)} missing)")
        return self

    def axis_values(self) -> list[list[int]]:
        """The sorted distinct coordinates of each axis."""
        return [sorted({p.at[i] for p in self.points}) for i in range(len(self.axes))]


class StepOverhead(_Frozen):
    """Fixed time of a real engine step that no op accounts for: step_s + per_seq_s x sequences."""

    step_s: float = Field(ge=0, description="Seconds per step (scheduling, input preparation, sampling).")
    per_seq_s: float = Field(ge=0, description="Extra seconds per scheduled sequence.")
    num_steps: int = Field(ge=1, description="Measured steps the fit used.")


class MemoryProfile(_Frozen):
    """Device memory measured besides the KV cache, from which KV capacity follows."""

    device_memory_bytes: float = Field(gt=0, description="Total memory of the device (host RAM for a CPU).")
    weight_bytes: float = Field(ge=0, description="Memory the model's weights took once loaded.")
    activation_peak_bytes: float = Field(ge=0, description="Peak extra memory of the largest measured step.")
    activation_tokens: int = Field(ge=1, description="Tokens of that step.")
    runtime_bytes: float = Field(ge=0, description="Runtime memory (CUDA context, allocator, workspaces).")

    @property
    def reserve_bytes(self) -> float:
        """Memory besides weights and KV: activation peak plus runtime."""
        return self.activation_peak_bytes + self.runtime_bytes


class DeviceInfo(_Frozen):
    """Where and with what the profile was measured."""

    kind: Literal["cpu", "cuda"] = Field(description="Device type.")
    name: str = Field(description="Device name as torch or the OS reports it.")
    num_threads: int = Field(ge=1, description="torch intra-op threads during the measurement.")
    torch_version: str = Field(description="torch.__version__.")
    cuda_version: str | None = Field(None, description="torch.version.cuda, None on CPU builds.")
    timer: str = Field(description="How times were taken (CUDA events, torch.utils.benchmark).")


class GridSpec(_Frozen):
    """The grid of shapes measured; held-out points lie between grid points and are not interpolated from."""

    name: str = Field(description="Grid preset (quick or full).")
    num_tokens: tuple[int, ...] = Field(description="Token counts of the linear ops, norms and activations.")
    prefill_new_tokens: tuple[int, ...] = Field(description="New tokens of a prefill chunk.")
    prefill_cached_tokens: tuple[int, ...] = Field(description="Cached tokens under a prefill chunk.")
    decode_seqs: tuple[int, ...] = Field(description="Sequences in a decode batch.")
    decode_context_tokens: tuple[int, ...] = Field(description="Context length of each decode sequence.")
    sampled_tokens: tuple[int, ...] = Field(description="Rows of the LM head.")
    packed_tokens: tuple[int, ...] = Field(description="Query tokens of packed attention.")
    packed_kv_tokens: tuple[int, ...] = Field(description="Key tokens of packed attention (all sequences').")


class OpFitError(_Frozen):
    """How well interpolation reproduces measured times of one op (relative errors)."""

    grid_max_rel_error: float = Field(ge=0, description="Largest error on the profile's own points.")
    held_out_mean_rel_error: float | None = Field(None, ge=0, description="Mean error on held-out points.")
    held_out_max_rel_error: float | None = Field(None, ge=0, description="Largest error on held-out points.")
    num_held_out: int = Field(0, ge=0, description="Held-out points measured.")


class LoadReport(_Frozen):
    """How busy the machine was with other processes while the profile was measured."""

    num_cpus: int = Field(ge=1, description="CPUs this process may run on.")
    num_threads: int = Field(ge=1, description="torch threads the measurement used.")
    other_cpus_before: float | None = Field(
        None, ge=0, description="CPUs other processes kept busy just before the measurement (mean)."
    )
    other_cpus_mean: float | None = Field(None, ge=0, description="CPUs other processes kept busy during it (mean).")
    other_cpus_p90: float | None = Field(None, ge=0, description="The same, 90th percentile of the samples.")
    load_average: tuple[float, ...] = Field((), description="/proc/loadavg's 1, 5 and 15 minute figures at the end.")
    num_samples: int = Field(0, ge=0, description="Samples behind the figures.")

    @property
    def spare_cpus(self) -> int:
        """CPUs the measurement left idle."""
        return max(0, self.num_cpus - self.num_threads)

    @property
    def other_cpus(self) -> float | None:
        """Other processes' load that decides: the mean during the measurement (before it, without samples)."""
        return self.other_cpus_mean if self.other_cpus_mean is not None else self.other_cpus_before

    @property
    def busy(self) -> bool:
        """Other processes competed for the measured cores (their load exceeded the cores left idle)."""
        others = self.other_cpus
        return others is not None and others > self.spare_cpus + BUSY_SPARE_CORES


class MeasurementQuality(_Frozen):
    """The harness's noise control and the machine's state during the measurement."""

    noise_rel_spread: float = Field(gt=0, description="Bound on a point's iqr / median the harness repeated toward.")
    min_passes: int = Field(ge=1, description="Interleaved passes every point got.")
    max_passes: int = Field(ge=1, description="Passes a point got at most (the repeat cap).")
    load: LoadReport | None = Field(None, description="Other processes' load; None where it cannot be read.")


class StepKindError(_Frozen):
    """Relative errors of predicted against measured whole steps of one kind."""

    num_steps: int = Field(ge=0, description="Steps of this kind.")
    mean_rel_error: float | None = Field(None, ge=0, description="Mean |predicted - measured| / measured.")
    p90_rel_error: float | None = Field(None, ge=0, description="90th percentile of the same.")
    mean_signed_rel_error: float | None = Field(
        None, description="Mean (predicted - measured) / measured: negative when the prediction is too fast."
    )


class EngineStep(_Frozen):
    """One real engine step as calibration measured it (the engine's own loop, start to end)."""

    prefill_new_tokens: tuple[int, ...] = Field((), description="New tokens of each prefill chunk.")
    prefill_cached_tokens: tuple[int, ...] = Field((), description="Tokens already cached under each chunk.")
    num_decode_seqs: int = Field(0, ge=0, description="Decode sequences.")
    decode_context_tokens: int = Field(0, ge=0, description="Sum of the decode sequences' contexts.")
    num_sampled_tokens: int = Field(0, ge=0, description="Sequences that sampled a token.")
    seconds: float = Field(gt=0, description="Wall time of the step.")
    held_out: bool = Field(False, description="Left out of the fit, measured to check it.")

    @property
    def kind(self) -> Literal["prefill", "decode", "mixed"]:
        if self.prefill_new_tokens and self.num_decode_seqs:
            return "mixed"
        return "prefill" if self.prefill_new_tokens else "decode"


STEP_KINDS = ("prefill", "decode", "mixed")


class EngineCalibration(_Frozen):
    """A real engine's whole steps fitted against the profile's op times (``calibrate --engine``).

    step time = time_scale x ops + step_overhead_s + per_seq_overhead_s x sequences
    + per_token_overhead_s x new tokens + per_kv_token_overhead_s x keys attended,
    every coefficient >= 0, a robust least-squares fit on relative error.
    """

    engine: Literal["hf", "builtin"] = Field(description="The engine: transformers' continuous batching or servesim's.")
    engine_version: str = Field(description="e.g. 'transformers 5.17.0' or 'servesim builtin 2.0'.")
    attention: Literal["per_sequence", "packed"] = Field(description="The engine's attention layout (profiled model).")
    attn_implementation: str | None = Field(None, description="transformers' attention implementation, if any.")
    num_threads: int = Field(ge=1, description="torch threads the engine ran with.")
    policy: str = Field(description="The batch policy the engine's scheduler corresponds to.")
    max_num_seqs: int = Field(ge=1, description="The engine's batch cap during calibration.")
    max_num_batched_tokens: int = Field(ge=1, description="Its token budget per step.")
    block_size: int = Field(ge=1, description="KV block size.")
    time_scale: float = Field(gt=0, description="The engine's op times over the harness's.")
    step_overhead_s: float = Field(ge=0, description="Seconds per step.")
    per_seq_overhead_s: float = Field(ge=0, description="Seconds per scheduled sequence.")
    per_token_overhead_s: float = Field(ge=0, description="Seconds per new token computed.")
    per_kv_token_overhead_s: float = Field(ge=0, description="Seconds per key attended.")
    ingest_delay_s: float = Field(ge=0, description="From sending a request to an idle engine to its scheduling.")
    loss: str = Field(description="The fit's robust loss (scipy.optimize.least_squares).")
    loss_scale: float = Field(gt=0, description="Relative error at which the loss turns from quadratic to linear.")
    fit_error: dict[str, StepKindError] = Field(description="Errors on the fitted steps, by step kind.")
    held_out_error: dict[str, StepKindError] = Field(description="Errors on held-out steps, by step kind.")
    steps: tuple[EngineStep, ...] = Field(description="Every measured step (fitted and held out).")
    wall_s: float = Field(ge=0, description="Seconds the engine runs took.")

    @property
    def held_out_mean_rel_error(self) -> float | None:
        errors = [e.mean_rel_error * e.num_steps for e in self.held_out_error.values() if e.mean_rel_error is not None]
        n = sum(e.num_steps for e in self.held_out_error.values() if e.mean_rel_error is not None)
        return sum(errors) / n if n else None


class CalibrationProfile(_Frozen):
    """Everything ``servesim calibrate`` measured for one model on one device."""

    schema_version: Literal[1, 2] = Field(description="Version of this format.")
    harness_version: str = Field(description="Version of the calibration harness that wrote it.")
    created_utc: str = Field(description="When it was measured (ISO 8601, UTC).")
    device: DeviceInfo
    dtype: Literal["bf16", "fp16", "fp32"] = Field(description="Weights, activations and KV dtype.")
    model: ModelSpec = Field(description="The model measured (weight and KV bytes follow the dtype).")
    hardware: HardwareSpec = Field(description="The device's figures as measured (peak GEMM, copy bandwidth).")
    grid: GridSpec
    ops: dict[str, OpTable] = Field(description="Measured op tables by op name.")
    held_out: dict[str, tuple[ProfilePoint, ...]] = Field(
        default_factory=dict, description="Points between grid points, measured only to check the fit, by op."
    )
    overhead: StepOverhead
    memory: MemoryProfile
    fit: dict[str, OpFitError] = Field(default_factory=dict, description="Fit errors by op, as calibrate reported.")
    step_fit_mean_rel_error: float | None = Field(
        None, ge=0, description="Mean error of predicted against measured whole steps of the decode loop."
    )
    quality: MeasurementQuality | None = Field(None, description="Noise control and machine load (version 2).")
    engine: EngineCalibration | None = Field(
        None, description="A real engine's whole steps fitted against the op times (calibrate --engine; version 2)."
    )
    calibration_wall_s: float | None = Field(None, ge=0, description="Seconds the calibration took (version 2).")

    @model_validator(mode="after")
    def _check_ops(self) -> CalibrationProfile:
        for name in [*self.ops, *self.held_out]:
            if name not in OP_AXES:
                raise ValueError(f"op {name!r} is not a measured op (one of {', '.join(OP_AXES)})")
        for name, table in self.ops.items():
            if table.axes != OP_AXES[name]:
                raise ValueError(f"op {name!r} has axes {table.axes}, expected {OP_AXES[name]}")
            expected = "model" if name in MODEL_SCOPE_OPS else "layer"
            if table.scope != expected:
                raise ValueError(f"op {name!r} has scope {table.scope!r}, expected {expected!r}")
        for name, points in self.held_out.items():
            if any(len(p.at) != len(OP_AXES[name]) for p in points):
                raise ValueError(f"held-out point of {name!r} has the wrong number of coordinates")
        return self

    def check_model(self, model: ModelSpec, source: str = "profile") -> None:
        """Raise ValueError when ``model`` differs from the model this profile measured."""
        diffs = [
            f"{f} {getattr(self.model, f)} != {getattr(model, f)}"
            for f in _SHAPE_FIELDS
            if getattr(self.model, f) != getattr(model, f)
        ]
        if diffs:
            raise ValueError(
                f"{source}: measured {self.model.name}, which does not match the scenario's model "
                f"{model.name} ({'; '.join(diffs)}); calibrate this model or drop --model"
            )


assert set(OP_AXES) - {"attn_packed"} <= set(OP_NAMES)


def load_profile(path: Path | str) -> CalibrationProfile:
    """Read and validate a profile file.

    Raises ValueError naming the file: unreadable, not JSON (corrupted), a schema version
    this servesim does not read, or fields that do not validate.
    """
    p = Path(path)
    text = read_text(p, "profile file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: corrupted profile, not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return parse_profile(data, str(p))


def parse_profile(data: object, source: str = "profile") -> CalibrationProfile:
    """Validate a profile already parsed from JSON; ValueError prefixed with ``source``."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: corrupted profile, expected a JSON object")
    version = data.get("schema_version")
    if version not in READABLE_SCHEMA_VERSIONS:
        readable = ", ".join(map(str, READABLE_SCHEMA_VERSIONS))
        raise ValueError(
            f"{source}: profile schema version {version!r} is not supported (this servesim reads versions "
            f"{readable}); re-run `servesim calibrate` to write a current profile"
        )
    try:
        return CalibrationProfile.model_validate(data)
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc, source=source)) from None


def save_profile(profile: CalibrationProfile, path: Path | str) -> Path:
    """Write ``profile`` as indented JSON; returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(profile.model_dump_json(indent=1) + "\n", encoding="utf-8")
    return p


# -- threads and the machine (no torch) -----------------------------------------------------


def _cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def num_cpus() -> int:
    """Logical CPUs this process may run on."""
    return max(1, len(_cpus()))


def default_torch_threads() -> int:
    """The intra-op threads torch starts with here, without importing it.

    OMP_NUM_THREADS (then MKL_NUM_THREADS) when set, else the physical cores this process
    may run on (torch's default; SMT siblings count once), else the logical CPUs.
    """
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(var, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    cores = set()
    for cpu in _cpus():
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add(((topo / "physical_package_id").read_text().strip(), (topo / "core_id").read_text().strip()))
        except OSError:
            return num_cpus()
    return max(1, len(cores)) if cores else num_cpus()


def cpu_model_name() -> str | None:
    """This machine's CPU model as the harness records it ("cpu: <model name>"), None when unknown."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return "cpu: " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def noisy_ops(profile: CalibrationProfile) -> dict[str, tuple[float, int, int]]:
    """Ops whose typical spread exceeds NOISY_OP_SPREAD: {op: (median spread, noisy points, points)}."""
    out = {}
    for name, table in profile.ops.items():
        points = [*table.points, *profile.held_out.get(name, ())]
        typical = statistics.median(p.rel_spread for p in points)
        if typical > NOISY_OP_SPREAD:
            out[name] = (typical, sum(p.noisy for p in points), len(points))
    return out


def thread_note(profile: CalibrationProfile, threads_here: int | None = None) -> str | None:
    """A line when an engine on this machine would run with other torch threads than the profile measured.

    Only for CPU profiles measured on this machine's CPU model (elsewhere the threads are not
    the only difference); ``threads_here`` defaults to torch's default here.
    """
    if profile.device.kind != "cpu" or profile.device.name != cpu_model_name():
        return None
    here = default_torch_threads() if threads_here is None else threads_here
    measured = profile.device.num_threads
    if here == measured:
        return None
    return (
        f"threads: the profile was measured with {measured} torch thread{'s' * (measured != 1)}, an engine here "
        f"runs with {here}; its CPU times differ with the thread count: match them (torch.set_num_threads, "
        f"OMP_NUM_THREADS={measured}) or calibrate with --threads {here}"
    )
