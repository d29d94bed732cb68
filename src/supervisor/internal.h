/* internal.h — the supervisor's private state, shared by zygote.c and child.c. */
#ifndef KG_SUPERVISOR_INTERNAL_H
#define KG_SUPERVISOR_INTERNAL_H

#include <pthread.h>

#include "kgym/arbiter.h"
#include "kgym/supervisor.h"

struct kg_supervisor {
    char *python;
    char *harness_dir;
    char *device;
    char *log_path;       /* the zygote's stderr, read back when it fails */
    double start_timeout_s;
    pthread_mutex_t lock; /* guards the zygote and its control socket */
    pid_t zygote_pid;
    int control_fd;
    int starts;
    json_t *info;
    kg_arbiter *arbiter;  /* who may use this device now (one per supervisor = one per GPU) */
};

/* The judge's exit status when its runner died or broke the socket (child.py). */
#define KG_JUDGE_RUNNER_LOST 5
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
/* Forks a judge (fds: proto, stdout, stderr, peer) and its runner (fds: peer,
 * stdout, stderr) from the zygote; `notes` receives the runner intermediate's
 * warnings (JSON array text).  runner_pid_ns 0 ("runner-bare": the job turned
 * the sandbox or its namespaces off) forks the runner in the zygote's own PID
 * namespace: a new one without the runner's fresh /proc breaks CUDA (error 304). */
int kg_zygote_fork_pair(kg_supervisor *sup, const int judge_fds[4], const int runner_fds[3], int runner_pid_ns,
                        pid_t *judge, pid_t *runner, char *notes, size_t notes_cap, kg_error *err);

#endif
