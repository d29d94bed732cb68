/*
 * pair.c — a judge and its runner: forked for a job, or forked ahead of one (a warm pair).
 *
 * Starting a pair costs far more than its two forks.  Each process creates a CUDA context (0.3 s alone on an
 * H100 host, 0.6–1 s while several start at once: the driver creates contexts one at a time), and the runner
 * enters its sandbox and proves that it maps the judge's device memory.  A warm pair has done all of that
 * before its job exists.  The supervisor starts one with the runner's part of a job like the one it was just
 * given (its "prelude": the device, threads, sandbox options and policy, with the uid and workdir kgym chose
 * for the pair), and hands it the next job whose runner part is the same; any other job gets
 * a pair of its own, as before.  Nothing of a candidate is in a warm pair: the candidate's bytes come with the
 * job, which the judge checks against its prelude (judge/child.py) before its runner loads anything.
 *
 * Ownership: a kg_pair owns its descriptors (ours ends), its runner slot, its workdir (a warm pair's, removed
 * by kg_pair_end) and its JSON; its processes are the caller's to wait for (kg_pair_end does not).  The warm
 * pairs waiting belong to the supervisor (sup->warm, under sup->warm_lock).
 */
#include "supervisor/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "eval/kinds.h"
#include "util/json.h"
#include "util/util.h"

/* Each runner runs as a uid of its own (KG_RUNNER_UID_BASE + slot) while kgym is root: concurrent runners
 * cannot read each other's files, signal each other or share RLIMIT_NPROC.  A slot is held with an exclusive
 * flock on a file of its own, machine-wide: every kgym process on the machine (one worker per GPU, a bench
 * next to a server) draws from the same slots, and a lock dies with its holder, so a crashed kgym frees its
 * slots.  flock belongs to the open file, so two threads of one kgym exclude each other too.  A warm pair
 * holds its slot from its start.
 *
 * A lock that dies with its holder outlives nothing, but the holder's runners may outlive it: a kgym killed with
 * SIGKILL frees its slots at once, while its runners (candidates' code) live on until its guardian ends them, a
 * second or two.  A runner given such a uid meanwhile would share it with a hostile candidate that is still
 * running: signals, ptrace, /proc/<pid>/mem, its files (the once-seen honest example judged "hacked" right
 * after a server was killed).  So a slot is used only when no process of its uid lives (slot_clear). */
#define KG_RUNNER_UID_BASE 61000
#define KG_RUNNER_SLOTS 1024
#define KG_RUNNER_SLOT_DIR "/tmp/kgym-runner-uids"

/* Is no process of uid left?  Every one is killed first, from a child that becomes uid and sends kill(-1,
 * SIGKILL): that reaches exactly the processes uid may signal, all at once (the kernel signals them under its
 * task-list lock, so a fork in flight either finishes first and its child is signalled too, or fails), wherever
 * they hide.  kill(-1) cannot say whether there were any (it answers 0 whenever any process exists), so the
 * child then counts them as the kernel does: with RLIMIT_NPROC at 2 (itself and one more), a clone succeeds only
 * when no other process of uid exists, none still exiting, no zombie (the kernel counts a process until it is
 * reaped; none can start another after the kill, so the count is exact).
 *
 * The children share this process's memory (CLONE_VM) on stacks of their own, this thread waiting until they end
 * (CLONE_VFORK), as posix_spawn does: a fork would copy the page tables of a server holding hundreds of MB (120 ms
 * for 200 MB on the test machine, against 0.8 ms).  They make raw system calls only, uninstrumented (ASan knows
 * nothing of their stacks), and change nothing of the memory they share. */
#define KG_CLEAR_STACK (64 * 1024)
typedef struct clear_args {
    uid_t uid;
    char *probe_stack; /* its top */
} clear_args;

__attribute__((no_sanitize("address", "undefined"))) static int clear_probe(void *arg)
{
    (void)arg;
    syscall(SYS_exit_group, 0);
    return 0;
}

__attribute__((no_sanitize("address", "undefined"))) static int clear_main(void *arg)
{
    const clear_args *a = arg;
    struct rlimit two = {2, 2};
    if (syscall(SYS_setresuid, a->uid, a->uid, a->uid) != 0)
        syscall(SYS_exit_group, 3);
    syscall(SYS_kill, -1, SIGKILL);
    if (syscall(SYS_setrlimit, RLIMIT_NPROC, &two) != 0)
        syscall(SYS_exit_group, 3);
    int probe = clone(clear_probe, a->probe_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
    if (probe < 0)
        syscall(SYS_exit_group, errno == EAGAIN ? 1 : 3);
    syscall(SYS_wait4, probe, 0, 0, 0);
    syscall(SYS_exit_group, 0);
    return 0;
}

/* 0: none left; 1: some (killed, still exiting); -1: it could not look. */
static int slot_clear(uid_t uid)
{
    char *stack = malloc(2 * KG_CLEAR_STACK);
    if (!stack)
        return -1;
    clear_args a = {uid, stack + 2 * KG_CLEAR_STACK};
    /* The catch-all reaper must not take the child's exit status (reaper.c). */
    kg_reaper_hold();
    int errno_before = errno; /* the child's failed calls write this thread's errno (shared memory) */
    pid_t pid = clone(clear_main, stack + KG_CLEAR_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
    int st = 0, r = pid < 0 ? -1 : 0;
    while (pid > 0 && (r = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
    }
    kg_reaper_release();
    errno = errno_before;
    free(stack);
    if (r < 0 || !WIFEXITED(st) || WEXITSTATUS(st) > 1)
        return -1;
    return WEXITSTATUS(st);
}

static void slot_take(kg_pair *p)
{
    p->slot = -1;
    p->slot_fd = -1;
    if (geteuid() != 0)
        return;
    if (mkdir(KG_RUNNER_SLOT_DIR, 0700) != 0 && errno != EEXIST)
        return;
    for (int i = 0; i < KG_RUNNER_SLOTS; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%d", KG_RUNNER_SLOT_DIR, KG_RUNNER_UID_BASE + i);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
            continue;
        /* Free, and none of its uid's processes lives: those of a killed kgym are killed now and the next
         * slot is taken (they may still be exiting, counted in the uid's RLIMIT_NPROC).  When it cannot be
         * looked at (no fork), the slot is used as the lock says: no worse than before the look existed. */
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && slot_clear((uid_t)(KG_RUNNER_UID_BASE + i)) != 1) {
            p->slot = i;
            p->slot_fd = fd;
            return;
        }
        close(fd);
    }
}

static void slot_give(kg_pair *p)
{
    if (p->slot_fd >= 0)
        close(p->slot_fd); /* releases the flock */
    p->slot_fd = -1;
    p->slot = -1;
}

/* The runner's part of the job that only kgym can choose: its uid.  Nothing
 * of a slot outlives an evaluation: the runner compiles into its own workdir
 * (runner/runner.py sets TRITON_HOME there), which goes with the evaluation; a
 * directory kept per slot and writable by its runners would carry whatever one
 * candidate leaves there to the next in that slot.
 * Returns the job this run sends (a new reference): the caller's job is left
 * as it was, so a job run twice (kgym eval's re-run alone) runs as the uid of
 * the slot it holds then, never as the one its first run gave back (another
 * evaluation may hold that one by now: a census would count its runner, and a
 * final sweep kill it).  NULL on allocation failure. */
static json_t *runner_identity(json_t *caller_job, int slot)
{
    json_t *sb = json_object_get(caller_job, "sandbox");
    if (sb && json_is_false(json_object_get(sb, "enabled")))
        return json_incref(caller_job);
    /* no slot: not root (nothing to drop to) or none free; a uid the caller chose (tests) stands */
    if (slot < 0 || json_object_get(caller_job, "runner_uid"))
        return json_incref(caller_job);
    json_t *job = json_copy(caller_job);
    if (kg_json_set(job, "runner_uid", json_integer(KG_RUNNER_UID_BASE + slot)) != 0) {
        json_decref(job);
        return NULL;
    }
    return job;
}

/* The runner's part of a job and nothing else (judge/child.py _RUNNER_JOB_KEYS): a warm pair's prelude.  Nothing
 * of the candidate is in it: its source and file name reach the runner with the job ("load"). */
static const char *const runner_part[] = {"workdir", "device", "threads", "sandbox", "runner_uid", "policy"};

/* What a warm pair must share with a job to take it: the runner's part as the caller chose it (runner/runner.py
 * setup).  The workdir is the pair's own, and so is the uid unless the caller chose one.  NULL on allocation
 * failure. */
static json_t *runner_key(const json_t *job)
{
    json_t *key = json_object();
    if (!key)
        return NULL;
    for (size_t i = 0; i < sizeof runner_part / sizeof runner_part[0]; i++) {
        if (!strcmp(runner_part[i], "workdir"))
            continue;
        json_t *v = json_object_get(job, runner_part[i]);
        if (v && json_object_set(key, runner_part[i], v) != 0) {
            json_decref(key);
            return NULL;
        }
    }
    return key;
}

/* An empty pair: no process, every descriptor -1 (a 0 would be stdin, closed by kg_pair_end). */
static void pair_init(kg_pair *p)
{
    memset(p, 0, sizeof *p);
    p->slot = p->slot_fd = p->peer_fd = p->workdir_lock = -1;
    for (int i = 0; i < KG_PAIR_FDS; i++)
        p->fds[i] = -1;
}

/* Moves a kept judge's part (its process, protocol socket and output pipes, the lines read so far, its previous
 * nonce, its task, the evaluations it served) from `from` to `to`; `from` keeps the rest. */
static void move_judge(kg_pair *to, kg_pair *from)
{
    to->judge = from->judge;
    from->judge = 0;
    for (int i = KG_PAIR_PROTO; i <= KG_PAIR_JERR; i++) {
        to->fds[i] = from->fds[i];
        from->fds[i] = -1;
    }
    to->proto_lines = from->proto_lines;
    memset(&from->proto_lines, 0, sizeof from->proto_lines);
    free(to->last_nonce);
    to->last_nonce = from->last_nonce;
    from->last_nonce = NULL;
    memcpy(to->task_key, from->task_key, sizeof to->task_key);
    to->served = from->served;
}

/* Forks the pair for `job` (the caller's; the runner's identity is applied to a copy, p->job), or, with `judge` (a
 * kept one, from sup->idle), only a runner for that judge: p then takes the judge's part out of *judge, and p->peer_fd
 * is the judge's end of the runner's socket, which goes with the first line the judge is sent.  On failure *judge is
 * left as it was (the caller's to keep or discard). */
static int pair_fork(kg_supervisor *sup, json_t *caller_job, kg_pair *p, kg_pair *judge, kg_error *err)
{
    /* p is empty (pair_init).  The runner's identity first: it needs none of the descriptors below (a failure has none to close). */
    slot_take(p);
    p->job = runner_identity(caller_job, p->slot);
    if (!p->job) {
        slot_give(p);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    /* proto: kgym <-> judge; peer: judge <-> runner; a stdout and a stderr pipe for each process (a kept judge
     * has its protocol socket and pipes already). */
    int proto[2] = {-1, -1}, peer[2] = {-1, -1}, jout[2] = {-1, -1}, jerr[2] = {-1, -1}, rout[2] = {-1, -1},
        rerr[2] = {-1, -1};
    int *all[] = {proto, peer, jout, jerr, rout, rerr};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, peer) != 0 || pipe2(rout, O_CLOEXEC) != 0 ||
        pipe2(rerr, O_CLOEXEC) != 0 ||
        (!judge && (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, proto) != 0 || pipe2(jout, O_CLOEXEC) != 0 ||
                    pipe2(jerr, O_CLOEXEC) != 0))) {
        int e = errno;
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            for (int j = 0; j < 2; j++)
                if (all[i][j] >= 0)
                    close(all[i][j]);
        slot_give(p);
        json_decref(p->job);
        p->job = NULL;
        return kg_error_set(err, KG_ERR_IO, "socketpair/pipe: %s", strerror(e));
    }
    int judge_fds[4] = {proto[1], jout[1], jerr[1], peer[0]};
    int runner_fds[3] = {peer[1], rout[1], rerr[1]};
    json_t *sb = json_object_get(p->job, "sandbox");
    int pid_ns = !(json_is_false(json_object_get(sb, "enabled")) || json_is_false(json_object_get(sb, "namespaces")));
    p->notes[0] = '\0';
    pid_t forked_judge = 0;
    int rc = kg_zygote_fork_pair(sup, judge ? NULL : judge_fds, runner_fds, pid_ns, &forked_judge, &p->runner,
                                 p->notes, sizeof p->notes, err);
    int child_ends[] = {proto[1], jout[1], jerr[1], peer[1], rout[1], rerr[1]};
    for (size_t i = 0; i < sizeof child_ends / sizeof child_ends[0]; i++)
        if (child_ends[i] >= 0)
            close(child_ends[i]);
    if (!judge || rc != KG_OK) {
        close(peer[0]);
        peer[0] = -1;
    }
    if (rc != KG_OK) {
        int ours[] = {proto[0], jout[0], jerr[0], rout[0], rerr[0]};
        for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
            if (ours[i] >= 0)
                close(ours[i]);
        slot_give(p);
        json_decref(p->job);
        p->job = NULL;
        return rc;
    }
    p->fds[KG_PAIR_ROUT] = rout[0];
    p->fds[KG_PAIR_RERR] = rerr[0];
    if (judge) {
        move_judge(p, judge);
        p->peer_fd = peer[0];
    } else {
        p->judge = forked_judge;
        p->fds[KG_PAIR_PROTO] = proto[0];
        p->fds[KG_PAIR_JOUT] = jout[0];
        p->fds[KG_PAIR_JERR] = jerr[0];
    }
    return KG_OK;
}

void kg_pair_end(kg_pair *p)
{
    for (int i = 0; i < KG_PAIR_FDS; i++)
        if (p->fds[i] >= 0) {
            close(p->fds[i]);
            p->fds[i] = -1;
        }
    if (p->peer_fd >= 0)
        close(p->peer_fd);
    p->peer_fd = -1;
    slot_give(p);
    if (p->workdir) {
        kg_remove_tree(p->workdir);
        free(p->workdir);
        p->workdir = NULL;
    }
    if (p->workdir_lock >= 0)
        close(p->workdir_lock);
    p->workdir_lock = -1;
    json_decref(p->job);
    json_decref(p->key);
    p->job = p->key = NULL;
    free(p->last_nonce);
    p->last_nonce = NULL;
    kg_lines_free(&p->proto_lines);
}

/* A warm pair that will not be used (it died while waiting, or the supervisor closes): its processes go. */
void kg_pair_discard(kg_pair *p)
{
    pid_t both[2] = {p->judge, p->runner};
    kg_pair_kill(p->judge, p->runner);
    for (int i = 0; i < 2; i++) {
        if (both[i] <= 0) /* a kept judge has no runner */
            continue;
        while (waitpid(both[i], NULL, 0) < 0 && errno == EINTR) {
        }
        kg_reaper_untrack(both[i]);
    }
    kg_pair_end(p);
}

/* The key a kept judge serves by: SHA-256 (hex) of the bytes of the job's task file; 0, or -1 ("" in out) when it
 * cannot be read (such a job gets no kept judge, and its judge is not kept). */
static int task_key(const json_t *job, char out[65])
{
    out[0] = '\0';
    const char *path = json_string_value(json_object_get(job, "task"));
    char *data = NULL;
    size_t len = 0;
    if (!path || kg_file_read(path, 0, &data, &len, NULL) != KG_OK)
        return -1;
    int rc = kg_sha256_hex(data, len, out) == KG_OK ? 0 : -1;
    free(data);
    if (rc != 0)
        out[0] = '\0';
    return rc;
}

/* The judge kept last (its caches the warmest) among those that served the task `key` (never another: a task
 * file runs in the judge and may leave the process changed in ways no check sees, docs/threat-model.md), taken
 * out of sup->idle; 0 when none is alive. */
static int take_idle(kg_supervisor *sup, const char *key, kg_pair *out)
{
    if (!key || !key[0])
        return 0;
    for (;;) {
        kg_pair *found = NULL;
        pthread_mutex_lock(&sup->warm_lock);
        for (int i = sup->nidle - 1; i >= 0 && !found; i--)
            if (!strcmp(sup->idle[i]->task_key, key)) {
                found = sup->idle[i];
                memmove(sup->idle + i, sup->idle + i + 1, (size_t)(sup->nidle - i - 1) * sizeof sup->idle[0]);
                sup->nidle--;
            }
        pthread_mutex_unlock(&sup->warm_lock);
        if (!found)
            return 0;
        *out = *found;
        free(found);
        /* A waiting judge has nothing to say: a line (or the end of its socket) before its next job is a judge
         * that is not what kgym kept, and nothing of it may be read as that job's. */
        struct pollfd proto = {.fd = out->fds[KG_PAIR_PROTO], .events = POLLIN};
        if (!kg_proc_exited(out->judge) && out->proto_lines.buf.len <= out->proto_lines.start &&
            poll(&proto, 1, 0) == 0)
            return 1;
        kg_pair_discard(out);
    }
}

void kg_pair_keep_judge(kg_supervisor *sup, kg_pair *p)
{
    kg_pair *j = malloc(sizeof *j);
    if (!j) {
        /* no memory to keep it: the judge goes now (its descriptors stay p's, for kg_pair_end) */
        kg_pair_kill(p->judge, 0);
        while (waitpid(p->judge, NULL, 0) < 0 && errno == EINTR) {
        }
        kg_reaper_untrack(p->judge);
        p->judge = 0;
        return;
    }
    pair_init(j);
    move_judge(j, p); /* p->task_key: the task this job ran, as verified by the caller */
    j->served++;
    /* A line with this job's nonce that comes later is stale: kgym's next run of this judge drops it (and keeps
     * the judge no longer).  Without a copy the judge is not kept: such a line would be read as the next job's. */
    const char *nonce = json_string_value(json_object_get(p->job, "nonce"));
    free(j->last_nonce); /* the job before this one's */
    j->last_nonce = nonce ? kg_strdup(nonce) : NULL;
    kg_pair *out = NULL;
    pthread_mutex_lock(&sup->warm_lock);
    if (sup->warm_closing || !j->last_nonce || !j->task_key[0]) {
        out = j;
    } else {
        if (sup->nidle >= KG_IDLE_MAX) {
            out = sup->idle[0];
            memmove(sup->idle, sup->idle + 1, (size_t)(sup->nidle - 1) * sizeof sup->idle[0]);
            sup->nidle--;
        }
        sup->idle[sup->nidle++] = j;
    }
    pthread_mutex_unlock(&sup->warm_lock);
    if (out) {
        kg_pair_discard(out);
        free(out);
    }
}

/* A waiting warm pair started for `key`, taken out of the pool; 0 when none is.  A pair whose judge was kept from
 * an earlier evaluation serves only that evaluation's task (`task`); with `kept_only`, only such a pair is taken
 * (and none is retired). */
static int take_warm(kg_supervisor *sup, const json_t *key, const char *task, int kept_only, kg_pair *out)
{
    for (;;) {
        kg_pair *found = NULL;
        pthread_mutex_lock(&sup->warm_lock);
        for (int i = 0; i < sup->nwarm; i++)
            if (json_equal(sup->warm[i]->key, key) &&
                (sup->warm[i]->task_key[0] ? !strcmp(sup->warm[i]->task_key, task) : !kept_only)) {
                found = sup->warm[i];
                sup->warm[i] = sup->warm[--sup->nwarm];
                break;
            }
        kg_pair *stale = NULL;
        if (!found && !kept_only && sup->nwarm >= sup->warm_max) {
            /* Every waiting pair is for jobs of another kind and none will be started for this kind: the
             * oldest goes, so that the warmer starts one for the jobs that come now. */
            stale = sup->warm[0];
            sup->warm[0] = sup->warm[--sup->nwarm];
        }
        pthread_mutex_unlock(&sup->warm_lock);
        if (stale) {
            kg_pair_discard(stale);
            free(stale);
        }
        if (!found)
            return 0;
        *out = *found;
        free(found);
        if (!kg_proc_exited(out->judge) && !kg_proc_exited(out->runner))
            return 1;
        kg_pair_discard(out); /* it failed while waiting (its CUDA context, its sandbox): a fresh one will say why */
    }
}

/* kg_pair_for_job without the task's key, which the caller reads once (`task`).  In order: a warm pair whose judge
 * was kept from this task; a judge kept from this task, with a runner forked now; any other warm pair; both forked
 * now.  A kept judge before a new warm pair: its CUDA context, loaded kernels, caches and the task's mode are
 * there already (docs/PERFORMANCE.md: a new judge's first uses of its kernels cost ~0.9 s inside its shared
 * phases on an H200), and the new warm pair stays for a job whose task has no judge kept (kgym bench examples on
 * the CPU, routed: 6 of 23 evaluations in kept judges when the warm pair came first). */
static int pair_for_job(kg_supervisor *sup, json_t *caller_job, const char *task, kg_pair *p, kg_error *err)
{
    json_t *key = sup->warm_max > 0 ? runner_key(caller_job) : NULL;
    int got = key && take_warm(sup, key, task, 1, p);
    if (!got) {
        kg_pair judge;
        if (take_idle(sup, task, &judge)) {
            if (pair_fork(sup, caller_job, p, &judge, err) == KG_OK) {
                json_decref(key);
                return KG_OK;
            }
            kg_pair_discard(&judge);
            pair_init(p);
        }
        got = key && take_warm(sup, key, task, 0, p);
    }
    json_decref(key);
    if (!got)
        return pair_fork(sup, caller_job, p, NULL, err);
    /* The job as the pair's runner already knows it: its workdir and uid are the prelude's. */
    json_t *job = json_copy(caller_job);
    static const char *const own[] = {"workdir", "runner_uid"};
    for (size_t i = 0; job && i < sizeof own / sizeof own[0]; i++) {
        json_t *v = json_object_get(p->job, own[i]);
        if (!v)
            json_object_del(job, own[i]);
        else if (kg_json_set(job, own[i], json_incref(v)) != 0) {
            json_decref(job);
            job = NULL;
        }
    }
    if (!job) {
        kg_pair_discard(p);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    json_decref(p->job);
    p->job = job;
    p->warm = 1;
    return KG_OK;
}

int kg_pair_for_job(kg_supervisor *sup, json_t *caller_job, int fresh, kg_pair *p, kg_error *err)
{
    pair_init(p);
    char task[65];
    task_key(caller_job, task);
    int rc = fresh ? pair_fork(sup, caller_job, p, NULL, err) : pair_for_job(sup, caller_job, task, p, err);
    if (rc == KG_OK) /* the task this job runs (a kept judge's was the same): its judge is kept for it alone */
        memcpy(p->task_key, task, sizeof p->task_key);
    return rc;
}

/* How long a warm-up may take (the GPU grant, then the judge's "warm" line) before the pair is given up. */
#define KG_WARM_TIMEOUT_MS 60000.0
/* The longest "warm" line (without '\n'): {"type": "warm"} and no more. */
#define KG_WARM_LINE_MAX 255

/* Starts one warm pair for jobs like `caller_job` and waits until it is warm.  On a GPU that happens in a
 * shared phase the warmer holds: making CUDA contexts and mapping device memory disturb the kernels of an
 * exclusive timing window (measured on an H100: the median per-round CV of the speedup 0.012 with set-up
 * outside any phase, 0.0045 inside one).  Returns the pair, or NULL. */
static kg_pair *warm_one(kg_supervisor *sup, json_t *caller_job)
{
    kg_arbiter_request *phase = NULL;
    if (strcmp(sup->device, "cpu") != 0) {
        phase = kg_arbiter_request_new(sup->arbiter, KG_GPU_SHARED);
        if (!phase)
            return NULL;
        if (!kg_arbiter_wait(phase, KG_WARM_TIMEOUT_MS)) {
            kg_arbiter_cancel(phase);
            return NULL;
        }
    }
    kg_pair *p = malloc(sizeof *p);
    if (p)
        pair_init(p);
    json_t *key = runner_key(caller_job);
    json_t *tmpl = json_copy(caller_job);
    char *dir = NULL;
    int dir_lock = -1;
    kg_error err = {0};
    int ok = p && key && tmpl && kg_temp_dir_owned("kgym-eval", &dir, &dir_lock, &err) == KG_OK;
    if (ok) {
        /* The template is the caller's job with the pair's own workdir; the previous job's secret stays out. */
        /* a path is passed as it is or not at all: json_string fails on one that is not UTF-8 */
        ok = kg_json_set(tmpl, "workdir", json_string(dir)) == 0;
        json_object_del(tmpl, "nonce");
        /* A judge kept from an earlier evaluation of the template's task gets the new runner when one waits. */
        kg_pair judge;
        char task[65];
        task_key(caller_job, task);
        int kept = ok && take_idle(sup, task, &judge);
        ok = ok && pair_fork(sup, tmpl, p, kept ? &judge : NULL, &err) == KG_OK;
        if (kept && !ok)
            kg_pair_discard(&judge);
        if (ok) {
            p->workdir = dir;
            p->workdir_lock = dir_lock;
            p->key = key;
            key = NULL;
            dir = NULL;
            dir_lock = -1;
        }
    }
    if (dir) {
        kg_remove_tree(dir);
        free(dir);
    }
    if (dir_lock >= 0)
        close(dir_lock);
    if (ok) {
        json_t *prelude = json_pack("{s:s}", "type", kg_msg_name(KG_MSG_PRELUDE));
        for (size_t i = 0; prelude && i < sizeof runner_part / sizeof runner_part[0]; i++) {
            json_t *v = json_object_get(p->job, runner_part[i]);
            if (v && json_object_set(prelude, runner_part[i], v) != 0) {
                json_decref(prelude);
                prelude = NULL;
            }
        }
        ok = prelude && kg_send_json_line_fd(p->fds[KG_PAIR_PROTO], prelude, p->peer_fd) == 0;
        json_decref(prelude);
        if (p->peer_fd >= 0) {
            close(p->peer_fd); /* the judge's now */
            p->peer_fd = -1;
        }
        /* The judge says "warm" once its runner is set up and both contexts are made (or that failed: then
         * the job hears why, where a cold start would have said it). */
        char *line = NULL;
        size_t len = 0;
        ok = ok && kg_lines_read(&p->proto_lines, p->fds[KG_PAIR_PROTO], KG_WARM_LINE_MAX, KG_WARM_TIMEOUT_MS, &line,
                                 &len) == 1;
        if (ok) {
            json_t *said = json_loadb(line, len, 0, NULL);
            ok = kg_msg_is(said, KG_MSG_WARM);
            json_decref(said);
        }
        if (!ok)
            kg_pair_discard(p);
    }
    if (phase)
        kg_arbiter_release(phase);
    json_decref(key);
    json_decref(tmpl);
    if (!ok) {
        free(p);
        return NULL;
    }
    return p;
}

/* The warmer: one thread per supervisor that keeps warm_max pairs waiting, for jobs like the last one.  One
 * pair at a time on purpose.  Tried on an H100 (6 jobs, the non-level-1 mix, paired with this): two warmers
 * starting pairs side by side (each start makes two CUDA contexts, which the driver makes one at a time, beside
 * every running evaluation's device-memory calls) saved no set-up time and the evaluations' own stages took 5%
 * and 12% longer in two commands; a job waiting for a pair being started instead of forking its own waited 30 s
 * in all for 19 s of set-up saved (docs/PERFORMANCE.md, fourteenth session).  Also tried (eighteenth session,
 * reverted): runners set up ahead with no judge, kgym sending their "setup" itself, for kept judges to adopt with
 * their next job; the set-up left the evaluations' path (1.09 -> 0.42 s in 34 of 64) and throughput did not move
 * (head/base 1.036 and 0.994 on one H100; below base in the two-H100 fleet): a runner start costs the driver the
 * same wherever it happens, and an evaluation that reaches its next shared phase sooner waits longer for it. */
static void *warmer(void *arg)
{
    kg_supervisor *sup = arg;
    pthread_mutex_lock(&sup->warm_lock);
    for (;;) {
        while (!sup->warm_closing && (!sup->warm_template || sup->nwarm >= sup->warm_max))
            pthread_cond_wait(&sup->warm_cond, &sup->warm_lock);
        if (sup->warm_closing)
            break;
        json_t *tmpl = json_incref(sup->warm_template);
        pthread_mutex_unlock(&sup->warm_lock);
        kg_pair *p = warm_one(sup, tmpl);
        json_decref(tmpl);
        if (!p) { /* a failure is not retried at once: a broken set-up would spin */
            struct timespec ts = {1, 0};
            nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&sup->warm_lock);
        if (p && sup->warm_closing) {
            pthread_mutex_unlock(&sup->warm_lock);
            kg_pair_discard(p);
            free(p);
            pthread_mutex_lock(&sup->warm_lock);
        } else if (p) {
            sup->warm[sup->nwarm++] = p;
        }
    }
    pthread_mutex_unlock(&sup->warm_lock);
    return NULL;
}

int kg_pair_warmer_start(kg_supervisor *sup)
{
    if (sup->warm_max <= 0)
        return 0;
    if (pthread_create(&sup->warm_thread, NULL, warmer, sup) != 0) {
        sup->warm_max = 0; /* every job gets a pair of its own, as without warm pairs */
        return -1;
    }
    sup->warm_running = 1;
    return 0;
}

void kg_pair_fill(kg_supervisor *sup, json_t *caller_job)
{
    if (sup->warm_max <= 0)
        return;
    pthread_mutex_lock(&sup->warm_lock);
    json_decref(sup->warm_template);
    sup->warm_template = json_incref(caller_job);
    pthread_cond_signal(&sup->warm_cond);
    pthread_mutex_unlock(&sup->warm_lock);
}

void kg_pair_drain(kg_supervisor *sup)
{
    pthread_mutex_lock(&sup->warm_lock);
    sup->warm_closing = 1;
    pthread_cond_broadcast(&sup->warm_cond);
    pthread_mutex_unlock(&sup->warm_lock);
    if (sup->warm_running)
        pthread_join(sup->warm_thread, NULL);
    sup->warm_running = 0;
    pthread_mutex_lock(&sup->warm_lock);
    json_decref(sup->warm_template);
    sup->warm_template = NULL;
    int n = sup->nwarm;
    kg_pair *list[KG_WARM_MAX + KG_IDLE_MAX];
    memcpy(list, sup->warm, (size_t)n * sizeof list[0]);
    sup->nwarm = 0;
    memcpy(list + n, sup->idle, (size_t)sup->nidle * sizeof list[0]);
    n += sup->nidle;
    sup->nidle = 0;
    pthread_mutex_unlock(&sup->warm_lock);
    for (int i = 0; i < n; i++) {
        kg_pair_discard(list[i]);
        free(list[i]);
    }
}

int kg_supervisor_warm_waiting(kg_supervisor *sup)
{
    pthread_mutex_lock(&sup->warm_lock);
    int n = sup->nwarm;
    pthread_mutex_unlock(&sup->warm_lock);
    return n;
}

int kg_supervisor_hot_tasks(kg_supervisor *sup, char (*keys)[65], int max)
{
    int n = 0;
    pthread_mutex_lock(&sup->warm_lock);
    for (int i = sup->nidle - 1; i >= 0 && n < max; i--) /* the latest kept first */
        if (sup->idle[i]->task_key[0])
            memcpy(keys[n++], sup->idle[i]->task_key, 65);
    for (int i = 0; i < sup->nwarm && n < max; i++)
        if (sup->warm[i]->task_key[0])
            memcpy(keys[n++], sup->warm[i]->task_key, 65);
    pthread_mutex_unlock(&sup->warm_lock);
    return n;
}
