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
#   1b. the device policy (bench_device.py; nonmarkov.engines.jax.placement):
#      (a) the device chosen for B1 (the host CPU) and for B3's large-bond
#      steps (the GPU), checked; (b) the calibration of its threshold: the
#      whole-step kernel of a B3 window at buckets 12-96 on the host CPU and on
#      the GPU, the bucket where the GPU starts to win and the ACCELERATOR_WORK
#      that would choose there, the same step on both devices; (c) one B3 step
#      at bucket 192 on the GPU broken down into compile, transfers, the QR
#      and SVD share and the rest;
#   2. the factorisations of a window step at bond 512, NumPy (CPU) against
#      the SVD algorithms the library offers on the device (the svd engine
#      option: default, qr, divide_and_conquer; bench_linalg.py);
#   3. B3 steps at large bond (bench_pt_steps.py): JAX runs B3 (the PT at
#      epsrel 1e-7) to t = 4.5 (bond ~250), then two steps are timed on JAX
#      and on NumPy with all CPU cores from the same window, with a check
#      that both did the same steps: the steps where a whole B3 spends its
#      time (NumPy would take hours for all of it), and the NumPy/JAX ratio per
#      step against the 10x target. On a GPU two JAX runs, each with its engine
#      options (nonmarkov.options.EngineOptions): the defaults and svd=qr (the
#      site-by-site and site-level runs of earlier versions were dropped to fit
#      the device section; run them with bench_pt_steps.py --jax-runs);
#   4. B3 up to t = 4 end to end: NumPy with all CPU cores against JAX (cold:
#      with compilation) with the options that were fastest in 3
#      (bench_jax.py --jax-options);
#   5. the backend-agreement tests with --backend jax;
#   6. B1 and B2, NumPy (CPU, 1 BLAS thread) against JAX (cold and warm);
#   6b. batched dynamics (bench_batched.py): 1, 100, 1000 systems on one
#      process tensor (bond 32), a loop of compute_dynamics against
#      compute_dynamics_batch on NumPy and on JAX forced onto the GPU
#      (NONMARKOV_JAX_DEVICE=accelerator: 'auto' keeps these batches on the
#      host; this calibrates the chain side of the rule);
#   7. (GPU only) the single-precision test again (the complex64
#      factorisations and the step-memory probe of the removed polar SVD
#      were dropped to fit the budget);
#   8. --full: B3 up to t = 10 on JAX alone, with the options that were
#      fastest in 3, printing every chunk of steps.
# Every JAX result is checked against the CPU: the B3 steps against NumPy's
# (same kept ranks, same chain state), B1/B2/B3 max|rho_numpy - rho_jax|, and
# the tests compare the JAX backend with NumPy.
# Needs no network and no installed package: without an installed nonmarkov it
# runs from src/. Without a CUDA device JAX runs on the CPU (and says so).
# GPU_CHECK_OUT=DIR keeps every log and JSON file there.
# GPU_CHECK_DRY=1: a dry run on a CPU: every section, the GPU-only ones too,
# at small sizes (B2 instead of B3 steps, short runs), JAX with two CPU devices
# of which the second stands in for the accelerator (bench_device.py
# --fake-accelerator); checks that the script and its summary work, not speed.
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

# the device policy: decisions, calibration of the threshold, a large-bond GPU step broken down
if [ "$dry" = 1 ]; then
    device_args=(--buckets 8 16 --bucket 24 --repeat 1)
else
    device_args=(--buckets 12 24 48 96 --bucket 192 --repeat 2)
fi
run_section device 100 "$PYTHON" benchmarks/bench_device.py --decisions --calibrate --profile \
    "${device_args[@]}" "${fake[@]}" --json "$out/device.json"

options=default  # engine options of the JAX runs of bench_jax.py (--jax-options)
bench() {  # bench NAME LIMIT ARGS...: bench_jax.py with its JSON in $out/NAME.json
    local name=$1 limit=$2
    shift 2
    run_section "$name" "$limit" "$PYTHON" benchmarks/bench_jax.py \
        --jax-platform "$platform" --jax-options "$options" --json "$out/$name.json" "$@"
}
runs=(default)
[ "$gpu" = 1 ] && runs=(default svd=qr)
if [ "$dry" = 1 ]; then
    steps_args=(--problem B2 --at 4 --steps 1)
else
    steps_args=(--problem B3 --at 4.5 --steps 2)
fi
run_section b3_steps 220 "$PYTHON" benchmarks/bench_pt_steps.py --jax-platform "$platform" "${steps_args[@]}" \
    --jax-runs "${runs[@]}" --numpy-blas-threads 0 --json "$out/b3_steps.json"
run_section linalg 30 "$PYTHON" benchmarks/bench_linalg.py --bonds "$([ "$dry" = 1 ] && echo 32 ||
    echo 512)" --repeat 1
options=$("$PYTHON" benchmarks/bench_pt_steps.py --fastest-label "$out/b3_steps.json")
options=${options:-default}
echo "fastest JAX options on the B3 steps (without compilation): $options"
if [ "$dry" = 1 ]; then
    bench b3_t4 60 --problems B3 --end-time B3=1 --numpy-blas-threads 0 --no-warm
else
    bench b3_t4 100 --problems B3 --end-time B3=4 --numpy-blas-threads 0 --no-warm
fi

# the backend-agreement tests, from the test files of this tree that exist
tests=()
for file in tests/test_compiled.py tests/test_tempo.py tests/test_host_start.py; do
    [ -f "$file" ] && tests+=("$file")
done
if [ "${#tests[@]}" -gt 0 ]; then
    [ -f tests/test_device_policy.py ] && tests+=(tests/test_device_policy.py)
    # a dry run checks the section, not the backend: the device-policy tests only
    [ "$dry" = 1 ] && [ -f tests/test_device_policy.py ] && tests=(tests/test_device_policy.py)
    run_section tests 60 "$PYTHON" -m pytest -q -p no:cacheprovider --backend jax \
        "${tests[@]}" -k "compiled or agree or padding or transfers or single or kept_rank or \
independent_boson or hands_over or device or host_and_auto or accelerator"
else
    echo "== tests: skipped (none of its test files in this tree)"
fi
test_summary=$(tail -n 1 "$out/tests.log" 2>/dev/null || echo "not run")
# B1/B2 with the device policy: JAX 'auto' keeps them on the host CPU next to the GPU
if [ "$dry" = 1 ]; then
    bench small 60 --problems B1 B2 --end-time B1=1 B2=1
else
    bench small 60 --problems B1 B2
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
        tests/test_compiled.py -k "single_precision_is_complex64"
fi

if [ "$mode" = full ]; then
    bench b3_full 600 --problems B3 --backends jax --no-warm --trace-chunks
fi

echo
echo "== summary ($mode, JAX on $platform, $((SECONDS - start)) s)"
echo "tests: $test_summary"
[ -f "$out/device.log" ] && { echo "-- device policy"; cat "$out/device.log"; }
[ -f "$out/b3_steps.log" ] && { echo "-- b3_steps"; sed -n '/^B[0-9A-Z]*, /,$p' "$out/b3_steps.log"; }
for name in b3_t4 small b3_full; do
    [ -f "$out/$name.log" ] || continue
    echo "-- $name"
    sed -n '/^problem/,$p' "$out/$name.log"
done
[ -f "$out/batched.log" ] && { echo "-- batched dynamics"; sed -n '/^time per member/,$p' "$out/batched.log"; }
[ -f "$out/linalg.log" ] && { echo "-- factorisations"; cat "$out/linalg.log"; }
[ -f "$out/single.log" ] && echo "single-precision test: $(tail -n 1 "$out/single.log")"
echo "logs and JSON: $out"
