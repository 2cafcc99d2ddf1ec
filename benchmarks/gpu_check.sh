#!/usr/bin/env bash
# gpu_check.sh — on a machine with an NVIDIA GPU: build ampy with its CUDA
# backend, run the CUDA tests, run the GPU benchmarks; the summary table is
# printed last. Budget: 7 minutes (build ~1-2 min for one arch, tests ~2 min,
# benchmarks the rest; every step has its own timeout so the table always
# comes out). Usage, from the repository root:
#     bash benchmarks/gpu_check.sh            # full
#     QUICK=1 bash benchmarks/gpu_check.sh    # smaller benchmark sizes
# Environment: PYTHON (default python3; needs numpy, torch with CUDA, pytest),
# AMPY_CUDA_ARCH_LIST (default: the GPU's own arch, read with nvidia-smi /
# torch, so the build compiles one target), OUT (a folder for logs, optional).
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
LOG=${OUT:-/tmp}/ampy_gpu_check
mkdir -p "$LOG"
export PYTHONUNBUFFERED=1
status=0
t0=$(date +%s)

echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv || true
if [ -z "${AMPY_CUDA_ARCH_LIST:-}" ]; then
    cc=$($PY -c "import torch; m, n = torch.cuda.get_device_capability(); print(f'{m}{n}')" 2>/dev/null)
    export AMPY_CUDA_ARCH_LIST=${cc:-90}
fi
echo "arch list: $AMPY_CUDA_ARCH_LIST; nvcc: $(nvcc --version 2>/dev/null | tail -1)"

echo "== build (AMPY_CUDA=1: a CUDA build failure fails the check)"
b0=$(date +%s)
if ! AMPY_CUDA=1 timeout 240 $PY setup.py -q build_ext --inplace >"$LOG/build.log" 2>&1; then
    tail -40 "$LOG/build.log"; echo "BUILD FAILED"; exit 1
fi
grep -E "ampy._C_cuda: built" "$LOG/build.log"
echo "build: $(( $(date +%s) - b0 ))s"
$PY -c "import ampy, ampy.cuda as c; print('is_available', c.is_available(), c.get_device_name(0) if c.is_available() else c._reason)"

echo "== tests"
timeout 180 $PY -m pytest -q -x --tb=short -p no:cacheprovider \
    tests/test_cuda_build.py tests/test_dlpack.py 2>&1 | tee "$LOG/tests.log" | tail -40
test_rc=${PIPESTATUS[0]}
# every GPU case, in the concern files (marked cuda)
timeout 180 $PY -m pytest -q -x --tb=short -p no:cacheprovider -m cuda tests/ 2>&1 \
    | tee -a "$LOG/tests.log" | tail -40
[ "${PIPESTATUS[0]}" -ne 0 ] && test_rc=1
[ "$test_rc" -ne 0 ] && status=1
# without -x as well, to see every failure at once when the first pass failed
if [ "$test_rc" -ne 0 ] && [ $(( $(date +%s) - t0 )) -lt 250 ]; then
    timeout 120 $PY -m pytest -q --tb=line -p no:cacheprovider -m cuda tests/ 2>&1 | tail -60
fi

echo "== benchmarks"
left=$(( 410 - ($(date +%s) - t0) ))
[ $left -lt 120 ] && export QUICK=1
timeout $(( left > 30 ? left : 30 )) $PY benchmarks/bench_gpu.py ${QUICK:+--quick} 2>&1 | tee "$LOG/bench.log"
[ "${PIPESTATUS[0]}" -ne 0 ] && status=1
echo "== gpu_check: tests rc=$test_rc, total $(( $(date +%s) - t0 ))s, logs in $LOG"
exit $status
