"""kgym's verl reward functions (python/kgym/client.py) run by verl's own reward managers
against a scripted fake kgym server (fake_kgym_server.py): one batch mixes a fast correct
kernel, an empty reply, a compile error, a server that fails twice, a job answered 202 then
polled, a body without fields and a refused request.

verl code paths exercised unchanged (verl 0.9.1):
  verl/trainer/ppo/reward.py                        get_custom_reward_fn (pkg:// and file paths,
                                                    reward_kwargs merged), load_reward_manager
  verl/workers/reward_manager/{naive,dapo,batch,prime}.py     the legacy managers' __call__ (prime: its
                                                    process pool, forked and spawned workers, the
                                                    function pickled by reference from pkg://kgym.client;
                                                    from a file path it cannot be pickled)
  verl/experimental/reward_loop/reward_loop.py      RewardLoopWorker.compute_score_batch and
                                                    RewardLoopManager.compute_rm_score (its
                                                    per-key aggregation raised KeyError: 'compiled')
  verl/experimental/reward_loop/reward_manager/{naive,dapo,limited}.py   run_single (limited: "rate_limited"), sync and
                                                    coroutine compute_score
Only Ray is replaced: the loop workers are local objects and ray.get returns its argument.

Runs like test_verl.py: in-process when `import verl` works, else re-run under
KGYM_VERL_PYTHON, else skipped with the reason.

    KGYM_VERL_PYTHON=/tmp/verlvenv/bin/python .venv/bin/python -m pytest -q python/tests/test_verl_reward.py
"""
import asyncio
import multiprocessing
import pickle
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import verl_env  # noqa: E402

try:
    import torch
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.experimental.reward_loop import reward_loop as verl_reward_loop
    from verl.trainer.ppo.reward import extract_reward, get_custom_reward_fn, load_reward_manager
    from verl.workers.reward_manager import (BatchRewardManager, DAPORewardManager, NaiveRewardManager,
                                             PrimeRewardManager)
    WHY_NOT = None
except Exception as exc:  # noqa: BLE001 - any failure means "no usable verl here"
    WHY_NOT = f"{type(exc).__name__}: {exc}"

if not verl_env.here(WHY_NOT):
    test_under_the_verl_venv = verl_env.rerun_test(__file__, WHY_NOT)
else:
    from fake_kgym_server import FakeKgym, dead_url
    from kgym import client as kc

    REF = "class Model:\n    pass  # the reference\n"
    FAIL = -1.0

    def cand(directive):
        return f"Here is my kernel:\n```python\n# fake: {directive}\nclass ModelNew:\n    pass\n```\n"

    # (reply, expected score with failure_reward -1, correctness)
    SAMPLES = [
        (cand("verdict=correct speedup=2"), 1.5, True),
        ("", FAIL, False),                                   # an empty reply
        (cand("verdict=compile_error"), FAIL, False),
        (cand("fail=500*2 verdict=correct"), 1.0, True),     # the server fails twice, then answers
        (cand("slow=2 verdict=incorrect"), 0.0, False),      # 202, then polled until done
        (cand("verdict=blank"), FAIL, False),                # a 200 with "{}"
        (cand("reject=400"), FAIL, False),                   # refused: 400 kernel_code
    ]
    N = len(SAMPLES)
    RESP_LEN = 4

    class Tokenizer:
        """Token k >= 1 decodes to sample k-1's reply; token 0 to "" (padding)."""
        eos_token = "</s>"

        def decode(self, ids, skip_special_tokens=True):
            return "".join(SAMPLES[int(i) - 1][0] if int(i) else "" for i in ids)

        def batch_decode(self, rows, skip_special_tokens=True):
            return [self.decode(r) for r in rows]

    def valid_len(i):
        return 1 + i % 3

    def batch():
        """A verl DataProto as the rollout leaves it: prompts, responses (valid_len(i) tokens,
        the reply first), attention_mask, data_source, reward_model.ground_truth, extra_info."""
        prompts = torch.full((N, 2), 0, dtype=torch.long)
        responses = torch.zeros((N, RESP_LEN), dtype=torch.long)
        mask = torch.zeros((N, 2 + RESP_LEN), dtype=torch.long)
        mask[:, :2] = 1
        for i in range(N):
            responses[i, 0] = i + 1
            mask[i, 2:2 + valid_len(i)] = 1
        return DataProto.from_dict(
            tensors={"prompts": prompts, "responses": responses, "attention_mask": mask},
            non_tensors={"data_source": np.array(["kernelbench"] * N, dtype=object),
                         "reward_model": np.array([{"ground_truth": REF, "style": "rule"}] * N, dtype=object),
                         "extra_info": np.array([{"index": i} for i in range(N)], dtype=object),
                         "uid": np.array([f"u{i // 2}" for i in range(N)], dtype=object)})

    def expected_tensor(scores=None):
        t = torch.zeros((N, RESP_LEN))
        for i, (_, s, _) in enumerate(SAMPLES):
            t[i, valid_len(i) - 1] = s if scores is None else scores
        return t

    def config(url, name="compute_score", manager="naive", path="pkg://kgym.client", workers=2, **kw):
        return OmegaConf.create({"reward": {
            "num_workers": workers,
            "reward_manager": {"source": "register", "name": manager, "module": {"path": None, "name": None}},
            "custom_reward_function": {"path": path, "name": name,
                                       "reward_kwargs": {"url": url, "failure_reward": FAIL, **kw}},
            "reward_model": {"enable": False, "enable_resource_pool": False},
            "sandbox_fusion": None, "reward_kwargs": {}, "max_concurrent": 4, "timeout": 120}})

    @pytest.fixture(autouse=True)
    def fast_retries(monkeypatch):
        monkeypatch.setenv("KGYM_RETRIES", "3")
        monkeypatch.setenv("KGYM_BACKOFF", "0.001")
        monkeypatch.setattr(kc, "_clients", {})

    @pytest.fixture
    def srv():
        with FakeKgym() as s:
            yield s

    def check_extra_info(info, n=N):
        assert set(info) == set(kc.SCORE_KEYS), sorted(info)
        for key in kc.SCORE_KEYS:
            assert len(info[key]) == n, key
        assert list(info["correctness"]) == [c for _, _, c in SAMPLES][:n]

    # -- the legacy managers (verl/workers/reward_manager) --

    @pytest.mark.parametrize("cls", [NaiveRewardManager, DAPORewardManager])
    def test_per_sample_managers(srv, cls):
        fn = get_custom_reward_fn(config(srv.url))
        out = cls(tokenizer=Tokenizer(), num_examine=0, compute_score=fn)(batch(), return_dict=True)
        torch.testing.assert_close(out["reward_tensor"], expected_tensor())
        check_extra_info(out["reward_extra_info"])
        assert len(srv.requests("POST", "/evaluate")) == N - 1 + 2  # no request for "", 2 retries

    def test_batch_manager(srv):
        fn = get_custom_reward_fn(config(srv.url, name="compute_score_batch"))
        out = BatchRewardManager(tokenizer=Tokenizer(), num_examine=0, compute_score=fn)(batch(), return_dict=True)
        torch.testing.assert_close(out["reward_tensor"], expected_tensor())
        check_extra_info(out["reward_extra_info"])

    def test_prime_manager(srv):
        """prime scores in a ProcessPoolExecutor and takes float(result) or result[0] (a dict would
        zero the whole batch), so it gets compute_score_scalar, loaded by module name (pkg://): the
        pool pickles the function by reference, and each worker process calls it."""
        fn = get_custom_reward_fn(config(srv.url, name="compute_score_scalar"))
        blob = pickle.dumps(fn)
        assert b"kgym.client" in blob and b"compute_score_scalar" in blob
        data = batch()
        out = PrimeRewardManager(tokenizer=Tokenizer(), num_examine=0, compute_score=fn)(data, return_dict=True)
        torch.testing.assert_close(out["reward_tensor"], expected_tensor())
        assert data.batch["acc"].tolist() == [s for _, s, _ in SAMPLES]
        assert len(srv.requests("POST", "/evaluate")) == N - 1 + 2

    @pytest.fixture
    def spawn():
        """New processes started fresh (spawn; Python 3.14's default, forkserver, is the same for
        this): a worker has only what it imports by name."""
        before = multiprocessing.get_start_method(allow_none=True)
        multiprocessing.set_start_method("spawn", force=True)
        yield
        multiprocessing.set_start_method(before, force=True)

    def test_prime_manager_with_fresh_worker_processes(srv, spawn):
        """One sample (one worker: each imports verl afresh, seconds of CPU)."""
        fn = get_custom_reward_fn(config(srv.url, name="compute_score_scalar"))
        out = PrimeRewardManager(tokenizer=Tokenizer(), num_examine=0, compute_score=fn)(batch()[0:1],
                                                                                          return_dict=True)
        torch.testing.assert_close(out["reward_tensor"], expected_tensor()[0:1])
        assert len(srv.requests("POST", "/evaluate")) == 1

    def test_prime_manager_loses_only_the_unreachable_sample(srv, monkeypatch):
        """prime turns a worker's exception into a 0 for that sample (it catches it: the step goes on).
        KgymUnavailable must come back through the pool intact: an exception that cannot be
        unpickled breaks the pool, and prime then zeros the whole batch."""
        samples = list(SAMPLES)
        samples[0] = (cand("delay=1 verdict=correct speedup=2"), 1.5, True)  # still running when 2 fails
        samples[2] = (cand("fail=503*99"), 0.0, False)
        monkeypatch.setattr(sys.modules[__name__], "SAMPLES", samples)
        fn = get_custom_reward_fn(config(srv.url, name="compute_score_scalar"))
        out = PrimeRewardManager(tokenizer=Tokenizer(), num_examine=0, compute_score=fn)(batch(), return_dict=True)
        torch.testing.assert_close(out["reward_tensor"], expected_tensor())
        assert out["reward_tensor"][0].sum() == 1.5
        assert len([r for r in srv.requests("POST") if "503" in r["body"]["kernel_code"]]) == 4  # 3 retries

    def test_prime_manager_cannot_use_a_file_path(srv):
        """Why prime needs pkg://: a function loaded from a file lives in a module that is not
        importable by name, so the pool cannot pickle it and prime scores every sample 0."""
        fn = get_custom_reward_fn(config(srv.url, name="compute_score_scalar",
                                         path=str(ROOT / "python" / "kgym" / "client.py")))
        with pytest.raises(pickle.PicklingError):
            pickle.dumps(fn)
        out = PrimeRewardManager(tokenizer=Tokenizer(), num_examine=0, compute_score=fn)(batch(), return_dict=True)
        assert not out["reward_tensor"].any()
        assert srv.requests() == []

    # -- the reward loop (what verl 0.9.1's trainer runs) --

    class LocalWorker(verl_reward_loop.RewardLoopWorker):
        """verl's RewardLoopWorker with the tokenizer given instead of loaded from a model path."""

        def __init__(self, config):
            super().__init__(config, None)

        def _init_reward_fn(self):
            self.input_tokenizer, self.reward_model_tokenizer = Tokenizer(), None
            self.reward_manager = load_reward_manager(self.config, self.input_tokenizer,
                                                      reward_router_address=None, reward_model_tokenizer=None)

    class LocalRewardLoopManager(verl_reward_loop.RewardLoopManager):
        """verl's RewardLoopManager with local workers in place of Ray actors."""

        def _init_reward_loop_workers(self):
            self.reward_loop_workers = []
            for _ in range(self.config.reward.num_workers):
                w = LocalWorker(self.config)
                run = (lambda w: lambda chunk: w.loop.run_until_complete(w.compute_score_batch(chunk)))(w)
                self.reward_loop_workers.append(SimpleNamespace(compute_score_batch=SimpleNamespace(remote=run)))

    @pytest.fixture
    def no_ray(monkeypatch):
        """ray.get returns its argument; a fresh current event loop, as a Ray actor has (the
        prime manager closes the loop it leaves current)."""
        monkeypatch.setattr(verl_reward_loop.ray, "get", lambda refs: refs)
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        yield
        # A step that raised (verl's gather) leaves the other samples' tasks pending: end them here,
        # not as "Task was destroyed but it is pending!" at exit.
        pending = asyncio.all_tasks(loop)
        for t in pending:
            t.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        asyncio.set_event_loop(None)
        loop.close()

    @pytest.mark.parametrize("manager,name", [("naive", "compute_score"), ("naive", "compute_score_async"),
                                              ("dapo", "compute_score"), ("dapo", "compute_score_async"),
                                              ("rate_limited", "compute_score_async")])
    def test_reward_loop(srv, no_ray, manager, name):
        m = LocalRewardLoopManager(config(srv.url, name=name, manager=manager))
        rm = m.reward_loop_workers[0]  # the managers verl built around kgym's function
        out = m.compute_rm_score(batch())
        torch.testing.assert_close(out.batch["rm_scores"], expected_tensor())
        tensor, info = extract_reward(out)
        check_extra_info({k: list(v) for k, v in info.items()})
        assert rm is not None
        assert len(srv.requests("POST", "/evaluate")) >= N - 1 + 2  # padding to 2 workers repeats a row

    def test_reward_loop_sees_a_coroutine_function(srv, no_ray):
        w = LocalWorker(config(srv.url, name="compute_score_async"))
        assert w.reward_manager.is_async_reward_score
        w = LocalWorker(config(srv.url, name="compute_score"))
        assert not w.reward_manager.is_async_reward_score

    def test_reward_loop_loads_the_client_by_file_path(srv, no_ray):
        m = LocalRewardLoopManager(config(srv.url, path=str(ROOT / "python" / "kgym" / "client.py")))
        torch.testing.assert_close(m.compute_rm_score(batch()).batch["rm_scores"], expected_tensor())

    def test_dead_server_fails_the_step_loudly(no_ray):
        """After the retries: KgymUnavailable out of verl's compute_rm_score, not a KeyError and not
        a batch of zeros the policy would learn from."""
        m = LocalRewardLoopManager(config(dead_url()))
        with pytest.raises(kc.KgymUnavailable, match="failed 4 times"):
            m.compute_rm_score(batch())

    def test_dead_server_scored_when_asked(no_ray):
        m = LocalRewardLoopManager(config(dead_url(), on_unavailable="score"))
        out = m.compute_rm_score(batch())
        torch.testing.assert_close(out.batch["rm_scores"], expected_tensor(FAIL))
        _, info = extract_reward(out)
        assert set(info) == set(kc.SCORE_KEYS)
        assert all("failed 4 times" in e or "empty reply" in e for e in info["error"])
