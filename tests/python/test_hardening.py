"""The Python surface fails cleanly (issue 70): each section is one way it did not. What could
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

KMEANS_BIN = os.environ.get("KMEANS_BIN", os.path.join(os.path.dirname(__file__), "../../build/kmeans"))


def cli_message(*args, env=None):
    """The CLI's one-line message for these options, without 'kmeans: error: ' (and without the
    ' (see --help)' that its parse errors add: the module has no --help)."""
    r = subprocess.run([KMEANS_BIN, "--quiet", *args], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode != 0, r.stdout
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("kmeans: error: "), line
    return line[len("kmeans: error: "):].removesuffix(" (see --help)")


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


@pytest.mark.parametrize("threads", [1025, 100_000, 2**31, 2**40, 2**70])
def test_threads_beyond_the_cap_give_the_cli_message(threads):
    """n_threads=100000 crashed libgomp; now the CLI's check of --threads, for any integer."""
    got = outcome(FIT + f"print(json.dumps(run(impl='omp', n_threads={threads})))")
    assert got["error"] == "ValueError", got
    # Beyond 64 bits the CLI's parser words it otherwise; the module keeps the one message.
    expected = cli_message(f"--threads={threads}") if threads < 2**63 else \
        f"--threads={threads} must be in 0..1024 (0: all cores)"
    assert got["message"] == expected


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
