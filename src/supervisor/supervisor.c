/*
 * supervisor.c — opening and closing a supervisor, and running one child to
 * its end under our limits (see src/supervisor/supervisor.h).
 */
#include "supervisor/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "eval/kinds.h"
#include "util/json.h"
#include "util/util.h"

/* The longest line the judge may write (a larger one ends the evaluation: protocol). */
#define KG_MAX_MESSAGE_BYTES (64u << 20)

int kg_supervisor_open(const kg_supervisor_options *opts, kg_supervisor **out, kg_error *err)
{
    *out = NULL;
    if (!opts || !opts->python || !opts->harness_dir || !opts->device)
        return kg_error_set(err, KG_ERR_INVALID, "supervisor needs python, harness_dir and device");
    if (strcmp(opts->device, "cpu") != 0 &&
        (strncmp(opts->device, "cuda:", 5) != 0 || !opts->device[5]))
        return kg_error_set(err, KG_ERR_INVALID, "device must be \"cpu\" or \"cuda:N\", not \"%s\"",
                            opts->device);
    if (access(opts->python, X_OK) != 0)
        return kg_error_set(err, KG_ERR_NOT_FOUND, "Python interpreter %s is not executable: %s",
                            opts->python, strerror(errno));
    kg_buf pkg = {0};
    if (kg_buf_printf(&pkg, "%s/kgym_harness/zygote.py", opts->harness_dir) != 0) {
        kg_buf_free(&pkg);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    int found = kg_file_exists(pkg.data);
    kg_buf_free(&pkg);
    if (!found)
        return kg_error_set(err, KG_ERR_NOT_FOUND, "no kgym_harness package under %s",
                            opts->harness_dir);

    kg_supervisor *sup = calloc(1, sizeof *sup);
    if (!sup)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    sup->python = kg_strdup(opts->python);
    sup->harness_dir = kg_strdup(opts->harness_dir);
    sup->device = kg_strdup(opts->device);
    sup->start_timeout_s = opts->start_timeout_s > 0 ? opts->start_timeout_s : 300.0;
    sup->control_fd = -1;
    pthread_mutex_init(&sup->lock, NULL);
    pthread_mutex_init(&sup->warm_lock, NULL);
    kg_cond_init(&sup->warm_cond);
    sup->warm_max = opts->warm_pairs < 0 ? 0 : opts->warm_pairs > KG_WARM_MAX ? KG_WARM_MAX : opts->warm_pairs;
    char *dir = NULL;
    if (!sup->python || !sup->harness_dir || !sup->device ||
        kg_arbiter_create(&sup->arbiter, err) != KG_OK || kg_temp_dir("kgym-zygote", &dir, err) != KG_OK) {
        kg_supervisor_close(sup);
        return err && err->code ? err->code : kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    /* Set first, it stands: the device's own figure (sent by the judges) is then ignored. */
    kg_arbiter_set_capacity(sup->arbiter, opts->device_memory_bytes);
    kg_buf log = {0};
    int logged = kg_buf_printf(&log, "%s/zygote.log", dir) == 0;
    if (!logged)
        rmdir(dir); /* kg_supervisor_close removes it through log_path, which there is none of */
    free(dir);
    sup->log_path = kg_buf_release(&log);
    if (!logged) {
        kg_supervisor_close(sup);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }

    /* Children are forked by the zygote's intermediate process, which exits at
     * once: as a subreaper we inherit them and can wait for their real status. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    signal(SIGPIPE, SIG_IGN);
    /* Evaluation folders an earlier kgym left when it was killed (its warm pairs', its evaluations'): their locks
     * died with it (kg_temp_dir_owned). */
    kg_temp_sweep("kgym-eval");

    int rc = kg_zygote_start(sup, err);
    if (rc != KG_OK) {
        kg_supervisor_close(sup);
        return rc;
    }
    kg_pair_warmer_start(sup);
    *out = sup;
    return KG_OK;
}

void kg_supervisor_close(kg_supervisor *sup)
{
    if (!sup)
        return;
    kg_pair_drain(sup);
    kg_zygote_stop(sup);
    if (sup->log_path) {
        char *slash = strrchr(sup->log_path, '/');
        unlink(sup->log_path);
        if (slash) {
            *slash = '\0';
            rmdir(sup->log_path);
        }
    }
    pthread_mutex_destroy(&sup->lock);
    pthread_mutex_destroy(&sup->warm_lock);
    pthread_cond_destroy(&sup->warm_cond);
    kg_arbiter_destroy(sup->arbiter);
    json_decref(sup->info);
    free(sup->python);
    free(sup->harness_dir);
    free(sup->device);
    free(sup->log_path);
    free(sup);
}

const json_t *kg_supervisor_info(kg_supervisor *sup)
{
    return sup->info;
}

kg_arbiter *kg_supervisor_arbiter(kg_supervisor *sup)
{
    return sup->arbiter;
}

int kg_supervisor_starts(kg_supervisor *sup)
{
    return sup->starts;
}

pid_t kg_supervisor_zygote_pid(kg_supervisor *sup)
{
    return sup->zygote_pid;
}

const char *kg_child_end_name(kg_child_end end)
{
    switch (end) {
    case KG_END_COMPLETED: return "completed";
    case KG_END_EXIT: return "exit";
    case KG_END_SIGNAL: return "signal";
    case KG_END_TIMEOUT: return "timeout";
    case KG_END_OUTPUT_FLOOD: return "output_flood";
    case KG_END_PROTOCOL: return "protocol";
    }
    return "unknown";
}

/* ---- bounded capture of a stream: the first `cap` bytes and the last `cap` */

typedef struct {
    kg_buf head;
    char *ring;
    size_t cap, ring_pos, ring_len, total;
    int lost; /* a part could not be kept (memory): the capture says it is cut */
} capture;

static void capture_add(capture *c, const char *data, size_t n)
{
    c->total += n;
    size_t to_head = 0;
    if (c->head.len < c->cap) {
        to_head = c->cap - c->head.len;
        if (to_head > n)
            to_head = n;
        if (kg_buf_append(&c->head, data, to_head) != 0)
            c->lost = 1;
    }
    data += to_head;
    n -= to_head;
    if (!n || !c->cap)
        return;
    if (!c->ring && !(c->ring = malloc(c->cap))) {
        c->lost = 1;
        return;
    }
    if (n > c->cap) { /* only the last cap bytes can survive */
        data += n - c->cap;
        n = c->cap;
    }
    for (size_t i = 0; i < n; i++) {
        c->ring[c->ring_pos] = data[i];
        c->ring_pos = (c->ring_pos + 1) % c->cap;
    }
    c->ring_len = c->ring_len + n > c->cap ? c->cap : c->ring_len + n;
}

static void capture_finish(capture *c, kg_capture *out)
{
    out->total_bytes = c->total;
    out->head = kg_buf_release(&c->head);
    kg_buf tail = {0};
    if (c->ring_len) {
        size_t start = (c->ring_pos + c->cap - c->ring_len) % c->cap;
        size_t first = c->cap - start < c->ring_len ? c->cap - start : c->ring_len;
        if (kg_buf_append(&tail, c->ring + start, first) != 0 ||
            kg_buf_append(&tail, c->ring, c->ring_len - first) != 0) {
            kg_buf_free(&tail);
            c->lost = 1;
        }
    }
    out->tail = kg_buf_release(&tail);
    out->truncated = c->total > c->cap + c->ring_len || c->lost;
    free(c->ring);
    c->ring = NULL;
}

/* ---- the supervision loop */

static void set_limit(pid_t pid, int resource, unsigned long long value)
{
    struct rlimit rl = {.rlim_cur = (rlim_t)value, .rlim_max = (rlim_t)value};
    prlimit(pid, resource, &rl, NULL);
}

static double stage_limit(const kg_child_limits *lim, const char *stage)
{
    json_t *v = lim->stage_timeouts_s ? json_object_get(lim->stage_timeouts_s, stage) : NULL;
    if (v && json_is_number(v))
        return json_number_value(v);
    return lim->default_stage_timeout_s;
}

static int send_all(int fd, const char *data, size_t len)
{
    while (len) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

int kg_proc_exited(pid_t pid)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid;
}

int kg_send_json_line(int fd, const json_t *obj)
{
    return kg_send_json_line_fd(fd, obj, -1);
}

int kg_send_with_fds(int fd, const char *data, size_t len, const int *fds, int nfds)
{
    if (nfds <= 0)
        return send_all(fd, data, len);
    if (nfds > KG_SEND_FDS_MAX || len == 0)
        return -1;
    union {
        char buf[CMSG_SPACE(KG_SEND_FDS_MAX * sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                        .msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int))};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
    ssize_t n;
    do {
        n = sendmsg(fd, &mh, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n <= 0)
        return -1;
    /* The descriptors went with the first chunk (the reader collects them with the bytes they came with); the
     * rest follows without them. */
    return (size_t)n < len ? send_all(fd, data + n, len - (size_t)n) : 0;
}

int kg_send_json_line_fd(int fd, const json_t *obj, int pass_fd)
{
    char *text = json_dumps(obj, JSON_COMPACT);
    if (!text)
        return -1;
    kg_buf line = {0};
    int rc = kg_buf_puts(&line, text) == 0 && kg_buf_puts(&line, "\n") == 0
                 ? kg_send_with_fds(fd, line.data, line.len, &pass_fd, pass_fd >= 0)
                 : -1;
    kg_buf_free(&line);
    free(text);
    return rc;
}

/* CPU seconds process `pid` has used (user + system), from /proc; -1 when it cannot be read. */
static double cpu_seconds_used(pid_t pid)
{
    kg_proc_stat ps;
    return kg_proc_stat_read(pid, &ps) ? ps.cpu_seconds : -1;
}

/* What process `pid` has cost so far, with the children it waited for: what wait4 reports of it once it has ended
 * (process.cpu_s counts a kept judge so, as one that ends); -1 when it cannot be read. */
static double cpu_seconds_with_children(pid_t pid)
{
    kg_proc_stat ps;
    return kg_proc_stat_read(pid, &ps) && ps.cpu_seconds >= 0 && ps.children_cpu_seconds >= 0
               ? ps.cpu_seconds + ps.children_cpu_seconds
               : -1;
}

/* waitpid with the ended child's resource use (its own and that of the children it waited for). */
static pid_t wait4_retry(pid_t pid, int *status, struct rusage *ru)
{
    pid_t r;
    while ((r = wait4(pid, status, 0, ru)) < 0 && errno == EINTR) {
    }
    return r;
}

static double rusage_seconds(const struct rusage *ru)
{
    return (double)ru->ru_utime.tv_sec + (double)ru->ru_utime.tv_usec / 1e6 + (double)ru->ru_stime.tv_sec +
           (double)ru->ru_stime.tv_usec / 1e6;
}

/* RLIMIT_CPU counts a process's whole life, and a judge kept between evaluations lives through several: its
 * soft limit (SIGXCPU, read as a timeout) is set for each evaluation from what it has used, and its hard limit, which
 * only a privileged process may raise, once, at its first (`first`), for as many as it may serve.  0, or -1 when an
 * evaluation's share could not be given (prlimit refused, or no room left under the hard limit): such a judge is not
 * kept after this evaluation. */
static int judge_cpu_limit(pid_t pid, int first, double cpu_seconds)
{
    unsigned long long each = (unsigned long long)cpu_seconds + 1;
    struct rlimit rl;
    if (first) {
        rl.rlim_cur = each;
        rl.rlim_max = each * KG_JUDGE_JOBS_MAX;
        return prlimit(pid, RLIMIT_CPU, &rl, NULL) == 0 ? 0 : -1;
    }
    double used = cpu_seconds_used(pid);
    if (used < 0 || prlimit(pid, RLIMIT_CPU, NULL, &rl) != 0)
        return -1;
    unsigned long long want = each + (unsigned long long)used;
    int fits = rl.rlim_max == RLIM_INFINITY || want <= rl.rlim_max;
    rl.rlim_cur = fits ? want : rl.rlim_max; /* else what is left of it: the judge is not kept after this one */
    return prlimit(pid, RLIMIT_CPU, &rl, NULL) == 0 && fits ? 0 : -1;
}

typedef struct {
    kg_supervisor *sup;
    kg_child_report *rep;
    const kg_child_limits *lim;
    int proto_fd;
    const char *nonce;        /* the job's secret: only lines that carry it are acted on */
    const char *stale_nonce;  /* a kept judge's previous job's: its lines are dropped (NULL: a new judge) */
    int stale;                /* such a line came: the judge is not kept after this job */
    double t0;
    double stage_start;
    double stage_limit_s;
    double paused_ms;         /* time spent waiting for the GPU: the deadlines stand still meanwhile */
    double outside_since;     /* when the child last left a stage (or started) */
    double outside_used_ms;   /* its time outside stages before that */
    int in_stage;
    int done;
    int stays;                /* the judge's "done" (with the nonce) said it waits for another job */
    char task_loaded[65];     /* the SHA-256 of the task file as the judge loaded it (its "done"), else "" */
    int killed;
    int runner_protocol;      /* the judge said its runner broke their protocol */
    kg_arbiter_request *gpu_held;
    kg_arbiter_request *gpu_pending;
    json_t *gpu_pending_msg;  /* the gpu_acquire line waiting (owned by rep->messages) */
    double gpu_pending_since;
    kg_arbiter_account *gpu_account; /* the evaluation's device-memory reservation, until its end */
    char own_failure[256];    /* kgym's failure, not the child's (a GPU wait that outlasted the limit, memory
                               * that ran out): the evaluation ends with this error and no verdict */
    int cancelled;            /* the caller's stop_requested said so */
    uid_t runner_uid;         /* 0: the runner has no uid of its own (no census, no final sweep) */
    pid_t runner_pid;
} run_state;

static void send_line(run_state *st, json_t *obj)
{
    kg_send_json_line(st->proto_fd, obj); /* a dead child shows up in the main loop */
    json_decref(obj);
}

/* Lets go of whatever the child holds or waits for on the GPU. */
static void gpu_let_go(run_state *st)
{
    if (st->gpu_held)
        kg_arbiter_release(st->gpu_held);
    if (st->gpu_pending)
        kg_arbiter_cancel(st->gpu_pending);
    st->gpu_held = st->gpu_pending = NULL;
    st->gpu_pending_msg = NULL;
}

static void kill_child(run_state *st, kg_child_end why);

/* kgym itself failed (memory ran out keeping the child's messages): the child is stopped and the evaluation
 * ends with kgym's own error, never a verdict decided from messages one of which may be missing. */
static void fail_own(run_state *st, const char *why)
{
    if (!st->own_failure[0])
        snprintf(st->own_failure, sizeof st->own_failure, "%s", why);
    if (!st->killed)
        kill_child(st, KG_END_TIMEOUT);
}

/* Grants a pending GPU request when the arbiter allows it: the wait is taken
 * off the child's clocks (the stage and total deadlines move by it), noted on
 * the request line as "waited_ms", and the child is told. */
static void gpu_try_grant(run_state *st)
{
    if (!st->gpu_pending || !kg_arbiter_poll(st->gpu_pending))
        return;
    double waited = kg_now_ms() - st->gpu_pending_since;
    st->paused_ms += waited;
    if (st->in_stage)
        st->stage_start += waited;
    else
        st->outside_since += waited;
    st->gpu_held = st->gpu_pending;
    st->gpu_pending = NULL;
    const char *mode = "shared";
    if (st->gpu_pending_msg) {
        double mem = kg_arbiter_memory_wait_ms(st->gpu_held);
        if (kg_json_set(st->gpu_pending_msg, "waited_ms", json_real(waited)) != 0 ||
            (mem > 0 && kg_json_set(st->gpu_pending_msg, "memory_waited_ms", json_real(mem < waited ? mem : waited))))
            fail_own(st, "out of memory recording a GPU wait");
        const char *m = json_string_value(json_object_get(st->gpu_pending_msg, "mode"));
        if (m && !strcmp(m, "exclusive"))
            mode = "exclusive";
    }
    st->gpu_pending_msg = NULL;
    send_line(st, json_pack("{s:s, s:s, s:f}", "type", kg_msg_name(KG_MSG_GPU_GRANT), "mode", mode, "waited_ms", waited));
}

/* A byte count from a gpu_acquire line: a non-negative integer, else 0 (nothing said). */
static uint64_t byte_field(json_t *msg, const char *key)
{
    json_t *v = json_object_get(msg, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

/* The child's questions: GPU phases go to the arbiter, the rest to the caller's hook. */
static int uid_processes(uid_t uid, pid_t except, int kill_them, char *names, size_t names_cap);

static void handle_request(run_state *st, json_t *msg, kg_msg kind)
{
    if (kind == KG_MSG_GPU_ACQUIRE) {
        const char *mode = json_string_value(json_object_get(msg, "mode"));
        gpu_let_go(st); /* one phase at a time: asking again ends the previous one */
        /* Device memory (arbiter.h): the judge says how much the device has and, once it knows the task's
         * sizes, what this evaluation will hold on it; kgym lets evaluations reserve KG_GPU_MEMORY_SHARE of
         * the device, the rest being the processes' CUDA contexts and what no estimate foresees. */
        uint64_t total = byte_field(msg, "device_total_bytes"), want = byte_field(msg, "reserve_bytes");
        if (total)
            kg_arbiter_set_capacity(st->sup->arbiter, (uint64_t)((double)total * KG_GPU_MEMORY_SHARE));
        /* "renew": a stage with a need of its own (the timing stage after correctness: judge/tasks.py
         * stage_footprints).  A holder never waits for a larger figure (arbiter.h), so the old reservation goes
         * back first and the new one is a first reservation, waiting in line like any: while it waits the
         * evaluation holds no phase (let go above) and no reservation, so nothing deadlocks.  The same figure
         * keeps its place. */
        if (st->gpu_account && json_is_true(json_object_get(msg, "renew")) &&
            kg_arbiter_account_reserved(st->gpu_account) != want)
            kg_arbiter_account_renew(st->gpu_account);
        if (want && !st->gpu_account)
            st->gpu_account = kg_arbiter_account_new(st->sup->arbiter);
        st->gpu_pending = kg_arbiter_request_reserve(st->sup->arbiter, mode && !strcmp(mode, "exclusive")
                                                                           ? KG_GPU_EXCLUSIVE : KG_GPU_SHARED,
                                                     st->gpu_account, st->gpu_account ? want : 0);
        if (!st->gpu_pending) {
            send_line(st, json_pack("{s:s, s:s}", "type", kg_msg_name(KG_MSG_ERROR), "message", "out of memory"));
            return;
        }
        st->gpu_pending_msg = msg;
        st->gpu_pending_since = kg_now_ms();
        gpu_try_grant(st);
    } else if (kind == KG_MSG_GPU_RELEASE) {
        gpu_let_go(st);
    } else if (kind == KG_MSG_CENSUS) {
        /* The judge has finished with the runner and asks, before telling it to exit, whether anything the
         * candidate started is still running (a daemon, a setsid grandchild): counted here, from /proc, by
         * the runner's uid, which is this evaluation's alone.  The runner's own answer would be worthless. */
        int n = st->runner_uid ? uid_processes(st->runner_uid, st->runner_pid, 0, st->rep->left_running_names,
                                               sizeof st->rep->left_running_names)
                               : 0;
        st->rep->left_running = n;
        /* The two pids as this process sees them: the judge reads the device memory NVML counts for each, to
         * decide whether the wind-down needs a GPU phase (judge/child.py _wind_down_plan). */
        send_line(st, json_pack("{s:s, s:i, s:b, s:I, s:I}", "type", kg_msg_name(KG_MSG_CENSUS), "processes", n,
                                "counted", st->runner_uid != 0, "runner_pid", (json_int_t)st->runner_pid, "judge_pid",
                                (json_int_t)st->rep->pid));
    } else if (json_is_true(json_object_get(msg, "reply"))) {
        json_t *reply = NULL;
        if (st->lim->on_request)
            st->lim->on_request(st->lim->on_request_ctx, st->rep->messages, msg, &reply);
        if (!reply)
            reply = json_pack("{s:s, s:s}", "type", kg_msg_name(KG_MSG_ERROR), "message", "kgym has no answer to this request");
        send_line(st, reply);
    }
}

/* Handles one complete protocol line; returns -1 on a protocol violation. */
static int handle_message(run_state *st, const char *line, size_t len)
{
    json_error_t jerr;
    json_t *msg = json_loadb(line, len, 0, &jerr);
    if (!msg || !json_is_object(msg)) {
        json_decref(msg);
        return -1;
    }
    /* A kept judge's line of its previous job, come late (it sends nothing after "done": a harness bug), is that
     * job's, not this one's: dropped, and the judge is not kept again. */
    const char *stale = st->stale_nonce && !(st->nonce && !strcmp(st->nonce, st->stale_nonce))
                            ? json_string_value(json_object_get(msg, "nonce"))
                            : NULL; /* a caller that sent the same nonce twice: no line can be told stale */
    if (stale && !strcmp(stale, st->stale_nonce)) {
        json_decref(msg);
        st->stale = 1;
        return 0;
    }
    double now = kg_now_ms();
    /* Every message is kept: the verdict is decided from them, and one lost (a finding) could make a pass. */
    if (kg_json_set(msg, "t_ms", json_real(now - st->t0)) != 0 ||
        kg_json_push(st->rep->messages, json_incref(msg)) != 0) {
        json_decref(msg);
        fail_own(st, "out of memory keeping the evaluation's messages");
        return 0;
    }
    json_decref(msg); /* st->rep->messages holds it */
    const char *type = json_string_value(json_object_get(msg, "type"));
    kg_msg kind = kg_msg_kind(msg);
    if (kind == KG_MSG_STAGE) {
        const char *stage = json_string_value(json_object_get(msg, "stage"));
        const char *status = json_string_value(json_object_get(msg, "status"));
        if (stage && status && strcmp(status, "begin") == 0) {
            snprintf(st->rep->stage, sizeof st->rep->stage, "%s", stage);
            if (!st->in_stage)
                st->outside_used_ms += now - st->outside_since;
            st->in_stage = 1;
            st->stage_start = now;
            st->stage_limit_s = stage_limit(st->lim, stage);
        } else if (stage && st->in_stage) {
            st->in_stage = 0;
            st->outside_since = now;
        }
    } else if (kind == KG_MSG_RUNNER_LOST) {
        const char *why = json_string_value(json_object_get(msg, "why"));
        st->runner_protocol = why && !strcmp(why, "protocol");
    }
    /* Only the harness knows the nonce: a line the candidate forged asks nothing of us. */
    const char *nonce = json_string_value(json_object_get(msg, "nonce"));
    if (kind == KG_MSG_DONE) {
        st->done = 1;
        st->rep->stage[0] = '\0';
        st->stays = st->nonce && nonce && !strcmp(nonce, st->nonce) && json_is_true(json_object_get(msg, "stays"));
        const char *loaded = json_string_value(json_object_get(msg, "task_sha256"));
        snprintf(st->task_loaded, sizeof st->task_loaded, "%s", st->stays && loaded ? loaded : "");
    }
    if (type && (!st->nonce || (nonce && !strcmp(nonce, st->nonce))))
        handle_request(st, msg, kind);
    return 0;
}

void kg_pair_kill(pid_t judge, pid_t runner)
{
    pid_t both[2] = {judge, runner};
    for (int i = 0; i < 2; i++)
        if (both[i] > 0) {
            kill(-both[i], SIGKILL);
            kill(both[i], SIGKILL);
        }
}

static void kill_child(run_state *st, kg_child_end why)
{
    if (st->killed)
        return;
    st->killed = 1;
    st->rep->end = why;
    kg_pair_kill(st->rep->pid, st->rep->runner_pid);
}

/* Every process running as the runner's uid is the runner's or its descendant's (the uid is its slot's alone,
 * machine-wide, until the slot is given back).  uid_processes counts them, leaving out `except` (the runner
 * itself) and zombies, and puts their names in `names` (comma-separated, truncated; may be NULL); with
 * kill_them it also kills them and reaps those re-parented to us.  kgym uses it twice: the census the judge
 * asks for before the runner exits (anything still running is the candidate's doing), and after both processes
 * are gone, where a PID namespace has killed everything already and this is the fallback where the kernel
 * refused one. */
static int uid_processes(uid_t uid, pid_t except, int kill_them, char *names, size_t names_cap)
{
    if (names && names_cap)
        names[0] = '\0';
    /* Killing and reaping by pid children of ours found in /proc: the catch-all reaper must not take one between
     * the look and the waitpid (reaper.c). */
    if (kill_them)
        kg_reaper_hold();
    DIR *d = opendir("/proc");
    if (!d) {
        if (kill_them)
            kg_reaper_release();
        return 0;
    }
    int count = 0;
    pid_t me = getpid();
    pid_t reap[256];
    int nreap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 1 || pid == (long)except)
            continue;
        /* Whose process: any of its real, effective, saved and filesystem uids, from /proc/N/status.  Not the
         * owner of /proc/N, which is the effective uid alone: a process of the runner's uid that runs a
         * set-user-ID program (possible where no_new_privs is not set: seccomp and Landlock refused) keeps the
         * runner's real uid (the kernel still counts it in the uid's RLIMIT_NPROC, and slot_clear's kill(-1)
         * reaches it) but /proc/N turns the program owner's, and the census and the final sweep missed it.
         * (Dumpability hides nothing here: /proc/N stays the effective uid's for a non-dumpable process, only
         * the files in it turn root's, and the status file stays readable to all.) */
        unsigned long ids[4];
        if (!kg_proc_uids_read(pid, ids) ||
            (ids[0] != uid && ids[1] != uid && ids[2] != uid && ids[3] != uid))
            continue;
        kg_proc_stat ps;
        int known = kg_proc_stat_read(pid, &ps);
        if (kill_them) {
            if (kill((pid_t)pid, SIGKILL) == 0)
                count++;
            /* Is it ours to reap (re-parented to this subreaper)? */
            if (known && ps.ppid == me && nreap < 256)
                reap[nreap++] = (pid_t)pid;
            continue;
        }
        if (!known || ps.state == 'Z')
            continue; /* gone, or ended and waiting to be reaped: nothing runs */
        count++;
        if (names && names_cap) {
            size_t used = strlen(names);
            snprintf(names + used, names_cap - used, "%s%s", used ? ", " : "", ps.comm);
        }
    }
    closedir(d);
    for (int i = 0; i < nreap; i++)
        while (waitpid(reap[i], NULL, 0) < 0 && errno == EINTR) {
        }
    if (kill_them)
        kg_reaper_release();
    return count;
}

/* How a process of the pair ended, from its wait status. */
static void classify(int status, kg_child_end *end, int *code, int *sig, int done)
{
    if (WIFSIGNALED(status)) {
        *end = KG_END_SIGNAL;
        *sig = WTERMSIG(status);
    } else {
        *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        *end = (*code == 0 && done) ? KG_END_COMPLETED : KG_END_EXIT;
    }
}

enum { FD_PROTO = KG_PAIR_PROTO, FD_JOUT = KG_PAIR_JOUT, FD_JERR = KG_PAIR_JERR, FD_ROUT = KG_PAIR_ROUT,
       FD_RERR = KG_PAIR_RERR, FD_COUNT = KG_PAIR_FDS };

int kg_supervisor_run(kg_supervisor *sup, json_t *caller_job, const kg_child_limits *limits,
                      kg_child_report *rep, kg_error *err)
{
    memset(rep, 0, sizeof *rep);
    kg_child_limits none = {0};
    const kg_child_limits *lim = limits ? limits : &none;
    kg_pair pair;
    int rc = kg_pair_for_job(sup, caller_job, lim->fresh_pair, &pair, err);
    if (rc != KG_OK)
        return rc;
    json_t *job = pair.job; /* the pair's; freed by kg_pair_end */
    pid_t pid = pair.judge, rpid = pair.runner;
    rep->pid = pid;
    rep->runner_pid = rpid;
    rep->messages = json_array();
    json_error_t jerr_parse;
    rep->runner_notes = json_loads(pair.notes, 0, &jerr_parse);
    rep->warm = pair.warm;
    rep->judge_served = pair.served;
    rep->judge_cpu_s = rep->runner_cpu_s = -1;
    /* What the judge had used before this job: a kept judge's earlier jobs are not this one's. */
    double judge_cpu0 = pair.served > 0 ? cpu_seconds_with_children(pid) : 0;
    rep->workdir = kg_strdup(json_string_value(json_object_get(job, "workdir")) ?: "");

    /* Limits go on from outside, before the processes have their job: no
     * candidate code has run yet (a warm pair has only entered its sandbox and
     * started its CUDA contexts), and none can lift a hard limit we set. */
    pid_t both[2] = {pid, rpid};
    int judge_cpu_ok = 1; /* its CPU limit covers this evaluation's own (else it is not kept after it) */
    for (int i = 0; i < 2; i++) {
        if (lim->address_space_bytes)
            set_limit(both[i], RLIMIT_AS, lim->address_space_bytes);
        /* Files: the runner's only (the judge writes none, and sizes the shared memory the runner's outputs
         * come back in: a memfd is a file too). */
        if (lim->file_size_bytes && both[i] == rpid)
            set_limit(both[i], RLIMIT_FSIZE, lim->file_size_bytes);
        if (lim->cpu_seconds > 0 && both[i] == rpid)
            set_limit(rpid, RLIMIT_CPU, (unsigned long long)lim->cpu_seconds + 1);
        else if (lim->cpu_seconds > 0)
            judge_cpu_ok = judge_cpu_limit(pid, pair.served == 0, lim->cpu_seconds) == 0;
        set_limit(both[i], RLIMIT_CORE, 0);
    }

    run_state st = {.sup = sup, .rep = rep, .lim = lim, .proto_fd = pair.fds[KG_PAIR_PROTO], .t0 = kg_now_ms(),
                    .nonce = json_string_value(json_object_get(job, "nonce")), .stale_nonce = pair.last_nonce};
    st.outside_since = st.t0;
    st.runner_pid = rpid;
    json_t *ruid = json_object_get(job, "runner_uid"); /* the census's and the final sweep's */
    if (json_is_integer(ruid) && json_integer_value(ruid) > 0)
        st.runner_uid = (uid_t)json_integer_value(ruid);
    /* The judge may stay for another evaluation when warm pairs are kept (kgym eval's single job keeps none), the
     * job is sealed (its "done" must carry the nonce) and it has served fewer than KG_JUDGE_JOBS_MAX; it says in
     * its "done" whether it does. */
    json_t *sent = json_copy(job);
    if (!sent || (sup->warm_max > 0 && st.nonce && pair.task_key[0] && judge_cpu_ok &&
                  pair.served + 1 < KG_JUDGE_JOBS_MAX && kg_json_set(sent, "stay", json_true()) != 0)) {
        json_decref(sent);
        kg_pair_discard(&pair);
        kg_child_report_free(rep);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    /* The runner's host memory, before it has its job: a group of its own (memcg.c; RLIMIT_AS breaks CUDA). */
    kg_memcg memcg;
    memset(&memcg, 0, sizeof memcg);
    if (lim->runner_memory_bytes &&
        kg_memcg_enter(&memcg, rpid, lim->runner_memory_bytes, rep->runner_memory_why,
                       sizeof rep->runner_memory_why) == 0)
        rep->runner_memory_limit = lim->runner_memory_bytes;
    kg_send_json_line_fd(pair.fds[KG_PAIR_PROTO], sent, pair.peer_fd); /* a dead child shows up below */
    json_decref(sent);
    if (pair.peer_fd >= 0) {
        close(pair.peer_fd); /* the judge's now */
        pair.peer_fd = -1;
    }
    /* The next evaluation's pair is started ahead while this one runs (pair.c's warmer). */
    kg_pair_fill(sup, caller_job);

    capture cap_out = {.cap = lim->capture_bytes}, cap_err = {.cap = lim->capture_bytes};
    int *fds = pair.fds; /* closed here as they end; kg_pair_end closes the rest */
    int exited = 0, status = 0, runner_exited = 0, runner_status = 0, runner_first = 0, keep = 0;
    char chunk[65536];
    for (;;) {
        double now = kg_now_ms();
        double deadline = -1;
        gpu_try_grant(&st);
        if (lim->total_timeout_s > 0)
            deadline = st.t0 + st.paused_ms + lim->total_timeout_s * 1000.0;
        if (st.gpu_pending)
            deadline = -1; /* waiting for the GPU is not the child's time */
        else if (st.in_stage && st.stage_limit_s > 0) {
            double d = st.stage_start + st.stage_limit_s * 1000.0;
            if (deadline < 0 || d < deadline)
                deadline = d;
        } else if (!st.in_stage && !st.done && lim->outside_stages_s > 0) {
            /* Start-up, the checks between stages and the wind-down have a budget of their own: without it
             * a child stuck there would run until the total limit, past every stage limit. */
            double d = st.outside_since + lim->outside_stages_s * 1000.0 - st.outside_used_ms;
            if (deadline < 0 || d < deadline)
                deadline = d;
        }
        if (!st.killed && lim->stop_requested && lim->stop_requested(lim->stop_ctx)) {
            st.cancelled = 1;
            kill_child(&st, KG_END_TIMEOUT); /* the end is not reported: the run returns KG_ERR_CANCELLED */
        }
        /* Waiting for the GPU stops the child's clocks, but no wait may last for ever: one longer than the
         * whole evaluation's limit means the GPU is not being shared out (a bug, or an evaluation that holds
         * the device and never ends).  The child is stopped and kgym reports an error of its own, with the
         * arbiter's state: no verdict, the candidate did nothing wrong. */
        if (!st.killed && st.gpu_pending && lim->total_timeout_s > 0 &&
            now - st.gpu_pending_since > lim->total_timeout_s * 1000.0) {
            char state[200];
            kg_arbiter_describe(st.sup->arbiter, state, sizeof state);
            snprintf(st.own_failure, sizeof st.own_failure, "no GPU grant in %.0f s (arbiter: %s)",
                     (now - st.gpu_pending_since) / 1000.0, state);
            kill_child(&st, KG_END_TIMEOUT);
        }
        if (!st.killed && deadline >= 0 && now >= deadline) {
            int stage_expired = st.in_stage && st.stage_limit_s > 0 &&
                                now >= st.stage_start + st.stage_limit_s * 1000.0;
            int outside_expired = !st.in_stage && !st.done && lim->outside_stages_s > 0 &&
                                  now >= st.outside_since + lim->outside_stages_s * 1000.0 - st.outside_used_ms;
            rep->stage_limit_s = stage_expired     ? st.stage_limit_s
                                 : outside_expired ? lim->outside_stages_s
                                                   : lim->total_timeout_s;
            kill_child(&st, KG_END_TIMEOUT);
        }
        /* Has either process ended?  WNOWAIT keeps the zombie, so its pid (and
         * process group id) cannot be reused while we clean up. */
        if (!runner_exited && kg_proc_exited(rpid)) {
            runner_exited = 1;
            runner_first = !exited; /* it ended on its own, before the judge (checked first) */
        }
        if (!exited && kg_proc_exited(pid))
            exited = 1;
        /* The judge said "done" and that it stays, and its runner has ended: the evaluation is over and the judge
         * waits for its next job (kept below when nothing of this one is left unread). */
        if (!exited && !st.killed && st.done && st.stays) {
            if (runner_exited) {
                keep = 1;
                break;
            }
            kg_pair_kill(0, rpid); /* it answered "exit" before "done": what is left of it goes now */
        }
        int open_count = 0;
        struct pollfd p[FD_COUNT];
        for (int i = 0; i < FD_COUNT; i++) {
            p[i].fd = fds[i];
            p[i].events = POLLIN;
            p[i].revents = 0;
            if (fds[i] >= 0)
                open_count++;
        }
        if (exited) {
            /* The judge is done: whatever is left of the pair goes too; then drain. */
            kg_pair_kill(pid, rpid);
        }
        if (open_count == 0 && exited && runner_exited)
            break;
        int timeout_ms = st.gpu_pending ? 1 : 50;
        if (!exited && !st.killed && deadline >= 0) {
            double left = deadline - kg_now_ms();
            timeout_ms = left < 0 ? 0 : (left > 50 ? 50 : (int)left + 1);
        }
        if (open_count == 0) {
            /* Streams closed but a process lives on: wait for it (or the deadline). */
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        int pr = poll(p, FD_COUNT, exited ? 0 : timeout_ms);
        if (pr < 0 && errno != EINTR)
            break;
        int progressed = 0;
        for (int i = 0; i < FD_COUNT; i++) {
            if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = i == FD_PROTO ? kg_lines_fill(&pair.proto_lines, fds[i]) : read(fds[i], chunk, sizeof chunk);
            if (n == KG_LINES_NOMEM) {
                /* a line of the judge's not kept: never a verdict decided without it */
                fail_own(&st, "out of memory reading the judge's messages");
                continue;
            }
            if (n < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (n <= 0) {
                close(fds[i]);
                fds[i] = -1;
                continue;
            }
            progressed = 1;
            if (i == FD_PROTO) {
                char *line;
                size_t len;
                int got;
                while ((got = kg_lines_next(&pair.proto_lines, KG_MAX_MESSAGE_BYTES, &line, &len)) == 1)
                    if (!st.killed && handle_message(&st, line, len) != 0)
                        kill_child(&st, KG_END_PROTOCOL);
                if (got == KG_LINES_TOO_LONG) /* a flood on the protocol channel is not protocol */
                    kill_child(&st, KG_END_PROTOCOL);
            } else {
                capture_add(i == FD_JOUT || i == FD_ROUT ? &cap_out : &cap_err, chunk, (size_t)n);
                if (lim->output_limit_bytes &&
                    cap_out.total + cap_err.total > lim->output_limit_bytes)
                    kill_child(&st, KG_END_OUTPUT_FLOOD);
            }
        }
        if (exited && !progressed) {
            /* Nothing more is buffered: stop reading (grandchildren that kept
             * the pipes open have been killed above). */
            for (int i = 0; i < FD_COUNT; i++)
                if (fds[i] >= 0) {
                    close(fds[i]);
                    fds[i] = -1;
                }
        }
    }
    int finished = keep; /* the judge said "done" and stays: killed below only if it is not kept after all */
    /* Kept for the task it ran only: the file's bytes as kgym read them when the job started (pair.task_key,
     * kg_pair_for_job) are the bytes the judge loaded (else the file changed meanwhile, and which task the judge
     * holds is not known). */
    if (st.stale || !pair.task_key[0] || strcmp(st.task_loaded, pair.task_key) != 0)
        keep = 0;
    /* Room under its hard CPU limit for another evaluation like this one, or it goes now.  Its soft limit gets
     * that room at once: a warm pair's set-up runs before the next evaluation sets it. */
    if (keep && lim->cpu_seconds > 0)
        keep = judge_cpu_limit(pid, 0, lim->cpu_seconds) == 0;
    if (keep) {
        /* What both processes wrote before the judge's "done" is in the pipes by now (the judge flushes its
         * streams before it says it): read without waiting.  The runner's pipes then close; the judge's stay
         * open for its next evaluation.  Anything on the protocol socket after "done" is not protocol: such a
         * judge is not kept. */
        for (int i = 0; i < FD_COUNT; i++) {
            while (fds[i] >= 0) {
                struct pollfd one = {.fd = fds[i], .events = POLLIN};
                if (poll(&one, 1, 0) <= 0 || !(one.revents & (POLLIN | POLLHUP | POLLERR)))
                    break;
                if (i == FD_PROTO) {
                    keep = 0;
                    break;
                }
                ssize_t n = read(fds[i], chunk, sizeof chunk);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0) {
                    close(fds[i]);
                    fds[i] = -1;
                    break;
                }
                capture_add(i == FD_JOUT || i == FD_ROUT ? &cap_out : &cap_err, chunk, (size_t)n);
            }
        }
        if (pair.proto_lines.buf.len > pair.proto_lines.start || fds[FD_PROTO] < 0 || fds[FD_JOUT] < 0 ||
            fds[FD_JERR] < 0)
            keep = 0;
    }
    gpu_let_go(&st);
    for (int i = 0; i < FD_COUNT; i++)
        if (fds[i] >= 0 && !(keep && (i == FD_PROTO || i == FD_JOUT || i == FD_JERR))) {
            close(fds[i]);
            fds[i] = -1;
        }
    kg_pair_kill(keep ? 0 : pid, rpid);
    struct rusage ru;
    double judge_cpu = -1;
    if (keep)
        judge_cpu = cpu_seconds_with_children(pid); /* as wait4 would count it: the children it waited for too */
    else if (wait4_retry(pid, &status, &ru) == pid)
        judge_cpu = rusage_seconds(&ru);
    if (wait4_retry(rpid, &runner_status, &ru) == rpid)
        rep->runner_cpu_s = rusage_seconds(&ru);
    if (judge_cpu >= 0 && judge_cpu0 >= 0)
        rep->judge_cpu_s = fmax(0.0, judge_cpu - judge_cpu0);
    if (!keep)
        kg_reaper_untrack(pid);
    kg_reaper_untrack(rpid);
    if (st.runner_uid)
        rep->stragglers = uid_processes(st.runner_uid, 0, 1, NULL, 0);
    /* What the evaluation orphaned and has ended since (its own or an earlier one's) is reaped now, not left a
     * zombie of this process. */
    kg_supervisor_reap_orphans();
    /* The runner's memory group, now that the runner and what it left are reaped: what the kernel killed there and
     * the most it held, then the group itself. */
    rep->runner_memory_kills = kg_memcg_oom_kills(&memcg);
    rep->runner_memory_peak = kg_memcg_peak(&memcg);
    kg_memcg_remove(&memcg);
    /* Both processes and anything left of the runner's are gone, and their device memory with them: the
     * reservation goes back. */
    kg_arbiter_account_free(st.gpu_account);
    if (keep)
        kg_pair_keep_judge(sup, &pair); /* the judge's part leaves the pair: kg_pair_end leaves it alone */
    kg_pair_end(&pair); /* the slot, a warm pair's workdir, the job: st.nonce pointed into it, no line is read after this */
    rep->wall_ms = kg_now_ms() - st.t0;
    rep->outside_stage = !st.in_stage && !st.done;
    if (finished) {
        rep->end = KG_END_COMPLETED; /* the judge finished its job (and lives on, unless it was not kept) */
    } else if (!st.killed) {
        classify(status, &rep->end, &rep->exit_code, &rep->signal, st.done);
        /* The judge finishes what it started unless its runner went away: then how
         * the evaluation ended is how the runner (the candidate's process) ended. */
        if (!st.done) {
            kg_child_end rend = KG_END_EXIT;
            int rcode = 0, rsig = 0;
            classify(runner_status, &rend, &rcode, &rsig, 0);
            int judge_says_lost = WIFEXITED(status) && WEXITSTATUS(status) == KG_JUDGE_RUNNER_LOST;
            if (judge_says_lost && st.runner_protocol) {
                /* It wrote something on the judge's socket that is not an answer. */
                rep->end = KG_END_PROTOCOL;
                rep->runner_ended = 1;
            } else if ((judge_says_lost && runner_first) ||
                       (rend == KG_END_SIGNAL && (runner_first || rsig != SIGKILL))) {
                /* A runner killed with SIGKILL after the judge had ended was killed by kgym (kg_pair_kill once
                 * the judge is gone): that is the judge's end (RLIMIT_CPU's SIGXCPU, a harness crash), not the
                 * candidate's. */
                rep->end = rend;
                rep->exit_code = rcode;
                rep->signal = rsig;
                rep->runner_ended = 1;
            }
        }
        /* RLIMIT_CPU ends a process with SIGXCPU/SIGKILL: that is a timeout. */
        if (rep->end == KG_END_SIGNAL && rep->signal == SIGXCPU) {
            rep->end = KG_END_TIMEOUT;
            rep->stage_limit_s = lim->cpu_seconds;
        }
    } else if (WIFSIGNALED(status)) {
        rep->signal = WTERMSIG(status);
    }
    if (!st.in_stage && rep->end != KG_END_TIMEOUT && st.done)
        rep->stage[0] = '\0';
    capture_finish(&cap_out, &rep->out);
    capture_finish(&cap_err, &rep->err);
    if (st.own_failure[0]) {
        kg_child_report_free(rep);
        return kg_error_set(err, KG_ERR_INTERNAL, "%s", st.own_failure);
    }
    if (st.cancelled) {
        kg_child_report_free(rep);
        return kg_error_set(err, KG_ERR_CANCELLED, "the evaluation was stopped: its job was cancelled");
    }
    return KG_OK;
}

void kg_child_report_free(kg_child_report *rep)
{
    if (!rep)
        return;
    json_decref(rep->messages);
    json_decref(rep->runner_notes);
    free(rep->workdir);
    free(rep->out.head);
    free(rep->out.tail);
    free(rep->err.head);
    free(rep->err.tail);
    memset(rep, 0, sizeof *rep);
}
