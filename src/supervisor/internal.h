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

int kg_zygote_start(kg_supervisor *sup, kg_error *err);
void kg_zygote_stop(kg_supervisor *sup);
int kg_zygote_alive(kg_supervisor *sup);
int kg_zygote_fork(kg_supervisor *sup, const int fds[3], pid_t *child, kg_error *err);

#endif
