/*
 * supervisor/supervisor.h — (internal) Python processes for one device: a warm zygote and the
 * evaluation children forked from it.
 *
 * The supervisor starts one zygote (python -m kgym_harness.zygote) that has
 * imported torch and triton.  Each kg_supervisor_run() asks the zygote to fork
 * a fresh child (it double-forks, so the child is re-parented to this process,
 * a child subreaper, and its exact exit status is ours to collect), hands the
 * child a JSON job, and then supervises it from outside: per-stage and total
 * timeouts (SIGKILL to the child's whole process group), rlimits set with
 * prlimit() before the job is sent, bounded capture of stdout/stderr, an output
 * flood limit, and every protocol message time-stamped with this process's
 * monotonic clock.  A dead zygote is restarted on the next run.
 * The protocol is documented in docs/protocol.md.
 *
 * The conversation: a child asks before each GPU phase ({"type": "gpu_acquire",
 * "mode": "shared" | "exclusive"}); the supervisor's arbiter (one per
 * supervisor, so one per GPU) grants it and the supervisor answers
 * {"type": "gpu_grant"} on the protocol socket.  While a child waits for the
 * GPU its stage and total deadlines stand still; a single wait longer than
 * the total limit stops the child and the run fails with KG_ERR_INTERNAL
 * (kgym's failure, not the child's).  Other requests (a message
 * with "reply": true) go to the caller's on_request hook, whose answer is sent
 * back the same way.
 *
 * Threads: kg_supervisor_run() may be called from several threads at once;
 * each call supervises its own child.
 * Ownership: a kg_child_report owns its messages (json) and captures; release
 * it with kg_child_report_free().
 */
#ifndef KGYM_SUPERVISOR_H
#define KGYM_SUPERVISOR_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

#include "supervisor/arbiter.h"
#include "kgym/error.h"

typedef struct kg_supervisor kg_supervisor;

typedef struct kg_supervisor_options {
    const char *python;      /* interpreter with torch and triton */
    const char *harness_dir; /* folder that holds the kgym_harness package */
    const char *device;      /* "cpu" or "cuda:N" */
    double start_timeout_s;  /* how long the zygote may take to import; 0 = 300 */
    unsigned long long device_memory_bytes; /* memory evaluations may reserve between them (arbiter.h); 0 =
                                             * KG_GPU_MEMORY_SHARE of what the device reports */
    int warm_pairs;          /* judge/runner pairs started ahead of their job (at most 8; 0 = none): each run
                              * starts one for a job like its own, and a later job like it takes it with its
                              * sandbox entered and its CUDA contexts made (the pair's own workdir and uid
                              * replace the job's).  Each waiting pair holds two processes, a
                              * runner slot and, on a GPU, two CUDA contexts (~0.5 GiB each). */
} kg_supervisor_options;

typedef struct kg_child_limits {
    double total_timeout_s;     /* whole child, 0 = none */
    json_t *stage_timeouts_s;   /* {"stage name": seconds}; borrowed; may be NULL */
    double default_stage_timeout_s; /* stages not named above; 0 = none */
    double outside_stages_s;    /* the child's time outside every stage, in all (start-up, between stages,
                                 * wind-down); 0 = bounded only by total_timeout_s */
    size_t capture_bytes;       /* kept of stdout and of stderr each (head + tail) */
    size_t output_limit_bytes;  /* stdout+stderr beyond this kills the child; 0 = none */
    unsigned long long address_space_bytes; /* RLIMIT_AS; 0 = unchanged */
    unsigned long long file_size_bytes;     /* RLIMIT_FSIZE; 0 = unchanged */
    double cpu_seconds;         /* RLIMIT_CPU backstop; 0 = unchanged */
    unsigned long long runner_memory_bytes; /* the runner's host memory, resident and pinned (a memory cgroup of its
                                             * own, memcg.c); 0 = not bounded */
    int fresh_pair;             /* 1: a judge and a runner forked for this job, neither a warm pair nor a kept
                                 * judge (a re-run after kgym's own failure: src/eval/eval.c) */
    /* Answers a child's request (a message with "reply": true, other than the GPU
     * ones): `messages` holds everything the child sent so far (borrowed), `msg`
     * the request.  Set *reply to a new object to answer (the supervisor frees
     * it), or leave it NULL to answer {"type": "error"}.  Runs on the thread of
     * kg_supervisor_run().  NULL: every request is answered with an error. */
    void (*on_request)(void *ctx, const json_t *messages, const json_t *msg, json_t **reply);
    void *on_request_ctx;
    /* Asked on every turn of the supervising loop (every 50 ms at most, so it must be cheap): non-zero stops
     * the child, and kg_supervisor_run() returns KG_ERR_CANCELLED with the report left empty (a job
     * cancelled while it runs).  Runs on the thread of kg_supervisor_run().  NULL: never. */
    int (*stop_requested)(void *ctx);
    void *stop_ctx;
} kg_child_limits;

typedef enum {
    KG_END_COMPLETED = 0, /* sent "done" and exited 0 */
    KG_END_EXIT,          /* exited (any code) without finishing */
    KG_END_SIGNAL,        /* killed by a signal it did not get from us */
    KG_END_TIMEOUT,       /* we killed it: a stage or the total ran too long */
    KG_END_OUTPUT_FLOOD,  /* we killed it: it printed more than the limit */
    KG_END_PROTOCOL       /* we killed it: it sent something that is not protocol */
} kg_child_end;

typedef struct kg_capture {
    char *head;          /* first bytes (NUL-terminated) */
    char *tail;          /* last bytes when more than fit in head, else "" */
    size_t total_bytes;  /* everything the child wrote */
    int truncated;       /* 1 when bytes were dropped between head and tail */
} kg_capture;

typedef struct kg_child_report {
    pid_t pid;                /* the judge */
    pid_t runner_pid;         /* the runner: the candidate's process */
    int runner_ended;         /* 1 when end/exit_code/signal describe the runner (it died first) */
    int warm;                 /* 1 when the pair was started ahead of the job (kg_supervisor_options.warm_pairs) */
    int judge_served;         /* evaluations the judge had finished before this one (0: a new judge) */
    char *workdir;            /* the workdir the pair ran in: the job's, or a warm pair's own (its files the
                               * candidate's tracebacks name) */
    json_t *runner_notes;     /* the runner's fork notes (JSON array, e.g. a refused PID namespace); may be NULL */
    int stragglers;           /* processes of the runner's uid still alive after it ended, killed by us */
    int left_running;         /* processes the runner started still running when the judge finished (its census) */
    char left_running_names[128]; /* their names, comma-separated (truncated) */
    kg_child_end end;
    int exit_code;            /* valid when the child exited */
    int signal;               /* valid when it was killed by a signal */
    char stage[64];           /* the stage running when it ended, or the last one begun ("" if none) */
    int outside_stage;        /* 1 when it ended outside every stage (after `stage`, or before the first) */
    double stage_limit_s;     /* the limit that was exceeded (timeout) */
    json_t *messages;         /* array of protocol messages, each with "t_ms" */
    kg_capture out, err;
    double wall_ms;
    /* CPU seconds (user + system, with the children each waited for: the runner's compilers) the judge spent on this
     * job (a new judge's start included; a kept judge's earlier jobs not) and the runner (its set-up included);
     * -1 when not known.  For tuning (docs/PERFORMANCE.md): an H200 host's cores slow down as they fill. */
    double judge_cpu_s, runner_cpu_s;
    /* The runner's host-memory bound (kg_child_limits.runner_memory_bytes): the limit its cgroup had (0: none was
     * made, runner_memory_why says why, "" when none was asked for), and how many of its processes the kernel
     * killed for it. */
    unsigned long long runner_memory_limit;
    unsigned long long runner_memory_peak; /* the most the group held at once (0: unknown) */
    int runner_memory_kills;
    char runner_memory_why[200];
} kg_child_report;

int kg_supervisor_open(const kg_supervisor_options *opts, kg_supervisor **out, kg_error *err);
void kg_supervisor_close(kg_supervisor *sup);

/* Versions and facts the zygote reported when it became ready (borrowed). */
const json_t *kg_supervisor_info(kg_supervisor *sup);
/* The arbiter of this supervisor's device (borrowed; for its statistics). */
kg_arbiter *kg_supervisor_arbiter(kg_supervisor *sup);
/* How many times the zygote has been (re)started. */
int kg_supervisor_starts(kg_supervisor *sup);
/* Warm pairs waiting for a job now (started ahead; see warm_pairs). */
int kg_supervisor_warm_waiting(kg_supervisor *sup);
/* The tasks a kept judge waits for now, idle or in a warm pair: each the SHA-256 (hex) of a task file's bytes,
 * the key kept judges serve by (a job's routing group, store.h kg_route).  Up to max into keys; returns how many
 * (a task with two judges waiting is listed twice).  For routing only: a judge listed may be taken meanwhile. */
#define KG_SUPERVISOR_HOT_MAX 16
int kg_supervisor_hot_tasks(kg_supervisor *sup, char (*keys)[65], int max);
/* The zygote's pid (0 if none is running); for tests that kill it. */
pid_t kg_supervisor_zygote_pid(kg_supervisor *sup);

/* Forks a child (or takes a warm pair started for a job like this one: then the
 * pair's own workdir replaces "workdir", which the judge reads only for its
 * candidate), sends it `job` (a JSON object; "workdir" must name a folder
 * the caller owns), supervises it to the end and fills `report`.  Returns
 * KG_OK whenever the child ran, whatever became of it; an error when no
 * child could be started, or when the GPU was not granted to it in time (then
 * `report` is left empty). */
int kg_supervisor_run(kg_supervisor *sup, json_t *job, const kg_child_limits *limits,
                      kg_child_report *report, kg_error *err);

/* Reaps this process's zombie children that no supervisor waits for: processes
 * re-parented to it (a child subreaper) when their parent ended, such as a
 * candidate's double-forked grandchild without a PID namespace.  The zygotes,
 * judges and runners are left to their supervisors, which collect their exact
 * exit status by pid.  Returns how many were reaped.  kg_supervisor_run()
 * calls it after every child; a long-lived caller (the service) also calls it
 * now and then for orphans that end between evaluations.  So a process that
 * runs a supervisor must not leave children of its own to a later waitpid:
 * an ended one may have been reaped. */
int kg_supervisor_reap_orphans(void);

void kg_child_report_free(kg_child_report *report);
const char *kg_child_end_name(kg_child_end end);

#endif
