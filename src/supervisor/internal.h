/* internal.h — the supervisor's private state, shared by supervisor.c, zygote.c, pair.c and reaper.c. */
#ifndef KG_SUPERVISOR_INTERNAL_H
#define KG_SUPERVISOR_INTERNAL_H

#include <pthread.h>
#include <sys/types.h>

#include "supervisor/arbiter.h"
#include "supervisor/supervisor.h"
#include "util/util.h"

/* Warm pairs waiting at most (kg_supervisor_options.warm_pairs is clamped to it). */
#define KG_WARM_MAX 8
/* Judges kept between evaluations, waiting for a runner, at most (the oldest goes first): each holds a process and,
 * on a GPU, its CUDA context (~0.5 GiB). */
#define KG_IDLE_MAX 8
/* Evaluations one judge serves at most: whatever a long-lived Python process accumulates stays bounded. */
#define KG_JUDGE_JOBS_MAX 64

/* A judge and its runner (pair.c). */
enum { KG_PAIR_PROTO, KG_PAIR_JOUT, KG_PAIR_JERR, KG_PAIR_ROUT, KG_PAIR_RERR, KG_PAIR_FDS };
typedef struct kg_pair {
    pid_t judge, runner;
    int fds[KG_PAIR_FDS]; /* our ends: the judge's protocol socket, then stdout and stderr of each */
    int slot, slot_fd;    /* the runner's uid slot and its lock (-1: none) */
    char *workdir;        /* a warm pair's own workdir (removed by kg_pair_end), else NULL */
    int workdir_lock;     /* its lock (kg_temp_dir_owned; closed by kg_pair_end once it is removed), else -1 */
    json_t *key;          /* a warm pair: the runner part of the job it was started for */
    json_t *job;          /* the job to send (the runner's identity applied) */
    kg_lines proto_lines; /* the judge's lines: its "warm", then the run loop's (what one read brought beyond a
                           * line is kept for the next) */
    int warm;             /* 1: started ahead of its job */
    int served;           /* evaluations its judge finished before this pair's (a judge kept between them) */
    char *last_nonce;     /* a kept judge: its previous job's nonce (a line carrying it now is stale), else NULL */
    char task_key[65];    /* SHA-256 (hex) of the task file: for a waiting judge (or a warm pair made from one) the
                           * task it served, the only one it serves again; for a pair given a job (kg_pair_for_job),
                           * that job's task, read when the job started; "" when none is known */
    int peer_fd;          /* a kept judge's end of its new runner's socket, ours until it goes with the judge's
                           * first line (SCM_RIGHTS); -1: the zygote gave the judge its end when it forked both */
    char notes[2048];     /* the runner intermediate's notes (JSON array text) */
} kg_pair;

struct kg_supervisor {
    char *python;
    char *harness_dir;
    char *device;
    char *log_path;       /* the zygote's stderr, read back when it fails */
    double start_timeout_s;
    pthread_mutex_t lock; /* guards the zygote and its control socket */
    pid_t zygote_pid;
    int control_fd;
    kg_lines control_lines; /* the zygote's answers on control_fd */
    int starts;
    json_t *info;
    kg_arbiter *arbiter;  /* who may use this device now (one per supervisor = one per GPU) */
    int warm_max;         /* warm pairs kept waiting (0: none) */
    pthread_mutex_t warm_lock; /* guards the five below */
    pthread_cond_t warm_cond;  /* a pair was taken, a template came, or the supervisor closes */
    kg_pair *warm[KG_WARM_MAX];
    int nwarm;
    json_t *warm_template; /* the last job run: warm pairs are started for jobs like it */
    kg_pair *idle[KG_IDLE_MAX]; /* judges kept after their evaluation, oldest first: only the judge's part is
                                 * set (runner 0, its descriptors -1) */
    int nidle;
    int warm_closing;
    pthread_t warm_thread;     /* the warmer (pair.c), when warm_running */
    int warm_running;
};

/* The pair for `job`: a waiting warm one started for a job like it, else one forked now (always, where `fresh`).
 * p->job is the job to send; the caller waits for both processes, then calls kg_pair_end. */
int kg_pair_for_job(kg_supervisor *sup, json_t *job, int fresh, kg_pair *p, kg_error *err);
/* Closes what is left of p's descriptors, gives its slot back, removes a warm pair's workdir, frees its JSON. */
void kg_pair_end(kg_pair *p);
/* After an evaluation whose judge said it stays (its job ended with "done", its state clean): the judge (its
 * process, protocol socket and output pipes, moved out of p) waits in sup->idle for its next runner, which
 * kg_pair_for_job or the warmer fork for it.  Where it cannot wait (the supervisor closes, no memory) it is killed
 * and reaped here.  The rest of p is the caller's for kg_pair_end. */
void kg_pair_keep_judge(kg_supervisor *sup, kg_pair *p);
/* Kills and reaps what runs of p (its judge, its runner), then kg_pair_end. */
void kg_pair_discard(kg_pair *p);
/* Starts the warmer thread, which keeps warm_max pairs waiting (0, or -1: then none are kept). */
int kg_pair_warmer_start(kg_supervisor *sup);
/* Tells the warmer that jobs like `job` come: it starts pairs for them while fewer than warm_max wait. */
void kg_pair_fill(kg_supervisor *sup, json_t *job);
/* Stops the warmer, then kills and reaps every waiting warm pair (kg_supervisor_close). */
void kg_pair_drain(kg_supervisor *sup);
/* SIGKILL to the judge and the runner, each process and its group (the runner's group is its whole PID
 * namespace; the judge's whatever it started); a pid <= 0 is skipped (supervisor.c). */
void kg_pair_kill(pid_t judge, pid_t runner);
/* Whether our child `pid` has ended, leaving it a zombie (WNOWAIT): its pid and group cannot be reused before
 * the caller's waitpid (supervisor.c). */
int kg_proc_exited(pid_t pid);
/* One JSON line on a socket (MSG_NOSIGNAL); 0 or -1.  Consumes nothing: obj stays the caller's.  pass_fd >= 0
 * goes with the line's first byte (SCM_RIGHTS): a kept judge's new runner socket. */
int kg_send_json_line(int fd, const json_t *obj);
int kg_send_json_line_fd(int fd, const json_t *obj, int pass_fd);
/* len bytes on a socket, the nfds descriptors (at most KG_SEND_FDS_MAX) attached to the first chunk (SCM_RIGHTS):
 * the one sender of descriptors to the zygote and to the judge; 0 or -1. */
#define KG_SEND_FDS_MAX 4
int kg_send_with_fds(int fd, const char *data, size_t len, const int *fds, int nfds);

/* The judge's exit status when its runner died or broke the socket (judge/child.py). */
#define KG_JUDGE_RUNNER_LOST 5
/* memcg.c: a memory cgroup around one runner, the bound on its host memory (memcg.c says why and where). */
typedef struct kg_memcg {
    char dir[640];            /* the group's folder; "" when none was made */
    int v2;                   /* 1: cgroup v2 (memory.max, memory.events), 0: v1 */
    unsigned long long limit; /* its limit in bytes */
} kg_memcg;
/* Makes the runner `pid`'s group beneath this process's own, limited to `bytes`, and moves it in.  0, or -1 with
 * why (no writable memory hierarchy, ...): *cg is then empty and the calls below do nothing. */
int kg_memcg_enter(kg_memcg *cg, pid_t pid, unsigned long long bytes, char *why, size_t why_cap);
/* How many processes the kernel killed in the group for its limit (0: none, or it cannot say). */
int kg_memcg_oom_kills(const kg_memcg *cg);
/* The most memory the group held at once, in bytes (0 when the kernel cannot say: v2 before Linux 5.19). */
unsigned long long kg_memcg_peak(const kg_memcg *cg);
/* Removes the group once its processes have ended; a no-op for an empty *cg. */
void kg_memcg_remove(kg_memcg *cg);

/* The share of a GPU's memory that evaluations may reserve between them (see handle_request). */
#define KG_GPU_MEMORY_SHARE 0.9

/* The reaper (reaper.c): children whose exit status a caller collects with its own waitpid (the zygote, each
 * judge and runner) are tracked from before they can be reaped until that waitpid returned; the catch-all
 * reaper (kg_supervisor_reap_orphans) leaves them alone.  A hold keeps the reaper still while a child may be
 * ours without being tracked yet (a fork request in flight) or while the supervisor reaps by pid itself. */
void kg_reaper_track(pid_t pid);
void kg_reaper_untrack(pid_t pid);
void kg_reaper_hold(void);
void kg_reaper_release(void);

int kg_zygote_start(kg_supervisor *sup, kg_error *err);
void kg_zygote_stop(kg_supervisor *sup);
int kg_zygote_alive(kg_supervisor *sup);
/* Forks a judge (fds: proto, stdout, stderr, peer; NULL: a runner alone, for a kept judge) and its runner (fds:
 * peer, stdout, stderr) from the zygote; `notes` receives the runner intermediate's
 * warnings (JSON array text).  runner_pid_ns 0 ("runner-bare": the job turned
 * the sandbox or its namespaces off) forks the runner in the zygote's own PID
 * namespace: a new one without the runner's fresh /proc breaks CUDA (error 304). */
int kg_zygote_fork_pair(kg_supervisor *sup, const int judge_fds[4], const int runner_fds[3], int runner_pid_ns,
                        pid_t *judge, pid_t *runner, char *notes, size_t notes_cap, kg_error *err);

#endif
