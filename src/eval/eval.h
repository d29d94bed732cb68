/*
 * eval/eval.h — (internal) one evaluation of a candidate against a task: the staged
 * pipeline (extract → parse → static → compile → tiny_run → correctness →
 * timing), and the result JSON (docs/result-schema.md) with its verdict,
 * reward and feedback.
 *
 * The Python child reports facts; everything decided lives here: which stage
 * failed, the verdict, the partial credit, the statistics, the feedback text.
 * Ownership: *result is a new jansson reference the caller json_decref()s.
 */
#ifndef KGYM_EVAL_H
#define KGYM_EVAL_H

#include <jansson.h>

#include "eval/kinds.h"
#include "kgym/error.h"
#include "kgym/extract.h"
#include "supervisor/supervisor.h"
#include "task/task.h"

#define KG_RESULT_SCHEMA "kgym.result/1"
/* The judge's stages: eval/kinds.def's stages from parse on (extraction is kgym's, before the judge starts). */
#define KG_EVAL_STAGE_FIRST KG_STAGE_PARSE
#define KG_EVAL_STAGE_COUNT (KG_STAGE_COUNT - KG_EVAL_STAGE_FIRST)

/* The protections of the candidate's process a `correct` verdict requires by default, by the codes the harness
 * reports once the kernel accepted each (harness/kgym_harness/sandbox.py PROTECTIONS; docs/threat-model.md).
 * X(code, cpu, gpu, what): cpu/gpu say whether the device requires it by default; an operator allows one to be
 * missing with --allow-unprotected (kg_eval_options.allow_unprotected), and the result says which were. */
#define KG_PROTECTIONS(X)                                                                                       \
    X(pid_namespace, 1, 1, "its own PID namespace (it sees and signals nothing outside)")                     \
    X(mount_namespace, 1, 1, "its own mount namespace")                                                       \
    X(network_namespace, 1, 1, "its own network namespace (no interfaces)")                                   \
    X(ipc_namespace, 1, 1, "its own IPC namespace")                                                           \
    X(uts_namespace, 1, 1, "its own UTS namespace")                                                           \
    X(fresh_proc, 1, 1, "a fresh /proc showing only its own processes")                                       \
    X(private_tmp, 1, 1, "private /tmp and /dev/shm")                                                         \
    X(own_uid, 1, 1, "an unprivileged uid of its own")                                                        \
    X(clean_environment, 1, 1, "a clean environment (no tokens or kgym variables)")                            \
    X(rlimits, 1, 1, "rlimits on processes, open files and core dumps")                                       \
    X(landlock, 1, 1, "Landlock: reads, writes and execution only where granted")                             \
    X(seccomp, 1, 1, "seccomp: no network, ptrace, other processes' memory, io_uring, mounts or namespaces")   \
    X(seccomp_signals, 1, 1, "seccomp: signals only to itself")                                               \
    X(no_processes, 1, 0, "seccomp: no new processes or programs (CPU only: a GPU runner runs compilers)")     \
    X(judge_not_dumpable, 1, 1, "the judge not dumpable (no ptrace or /proc/<pid>/mem of it)")               \
    X(source_readonly, 1, 1, "the checked source unchangeable by it (checked bytes = executed bytes)")         \
    X(import_path, 1, 1, "nothing it can write on its Python import path")                                    \
    X(workdir_limit, 1, 1, "its writable folder a private tmpfs of bounded size and files")                  \
    X(descriptors, 1, 1, "no descriptor of kgym's or its caller's besides its socket")

/* Whether `code` names a protection of KG_PROTECTIONS. */
int kg_eval_protection_known(const char *code);
/* Checks an --allow-unprotected list: "all", or comma-separated codes of KG_PROTECTIONS.  KG_OK, or
 * KG_ERR_INVALID with the unknown code and the known ones in err. */
int kg_eval_check_protection_list(const char *list, kg_error *err);

typedef struct kg_eval_options {
    const char *device;        /* "cpu" or "cuda:N"; must match the supervisor */
    long budget_elements;      /* CPU: size budget per tensor (default 65536); GPU: ignored */
    long tiny_budget_elements; /* the tiny run's budget (default 4096) */
    double atol, rtol;         /* < 0: by dtype and profile (strict: fp32 1e-4, fp16/bf16 1e-2) */
    /* Named tolerance profile (docs/evaluation-protocol.md, "Tolerance profiles"): "strict" (the default:
     * tolerances relative to the output, TF32 off for the reference) or "kernelbench" (atol = rtol = 1e-2,
     * the reference at PyTorch's default precision, as KernelBench evaluates).  Borrowed; NULL = "strict". */
    const char *tolerance_profile;
    const char *half;          /* "fp16", "bf16", "fp16,bf16" or NULL: extra variants */
    const char *variants;      /* comma list of variant names to run, NULL = all */
    /* Run every planned correctness variant even after one failed (0, the default: the judge stops at the first
     * variant that fails the stage, asking kgym's rule after each one (variant_go); the stage fails either way,
     * and the variants not run are listed in correctness.not_run).  Part of the service's profile (sched.c):
     * a stopped run may miss a hack a later variant shows, so the two settings never share results. */
    int all_variants;
    unsigned seed;             /* base seed (default 42) */
    double credit[5];          /* reward: invalid, compile_error, tiny run failed, incorrect, correct */
    int timing;                /* GPU: time reference and candidate (default on) */
    int timing_warmup;         /* untimed calls of each model first (10) when timing_round_ms is 0; else the
                                * first round warms up for 250 ms */
    int timing_rounds;         /* rounds planned (2), all in one exclusive GPU window */
    int timing_iters;          /* timed calls of each model per round (50) */
    double timing_round_ms;    /* a round of slow kernels is cut to about this long, never under 3 calls (2 where
                                * two fill it; the judge's round_calls) (100; 0 = always timing_iters) */
    int timing_max_rounds;     /* re-measuring stops here (6) */
    double timing_cv_threshold;/* more rounds while the per-round speedups vary more than this (0.02) */
    double timing_agree;       /* with fewer than 3 rounds: one more while the rounds' speedups spread (max / min - 1)
                                * more than this; 0: off (for --timing-rounds 2: timing.c kg_eval_timing_more) */
    const char *reference_mode;/* "eager" (default) or "compile": how the reference is timed */
    int profile;               /* GPU: profile the candidate's forward for coverage (default on) */
    /* Reference-time cache (NULL = off): the reference's per-call times stored per task content, GPU,
     * dtype and protocol; a hit times only the candidate.  Borrowed. */
    struct kg_refcache *refcache;
    /* Seconds each stage may run (0 = no limit), in kg_eval_stage_names order. */
    double stage_timeout_s[KG_EVAL_STAGE_COUNT];
    kg_child_limits limits;    /* total timeout, output caps, rlimits (stage table is built from the above) */
    /* Reward-hack policy (docs/threat-model.md).  policy_json: the text of a policy file
     * (policy/default.json is the default), borrowed; NULL = the harness's own default file, and then
     * every finding counts as a hack.  Its "findings" map says which finding types make the verdict
     * `hacked` ("hack"), are only listed in warnings[] ("warn") or are not checked ("off"). */
    const char *policy_json;
    /* policy_json parsed once for the process (the CLI does: kg_cli_setup), borrowed and only read, so worker
     * threads share it; NULL: each evaluation parses policy_json itself (kg_eval_policy). */
    const json_t *policy;
    double hack_penalty;       /* the reward of verdict `hacked` (default 0) */
    double coverage_floor;     /* GPU: least share of the forward's device time in the candidate's own Triton
                                * kernels (default 0.5 on a GPU, docs/threat-model.md "Coverage floor"; 0 = not
                                * checked; the CPU has no profile).  Under a floor the profile is required. */
    int sandbox;               /* the runner's sandbox (default 1); 0 allows every protection to be missing */
    const char *allow_unprotected; /* protections (KG_PROTECTIONS codes, comma-separated, or "all") the operator
                                    * allows to be missing without losing `correct`; NULL = none.  Borrowed. */
    /* The runner's writable folder (and its /dev/shm): a private tmpfs of this many bytes and files each
     * (1 GiB, 10,000; docs/threat-model.md).  Where the runner gets no mount namespace the limit cannot be
     * applied: the protection workdir_limit is missing. */
    unsigned long long workdir_bytes;
    long workdir_files;
} kg_eval_options;

/* The child's stages in order: "parse", "static", "compile", "tiny_run",
 * "correctness", "timing" (extraction happens in C before any of them): KG_EVAL_STAGE_COUNT names, the tail of
 * eval/kinds.h's kg_stage_names. */
extern const char *const *const kg_eval_stage_names;
/* Index of a stage name, -1 if unknown. */
int kg_eval_stage_index(const char *name);

/* The reward-hack policy of the options as JSON: opts->policy (a new reference to it), else policy_json parsed;
 * NULL without a policy.  KG_ERR_INVALID in err when policy_json is not a JSON object. */
int kg_eval_policy(const kg_eval_options *opts, json_t **policy, kg_error *err);

/* The tolerance profiles kgym knows, NULL-terminated ("strict" first: the default). */
extern const char *const kg_eval_tolerance_profiles[];
/* 1 when name is one of kg_eval_tolerance_profiles, else 0 (NULL: 0). */
int kg_eval_tolerance_profile_known(const char *name);

/* Fills the defaults for a device (docs/evaluation-protocol.md lists them). */
void kg_eval_options_default(kg_eval_options *o, const char *device);

/* The extraction of a response (kg_extract_candidate): its status, result and error. */
typedef struct kg_eval_extraction {
    int rc;               /* KG_OK: ex holds the module; else err says why there is none */
    kg_extract_result ex; /* owned: kg_eval_extraction_free */
    kg_error err;
} kg_eval_extraction;

void kg_eval_extract(const char *response, size_t len, kg_eval_extraction *out);
void kg_eval_extraction_free(kg_eval_extraction *x);

typedef struct kg_eval_request {
    const kg_task *task;
    const char *response;       /* raw model output or a plain module (extracted either way) */
    size_t response_len;
    const char *candidate_name; /* shown in reports (a file path), may be NULL */
    /* The response's extraction when the caller made it already (kgym eval does, to know whether Python is
     * needed at all), borrowed; NULL: kg_eval_run extracts. */
    const kg_eval_extraction *extracted;
} kg_eval_request;

/* Runs one evaluation.  KG_OK whenever the candidate was evaluated, whatever
 * the verdict; an error (with err filled) only when kgym itself could not do
 * the work: no Python child, or a task that fails on its own. */
int kg_eval_run(kg_supervisor *sup, const kg_eval_options *opts, const kg_eval_request *req,
                json_t **result, kg_error *err);

/* Builds the result from a finished child's report (exposed for tests).
 * extract_detail/extract_source describe the extraction stage. */
int kg_eval_build_result(const kg_eval_options *opts, const kg_eval_request *req,
                         const kg_child_report *rep, const char *candidate_path,
                         json_t *extract_stage, json_t **result, kg_error *err);

/* The one feedback renderer: concise text a model can act on, from a finished result (verdict, failing stage,
 * the error trimmed to the candidate's frames, failing variants, hack rules, precision hints).  The result's
 * "feedback" is this text; rollouts show it too (kg_feedback_render).  opts: the evaluation's (limits named in
 * the text), or NULL.  malloc'd; NULL when out of memory. */
char *kg_eval_feedback(const json_t *result, const kg_eval_options *opts);

/* The reward for a verdict reached at a stage level (0..4), per opts->credit;
 * `hacked` gets opts->hack_penalty. */
double kg_eval_credit(const kg_eval_options *opts, const char *verdict, int level);

/* A fresh per-job secret (32 hex digits + NUL) from the kernel's random source.  The child puts it in every
 * protocol message; it holds it only in a closure made before the candidate is imported. */
int kg_eval_make_nonce(char out[33], kg_error *err);

/* Drops every protocol message whose "nonce" is not `nonce` (a line the candidate forged on the socket)
 * and strips the nonce from the others.  When any was dropped, one message {"type": "forged", "count",
 * "sample"} takes their place, which kg_eval_build_result reports as the hack `protocol_forgery`.
 * *dropped (may be NULL) is the number dropped.  A NULL nonce checks nothing.  KG_OK, or KG_ERR_NOMEM when the
 * "forged" message could not be made: the lines are gone then and nothing would report them, so the caller
 * must not decide a verdict from these messages. */
int kg_eval_screen_messages(json_t *messages, const char *nonce, size_t *dropped);

#endif
