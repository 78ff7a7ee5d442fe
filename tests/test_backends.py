"""The numerical backend layer: switching, precision, proxy extras and error messages."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy
import pytest
import scipy.linalg

from nonmarkov import backends
from nonmarkov.backends import host
from nonmarkov.backends import numerical_backend as nb
from nonmarkov.backends.numerical_backend import la, np

jax_installed = True
try:
    import jax  # noqa: F401
except ImportError:  # pragma: no cover - depends on the install
    jax_installed = False

needs_jax = pytest.mark.skipif(not jax_installed, reason="JAX is not installed")
BACKENDS = ["numpy", pytest.param("jax", marks=needs_jax)]


def run_python(code: str, **environment: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(environment)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


def sample_matrix() -> numpy.ndarray:
    rng = numpy.random.default_rng(3)
    return rng.normal(size=(5, 4)) + 1j * rng.normal(size=(5, 4))


def compute_with_active_backend(matrix: numpy.ndarray) -> dict[str, numpy.ndarray]:
    """A few typical kernel operations through the proxies, results on the host."""
    a = np.asarray_complex(matrix)
    u, s, vh = la.svd(a)
    square = np.einsum("ij,kj->ik", a, np.conj(a))
    return {
        "s": np.to_host(s),
        "reconstruction": np.to_host((u * s) @ vh),
        "square": np.to_host(square),
        "expm": np.to_host(la.expm(0.1j * square)),
        "trace": np.to_host(np.trace(square)),
    }


def test_session_backend_matches_the_option(request, backend_name):
    assert backend_name == request.config.getoption("--backend")
    assert backends.get_backend() == backend_name
    assert np.backend_name == backend_name


@needs_jax
def test_switching_backends_gives_identical_numbers():
    matrix = sample_matrix()
    with backends.use_backend("numpy", "double"):
        on_numpy = compute_with_active_backend(matrix)
    with backends.use_backend("jax", "double"):
        assert backends.get_backend() == "jax"
        assert type(np.zeros(2)).__module__.startswith("jax")
        on_jax = compute_with_active_backend(matrix)
    for key, value in on_numpy.items():
        numpy.testing.assert_allclose(on_jax[key], value, rtol=1e-12, atol=1e-12, err_msg=key)
    # the reference results are right, too
    numpy.testing.assert_allclose(on_numpy["s"], scipy.linalg.svdvals(matrix), rtol=1e-12)
    numpy.testing.assert_allclose(on_numpy["reconstruction"], matrix, atol=1e-12)


@needs_jax
def test_set_backend_switches_and_switches_back():
    start = backends.get_backend()
    other = "jax" if start == "numpy" else "numpy"
    backends.set_backend(other)
    assert backends.get_backend() == other
    assert np.backend_name == other
    backends.set_backend(start)
    assert backends.get_backend() == start


@needs_jax
def test_enable_jax_features():
    session_precision = backends.get_precision()
    backends.set_backend("numpy")
    backends.enable_jax_features()
    assert backends.get_backend() == "jax"
    assert backends.get_precision() == session_precision  # precision is kept
    backends.enable_jax_features("double")
    assert np.zeros(1, dtype=np.dtype_complex).dtype == numpy.complex128


@pytest.mark.parametrize("name", BACKENDS)
def test_use_backend_restores_the_previous_backend_on_exception(name):
    before = nb.get_state()
    with pytest.raises(RuntimeError, match="inside the block"):
        with backends.use_backend(name, "single"):
            assert backends.get_backend() == name
            assert backends.get_precision() == "single"
            raise RuntimeError("inside the block")
    assert nb.get_state() is before
    assert backends.get_precision() == before.precision


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize(
    "precision, complex_dtype, float_dtype",
    [
        ("double", numpy.complex128, numpy.float64),
        ("single", numpy.complex64, numpy.float32),
    ],
)
def test_dtypes_follow_the_precision(name, precision, complex_dtype, float_dtype):
    with backends.use_backend(name, precision):
        assert np.dtype_complex == complex_dtype
        assert np.dtype_float == float_dtype
        assert np.asarray_complex([1.0, 2.0]).dtype == complex_dtype
        assert np.asarray_float([1.0, 2.0]).dtype == float_dtype
        assert np.zeros(3, dtype=np.dtype_complex).dtype == complex_dtype
        assert np.get_random_floats(1, (2,)).dtype == float_dtype
        u, s, vh = la.svd(np.asarray_complex(sample_matrix()))
        assert u.dtype == complex_dtype
        assert s.dtype == float_dtype
        assert host.to_backend(numpy.eye(2)).dtype == complex_dtype
        details = backends.info()
        assert details["dtype_complex"] == numpy.dtype(complex_dtype).name
        assert details["dtype_float"] == numpy.dtype(float_dtype).name
    # back in the session precision, double-precision arithmetic is available again
    if backends.get_precision() == "double":
        assert np.asarray_complex([1.0]).dtype == numpy.complex128
        assert np.asarray(1.0, dtype=np.dtype_float) + 1e-12 != 1.0


@pytest.mark.parametrize("name", BACKENDS)
def test_update_semantics(name):
    with backends.use_backend(name):
        array = np.zeros((3, 2), dtype=np.dtype_float)
        updated = np.update(array, (1, slice(None)), np.asarray([4.0, 5.0]))
        numpy.testing.assert_array_equal(np.to_host(updated), [[0.0, 0.0], [4.0, 5.0], [0.0, 0.0]])
        if name == "numpy":
            assert updated is array  # in place, no copy
        else:
            # functional: the input array is unchanged
            numpy.testing.assert_array_equal(np.to_host(array), numpy.zeros((3, 2)))
        again = np.update(updated, 0, 7.0)
        numpy.testing.assert_array_equal(np.to_host(again)[0], [7.0, 7.0])


@needs_jax
def test_random_floats_are_identical_across_backends():
    with backends.use_backend("numpy"):
        on_numpy = np.to_host(np.get_random_floats(42, (3, 4)))
    with backends.use_backend("jax"):
        on_jax = np.to_host(np.get_random_floats(42, (3, 4)))
    numpy.testing.assert_array_equal(on_numpy, on_jax)
    assert on_numpy.shape == (3, 4)
    assert 0.0 <= on_numpy.min() and on_numpy.max() < 1.0
    with backends.use_backend("numpy"):
        different_seed = np.to_host(np.get_random_floats(43, (3, 4)))
    assert not numpy.array_equal(on_numpy, different_seed)


@pytest.mark.parametrize("name", BACKENDS)
def test_info_describes_the_active_backend(name):
    with backends.use_backend(name):
        details = backends.info()
        assert set(details) == {
            "backend",
            "version",
            "precision",
            "dtype_complex",
            "dtype_float",
            "devices",
            "default_device",
        }
        assert details["backend"] == name
        assert details["version"].startswith("numpy" if name == "numpy" else "jax")
        assert details["precision"] == backends.get_precision()
        assert details["devices"] and all(isinstance(d, str) for d in details["devices"])
        assert details["default_device"] == details["devices"][0]
        text = backends.format_info(details)
        assert any(line.split() == ["backend", name] for line in text.splitlines())
        assert len(text.splitlines()) == len(details)


def test_host_helpers_return_host_results_and_move_them_once():
    matrix = numpy.array([[0.0, 1.0], [-2.0, -3.0]])  # not symmetric: eigenvalues -1, -2
    values, vectors = host.host_eig(matrix)
    assert sorted(numpy.real(np.to_host(values)).tolist()) == pytest.approx([-2.0, -1.0])
    vectors = np.to_host(vectors)
    numpy.testing.assert_allclose(matrix @ vectors, vectors * np.to_host(values), atol=1e-12)


def test_command_line_info():
    result = subprocess.run(
        [sys.executable, "-m", "nonmarkov", "info"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NONMARKOV_BACKEND": ""},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("nonmarkov ")
    assert "backend" in result.stdout and "numpy" in result.stdout
    assert "dtype_complex" in result.stdout and "complex128" in result.stdout


@needs_jax
def test_command_line_info_for_jax():
    result = subprocess.run(
        [sys.executable, "-m", "nonmarkov", "info", "--backend", "jax"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "jax" in result.stdout


# --- errors ---------------------------------------------------------------------------------


def test_unknown_backend_lists_the_valid_values():
    before = nb.get_state()
    with pytest.raises(ValueError, match=r"unknown backend 'torch'.*\['numpy', 'jax'\]"):
        backends.set_backend("torch")
    with pytest.raises(TypeError, match="backend must be a string"):
        backends.set_backend(None)
    assert nb.get_state() is before


def test_unknown_precision_lists_the_valid_values():
    before = nb.get_state()
    with pytest.raises(ValueError, match=r"unknown precision 'half'.*\['double', 'single'\]"):
        backends.set_backend("numpy", "half")
    with pytest.raises(ValueError, match="unknown precision"):
        with backends.use_backend("numpy", "quad"):
            pass  # pragma: no cover
    assert nb.get_state() is before


def test_missing_jax_gives_the_install_command(monkeypatch):
    # simulate an install without JAX: importing 'jax' fails
    for module in ("jax", "jax.numpy", "jax.scipy.linalg"):
        monkeypatch.setitem(sys.modules, module, None)
    before = nb.get_state()
    with pytest.raises(ImportError, match=r'JAX is not installed.*pip install "nonmarkov\[jax\]"'):
        backends.set_backend("jax")
    with pytest.raises(ImportError, match="pip install"):
        backends.enable_jax_features()
    assert nb.get_state() is before


def test_bogus_backend_environment_variable_fails_at_import():
    result = run_python("import nonmarkov", NONMARKOV_BACKEND="bogus")
    assert result.returncode != 0
    assert "NONMARKOV_BACKEND" in result.stderr
    assert "'bogus'" in result.stderr
    assert "['numpy', 'jax']" in result.stderr


def _without_backend_variables() -> dict[str, str]:
    return {
        key: value
        for key, value in os.environ.items()
        if key not in ("NONMARKOV_BACKEND", "OQUPY_BACKEND")
    }


def _backend_of(**variables: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from nonmarkov import backends; print(backends.get_backend())"],
        capture_output=True,
        text=True,
        env={**_without_backend_variables(), **variables},
        timeout=120,
    )


def test_oqupy_backend_is_read_where_nonmarkov_backend_is_unset():
    assert _backend_of(OQUPY_BACKEND="numpy").stdout.strip() == "numpy"
    assert _backend_of(NONMARKOV_BACKEND="numpy", OQUPY_BACKEND="NumPy").returncode == 0
    conflict = _backend_of(NONMARKOV_BACKEND="numpy", OQUPY_BACKEND="jax")
    assert conflict.returncode != 0
    assert "NONMARKOV_BACKEND='numpy'" in conflict.stderr
    assert "OQUPY_BACKEND='jax'" in conflict.stderr
    bogus = _backend_of(OQUPY_BACKEND="torch")
    assert bogus.returncode != 0 and "OQUPY_BACKEND" in bogus.stderr


@needs_jax
def test_oqupy_backend_jax_selects_jax():
    result = _backend_of(OQUPY_BACKEND="jax")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "jax"


def test_bogus_precision_environment_variable_fails_at_import():
    result = run_python(
        "import nonmarkov", NONMARKOV_PRECISION="quadruple", NONMARKOV_BACKEND="numpy"
    )
    assert result.returncode != 0
    assert "NONMARKOV_PRECISION" in result.stderr
    assert "['double', 'single']" in result.stderr


@pytest.mark.parametrize(
    "variable, value, expected",
    [
        ("NONMARKOV_BACKEND", "NumPy", "numpy"),
        ("NONMARKOV_PRECISION", "single", "complex64"),
    ],
)
def test_environment_variables_are_read_at_import(variable, value, expected):
    env = {"NONMARKOV_BACKEND": "numpy", variable: value}
    code = (
        "from nonmarkov import backends; d = backends.info(); "
        "print(d['backend'], d['dtype_complex'])"
    )
    result = run_python(code, **env)
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout


@needs_jax
def test_jax_environment_variable_selects_jax_with_x64():
    code = (
        "from nonmarkov.backends import np, get_backend; "
        "print(get_backend(), np.asarray_complex([1.0]).dtype)"
    )
    result = run_python(code, NONMARKOV_BACKEND="jax", NONMARKOV_PRECISION="double")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["jax", "complex128"]
