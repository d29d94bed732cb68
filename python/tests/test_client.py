"""kgym.client against a live `kgym serve` (the ASan build when present) on a
free loopback port with a temp database, CPU device, one worker."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from kgym.client import Client, KgymError, compute_score, drkernel_reward  # noqa: E402

FIX = ROOT / "tests" / "fixtures"
REF = (FIX / "tasks" / "add_one.py").read_text()


def cand(name):
    return (FIX / "candidates" / f"{name}.py").read_text()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    binary = os.environ.get("KGYM_BIN") or str(ROOT / ("build/asan/kgym" if (ROOT / "build/asan/kgym").exists()
                                                       else "build/kgym"))
    if not Path(binary).exists():
        pytest.skip("kgym is not built")
    d = tmp_path_factory.mktemp("serve")
    port_file = d / "port"
    log = open(d / "log", "w")
    env = dict(os.environ, TMPDIR=str(d))
    proc = subprocess.Popen([binary, "serve", "--device", "cpu", "--port", "0", "--port-file", str(port_file),
                             "--db", str(d / "jobs.db"), "--workers", "1", "--token", "tok",
                             "--stage-timeout", "compile=30"],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    for _ in range(600):
        if port_file.exists() and port_file.read_text().strip():
            break
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the server did not start")
    if proc.poll() is not None:
        pytest.fail("the server exited: " + (d / "log").read_text()[-2000:])
    url = f"http://127.0.0.1:{port_file.read_text().strip()}"
    yield url
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    log.close()
    assert "Sanitizer" not in (d / "log").read_text()


@pytest.fixture
def client(server):
    return Client(server, token="tok")


def test_health_and_auth(server):
    assert Client(server).health()["status"] == "healthy"  # /health needs no token
    with pytest.raises(KgymError) as e:
        Client(server, token="wrong").jobs()
    assert e.value.status == 401


def test_evaluate_correct(client):
    r = client.evaluate(REF, cand("ok"))
    assert r["status"] == "completed" and r["correctness"] and r["kgym"]["verdict"] == "correct"


def test_evaluate_compile_error_says_why(client):
    r = client.evaluate(REF, cand("import_error"))
    assert r["status"] == "failed" and not r["compiled"]
    assert r["error_code"] == "COMPILATION_ERROR" and "magic_kernels" in r["error_message"]


def test_submit_wait_and_batch(client):
    jid = client.submit(cand("wrong_value"), reference_code=REF, force_refresh=True)
    job = client.wait(jid, timeout=120)
    assert job["status"] == "done" and job["result"]["verdict"] == "incorrect"
    ids = client.submit_many([{"reference_code": REF, "kernel_code": cand(n)} for n in ("ok", "wrong_shape")])
    jobs = client.wait_all(ids, timeout=120)
    assert [j["result"]["verdict"] for j in jobs] == ["correct", "incorrect"]
    assert jobs[0]["cached_from"] is not None  # same content as test_evaluate_correct: from the store
    b = client.evaluate_batch([{"reference_code": REF, "kernel_code": cand("raise_in_forward")}])
    assert b["total_tasks"] == 1 and b["results"][0]["kgym"]["verdict"] == "runtime_error"
    assert any(j["id"] == jid for j in client.jobs(status="done"))


def test_errors_name_the_field(client):
    with pytest.raises(KgymError) as e:
        client.submit(cand("ok"), reference_code=REF, num_perf_trials="x")
    assert e.value.status == 400 and e.value.field == "num_perf_trials"
    with pytest.raises(KgymError) as e:
        client.cancel("no-such-job")
    assert e.value.status == 404
    with pytest.raises(KgymError) as e:
        client.get("no-such-job")
    assert e.value.status == 404 and e.value.field == "id"


def test_wait_timeout(client):
    jid = client.submit(cand("hang"), reference_code=REF, timeout=10)
    with pytest.raises(TimeoutError):
        client.wait(jid, timeout=0.5)
    assert client.cancel(jid)["status"] == "cancelled"


def test_metrics_text(client):
    m = client.metrics()
    assert "kgym_queue_depth" in m and 'kgym_jobs_finished_total{verdict="correct"}' in m


def test_compute_score_verl_signature(server):
    os.environ["KGYM_TOKEN"] = "tok"
    try:
        reply = "Here is my kernel:\n```python\n" + cand("ok") + "```\n"
        s = compute_score("kernelbench", reply, REF, extra_info={"uid": 1}, url=server)
        # Correct on CPU: no timing, so Dr. Kernel's reward is 0.5 (correctness only).
        assert s["score"] == pytest.approx(0.5) and s["verdict"] == "correct"
        s = compute_score("kernelbench", cand("wrong_value"), REF, url=server, reward="staged")
        assert s["score"] == pytest.approx(0.7) and "elements differ" in s["feedback"]
        s = compute_score("kernelbench", "no code at all", REF, url=server)
        assert s["score"] == 0.0 and s["verdict"] == "invalid"
    finally:
        del os.environ["KGYM_TOKEN"]


def test_drkernel_reward_formula():
    assert drkernel_reward({"status": "failed"}) == 0.0
    assert drkernel_reward({"status": "completed", "decoy_kernel": True, "correctness": True, "speedup": 2}) == 0.0
    assert drkernel_reward({"status": "completed", "correctness": True, "speedup": 5.0}) == pytest.approx(2.0)
    assert drkernel_reward({"status": "completed", "correctness": True, "speedup": 1.0,
                            "metadata": {"custom_kernel_cuda_time_in_profiling_us": 50,
                                         "total_kernel_run_time_in_profiling_us": 100}},
                           coverage_weight=0.5) == pytest.approx(1.25)
