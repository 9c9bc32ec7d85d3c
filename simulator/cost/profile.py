"""The calibration profile: what ``servesim calibrate`` measured, in the format the simulator reads.

A profile holds, for one model on one device and dtype, the measured time of every op of
the cost model's decomposition (``OP_NAMES``) over a grid of shapes, the fixed per-step
overhead of a real decode loop, and the device memory used besides the KV cache. It is
plain JSON validated by the pydantic models below (frozen, ``extra="forbid"``), versioned
by ``schema_version``: a reader refuses a version it does not know instead of guessing.

Op tables are rectilinear grids: every combination of the axis values is measured once.
Times are per decoder layer for ``scope == "layer"`` ops (the cost model multiplies by
the layer count) and per step for ``scope == "model"`` ops (embedding, LM head).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from simulator.config.errors import format_validation_error
from simulator.config.files import read_text
from simulator.config.specs import HardwareSpec, ModelSpec
from simulator.cost.shape import OP_NAMES

PROFILE_SCHEMA_VERSION = 2  # 2: noisy points and the calibration's quality; version 1 is still read
READABLE_SCHEMA_VERSIONS = (1, 2)

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
    "num_linear_layers",
    "attn_output_gate",
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
        False, description="Its median stayed uncertain by more than 5% (standard error) after the harness's retries."
    )


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


class ProfileQuality(_Frozen):
    """How far the calibration can be trusted (``calibration.quality``): noise, load, and the warnings they earn."""

    noise_bound: float = Field(ge=0, description="Relative standard error of a median above which a point is noisy.")
    num_points: int = Field(ge=0, description="Points measured (grid and held-out).")
    num_noisy_points: int = Field(ge=0, description="Points still noisy after the retries.")
    other_cores: float | None = Field(
        None, ge=0, description="Cores other processes used on average while calibrating (None: not measurable)."
    )
    warnings: tuple[str, ...] = Field((), description="What makes this profile suspect; empty when none.")


class EngineCalibration(_Frozen):
    """One engine's own time per step, fitted to whole steps it ran (``servesim calibrate --engine``).

    step = time_scale x (the profile's op times) + step_overhead_s + per_seq_overhead_s x sequences
    + per_kv_token_overhead_s x keys attended; requests reach the engine ``ingest_delay_s`` after they are sent.
    """

    engine: Literal["builtin", "hf"] = Field(description="The engine measured.")
    engine_version: str = Field(description="Its version as it reports it.")
    attention: Literal["per_sequence", "packed"] = Field(description="How its attention is laid out (cost model).")
    num_threads: int = Field(ge=1, description="torch threads it ran with.")
    time_scale: float = Field(gt=0, description="Its kernels' time relative to the harness's op tables.")
    step_overhead_s: float = Field(ge=0, description="Seconds per step besides the ops.")
    per_seq_overhead_s: float = Field(ge=0, description="Seconds per scheduled sequence.")
    per_kv_token_overhead_s: float = Field(ge=0, description="Seconds per key attended in a step.")
    ingest_delay_s: float = Field(ge=0, description="From a request's sending to the engine's first sight of it.")
    num_steps: int = Field(ge=1, description="Whole steps the fit used.")
    fit_mean_rel_error: float = Field(ge=0, description="Mean error of the fit on its own steps.")
    num_held_out: int = Field(ge=0, description="Steps of separate runs measured only to check the fit.")
    held_out_mean_rel_error: float | None = Field(None, ge=0, description="Mean error on those steps.")


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
    quality: ProfileQuality | None = Field(None, description="Noise, load and warnings (None in version 1 files).")
    engines: dict[str, EngineCalibration] = Field(
        default_factory=dict, description="Engine-level fits by engine name (servesim calibrate --engine)."
    )

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

    @property
    def warnings(self) -> tuple[str, ...]:
        """What makes this profile suspect (noise, a busy machine, held-out error); empty for version 1 files."""
        return self.quality.warnings if self.quality is not None else ()

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
        readable = " and ".join(str(v) for v in READABLE_SCHEMA_VERSIONS)
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
