"""The Python surface fails cleanly: each section is one way it did not. What could
kill the interpreter runs in a subprocess, so that a crash fails the test instead of pytest.
Run by ctest (PYTHONPATH=build/python, KMEANS_BIN=build/kmeans)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import kmeans_gpu

KMEANS_BIN = os.environ.get("KMEANS_BIN", os.path.join(os.path.dirname(__file__), "../../build/kmeans"))


def cli_message(*args, env=None):
    """The CLI's one-line message for these options, without 'kmeans: error: ' (and without the
    ' (see --help)' that its parse errors add: the module has no --help), its option names as
    the module's parameters (--clusters=8 -> n_clusters=8)."""
    r = subprocess.run([KMEANS_BIN, "--quiet", *args], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode != 0, r.stdout
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("kmeans: error: "), line
    return kmeans_gpu._core.python_names(line[len("kmeans: error: "):].removesuffix(" (see --help)"))


def python(code, env=None, timeout=120):
    """Runs code in a fresh interpreter; returns (returncode, stdout, stderr)."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, **(env or {})})
    return r.returncode, r.stdout, r.stderr


def outcome(code, env=None):
    """The one JSON line code prints: what the calls it makes raised (a crash fails here)."""
    rc, out, err = python(code, env)
    assert rc == 0, f"exit {rc} (negative: killed by that signal)\n{out}\n{err}"
    return json.loads(out.strip().splitlines()[-1])


# -- threads ------------------------------------------------------------------------------------

FIT = textwrap.dedent("""
    import json, warnings, numpy as np, kmeans_gpu
    X = np.random.default_rng(0).random((2000, 4))
    def run(**params):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                km = kmeans_gpu.KMeans(**{"n_clusters": 3, "random_state": 0, **params}).fit(X)
                km.predict(X)
                result = {"threads": km.report_["threads"], "inertia": km.inertia_}
            except (ValueError, TypeError) as e:
                result = {"error": type(e).__name__, "message": str(e)}
        result["warnings"] = [str(w.message) for w in caught if w.category is RuntimeWarning]
        return result
""")


@pytest.mark.parametrize("threads", [0, -3, 1025, 100_000, 2**31, 2**40, 2**70])
def test_threads_out_of_range_name_the_range(threads):
    """n_threads=100000 crashed libgomp; now the CLI's cap on --threads, for any integer, with one
    range named below it and above it (the CLI's 0, all cores, is None here)."""
    got = outcome(FIT + f"print(json.dumps(run(impl='omp', n_threads={threads})))")
    assert got["error"] == "ValueError", got
    assert got["message"] == f"n_threads={threads}: must be in 1..1024 (None: all cores)"


def test_threads_at_the_cap_run():
    got = outcome(FIT + "print(json.dumps(run(impl='omp', n_threads=1024)))")
    assert got["threads"] == 1024 and not got["warnings"], got


@pytest.mark.parametrize("impl", ["omp", "seq"])
def test_huge_omp_num_threads_is_clamped_as_the_cli_clamps_it(impl, tmp_path):
    """OMP_NUM_THREADS=100000 crashed the first parallel region (the tol scale, or omp's
    loop); the CLI clamps it to its cap of 1024 with a note: the module does the same, the note
    a RuntimeWarning (once: the setting stays clamped)."""
    env = {"OMP_NUM_THREADS": "100000"}
    got = outcome(FIT + f"print(json.dumps([run(impl='{impl}', max_iter=2), run(impl='{impl}', max_iter=2, tol=0)]))",
                  env)
    cli = subprocess.run([KMEANS_BIN, f"--impl={impl}", "--objects=2000", "--coords=4", "--clusters=3", "--loops=2",
                          "--report=json", "--quiet"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env})
    assert cli.returncode == 0, cli.stderr
    note = "kmeans: note: OMP_NUM_THREADS=100000 is above the limit of 1024 threads; using 1024"
    assert cli.stderr.strip() == note
    assert got[0]["warnings"] == [note[len("kmeans: note: "):]], got
    assert not got[1]["warnings"], got
    assert got[0]["threads"] == got[1]["threads"] == json.loads(cli.stdout)["threads"], got


# -- Ctrl-C inside one iteration --------------------------------------------------------------

LONG = """
    import sys, numpy as np, kmeans_gpu
    X = np.random.default_rng(0).random((200_000, 64))
    km = kmeans_gpu.KMeans(2000, init="first", max_iter=3, tol=0, impl="{impl}")
    if {predict}:  # centroids from one quick fit; then seq's predict labels 200,000 objects
        km.set_params(max_iter=1, impl="omp").fit(X[:2000]).set_params(impl="{impl}")
    print("started", flush=True)
    try:
        km.predict(X) if {predict} else km.fit(X)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(3)
    print("finished", flush=True)
"""


def test_ctrl_c_inside_one_long_iteration():
    """One iteration of 200,000 x 64 with K = 2,000 takes seconds here (seq: about a minute):
    SIGINT a second in must end seq's and omp's fits and seq's predict within two seconds."""
    cases = {"seq": LONG.format(impl="seq", predict=False), "omp": LONG.format(impl="omp", predict=False),
             "seq-predict": LONG.format(impl="seq", predict=True)}
    procs = {name: subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                                    text=True, env=os.environ.copy()) for name, code in cases.items()}
    try:
        for name, p in procs.items():
            assert p.stdout.readline().strip() == "started", name
        time.sleep(1.0)
        for p in procs.values():
            p.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        for name, p in procs.items():
            try:
                out, _ = p.communicate(timeout=max(0.1, signalled + 2.0 - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"{name}: no KeyboardInterrupt within 2 s of SIGINT")
            assert p.returncode == 3 and "interrupted" in out, (name, p.returncode, out)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


# -- integers beyond C's int ------------------------------------------------------------------

@pytest.mark.parametrize("param,value,option", [
    ("n_clusters", 2**31, "--clusters"),
    ("n_clusters", 2**40, "--clusters"),
    ("max_iter", 2**31, "--loops"),
    ("n_init", 2**31, "--n-init"),
    ("block", 2**40, "--block"),
    ("n_gpus", 2**31, "--gpus"),
    ("random_state", 2**64, "--seed"),
    ("random_state", 2**70, "--seed"),
    ("device_memory", 2**70, "--device-memory"),
])
def test_integers_beyond_c_give_the_cli_message(param, value, option):
    """They raised pybind11's TypeError with a dump of the call; now the CLI's message."""
    got = outcome(FIT + f"print(json.dumps(run(impl='omp', {param}={value})))")
    assert got["error"] == "ValueError", got
    assert got["message"] == cli_message(f"{option}={value}")


# -- fuzz -------------------------------------------------------------------------------------

FUZZ = """
    import json, random, sys, time, warnings
    import numpy as np, kmeans_gpu
    from kmeans_gpu import KMeans

    INTS = [-2**70, -2**63, -2**31 - 1, -1, 0, 1, 2, 3, 7, 64, 1024, 1025, 2**31 - 1, 2**31, 2**32, 2**63 - 1,
            2**63, 2**64 - 1, 2**64, 2**70, 10**30, np.int64(5), np.uint64(2**64 - 1), np.int32(-3)]
    FLOATS = [float("nan"), float("inf"), -float("inf"), -1.5, -0.0, 0.0, 1e-300, 0.5, 1.0, 2.5, 1e300,
              np.float32(0.25)]
    STRINGS = ["", "a", "seq", "omp", "fused", "k-means++", "k-means||", "random", "first", "float", "double",
               "8G", "\\x00", "\\u00e9" * 50]
    OTHERS = [None, True, False, [], [1], {}, (), object(), b"bytes", 1 + 1j, np.array([1.0]), np.zeros((3, 4)),
              np.full((3, 4), np.nan), np.ones((2, 4)), np.zeros((3, 4), dtype=np.float32), slice(1)]
    POOL = INTS + FLOATS + STRINGS + OTHERS
    VALID = {"n_clusters": [1, 2, 5], "init": ["k-means++", "k-means||", "random", "first", np.zeros((3, 4))],
             "max_iter": [1, 5, 2**31 - 1], "tol": [0, 1e-4, 1e300], "threshold": [0, 0.5, 1], "n_init": [1, 2],
             "random_state": [None, 0, 2**64 - 1, np.random.RandomState(1)], "impl": [None, "seq", "omp"],
             "precision": [None, "float", "double"], "block": [None, 32, 1024], "n_threads": [None, 1, 2],
             "n_gpus": [1], "device_memory": [None, 1, 2**40], "verbose": [0, 1, 2, True]}
    # A valid n_init that large runs for ever as asked (as the CLI's): not a hang to find.
    SKIP = {"n_init": lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 64 < v < 2**31}
    PARAMS = ["n_clusters", "init", "max_iter", "tol", "threshold", "n_init", "random_state", "impl",
              "precision", "block", "n_threads", "n_gpus", "device_memory", "verbose"]

    rng = random.Random(int(sys.argv[1]))
    X = np.random.default_rng(0).random((50, 4))
    counts = {"fitted": 0, "ok": 0, "ValueError": 0, "TypeError": 0}
    warnings.simplefilter("ignore")
    for case in range(int(sys.argv[2])):
        params = {"n_clusters": 3, "impl": "omp", "max_iter": 20}
        for name in rng.sample(PARAMS, rng.randint(1, 3)):
            value = rng.choice(VALID[name] if rng.random() < 0.5 else POOL)
            if not (name in SKIP and SKIP[name](value)):
                params[name] = value
        data = X.astype(np.float32) if rng.random() < 0.3 else X
        started = time.monotonic()
        try:
            km = KMeans(**params).fit(data)
            counts["fitted"] += 1
            name = rng.choice(["block", "n_threads", "device_memory", "impl"])
            km.set_params(**{name: rng.choice(VALID[name] if rng.random() < 0.5 else POOL)})
            km.predict(data), km.transform(data), km.score(data)
            counts["ok"] += 1
        except (ValueError, TypeError) as e:
            # A message of ours or scikit-learn's, never pybind11's dump of the call.
            assert str(e) and "incompatible function arguments" not in str(e), (params, repr(e))
            counts[type(e).__name__] += 1
        except BaseException as e:
            print(json.dumps({"params": repr(params), "raised": repr(e)}))
            raise
        assert time.monotonic() - started < 10, params
    print(json.dumps(counts))
"""


@pytest.mark.parametrize("seed", [1, 2])
def test_fuzz_every_parameter(seed):
    """Random ints, floats, strings, None, huge values and odd objects in every parameter
    (then in predict's), half of them valid: each fit either runs or raises ValueError/TypeError,
    soon; never a crash, a hang or another exception. KMEANS_FUZZ_CASES sets the number of
    cases (the fixed seeds keep a run reproducible)."""
    cases = os.environ.get("KMEANS_FUZZ_CASES", "150")
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(FUZZ), str(seed), cases], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    counts = json.loads(r.stdout.strip().splitlines()[-1])
    assert counts["ok"] > 10 and counts["ValueError"] > 10 and counts["TypeError"] > 10, counts
    assert time.monotonic() - started < 60 * int(cases) / 150
