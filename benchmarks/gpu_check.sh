#!/usr/bin/env bash
# Check the compiled JAX backend on a GPU machine; prints one table at the end.
#
#   bash benchmarks/gpu_check.sh [--quick | --full]
#
# Sections, in this order, each under its own time limit and all under one
# budget (GPU_CHECK_BUDGET seconds, default 570; a section that would not fit
# is cut at the budget and says so; the most telling come first):
#   1. device and library versions;
#   2. the factorisations of a window step at bond 512, NumPy (CPU) against
#      the SVD algorithms the library offers on the device (the svd engine
#      option: default, qr, divide_and_conquer; bench_linalg.py);
#   3. B3 steps at large bond (bench_pt_steps.py): JAX runs B3 (the PT at
#      epsrel 1e-7) to t = 4.5 (bond ~250), then two steps are timed on JAX
#      and on NumPy with all CPU cores from the same window, with a check
#      that both did the same steps: the steps where a whole B3 spends its
#      time (NumPy would take hours for all of it). On a GPU four JAX runs,
#      each with its engine options (nonmarkov.options.EngineOptions): the
#      defaults, svd=qr, site by site (sitewise=on: per-site buckets that
#      follow the bond profile, many small kernels; off on GPUs by default
#      until measured) and site levels (levels=on: the whole-step kernel
#      works on each site at one of a few smaller sizes that holds its bonds;
#      off on GPUs by default until measured);
#   4. B3 up to t = 4 end to end: NumPy with all CPU cores against JAX (cold:
#      with compilation) with the options that were fastest in 3
#      (bench_jax.py --jax-options);
#   5. the backend-agreement tests with --backend jax;
#   6. B1 and B2, NumPy (CPU, 1 BLAS thread) against JAX (cold and warm);
#   6b. batched dynamics (bench_batched.py): 1, 100, 1000 systems on one
#      process tensor (bond 32), a loop of compute_dynamics against
#      compute_dynamics_batch on NumPy and on JAX (the device);
#   7. (GPU only) the factorisations in complex64 at small bonds (is a
#      cuSOLVER complex64 routine behind single precision's 1.7e-3 on the
#      H200?) and the single-precision test again; XLA's memory for the B3
#      step at a few buckets with each of the library's SVD algorithms;
#   8. --full: B3 up to t = 10 on JAX alone, with the options that were
#      fastest in 3, printing every chunk of steps.
# Every JAX result is checked against the CPU: the B3 steps against NumPy's
# (same kept ranks, same chain state), B1/B2/B3 max|rho_numpy - rho_jax|, and
# the tests compare the JAX backend with NumPy.
# Needs no network and no installed package: without an installed nonmarkov it
# runs from src/. Without a CUDA device JAX runs on the CPU (and says so).
# GPU_CHECK_OUT=DIR keeps every log and JSON file there.
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

if JAX_PLATFORMS=cuda "$PYTHON" -c "import jax; jax.devices('cuda')" >/dev/null 2>&1; then
    platform=cuda
else
    platform=cpu
    echo "note: no CUDA device visible to JAX; the JAX runs use the CPU"
fi
export JAX_PLATFORMS=$platform

echo "== device"
NONMARKOV_BACKEND=jax "$PYTHON" -m nonmarkov info
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader
"$PYTHON" -c "import jax, numpy, scipy; print('jax', jax.__version__, 'numpy', \
numpy.__version__, 'scipy', scipy.__version__)"
echo "CPU cores: $(nproc)"

run_section linalg 45 "$PYTHON" benchmarks/bench_linalg.py --bonds 512 --repeat 2

options=default  # engine options of the JAX runs of bench_jax.py (--jax-options)
bench() {  # bench NAME LIMIT ARGS...: bench_jax.py with its JSON in $out/NAME.json
    local name=$1 limit=$2
    shift 2
    run_section "$name" "$limit" "$PYTHON" benchmarks/bench_jax.py \
        --jax-platform "$platform" --jax-options "$options" --json "$out/$name.json" "$@"
}
runs=(default)
[ "$platform" = cuda ] && runs=(default svd=qr sitewise=on levels=on)
run_section b3_steps 300 "$PYTHON" benchmarks/bench_pt_steps.py --jax-platform "$platform" \
    --at 4.5 --steps 2 --jax-runs "${runs[@]}" --numpy-blas-threads 0 \
    --json "$out/b3_steps.json"
options=$("$PYTHON" benchmarks/bench_pt_steps.py --fastest-label "$out/b3_steps.json")
options=${options:-default}
echo "fastest JAX options on the B3 steps (without compilation): $options"
bench b3_t4 130 --problems B3 --end-time B3=4 --numpy-blas-threads 0 --no-warm

# the backend-agreement tests, from the test files of this tree that exist
tests=()
for file in tests/test_compiled.py tests/test_tempo.py tests/test_host_start.py; do
    [ -f "$file" ] && tests+=("$file")
done
if [ "${#tests[@]}" -gt 0 ]; then
    run_section tests 100 "$PYTHON" -m pytest -q -p no:cacheprovider --backend jax \
        "${tests[@]}" \
        -k "compiled or agree or padding or transfers or single or kept_rank or independent_boson or hands_over"
else
    echo "== tests: skipped (none of its test files in this tree)"
fi
test_summary=$(tail -n 1 "$out/tests.log" 2>/dev/null || echo "not run")
bench small 80 --problems B1 B2
# batched dynamics: a loop of compute_dynamics against compute_dynamics_batch, NumPy and JAX
run_section batched 60 "$PYTHON" benchmarks/bench_batched.py --jax-platform "$platform" \
    --sizes 1 100 1000 --loop-max 20 --repeat 2 --json "$out/batched.json"

if [ "$platform" = cuda ]; then
    run_section linalg_single 40 "$PYTHON" benchmarks/bench_linalg.py --bonds 16 64 \
        --repeat 1 --precision single
    run_section single 40 "$PYTHON" -m pytest -q -p no:cacheprovider --backend jax \
        tests/test_compiled.py -k "single_precision_is_complex64"
    run_section step_memory 45 "$PYTHON" benchmarks/bench_linalg.py --step-memory \
        --bonds 56 112 224
fi

if [ "$mode" = full ]; then
    bench b3_full 600 --problems B3 --backends jax --no-warm --trace-chunks
fi

echo
echo "== summary ($mode, JAX on $platform, $((SECONDS - start)) s)"
echo "tests: $test_summary"
[ -f "$out/b3_steps.log" ] && { echo "-- b3_steps"; sed -n '/^B3, /,$p' "$out/b3_steps.log"; }
for name in b3_t4 small b3_full; do
    [ -f "$out/$name.log" ] || continue
    echo "-- $name"
    sed -n '/^problem/,$p' "$out/$name.log"
done
[ -f "$out/batched.log" ] && { echo "-- batched dynamics"; sed -n '/^time per member/,$p' "$out/batched.log"; }
[ -f "$out/linalg.log" ] && { echo "-- factorisations"; cat "$out/linalg.log"; }
[ -f "$out/linalg_single.log" ] && { echo "-- factorisations, complex64"
    cat "$out/linalg_single.log"; }
[ -f "$out/single.log" ] && echo "single-precision test: $(tail -n 1 "$out/single.log")"
[ -f "$out/step_memory.log" ] && { echo "-- step memory"; grep -v '^W' "$out/step_memory.log"; }
echo "logs and JSON: $out"
