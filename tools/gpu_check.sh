#!/usr/bin/env bash
# On a GPU machine whose image ships JAX (0.11.2 with its CUDA plugin, say) and no network:
# the suite's core on the GPU, then the transformer step and the BERT / Adafactor step
# benchmarks, each beside its hand-written JAX + optax baseline. About 6 minutes on one H100.
#
#   bash tools/gpu_check.sh [OUT_DIR]
#
# PYTHON (default python3) is the interpreter with JAX; JAX_PLATFORMS (default cuda,cpu)
# may name cpu alone to try the script on a machine without a GPU.
#
# A package the image lacks (google-crc32c) travels as a wheel in .whl/, made on a machine
# with a network (Python 3.12, manylinux x86-64):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --platform manylinux_2_17_x86_64 -d .whl google-crc32c
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu-results}}
py=${PYTHON:-python3}
status=0
mkdir -p "$out"
if compgen -G ".whl/*.whl" >/dev/null; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --target /tmp/funcgrad-site .whl/*.whl
    export PYTHONPATH="/tmp/funcgrad-site:$PWD"
else
    export PYTHONPATH="$PWD"
fi
export JAX_PLATFORMS=${JAX_PLATFORMS:-cuda,cpu} PYTHONUNBUFFERED=1
"$py" - <<'PY' | tee "$out/versions.txt"
import sys, jax, optax, funcgrad
print("Python", sys.version.split()[0], "JAX", jax.__version__, "optax", optax.__version__)
print("devices", jax.devices())
PY
# The suite's core: gradients, overrides, conventions, higher orders, the jaxpr machinery
# and the TF1 optimizers (TensorFlow's parity tests need TensorFlow and are skipped here).
timeout 240 "$py" -m pytest -q -p no:cacheprovider -n 8 \
    tests/test_gradients.py tests/test_higher_order.py tests/test_overrides.py \
    tests/test_conventions.py tests/_core/test_rewrite.py tests/_core/test_connectivity.py \
    tests/_core/test_jax_internals.py tests/_core/test_sparse_reads.py \
    tests/train/test_optimizer.py tests/train/optimizers/test_tf1.py tests/train/test_sparse.py \
    2>&1 | tee "$out/suite.txt" || status=1
# Each benchmark times funcgrad and its hand-written baseline side by side, interleaved.
for bench in "bench_trace 120 7" "bench_tf1_projects 90 9" "bench_adafactor 90 9"; do
    read -r name limit repeats <<<"$bench"
    timeout "$limit" "$py" "benchmarks/$name.py" --repeats "$repeats" 2>&1 |
        tee "$out/$name.txt" || status=1
done
exit "$status"
