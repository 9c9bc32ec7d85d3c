#!/usr/bin/env bash
# Calibrate Llama-3.1-8B in bf16 on a CUDA GPU (--grid quick) and validate the simulator against
# transformers' continuous batching and servesim's builtin engine there, in one call.
#
#   bash calibration/gpu_check.sh prepare   # here, with pip: servesim's pure-Python deps as wheels in runs/gpu-wheels/
#   bash calibration/gpu_check.sh run       # on the GPU machine (its python3 has torch and transformers)
#
# `run` writes to $OUT (or runs/gpu-out): the profile, both validations' folders (--json output
# in *.json), and logs. runs/ is git-ignored, so nothing here needs an exclude entry. The device
# tool's `run` call for it, from the repository root:
#   command: bash calibration/gpu_check.sh run    carry: ["runs/gpu-wheels"]    timeout_s: 600
# Budget: calibration about 2-3 minutes on an H200, each validation about 1-2 minutes.
# MODEL, DEVICE, DTYPE and REQUESTS override the defaults (a CPU rehearsal:
#   SKIP_WHEELS=1 MODEL=tests/data/tiny_llama_config.json DEVICE=cpu DTYPE=fp32 REQUESTS=16 bash calibration/gpu_check.sh run,
# with servesim installed; SKIP_WHEELS keeps the CPython 3.12 wheels off another Python).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-run}"
# pure-Python dependencies of servesim the GPU image may lack (numpy, pandas, pyyaml, rich,
# scipy, torch and transformers are in the image; typing-extensions is carried as pydantic-core needs a recent
# one); pydantic-core is compiled, for CPython 3.12
WHEELS=(simpy==4.1.2 pydantic==2.14.4 pydantic-core==2.50.5 typing-inspection==0.4.5 annotated-types==0.8.0 typing-extensions==4.16.0)

wheels=runs/gpu-wheels
if [[ "$mode" == prepare ]]; then
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$wheels" "${WHEELS[@]}"
    exit 0
fi

out="${OUT:-$PWD/runs/gpu-out}"
mkdir -p "$out"
if [[ -z "${SKIP_WHEELS:-}" ]] && compgen -G "$wheels/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$wheels"/*.whl
    export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
servesim=(python3 -m servesim)  # no console script there: the repository is on PYTHONPATH

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt" || true
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'transformers', transformers.__version__)" | tee -a "$out/gpu.txt"

model="${MODEL:-llama-3.1-8b}" device="${DEVICE:-cuda}" dtype="${DTYPE:-bf16}" requests="${REQUESTS:-100}"
profile="$out/profile-$device-$dtype.json"
timeout 420 "${servesim[@]}" calibrate --model "$model" --device "$device" --dtype "$dtype" --grid quick \
    --engine hf --engine builtin --out "$profile" --quiet 2>&1 | tee "$out/calibrate.log"
for engine in hf builtin; do
    timeout 200 "${servesim[@]}" validate --profile "$profile" --engine "$engine" --requests "$requests" --json --quiet \
        --out "$out/validate-$engine" > "$out/validate-$engine.json" 2> "$out/validate-$engine.log" \
        || echo "validate --engine $engine failed: see validate-$engine.log" | tee -a "$out/gpu.txt"
    cat "$out/validate-$engine.json" || true
done
