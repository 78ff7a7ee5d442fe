#!/usr/bin/env bash
# Check the compiled JAX backend on a GPU machine; prints one table at the end.
#
#   bash benchmarks/gpu_check.sh [--quick | --full]
#
# --quick (default, a few minutes): backend-agreement tests with --backend jax,
#   B1 (t in [0, 10]) and B3 up to t = 2, NumPy on the CPU against JAX on the GPU.
# --full: B1, B3 and S1 up to t = 10 (B3 on NumPy takes long).
# Needs no network. Without a CUDA device JAX runs on the CPU (and says so).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

mode=quick
case "${1:-}" in
    "" | --quick) mode=quick ;;
    --full) mode=full ;;
    *) echo "usage: $0 [--quick | --full]" >&2; exit 2 ;;
esac

export XLA_PYTHON_CLIENT_PREALLOCATE=false
export NONMARKOV_PROGRESS=silent
if JAX_PLATFORMS=cuda python -c "import jax; jax.devices('cuda')" >/dev/null 2>&1; then
    platform=cuda
else
    platform=cpu
    echo "note: no CUDA device visible to JAX; the JAX runs use the CPU"
fi

echo "== device"
NONMARKOV_BACKEND=jax JAX_PLATFORMS=$platform python -m nonmarkov info

echo "== backend agreement tests (--backend jax, JAX_PLATFORMS=$platform)"
test_log=$(mktemp)
JAX_PLATFORMS=$platform timeout 300 python -m pytest -q -p no:cacheprovider --backend jax \
    tests/test_compiled.py tests/test_tempo.py \
    -k "compiled or agree or padding or transfers or single or kept_rank or independent_boson" \
    2>&1 | tee "$test_log" | tail -n 3
test_summary=$(tail -n 1 "$test_log")
rm -f "$test_log"

echo "== benchmarks (NumPy on the CPU, JAX on $platform)"
if [ "$mode" = quick ]; then
    problems=(B1 B3)
    end_times=(B3=2)
else
    problems=(B1 B3 S1)
    end_times=(10)
fi
bench_log=$(mktemp)
timeout 480 python benchmarks/bench_jax.py --problems "${problems[@]}" \
    --end-time "${end_times[@]}" --jax-platform "$platform" | tee "$bench_log" >/dev/null
bench_status=${PIPESTATUS[0]}

echo
echo "== summary ($mode, JAX on $platform)"
echo "tests: $test_summary"
sed -n '/^problem/,$p' "$bench_log"
[ "$bench_status" -eq 0 ] || echo "benchmark exit status: $bench_status"
rm -f "$bench_log"
