"""Where the JAX engines run, and what a large-bond step costs on the accelerator.

Three checks for ``gpu_check.sh`` (any subset, in this order):

``--decisions``
    the device the rule (``nonmarkov.engines.jax.placement``) picks, and the
    device a window engine really gets, for B1 (TEMPO, bucket 10: the host) and
    for B3's large-bond steps (PT-TEMPO, bucket 256: the accelerator where there
    is one); exit status 1 if either is not the expected one.
``--calibrate --buckets 12 24 48 96``
    the whole-step kernel of a B3 window (m = 4, r = 3, 29 sites, random
    sites) timed at each bucket on the host CPU device and on the accelerator,
    with the work of the rule (``placement.window_work``); prints the ratio,
    the bucket and work where the accelerator starts to win, the
    ``ACCELERATOR_WORK`` that would put the choice there, and checks that both
    devices give the same step (gauge-invariant chain contraction).
``--profile --bucket 192``
    one large-bond step on the accelerator broken down: compile time, the
    window's transfer host -> device, the step (warm), the QR and SVD of one
    site at the step's shapes times the sites (their share of the step), the
    fetch of one step's outputs and of the whole window.

``--fake-accelerator`` (dry runs on a CPU): the last CPU device stands in for
the accelerator (start Python with
``XLA_FLAGS=--xla_force_host_platform_device_count=2`` so that it is another
device). ``--json FILE`` writes the records.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import bench_jax
import bench_pt_steps

SEED = 20261201


def _jax():
    import jax

    return jax


def _fake(enabled: bool) -> None:
    if enabled:
        from nonmarkov.engines.jax import placement

        other = _jax().devices("cpu")[-1]
        placement.accelerators = lambda: [other]


def _window_shape(spec) -> tuple[int, int, int]:
    """(x, m, r) of a window spec."""
    projector = np.asarray(spec.projector)
    return projector.shape[0], projector.shape[1], int(np.asarray(spec.carrier).max()) + 1


def _b1_spec():
    """B1's TEMPO window spec (unique=True, as bench_jax runs it)."""
    spec = bench_jax.PROBLEMS["B1"]
    nm, system, bath, rho0 = bench_jax._model(spec["spin"])
    parameters = nm.TempoParameters(dt=bench_jax.DT, tcut=bench_jax.TCUT, epsrel=spec["epsrel"])
    tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, unique=True)
    return tempo


def decisions(record: dict) -> bool:
    from nonmarkov.engines import window_engine
    from nonmarkov.engines.jax import placement
    from nonmarkov.options import default_options

    have = bool(placement.accelerators())
    options = default_options().replace(host_start=False)
    ok = True
    rows = []
    # B1: the TEMPO window at its bucket 10
    tempo = _b1_spec()
    compiled = tempo.engine.compiled
    b1_work = placement.window_work(compiled.bond, compiled._num_rows, compiled.num_classes)
    rows.append(("B1 (TEMPO)", compiled.bond, b1_work, "host", compiled.device))
    # B3: the PT window at the bucket of its large-bond steps
    _, influence, parameters = bench_pt_steps._problem_influence("B3")
    spec = bench_pt_steps._window_spec(influence, parameters)
    _, m, r = _window_shape(spec)
    engine = window_engine(spec, options.replace(initial_bond=256))
    big = engine.compiled
    expected = "accelerator" if have else "host"
    rows.append(
        (
            "B3 large-bond steps",
            big.bond,
            placement.window_work(big.bond, r, m),
            expected,
            big.device,
        )
    )
    print(
        f"accelerators seen by JAX: {placement.accelerators() or 'none'}; "
        f"threshold ACCELERATOR_WORK = {placement.ACCELERATOR_WORK:.1e}"
    )
    print(f"{'problem':<22} {'bucket':>6} {'work':>9} {'expected':>11} {'got':>11}  device")
    record["decisions"] = []
    for name, bucket, work, want, device in rows:
        got = "host" if device == placement.host_device() else "accelerator"
        ok = ok and got == want
        print(
            f"{name:<22} {bucket:6d} {work:9.2e} {want:>11} {got:>11}  {device}"
            f"{'' if got == want else '   <-- NOT the expected device'}"
        )
        record["decisions"].append(
            {"problem": name, "bucket": bucket, "work": work, "expected": want, "got": got}
        )
    print(f"device decisions: {'as expected' if ok else 'NOT as expected'}", flush=True)
    return ok


def _step_inputs(bucket: int, seed: int = SEED):
    """Host inputs of one whole-step kernel call of a full B3 window at ``bucket``:
    (front, sites, count, log_scale, between, second, constants, memory)."""
    _, influence, parameters = bench_pt_steps._problem_influence("B3")
    spec = bench_pt_steps._window_spec(influence, parameters)
    x, m, r = _window_shape(spec)
    memory = int(spec.memory)
    capacity = memory - 1
    rng = np.random.default_rng(seed)

    def random(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) / np.sqrt(bucket * m)

    constants = {
        "projector": np.asarray(spec.projector, complex),
        "first": np.asarray(spec.first, complex),
        "carrier": np.eye(r)[np.asarray(spec.carrier, int)].astype(complex),
        "out_map": np.asarray(spec.out_map, complex),
        "epsrel": np.asarray(spec.epsrel, float),
        "lags": np.asarray([spec.lag_rows(lag + 2) for lag in range(capacity)], complex),
        "leaving": np.asarray(spec.lag_rows(memory), complex),
    }
    return (
        random(x, bucket),
        random(capacity, bucket, m, bucket),
        np.asarray(capacity, np.int32),
        np.asarray(0.0),
        np.eye(x, dtype=complex),
        np.eye(x, dtype=complex),
        constants,
        memory,
    )


def _kernel(memory: int, bucket: int, m: int, r: int, platform: str):
    from nonmarkov.engines.jax import window
    from nonmarkov.options import default_options

    options = default_options()
    levels = window.site_levels(bucket, r, m, platform, options.site_levels)
    return window._compiled_step(memory, None, platform, "finalize", options.svd, levels)


def _blocked(value):
    return _jax().block_until_ready(value)


def _time_step(bucket: int, device, repeat: int) -> tuple[float, float, object]:
    """(first call s, best warm s, outputs on the host) of the kernel on ``device``."""
    jax = _jax()
    *inputs, memory = _step_inputs(bucket)
    x, m = inputs[6]["projector"].shape
    r = inputs[6]["carrier"].shape[1]
    step = _kernel(memory, bucket, m, r, str(device.platform))
    placed = jax.device_put(tuple(inputs), device)
    first, best, outputs = _first_and_best(step, placed, repeat)
    return first, best, jax.device_get(outputs)


def _first_and_best(step, placed, repeat: int) -> tuple[float, float, object]:
    """(first call s, best of ``repeat`` warm calls s, outputs) of ``step(*placed)``."""
    begin = time.perf_counter()
    outputs = _blocked(step(*placed))
    first = time.perf_counter() - begin
    best = float("inf")
    for _ in range(repeat):
        begin = time.perf_counter()
        outputs = _blocked(step(*placed))
        best = min(best, time.perf_counter() - begin)
    return first, best, outputs


def _state(outputs) -> np.ndarray:
    """Gauge-invariant contraction of a step's window and finalised site."""
    front, sites, count, _, (final_site, *_), _ = outputs
    window = [np.asarray(front)[None]] + [np.asarray(site) for site in sites[: int(count)]]
    return bench_pt_steps.chain_state(window, [np.asarray(final_site)])


def calibrate(buckets: list[int], repeat: int, record: dict) -> bool:
    from nonmarkov.engines.jax import placement

    accelerators = placement.accelerators()
    host = placement.host_device()
    if not accelerators or host is None:
        print("calibration: needs an accelerator and the host CPU device; skipped")
        return True
    accelerator = accelerators[0]
    print(
        f"whole-step kernel of a full B3 window (29 sites, m = 4, r = 3), host {host} "
        f"against {accelerator}; best of {repeat}"
    )
    print(
        f"{'bucket':>6} {'work':>9} {'host s':>9} {'accel s':>9} {'host/accel':>10} "
        f"{'compile host':>12} {'compile accel':>13} {'|d state|':>9}"
    )
    rows, ok = [], True
    for bucket in buckets:
        first_h, host_s, out_h = _time_step(bucket, host, repeat)
        first_a, accel_s, out_a = _time_step(bucket, accelerator, repeat)
        difference = float(np.linalg.norm(_state(out_h) - _state(out_a)))
        ok = ok and difference < 1e-8
        work = placement.window_work(bucket, 3, 4)
        rows.append(
            {
                "bucket": bucket,
                "work": work,
                "host_s": host_s,
                "accelerator_s": accel_s,
                "compile_host_s": first_h - host_s,
                "compile_accelerator_s": first_a - accel_s,
                "state_difference": difference,
            }
        )
        print(
            f"{bucket:6d} {work:9.2e} {host_s:9.4f} {accel_s:9.4f} {host_s / accel_s:10.2f} "
            f"{first_h - host_s:12.2f} {first_a - accel_s:13.2f} {difference:9.1e}",
            flush=True,
        )
    wins = [row for row in rows if row["accelerator_s"] < row["host_s"]]
    if wins:
        first = wins[0]
        index = rows.index(first)
        below = rows[index - 1]["work"] if index else first["work"]
        suggestion = float(np.sqrt(below * first["work"]))
        print(
            f"the accelerator wins from bucket {first['bucket']} (work {first['work']:.2e}); "
            f"ACCELERATOR_WORK ~ {suggestion:.1e} would choose there "
            f"(now {placement.ACCELERATOR_WORK:.1e})"
        )
    else:
        suggestion = None
        print(
            f"the accelerator wins at none of these buckets; ACCELERATOR_WORK should be "
            f"above {rows[-1]['work']:.1e} (now {placement.ACCELERATOR_WORK:.1e})"
        )
    print(f"same step on both devices: {'yes' if ok else 'NO'}", flush=True)
    record["calibration"] = {"rows": rows, "suggested_work": suggestion}
    return ok


def profile(bucket: int, repeat: int, record: dict) -> bool:
    from nonmarkov.engines.jax import padding, placement
    from nonmarkov.options import default_options

    jax = _jax()
    accelerators = placement.accelerators()
    if not accelerators:
        print("profile: no accelerator; skipped")
        return True
    device = accelerators[0]
    *inputs, memory = _step_inputs(bucket)
    x, m = inputs[6]["projector"].shape
    r = inputs[6]["carrier"].shape[1]
    count = int(inputs[2])
    begin = time.perf_counter()
    placed = _blocked(jax.device_put(tuple(inputs), device))
    transfer_in = time.perf_counter() - begin
    window_bytes = inputs[0].nbytes + inputs[1].nbytes
    step = _kernel(memory, bucket, m, r, str(device.platform))
    first, step_s, outputs = _first_and_best(step, placed, repeat)
    begin = time.perf_counter()
    jax.device_get(outputs[4])  # what a chunk of one step fetches (finalised site, ranks)
    fetch_step = time.perf_counter() - begin
    begin = time.perf_counter()
    jax.device_get((outputs[0], outputs[1]))  # the whole window (a move, host_window)
    fetch_window = time.perf_counter() - begin
    # one site's factorisations at the step's shapes
    wide = bucket * r
    algorithm = padding._svd_algorithm(default_options().svd, str(device.platform))
    rng = np.random.default_rng(SEED)
    tall = jax.device_put(rng.standard_normal((wide * m, wide)) + 0j, device)
    flat = jax.device_put(rng.standard_normal((wide, m * bucket)) + 0j, device)
    qr = jax.jit(padding._padded_qr)
    svd = jax.jit(lambda a: padding._svd(a, algorithm))
    timings = {}
    for name, function, argument in (("qr", qr, tall), ("svd", svd, flat)):
        _blocked(function(argument))
        best = float("inf")
        for _ in range(repeat):
            begin = time.perf_counter()
            _blocked(function(argument))
            best = min(best, time.perf_counter() - begin)
        timings[name] = best
    factorisations = count * timings["qr"] + (count + 1) * timings["svd"]
    rows = [
        ("compile (first call less a warm one)", first - step_s),
        (f"window host -> device ({window_bytes / 2**20:.0f} MiB)", transfer_in),
        ("step (warm)", step_s),
        (f"  QR ({wide * m}, {wide}) x {count} sites", count * timings["qr"]),
        (f"  SVD ({wide}, {m * bucket}) x {count + 1}", (count + 1) * timings["svd"]),
        ("  the rest (products, masks, launches)", step_s - factorisations),
        ("fetch of one step's outputs", fetch_step),
        ("fetch of the whole window", fetch_window),
    ]
    print(f"one B3 step at bucket {bucket} ({count} sites) on {device}; best of {repeat}")
    for name, seconds in rows:
        share = f"{100 * seconds / step_s:6.1f} % of the step" if step_s > 0 else ""
        print(f"  {name:<44} {seconds:9.4f} s  {share}")
    print(
        f"  factorisations: {100 * factorisations / step_s:.0f} % of the step "
        f"(SVD {100 * (count + 1) * timings['svd'] / step_s:.0f} %, "
        f"QR {100 * count * timings['qr'] / step_s:.0f} %)",
        flush=True,
    )
    record["profile"] = {
        "bucket": bucket,
        "sites": count,
        **{name: s for name, s in rows},
        "qr_s": timings["qr"],
        "svd_s": timings["svd"],
    }
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", action="store_true")
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--buckets", type=int, nargs="+", default=[12, 24, 48, 96])
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--bucket", type=int, default=192, help="bucket of --profile")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--fake-accelerator", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    from nonmarkov import backends

    backends.set_backend("jax")
    _fake(args.fake_accelerator)
    record: dict = {}
    ok = True
    if args.decisions:
        ok = decisions(record) and ok
    if args.calibrate:
        ok = calibrate(args.buckets, args.repeat, record) and ok
    if args.profile:
        ok = profile(args.bucket, args.repeat, record) and ok
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(record, handle, default=str)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
