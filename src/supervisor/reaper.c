/*
 * reaper.c — reaping the zombies nobody else will.  A supervisor makes its
 * process a child subreaper (judges and runners are forked by the zygote's
 * intermediate and re-parented to us, so their exact exit status is ours), and
 * so every process orphaned below an evaluation comes to us too: a candidate's
 * double-forked grandchild outside the runner's PID namespace (--no-sandbox),
 * a runner the zygote forked after a request we gave up on.  When one of them
 * exits it stays a zombie of this process until it is waited for.
 *
 * A blind waitpid(-1) would take the judge's and runner's exit status (and the
 * zygote's) from the supervisor, which waits for each by pid.  So every child
 * whose status someone collects is tracked from before it can be reaped until
 * its waitpid returned, and kg_supervisor_reap_orphans() waits only for
 * zombies of ours that are not tracked.  A child is ours to collect from the
 * moment fork() (the zygote) or the zygote's answer (a judge, a runner)
 * returns: those windows are held (kg_reaper_hold), and so is the
 * supervisor's own sweep that kills and reaps a runner's left-overs.  No pid
 * is reaped twice: only this process reaps its children, and an untracked
 * zombie is reaped by nobody but the reaper, under its lock.
 */
#include "supervisor/internal.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KG_TRACKED_MAX 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t released; /* on CLOCK_MONOTONIC: made once by released_init */
static pthread_once_t released_once = PTHREAD_ONCE_INIT;

static void released_init(void)
{
    kg_cond_init(&released);
}
static pid_t tracked[KG_TRACKED_MAX];
static int n_tracked;
static int holds;
/* Children that could not be tracked (the table full): the reaper stands still until they are untracked. */
static int untracked_children;

void kg_reaper_track(pid_t pid)
{
    if (pid <= 0)
        return;
    pthread_mutex_lock(&lock);
    if (n_tracked < KG_TRACKED_MAX)
        tracked[n_tracked++] = pid;
    else
        untracked_children++;
    pthread_mutex_unlock(&lock);
}

void kg_reaper_untrack(pid_t pid)
{
    if (pid <= 0)
        return;
    pthread_mutex_lock(&lock);
    int found = 0;
    for (int i = 0; i < n_tracked; i++)
        if (tracked[i] == pid) {
            tracked[i] = tracked[--n_tracked];
            found = 1;
            break;
        }
    if (!found && untracked_children > 0)
        untracked_children--;
    pthread_mutex_unlock(&lock);
}

void kg_reaper_hold(void)
{
    pthread_mutex_lock(&lock);
    holds++;
    pthread_mutex_unlock(&lock);
}

void kg_reaper_release(void)
{
    pthread_once(&released_once, released_init);
    pthread_mutex_lock(&lock);
    if (holds > 0)
        holds--;
    if (holds == 0)
        pthread_cond_broadcast(&released);
    pthread_mutex_unlock(&lock);
}

static int is_tracked(pid_t pid)
{
    for (int i = 0; i < n_tracked; i++)
        if (tracked[i] == pid)
            return 1;
    return 0;
}

int kg_supervisor_reap_orphans(void)
{
    pthread_once(&released_once, released_init);
    pthread_mutex_lock(&lock);
    /* A hold is short (one fork request, one sweep): wait for it a little, else try again next time. */
    struct timespec ts;
    kg_deadline_in(&ts, 0.2);
    while (holds > 0)
        if (pthread_cond_timedwait(&released, &lock, &ts) != 0)
            break;
    if (holds > 0 || untracked_children > 0) {
        pthread_mutex_unlock(&lock);
        return 0;
    }
    /* The lock is held to the end: no child becomes tracked, and none is collected by the supervisor's sweep,
     * while the zombies found are checked and reaped. */
    int reaped = 0;
    long me = (long)getpid();
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        kg_proc_stat st;
        if (*end || pid <= 1 || !kg_proc_stat_read(pid, &st) || st.ppid != me || st.state != 'Z' ||
            is_tracked((pid_t)pid))
            continue;
        pid_t r;
        do {
            r = waitpid((pid_t)pid, NULL, WNOHANG);
        } while (r < 0 && errno == EINTR);
        reaped += r == (pid_t)pid;
    }
    if (d)
        closedir(d);
    pthread_mutex_unlock(&lock);
    return reaped;
}
