/*
 * supervisor.c — opening and closing a supervisor, and running one child to
 * its end under our limits (see include/kgym/supervisor.h).
 */
#include "supervisor/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"

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
    kg_buf_printf(&pkg, "%s/kgym_harness/zygote.py", opts->harness_dir);
    int found = pkg.data && kg_file_exists(pkg.data);
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
    char *dir = NULL;
    if (!sup->python || !sup->harness_dir || !sup->device ||
        kg_arbiter_create(&sup->arbiter, err) != KG_OK || kg_temp_dir("kgym-zygote", &dir, err) != KG_OK) {
        kg_supervisor_close(sup);
        return err && err->code ? err->code : kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    kg_buf log = {0};
    kg_buf_printf(&log, "%s/zygote.log", dir);
    free(dir);
    sup->log_path = kg_buf_release(&log);

    /* Children are forked by the zygote's intermediate process, which exits at
     * once: as a subreaper we inherit them and can wait for their real status. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    signal(SIGPIPE, SIG_IGN);

    int rc = kg_zygote_start(sup, err);
    if (rc != KG_OK) {
        kg_supervisor_close(sup);
        return rc;
    }
    *out = sup;
    return KG_OK;
}

void kg_supervisor_close(kg_supervisor *sup)
{
    if (!sup)
        return;
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
} capture;

static void capture_add(capture *c, const char *data, size_t n)
{
    c->total += n;
    size_t to_head = 0;
    if (c->head.len < c->cap) {
        to_head = c->cap - c->head.len;
        if (to_head > n)
            to_head = n;
        kg_buf_append(&c->head, data, to_head);
    }
    data += to_head;
    n -= to_head;
    if (!n || !c->cap)
        return;
    if (!c->ring && !(c->ring = malloc(c->cap)))
        return;
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
        for (size_t i = 0; i < c->ring_len; i++)
            kg_buf_append(&tail, &c->ring[(start + i) % c->cap], 1);
    }
    out->tail = kg_buf_release(&tail);
    out->truncated = c->total > c->cap + c->ring_len;
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

typedef struct {
    kg_supervisor *sup;
    kg_child_report *rep;
    const kg_child_limits *lim;
    int proto_fd;
    const char *nonce;        /* the job's secret: only lines that carry it are acted on */
    double t0;
    double stage_start;
    double stage_limit_s;
    double paused_ms;         /* time spent waiting for the GPU: the deadlines stand still meanwhile */
    int in_stage;
    int done;
    int killed;
    kg_arbiter_request *gpu_held;
    kg_arbiter_request *gpu_pending;
    json_t *gpu_pending_msg;  /* the gpu_acquire line waiting (owned by rep->messages) */
    double gpu_pending_since;
} run_state;

static void send_line(run_state *st, json_t *obj)
{
    char *text = json_dumps(obj, JSON_COMPACT);
    if (text) {
        kg_buf line = {0};
        kg_buf_puts(&line, text);
        kg_buf_puts(&line, "\n");
        send_all(st->proto_fd, line.data, line.len); /* a dead child shows up in the main loop */
        kg_buf_free(&line);
        free(text);
    }
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
    st->gpu_held = st->gpu_pending;
    st->gpu_pending = NULL;
    const char *mode = "shared";
    if (st->gpu_pending_msg) {
        json_object_set_new(st->gpu_pending_msg, "waited_ms", json_real(waited));
        const char *m = json_string_value(json_object_get(st->gpu_pending_msg, "mode"));
        if (m && !strcmp(m, "exclusive"))
            mode = "exclusive";
    }
    st->gpu_pending_msg = NULL;
    send_line(st, json_pack("{s:s, s:s, s:f}", "type", "gpu_grant", "mode", mode, "waited_ms", waited));
}

/* The child's questions: GPU phases go to the arbiter, the rest to the caller's hook. */
static void handle_request(run_state *st, json_t *msg, const char *type)
{
    if (!strcmp(type, "gpu_acquire")) {
        const char *mode = json_string_value(json_object_get(msg, "mode"));
        gpu_let_go(st); /* one phase at a time: asking again ends the previous one */
        st->gpu_pending = kg_arbiter_request_new(st->sup->arbiter, mode && !strcmp(mode, "exclusive")
                                                                      ? KG_GPU_EXCLUSIVE : KG_GPU_SHARED);
        if (!st->gpu_pending) {
            send_line(st, json_pack("{s:s, s:s}", "type", "error", "message", "out of memory"));
            return;
        }
        st->gpu_pending_msg = msg;
        st->gpu_pending_since = kg_now_ms();
        gpu_try_grant(st);
    } else if (!strcmp(type, "gpu_release")) {
        gpu_let_go(st);
    } else if (json_is_true(json_object_get(msg, "reply"))) {
        json_t *reply = NULL;
        if (st->lim->on_request)
            st->lim->on_request(st->lim->on_request_ctx, st->rep->messages, msg, &reply);
        if (!reply)
            reply = json_pack("{s:s, s:s}", "type", "error", "message", "kgym has no answer to this request");
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
    double now = kg_now_ms();
    json_object_set_new(msg, "t_ms", json_real(now - st->t0));
    const char *type = json_string_value(json_object_get(msg, "type"));
    if (type && strcmp(type, "stage") == 0) {
        const char *stage = json_string_value(json_object_get(msg, "stage"));
        const char *status = json_string_value(json_object_get(msg, "status"));
        if (stage && status && strcmp(status, "begin") == 0) {
            snprintf(st->rep->stage, sizeof st->rep->stage, "%s", stage);
            st->in_stage = 1;
            st->stage_start = now;
            st->stage_limit_s = stage_limit(st->lim, stage);
        } else if (stage) {
            st->in_stage = 0;
        }
    } else if (type && strcmp(type, "done") == 0) {
        st->done = 1;
        st->rep->stage[0] = '\0';
    }
    json_array_append_new(st->rep->messages, msg);
    /* Only the harness knows the nonce: a line the candidate forged asks nothing of us. */
    const char *nonce = json_string_value(json_object_get(msg, "nonce"));
    if (type && (!st->nonce || (nonce && !strcmp(nonce, st->nonce))))
        handle_request(st, msg, type);
    return 0;
}

static void kill_child(run_state *st, kg_child_end why)
{
    if (st->killed)
        return;
    st->killed = 1;
    st->rep->end = why;
    kill(-st->rep->pid, SIGKILL);
    kill(st->rep->pid, SIGKILL);
}

int kg_supervisor_run(kg_supervisor *sup, json_t *job, const kg_child_limits *limits,
                      kg_child_report *rep, kg_error *err)
{
    memset(rep, 0, sizeof *rep);
    kg_child_limits none = {0};
    const kg_child_limits *lim = limits ? limits : &none;
    int proto[2], out[2], errp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, proto) != 0)
        return kg_error_set(err, KG_ERR_IO, "socketpair: %s", strerror(errno));
    if (pipe2(out, O_CLOEXEC) != 0) {
        close(proto[0]);
        close(proto[1]);
        return kg_error_set(err, KG_ERR_IO, "pipe: %s", strerror(errno));
    }
    if (pipe2(errp, O_CLOEXEC) != 0) {
        close(proto[0]); close(proto[1]); close(out[0]); close(out[1]);
        return kg_error_set(err, KG_ERR_IO, "pipe: %s", strerror(errno));
    }
    int child_fds[3] = {proto[1], out[1], errp[1]};
    pid_t pid = 0;
    int rc = kg_zygote_fork(sup, child_fds, &pid, err);
    close(proto[1]);
    close(out[1]);
    close(errp[1]);
    if (rc != KG_OK) {
        close(proto[0]); close(out[0]); close(errp[0]);
        return rc;
    }
    rep->pid = pid;
    rep->messages = json_array();

    /* Limits go on from outside, before the child has its job: no candidate
     * code has run yet, and none can lift a hard limit we set. */
    if (lim->address_space_bytes)
        set_limit(pid, RLIMIT_AS, lim->address_space_bytes);
    if (lim->file_size_bytes)
        set_limit(pid, RLIMIT_FSIZE, lim->file_size_bytes);
    if (lim->cpu_seconds > 0)
        set_limit(pid, RLIMIT_CPU, (unsigned long long)lim->cpu_seconds + 1);
    set_limit(pid, RLIMIT_CORE, 0);

    run_state st = {.sup = sup, .rep = rep, .lim = lim, .proto_fd = proto[0], .t0 = kg_now_ms(),
                    .nonce = json_string_value(json_object_get(job, "nonce"))};
    char *job_text = json_dumps(job, JSON_COMPACT);
    if (job_text) {
        kg_buf line = {0};
        kg_buf_puts(&line, job_text);
        kg_buf_puts(&line, "\n");
        send_all(proto[0], line.data, line.len); /* a dead child shows up below */
        kg_buf_free(&line);
        free(job_text);
    }

    capture cap_out = {.cap = lim->capture_bytes}, cap_err = {.cap = lim->capture_bytes};
    kg_buf linebuf = {0};
    int fds[3] = {proto[0], out[0], errp[0]};
    int exited = 0, status = 0;
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
        }
        if (!st.killed && deadline >= 0 && now >= deadline) {
            int stage_expired = st.in_stage && st.stage_limit_s > 0 &&
                                now >= st.stage_start + st.stage_limit_s * 1000.0;
            rep->stage_limit_s = stage_expired ? st.stage_limit_s : lim->total_timeout_s;
            kill_child(&st, KG_END_TIMEOUT);
        }
        /* Has the child itself ended?  WNOWAIT keeps the zombie, so its pid
         * (and process group id) cannot be reused while we clean up. */
        if (!exited) {
            siginfo_t si;
            memset(&si, 0, sizeof si);
            if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
                exited = 1;
        }
        int open_count = 0;
        struct pollfd p[3];
        for (int i = 0; i < 3; i++) {
            p[i].fd = fds[i];
            p[i].events = POLLIN;
            p[i].revents = 0;
            if (fds[i] >= 0)
                open_count++;
        }
        if (exited) {
            /* Whatever it left behind in its group goes too; then drain. */
            kill(-pid, SIGKILL);
        }
        if (open_count == 0 && exited)
            break;
        int timeout_ms = st.gpu_pending ? 1 : 50;
        if (!exited && !st.killed && deadline >= 0) {
            double left = deadline - kg_now_ms();
            timeout_ms = left < 0 ? 0 : (left > 50 ? 50 : (int)left + 1);
        }
        if (open_count == 0) {
            /* Streams closed but the child lives on: wait for it (or the deadline). */
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        int pr = poll(p, 3, exited ? 0 : timeout_ms);
        if (pr < 0 && errno != EINTR)
            break;
        int progressed = 0;
        for (int i = 0; i < 3; i++) {
            if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(fds[i], chunk, sizeof chunk);
            if (n < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (n <= 0) {
                close(fds[i]);
                fds[i] = -1;
                continue;
            }
            progressed = 1;
            if (i == 0) {
                kg_buf_append(&linebuf, chunk, (size_t)n);
                char *start = linebuf.data, *nl;
                while ((nl = memchr(start, '\n', linebuf.len - (size_t)(start - linebuf.data)))) {
                    if (!st.killed && handle_message(&st, start, (size_t)(nl - start)) != 0)
                        kill_child(&st, KG_END_PROTOCOL);
                    start = nl + 1;
                }
                size_t rest = linebuf.len - (size_t)(start - linebuf.data);
                memmove(linebuf.data, start, rest);
                linebuf.len = rest;
                linebuf.data[rest] = '\0';
                if (linebuf.len > KG_MAX_MESSAGE_BYTES)
                    kill_child(&st, KG_END_PROTOCOL);
            } else {
                capture_add(i == 1 ? &cap_out : &cap_err, chunk, (size_t)n);
                if (lim->output_limit_bytes &&
                    cap_out.total + cap_err.total > lim->output_limit_bytes)
                    kill_child(&st, KG_END_OUTPUT_FLOOD);
            }
        }
        if (exited && !progressed) {
            /* Nothing more is buffered: stop reading (grandchildren that kept
             * the pipes open have been killed above). */
            for (int i = 0; i < 3; i++)
                if (fds[i] >= 0) {
                    close(fds[i]);
                    fds[i] = -1;
                }
        }
    }
    gpu_let_go(&st);
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    rep->wall_ms = kg_now_ms() - st.t0;
    if (!st.killed) {
        if (WIFSIGNALED(status)) {
            rep->end = KG_END_SIGNAL;
            rep->signal = WTERMSIG(status);
        } else {
            rep->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            rep->end = (rep->exit_code == 0 && st.done) ? KG_END_COMPLETED : KG_END_EXIT;
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
    kg_buf_free(&linebuf);
    return KG_OK;
}

void kg_child_report_free(kg_child_report *rep)
{
    if (!rep)
        return;
    json_decref(rep->messages);
    free(rep->out.head);
    free(rep->out.tail);
    free(rep->err.head);
    free(rep->err.tail);
    memset(rep, 0, sizeof *rep);
}
