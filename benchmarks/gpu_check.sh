#!/usr/bin/env bash
# Check the compiled JAX backend on a GPU machine; prints one table at the end.
#
#   bash benchmarks/gpu_check.sh [--quick | --full]
#   GPU_CHECK_DRY=1 bash benchmarks/gpu_check.sh   # dry run on a CPU (see below)
#
# Sections, in this order, each under its own time limit and all under one
# budget (GPU_CHECK_BUDGET seconds, default 570; a section that would not fit
# is cut at the budget and says so; the most telling come first):
#   1. device and library versions;
#   2. the compiled zip-up window on each device (bench_device.py): B1 (TEMPO)
#      and B2 (PT-TEMPO) with every step compiled (compiled='on') on the host
#      CPU and on the GPU, twice each (the second finds its kernels: step
#      time), against NumPy; the device the engine reports is checked;
#   3. the factorisations of a window step at bond 512, NumPy (CPU) against
#      the SVD algorithms the library offers on the device (bench_linalg.py);
#   4. the backend-agreement tests with --backend jax;
#   5. B1 and B2 end to end, NumPy (CPU, 1 BLAS thread) against JAX (cold and
#      warm) with the planner's choices (bench_jax.py);
#   6. batched dynamics (bench_batched.py): 1, 100, 1000 systems on one
#      process tensor (bond 32), a loop of compute_dynamics against
#      compute_dynamics_batch on NumPy and on JAX forced onto the GPU
#      (NONMARKOV_JAX_DEVICE=accelerator: 'auto' keeps these batches on the
#      host; this calibrates the chain side of the rule);
#   7. (GPU only) the single-precision test again;
#   7b. the large-bond spin-1 PT (bench_large_bonds.py S1 at epsrel 1e-6),
#      NumPy against JAX with the planner's choices: on the GPU the window
#      runs compiled with the copies-aware sketch (on a CPU, on the host);
#      the same bonds and error against the reference are the check;
#   8. --full: B3 (PT at epsrel 1e-7, bonds of several hundred) to t = 4,
#      NumPy with all cores against JAX (the window on the host CPU beyond the
#      compiled regime, the dynamics as a compiled scan).
# Every JAX result is checked against NumPy: max|rho_numpy - rho_jax| of every
# run, and the tests compare the JAX backend with NumPy.
# Needs no network and no installed package: without an installed nonmarkov it
# runs from src/. Without a CUDA device JAX runs on the CPU (and says so).
# GPU_CHECK_OUT=DIR keeps every log and JSON file there.
# GPU_CHECK_DRY=1: a dry run on a CPU: every section, the GPU-only ones too,
# at small sizes (short runs), JAX with two CPU devices of which the second
# stands in for the accelerator (bench_device.py --fake-accelerator); checks
# that the script and its summary work, not speed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

mode=quick
case "${1:-}" in
    "" | --quick) mode=quick ;;
    --full) mode=full ;;
    *) echo "usage: $0 [--quick | --full]" >&2; exit 2 ;;
esac

PYTHON=${PYTHON:-$(command -v python3 || command -v python)}
if ! "$PYTHON" -c "import nonmarkov" >/dev/null 2>&1; then
    export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
fi
out=${GPU_CHECK_OUT:-$(mktemp -d)}
mkdir -p "$out"
export XLA_PYTHON_CLIENT_PREALLOCATE=false NONMARKOV_PROGRESS=silent PYTHONUNBUFFERED=1
budget=${GPU_CHECK_BUDGET:-570}
start=$SECONDS
dry=${GPU_CHECK_DRY:-0}

# run_section NAME LIMIT COMMAND...: run with min(LIMIT, budget left) seconds, log to $out
run_section() {
    local name=$1 limit=$2
    shift 2
    local left=$((budget - (SECONDS - start)))
    if [ "$left" -lt 20 ]; then
        echo "== $name: skipped (budget of ${budget} s spent)"
        return 1
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "== $name (at most ${limit} s)"
    timeout "$limit" "$@" 2>&1 | tee "$out/$name.log"
    local status=${PIPESTATUS[0]}
    [ "$status" -eq 124 ] && echo "   ($name stopped at its time limit)"
    return "$status"
}

fake=()
if [ "$dry" = 1 ]; then
    platform=cpu
    gpu=1  # the GPU-only sections run too, on the CPU
    fake=(--fake-accelerator)
    export XLA_FLAGS="--xla_force_host_platform_device_count=2${XLA_FLAGS:+ $XLA_FLAGS}"
    echo "note: dry run (GPU_CHECK_DRY=1): small sizes, CPU device 1 stands in for the GPU"
elif JAX_PLATFORMS=cuda "$PYTHON" -c "import jax; jax.devices('cuda')" >/dev/null 2>&1; then
    platform=cuda
    gpu=1
else
    platform=cpu
    gpu=0
    echo "note: no CUDA device visible to JAX; the JAX runs use the CPU"
fi
# the CPU stays enabled next to the GPU: the device policy runs small problems there
if [ "$platform" = cuda ]; then
    export JAX_PLATFORMS=cuda,cpu
else
    export JAX_PLATFORMS=cpu
fi

echo "== device"
NONMARKOV_BACKEND=jax "$PYTHON" -m nonmarkov info
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader
"$PYTHON" -c "import jax, numpy, scipy; print('jax', jax.__version__, 'numpy', \
numpy.__version__, 'scipy', scipy.__version__)"
echo "CPU cores: $(nproc)"

# the compiled window on the host CPU and on the accelerator
end=3
[ "$dry" = 1 ] && end=1
run_section device 120 "$PYTHON" benchmarks/bench_device.py --end-time "$end" "${fake[@]}" \
    --json "$out/device.json"
run_section linalg 30 "$PYTHON" benchmarks/bench_linalg.py --bonds "$([ "$dry" = 1 ] && echo 32 ||
    echo 512)" --repeat 1

bench() {  # bench NAME LIMIT ARGS...: bench_jax.py with its JSON in $out/NAME.json
    local name=$1 limit=$2
    shift 2
    run_section "$name" "$limit" "$PYTHON" benchmarks/bench_jax.py \
        --jax-platform "$platform" --json "$out/$name.json" "$@"
}

# the backend-agreement tests
tests=(tests/test_compiled.py tests/test_zip_up_compiled.py tests/test_device_policy.py)
[ "$dry" = 1 ] && tests=(tests/test_device_policy.py)  # a dry run checks the section
run_section tests 120 "$PYTHON" -m pytest -q -p no:cacheprovider --backend jax "${tests[@]}"
test_summary=$(tail -n 1 "$out/tests.log" 2>/dev/null || echo "not run")
# B1/B2 with the planner's choices
if [ "$dry" = 1 ]; then
    bench small 60 --problems B1 B2 --end-time B1=1 B2=1
else
    bench small 90 --problems B1 B2
fi
# batched dynamics: a loop of compute_dynamics against compute_dynamics_batch, NumPy and JAX
# on the accelerator ('auto' would keep these batches on the host)
sizes=(1 100 1000)
[ "$dry" = 1 ] && sizes=(1 10)
run_section batched 40 env NONMARKOV_JAX_DEVICE="$([ "$gpu" = 1 ] && [ "$dry" = 0 ] &&
    echo accelerator || echo auto)" "$PYTHON" benchmarks/bench_batched.py \
    --jax-platform "$platform" --sizes "${sizes[@]}" --loop-max 20 --repeat 2 \
    --json "$out/batched.json"

if [ "$gpu" = 1 ]; then
    run_section single 30 "$PYTHON" -m pytest -q -p no:cacheprovider --backend jax \
        tests/test_compiled.py -k "single_precision"
fi

sketch_epsrel=1e-6
[ "$dry" = 1 ] && sketch_epsrel=1e-4
run_section sketch 150 "$PYTHON" benchmarks/bench_large_bonds.py --problems S1 \
    --epsrels "$sketch_epsrel" --reference-epsrel 1e-7 --nm-backends numpy jax --no-oqupy

if [ "$mode" = full ]; then
    bench b3_t4 300 --problems B3 --end-time B3=4 --numpy-blas-threads 0 --no-warm
fi

echo
echo "== summary ($mode, JAX on $platform, $((SECONDS - start)) s)"
echo "tests: $test_summary"
[ -f "$out/device.log" ] && { echo "-- compiled window per device"; cat "$out/device.log"; }
for name in small b3_t4; do
    [ -f "$out/$name.log" ] || continue
    echo "-- $name"
    sed -n '/^problem/,$p' "$out/$name.log"
done
[ -f "$out/sketch.log" ] && { echo "-- large bonds (sketch)"; tail -n 8 "$out/sketch.log"; }
[ -f "$out/batched.log" ] && { echo "-- batched dynamics"; sed -n '/^time per member/,$p' "$out/batched.log"; }
[ -f "$out/linalg.log" ] && { echo "-- factorisations"; cat "$out/linalg.log"; }
[ -f "$out/single.log" ] && echo "single-precision test: $(tail -n 1 "$out/single.log")"
echo "logs and JSON: $out"
