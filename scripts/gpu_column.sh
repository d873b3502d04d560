#!/usr/bin/env bash
# The GPU column: the whole catalogue on gpu and cpu targets of the installed frameworks, then
# the overlapping-window families and the segment and RoI ops (CUDA adds them atomically) three
# times on gpu (bitwise differences between repeats read `nondeterministic`). Results and the
# machine's description go to $OUT (default out/gpu), compressed. Budgets in seconds keep it
# inside a lease: POOLGRAD_GPU_RUN_S, POOLGRAD_GPU_REPEAT_S; POOLGRAD_GPU_DEVICES=gpu leaves the
# CPU targets to the CPU machines.
#   OUT=out/gpu scripts/gpu_column.sh --frameworks torch,jax
set -u
cd "$(dirname "$0")/.."
out=${OUT:-out/gpu}
py=${PYTHON:-python3}
mkdir -p "$out"
# Plugins are named, not auto-loaded: a GPU image's own pytest plugins stay out of the run.
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 PYTHONUNBUFFERED=1
# Inductor compiles in the worker itself: -n N workers each with a pool of cpu_count compile
# processes would not fit in memory. It changes compile time only, not the kernels.
export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-1}
workers=${POOLGRAD_GPU_WORKERS:-10}
pytest=("$py" -m pytest poolgrad/conformance -p xdist.plugin -p poolgrad.plugin -p no:cacheprovider
        -n "$workers" --case-timeout 120 -q "$@")

{ date -u; nvidia-smi; nvidia-smi -q | grep -iE "product name|driver version|cuda version|vbios"
  "$py" - <<'PY'
import importlib.metadata as md
for d in ("torch", "torchvision", "torch_geometric", "triton", "jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "flax", "keras",
          "nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "numpy", "ml_dtypes"):
    try: print(d, md.version(d))
    except md.PackageNotFoundError: pass
import torch
print("torch cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), torch.cuda.get_device_name(0))
PY
} >"$out/machine.txt" 2>&1

began=$(date +%s)
timeout -s INT -k 30 "${POOLGRAD_GPU_RUN_S:-400}" "${pytest[@]}" --devices "${POOLGRAD_GPU_DEVICES:-gpu,cpu}" \
    --results /tmp/gpu-column.jsonl >/tmp/gpu-column.log 2>&1
echo "catalogue: rc=$? in $(( $(date +%s) - began )) s" | tee -a "$out/machine.txt"
began=$(date +%s)
timeout -s INT -k 20 "${POOLGRAD_GPU_REPEAT_S:-100}" "${pytest[@]}" --devices gpu --repeat 3 \
    -k "ties_overlap or accumulation_routed or accumulation_sums or signed_zero_wide or segment or roi" \
    --results /tmp/gpu-repeat.jsonl >/tmp/gpu-repeat.log 2>&1
echo "repeat 3: rc=$? in $(( $(date +%s) - began )) s" | tee -a "$out/machine.txt"
for f in gpu-column gpu-repeat; do
    gzip -c "/tmp/$f.jsonl" >"$out/$f.jsonl.gz"
    tail -c 400000 "/tmp/$f.log" | gzip >"$out/$f.log.gz"
done
tail -n 15 /tmp/gpu-column.log /tmp/gpu-repeat.log
