"""kgym's estimators and rejection masks inside a verl training run.

verl (volcengine/verl) picks its advantage estimator by name from a registry
(``verl.trainer.ppo.core_algos.register_adv_est`` / ``get_adv_estimator_fn``;
``algorithm.adv_estimator=kgym_trloo`` in the trainer config).  ``register()``
adds ``kgym_trloo``, ``kgym_grpo`` and ``kgym_rloo``; each is computed by
libkgym through :mod:`kgym.rl`, so a verl run and ``kgym advantages`` give
the same numbers.

The layout is verl's multi-turn one: one row per trajectory, the model's
tokens marked by ``response_mask`` and the environment's (tool or user)
tokens in between marked 0.  Turn k of a row is its k-th run of 1s; its
reward is the sum of ``token_level_rewards`` from the run's first token up to
the next run (verl puts a reward on a turn's last token).  Rows sharing
``index`` (verl's ``uid``) are samples of one prompt.  Every token of a turn
gets that turn's advantage; tokens outside runs get 0.

A trainer that rejects turns (MRS, PRS) or loss-masks them passes the
per-turn decisions through ``set_turn_flags(data, mask=..., keep=...)``
before ``compute_advantage``: verl hands an estimator no per-turn fields of
its own, so they travel in ``data.meta_info`` under ``kgym_turn_flags``.

``mrs_response_mask`` and ``prs_response_mask`` are the rejection hooks: they
return a copy of ``response_mask`` with the rejected turns (or, in MRS token
mode, tokens) zeroed, as Dr. Kernel's trainer does, and the per-turn keep
flags.  Turns are found from ``response_mask``, so compute the advantages on
the unedited mask with the flags (``set_turn_flags(data, keep=...)``), then
install the edited mask for the loss: a rejected turn then keeps its place
in its group's baseline and gets advantage 0, as in Dr. Kernel.

Importing this module needs torch; ``register()`` needs verl.  Nothing here
is loaded by ``import kgym``.
"""
from __future__ import annotations

import numpy as np
import torch

from kgym import rl

ESTIMATORS = {"kgym_trloo": "trloo", "kgym_grpo": "grpo", "kgym_rloo": "rloo"}
FLAGS_KEY = "kgym_turn_flags"


def turn_spans(response_mask) -> list[list[tuple[int, int]]]:
    """Per row, the (start, end) token spans of its turns: maximal runs of 1s."""
    m = np.asarray(torch.as_tensor(response_mask).detach().cpu().numpy() != 0)
    rows = []
    for row in m:
        edges = np.flatnonzero(np.diff(np.concatenate(([0], row.astype(np.int8), [0]))))
        rows.append(list(zip(edges[0::2].tolist(), edges[1::2].tolist())))
    return rows


def _turn_rewards(rewards: np.ndarray, spans):
    """A turn's reward: its tokens' rewards and those up to the next turn."""
    out = []
    for k, (start, _end) in enumerate(spans):
        stop = spans[k + 1][0] if k + 1 < len(spans) else rewards.shape[0]
        out.append(float(rewards[start:stop].sum()))
    return out


def trajectory_advantages(token_level_rewards, response_mask, index, estimator="trloo",
                          turn_mask=None, turn_keep=None, **options):
    """(advantages, returns) as tensors shaped like token_level_rewards.
    turn_mask / turn_keep: per row, one 0/1 per turn (None: all 1)."""
    rewards = torch.as_tensor(token_level_rewards).detach().cpu().double().numpy()
    spans = turn_spans(response_mask)
    prompt, sample, turn, reward, mask, keep, where = [], [], [], [], [], [], []
    for row, row_spans in enumerate(spans):
        for k, r in enumerate(_turn_rewards(rewards[row], row_spans)):
            prompt.append(index[row])
            sample.append(row)
            turn.append(k + 1)
            reward.append(r)
            mask.append(1 if turn_mask is None else int(turn_mask[row][k]))
            keep.append(1 if turn_keep is None else int(turn_keep[row][k]))
            where.append((row, *row_spans[k]))
    adv_out = torch.zeros_like(torch.as_tensor(token_level_rewards), dtype=torch.float32)
    ret_out = torch.zeros_like(adv_out)
    if not where:
        return adv_out, ret_out
    if estimator == "rloo" and any(len(s) > 1 for s in spans):
        raise rl.KgymError("kgym_rloo is single-turn: a row has several turns (use kgym_trloo)")
    adv, ret = rl.advantages(prompt, sample, reward, turn=turn, mask=mask, keep=keep,
                             estimator=estimator, **options)
    for (row, start, end), a, g in zip(where, adv, ret):
        adv_out[row, start:end] = float(a)
        ret_out[row, start:end] = float(g)
    return adv_out, ret_out


def set_turn_flags(data, mask=None, keep=None):
    """Per-turn loss mask and rejection decisions for the kgym estimators
    (lists of per-row lists, one 0/1 per turn)."""
    data.meta_info[FLAGS_KEY] = {"mask": mask, "keep": keep}
    return data


def _options_from(config, estimator):
    """kgym options from verl's ``algorithm`` config: gamma, GRPO's
    norm_adv_by_std_in_grpo, and kgym_singleton / kgym_masked_reward /
    kgym_rejected / kgym_small_std overrides."""
    out = {}
    if config is None:
        return out
    get = config.get if hasattr(config, "get") else (lambda k, d=None: getattr(config, k, d))
    if get("gamma", None) is not None:
        out["gamma"] = float(get("gamma"))
    if estimator == "grpo" and get("norm_adv_by_std_in_grpo", None) is not None:
        out["normalize_std"] = bool(get("norm_adv_by_std_in_grpo"))
    for name in ("singleton", "masked_reward", "rejected", "small_std"):
        value = get(f"kgym_{name}", None)
        if value is not None:
            out[name] = value
    return out


def _make_estimator(name, estimator):
    def fn(token_level_rewards, response_mask, index=None, config=None, **kwargs):
        if index is None:
            raise rl.KgymError(f"{name} needs verl's uid (the prompt groups)")
        flags = kwargs.get("kgym_turn_flags") or {}
        return trajectory_advantages(token_level_rewards, response_mask, list(index), estimator,
                                     flags.get("mask"), flags.get("keep"),
                                     **_options_from(config, estimator))
    fn.__name__ = f"compute_{name}_advantage"
    fn.__doc__ = f"verl advantage estimator {name!r}: kgym's {estimator} (docs/rl.md)."
    return fn


_FUNCTIONS = {name: _make_estimator(name, est) for name, est in ESTIMATORS.items()}


def register():
    """Registers kgym_trloo, kgym_grpo and kgym_rloo with verl (idempotent)."""
    from verl.trainer.ppo import core_algos

    for name, fn in _FUNCTIONS.items():
        core_algos.register_adv_est(name)(fn)
    return sorted(_FUNCTIONS)


def compute_advantage(data, estimator="kgym_trloo", config=None):
    """verl's own ``compute_advantage`` with the per-turn flags of
    ``set_turn_flags`` passed on (verl does not forward meta_info)."""
    from verl.trainer.ppo import core_algos

    fn = core_algos.get_adv_estimator_fn(estimator)
    flags = data.meta_info.get(FLAGS_KEY)
    adv, ret = fn(token_level_rewards=data.batch["token_level_rewards"],
                  response_mask=data.batch["response_mask"],
                  index=data.non_tensor_batch["uid"], config=config, kgym_turn_flags=flags)
    data.batch["advantages"], data.batch["returns"] = adv, ret
    return data


def _per_row(flags, where, n_rows):
    out = [[] for _ in range(n_rows)]
    for (row, _s, _e), f in zip(where, flags):
        out[row].append(int(f))
    return out


def mrs_response_mask(old_log_probs, rollout_log_probs, response_mask, turn_mask=None,
                      mode="geometric", delta=0.001, veto_threshold=1e-4):
    """Dr. Kernel's MRS on verl tensors: (response_mask with rejected turns, or
    tokens in token mode, zeroed; per-row lists of per-turn keep flags).  A
    row is one trajectory; turn_mask is the per-turn loss mask."""
    lr = (torch.as_tensor(old_log_probs) - torch.as_tensor(rollout_log_probs)).detach().cpu() \
        .double().numpy()
    spans = turn_spans(response_mask)
    log_ratios, traj, mask, where = [], [], [], []
    for row, row_spans in enumerate(spans):
        for k, (start, end) in enumerate(row_spans):
            log_ratios.append(lr[row, start:end])
            traj.append(row)
            mask.append(1 if turn_mask is None else int(turn_mask[row][k]))
            where.append((row, start, end))
    out = torch.as_tensor(response_mask).clone()
    if not where:
        return out, [[] for _ in spans]
    keep, _, _, tokens = rl.mrs_filter(log_ratios, traj, delta=delta,
                                       veto_threshold=veto_threshold, mode=mode, mask=mask,
                                       return_tokens=True)
    for (row, start, end), tk, m in zip(where, tokens, mask):
        if m:  # a loss-masked turn is the trainer's business, not MRS's
            out[row, start:end] = out[row, start:end] * torch.as_tensor(tk, dtype=out.dtype)
    return out, _per_row(keep, where, len(spans))


def prs_response_mask(results, response_mask, seed=0, mode="turn", live=None, **options):
    """Dr. Kernel's PRS on verl tensors: results[row][k] is turn k's kgym
    evaluation result; live[row][k] (default all 1) whether turn k is still
    in the loss (for the geometric mode).  Returns (response_mask with the
    rejected turns zeroed, per-row lists of per-turn keep flags)."""
    spans = turn_spans(response_mask)
    flat, traj, where = [], [], []
    for row, row_spans in enumerate(spans):
        if len(results[row]) != len(row_spans):
            raise rl.KgymError(f"row {row}: {len(row_spans)} turns but {len(results[row])} results")
        for k, (start, end) in enumerate(row_spans):
            flat.append(results[row][k])
            traj.append(row)
            where.append((row, start, end))
    out = torch.as_tensor(response_mask).clone()
    if not where:
        return out, [[] for _ in spans]
    flat_live = None if live is None else [int(v) for row in live for v in row]
    keep, _, _ = rl.prs_sample(flat, seed=seed, mode=mode, trajectory=traj, live=flat_live,
                               **options)
    for (row, start, end), k in zip(where, keep):
        if not k:
            out[row, start:end] = 0
    return out, _per_row(keep, where, len(spans))
