/*
 * agent/agent.h — (internal) the agent loop: multi-turn rollouts of a model served over
 * an OpenAI-compatible chat-completions endpoint, each turn evaluated by kgym,
 * written as per-turn trajectory records (JSONL) ready for a trainer, with
 * rewards, advantages, PRS decisions, best-of-turns and a metrics report.
 * docs/agent.md describes the loop, the record schema and the prompts.
 *
 * Pieces, usable on their own: the chat client (libcurl multi: concurrency,
 * retries with backoff on 429/5xx/timeouts, per-request timeout), the prompt
 * templates and the feedback renderer, the context builder (task statement
 * always kept; middle turns dropped first; best-k by reward), the post-run
 * annotation (advantages, PRS, best-of-turns) and the rollout driver.
 *
 * Ownership: strings returned through `char **` are malloc'd (free());
 * json_t returned through `json_t **` are new references (json_decref());
 * kg_chat_reply and kg_prompts own their strings (free with their _free).
 * Borrowed inputs are never kept past the call.
 */
#ifndef KGYM_AGENT_H
#define KGYM_AGENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "kgym/error.h"
#include "eval/eval.h"
#include "kgym/rl.h"
#include "task/task.h"

#define KG_TURN_SCHEMA "kgym.turn/1"

/* ------------------------------------------------------------ chat client */

typedef struct kg_chat_config {
    const char *url;       /* base URL ("http://h:8000/v1") or the full .../chat/completions URL */
    const char *model;
    const char *api_key;   /* sent as "Authorization: Bearer KEY"; NULL = none */
    double temperature;    /* < 0: not sent */
    double top_p;          /* < 0: not sent */
    int max_tokens;        /* <= 0: not sent */
    const char *const *stop; /* n_stop stop strings */
    size_t n_stop;
    double timeout_s;      /* per attempt; 0 = none */
    int max_retries;       /* extra attempts after a retryable failure */
    double backoff_base_s; /* wait base·2^(attempt−1), capped, or the server's Retry-After */
    double backoff_max_s;
    int concurrency;       /* requests in flight at once (>= 1) */
} kg_chat_config;

void kg_chat_config_default(kg_chat_config *cfg);

typedef struct kg_chat_request {
    const json_t *messages; /* borrowed: [{"role","content"}...] */
    const char *tag;        /* sent as header X-Kgym-Request (tracing); may be NULL */
} kg_chat_request;

typedef struct kg_chat_reply {
    int ok;                 /* 1: content holds the model's reply */
    char *content;
    char *finish_reason;
    long prompt_tokens, completion_tokens; /* from "usage"; -1 when the server gave none */
    int attempts;
    long http_status;       /* of the last attempt (0: no HTTP answer) */
    double latency_ms;      /* of the successful attempt */
    char error[512];        /* why it failed (last attempt) when !ok */
} kg_chat_reply;

void kg_chat_reply_free(kg_chat_reply *r);

/* Called from the calling thread as soon as request `index` has its final
 * answer (success, or failure after the last retry); done of total have.
 * replies[index] is complete then and never touched again by the batch, so
 * the callback may take it over (copy the struct, then zero replies[index]). */
typedef void (*kg_chat_progress_fn)(void *ctx, size_t index, kg_chat_reply *replies, size_t done, size_t total);

/* Sends n requests with at most cfg->concurrency in flight (curl multi, this
 * thread only) and fills replies[0..n).  KG_OK when every request was tried to
 * the end (each reply says whether it succeeded); an error only for a bad
 * configuration or when libcurl itself fails. */
int kg_chat_batch(const kg_chat_config *cfg, size_t n, const kg_chat_request *requests,
                  kg_chat_reply *replies, kg_chat_progress_fn progress, void *progress_ctx,
                  kg_error *err);

/* The streaming form, for callers whose next requests depend on earlier
 * answers.  Whenever a slot is free, pull() is asked for a request: it
 * returns 1 (req and *id filled; req->messages must stay valid until done()
 * is called for that id), 0 (none right now: asked again within ~20 ms) or
 * -1 (none ever again).  done() gets each final answer; the reply's strings
 * are freed after done() returns unless done() zeroes the struct to keep
 * them.  Returns once pull() said -1 and every request has ended.  Both
 * callbacks run on the calling thread. */
typedef int (*kg_chat_pull_fn)(void *ctx, kg_chat_request *req, void **id);
typedef void (*kg_chat_done_fn)(void *ctx, void *id, kg_chat_reply *reply);
int kg_chat_stream(const kg_chat_config *cfg, kg_chat_pull_fn pull, kg_chat_done_fn done, void *ctx,
                   kg_error *err);

/* Parses a chat-completions response body into r (exposed for tests);
 * KG_ERR_PROTOCOL with err naming what is missing. */
int kg_chat_parse_response(const char *body, size_t len, kg_chat_reply *r, kg_error *err);

/* ---------------------------------------------------------------- prompts */

/* Template files (docs/agent.md): first_turn.md, feedback.md, example.md.
 * Placeholders {{name}} are replaced; unknown names are left as they are. */
typedef struct kg_prompts {
    char *first_turn, *feedback, *example;
} kg_prompts;

/* dir NULL: the built-in prompts/ folder of the source tree. */
int kg_prompts_load(const char *dir, kg_prompts *p, kg_error *err);
void kg_prompts_free(kg_prompts *p);

/* {{reference_code}}, {{task_id}}, {{example}}, {{rules}} */
int kg_prompt_first_turn(const kg_prompts *p, const kg_task *task, char **out, kg_error *err);

/* The evaluation as the model reads it: the result's "feedback" (src/eval/feedback.c, the one renderer, whose
 * text verl and KernelGYM clients train on), or, for a result without one, that renderer's text of the result.
 * KG_ERR_INVALID for a non-object.  *out is malloc'd. */
int kg_feedback_render(const json_t *result, char **out, kg_error *err);

/* The feedback user message: {{evaluation}}, {{verdict}}, {{reward}},
 * {{turn}}, {{turns_left}}. */
int kg_prompt_feedback(const kg_prompts *p, const json_t *result, double reward, int turn,
                       int turns_left, char **out, kg_error *err);

/* ---------------------------------------------------------------- context */

typedef struct kg_turn_view {
    int turn;
    const char *reply;    /* the assistant's reply */
    const char *feedback; /* the user message that answered it */
    double reward;
} kg_turn_view;

/* Messages for the next turn: the first prompt, then (reply, feedback) pairs
 * of earlier turns in order.  keep_best > 0 keeps only the keep_best turns
 * with the highest reward (ties: the later turn).  When the text exceeds
 * max_chars (0 = no limit), whole middle pairs are dropped first, oldest
 * first; the first prompt and the latest kept pair always stay.  *kept_turns
 * (may be NULL) receives the turn numbers kept, as a new JSON array. */
int kg_agent_context(const char *first_prompt, const kg_turn_view *turns, size_t n, int keep_best,
                     size_t max_chars, json_t **messages, json_t **kept_turns, kg_error *err);

/* ------------------------------------------------------------- post-run */

/* What kgym's RL library reads from one result (NaN: not measured). */
int kg_agent_outcome(const json_t *result, kg_eval_outcome *out, kg_error *err);

/* Annotates turn records in place: "return", "advantage" (cfg's estimator;
 * groups by task × turn), "prs_keep"/"prs_prob" (null when a correct turn
 * has no coverage, e.g. on CPU, and prs is NULL), and "best" (the one turn of
 * each trajectory with the highest reward, earliest on ties).  Records need
 * "task", "sample", "turn", "reward" and "result". */
int kg_agent_annotate(json_t *records, const kg_advantage_config *adv, const kg_prs_config *prs,
                      uint64_t seed, kg_error *err);

/* Dr. Kernel's void-turn rule (kernelgym-reference §3.5): in each
 * trajectory, a turn whose reward is <= 0 after an earlier turn scored > 0
 * gets "mask": false (out of the loss and of every baseline); other turns
 * "mask": true. */
int kg_agent_mask_void_turns(json_t *records, kg_error *err);

/* kgym metrics over turn records (per turn and best-of-turns). */
int kg_agent_metrics(const json_t *records, kg_metrics_report *out, kg_error *err);

/* ---------------------------------------------------------------- rollout */

/* How a turn is evaluated: in-process through a supervisor, or by a kgym
 * service.  Called from several threads at once. */
typedef int (*kg_agent_eval_fn)(void *ctx, const kg_task *task, const char *reply, size_t len,
                                json_t **result, kg_error *err);

typedef struct kg_agent_local_eval {
    kg_supervisor *sup;
    const kg_eval_options *opts;
} kg_agent_local_eval;
int kg_agent_eval_local(void *ctx, const kg_task *task, const char *reply, size_t len,
                        json_t **result, kg_error *err);

typedef struct kg_agent_server_eval {
    const char *url;     /* kgym serve base URL; POST url/evaluate */
    const char *token;   /* sent as "Authorization: Bearer TOKEN"; NULL = none */
    double timeout_s;
    int max_retries;
} kg_agent_server_eval;
int kg_agent_eval_server(void *ctx, const kg_task *task, const char *reply, size_t len,
                         json_t **result, kg_error *err);

typedef struct kg_rollout_config {
    const kg_task *tasks;
    size_t n_tasks;
    int samples, turns;
    int keep_best;          /* 0: whole history */
    size_t max_context_chars;
    int stop_on_correct;
    int mask_void_turns;    /* Dr. Kernel's rule: mask a turn scoring <= 0 after an earlier turn scored > 0 */
    double reeval_above;    /* evaluate again once when the speedup is above this (0: never);
                             * Dr. Kernel's rule with 3, see kg_reeval_wanted */
    const kg_chat_config *chat;
    const kg_prompts *prompts;
    kg_reward_config reward;
    kg_advantage_config advantage;
    kg_prs_config prs;
    uint64_t seed;
    kg_agent_eval_fn evaluate;
    void *eval_ctx;
    int eval_jobs;          /* evaluations in parallel (threads) */
    const char *out_path;   /* trajectories JSONL; OUT.replies.jsonl caches replies */
    int resume;             /* continue an existing OUT */
    double price_in, price_out; /* USD per million prompt / completion tokens */
    int progress;           /* 1: progress bar on stderr */
} kg_rollout_config;

typedef struct kg_rollout_stats {
    size_t turns_done, turns_resumed, replies_cached, model_errors, eval_errors;
    size_t trajectories, trajectories_incomplete;
    long prompt_tokens, completion_tokens;
    double cost_usd;
    size_t chat_attempts;
} kg_rollout_stats;

/* Runs (or resumes) the rollout, then rewrites OUT with the post-run fields
 * (kg_agent_annotate).  KG_OK when the run ended, even if some trajectories
 * are incomplete (stats says so; resume finishes them). */
int kg_rollout_run(const kg_rollout_config *cfg, kg_rollout_stats *stats, kg_error *err);

#endif
