/*
 * supervisor.c — opening and closing a supervisor, and running one child to
 * its end under our limits (see include/kgym/supervisor.h).
 */
#include "supervisor/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
    /* Set first, it stands: the device's own figure (sent by the judges) is then ignored. */
    kg_arbiter_set_capacity(sup->arbiter, opts->device_memory_bytes);
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
    double outside_since;     /* when the child last left a stage (or started) */
    double outside_used_ms;   /* its time outside stages before that */
    int in_stage;
    int done;
    int killed;
    int runner_protocol;      /* the judge said its runner broke their protocol */
    kg_arbiter_request *gpu_held;
    kg_arbiter_request *gpu_pending;
    json_t *gpu_pending_msg;  /* the gpu_acquire line waiting (owned by rep->messages) */
    double gpu_pending_since;
    kg_arbiter_account *gpu_account; /* the evaluation's device-memory reservation, until its end */
    char starved[256];        /* set when a GPU wait outlasted the limit (kgym's failure, not the child's) */
    int cancelled;            /* the caller's stop_requested said so */
    uid_t runner_uid;         /* 0: the runner has no uid of its own (no census, no final sweep) */
    pid_t runner_pid;
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
    else
        st->outside_since += waited;
    st->gpu_held = st->gpu_pending;
    st->gpu_pending = NULL;
    const char *mode = "shared";
    if (st->gpu_pending_msg) {
        json_object_set_new(st->gpu_pending_msg, "waited_ms", json_real(waited));
        double mem = kg_arbiter_memory_wait_ms(st->gpu_held);
        if (mem > 0)
            json_object_set_new(st->gpu_pending_msg, "memory_waited_ms", json_real(mem < waited ? mem : waited));
        const char *m = json_string_value(json_object_get(st->gpu_pending_msg, "mode"));
        if (m && !strcmp(m, "exclusive"))
            mode = "exclusive";
    }
    st->gpu_pending_msg = NULL;
    send_line(st, json_pack("{s:s, s:s, s:f}", "type", "gpu_grant", "mode", mode, "waited_ms", waited));
}

/* A byte count from a gpu_acquire line: a non-negative integer, else 0 (nothing said). */
static uint64_t byte_field(json_t *msg, const char *key)
{
    json_t *v = json_object_get(msg, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

/* The child's questions: GPU phases go to the arbiter, the rest to the caller's hook. */
static int uid_processes(uid_t uid, pid_t except, int kill_them, char *names, size_t names_cap);

static void handle_request(run_state *st, json_t *msg, const char *type)
{
    if (!strcmp(type, "gpu_acquire")) {
        const char *mode = json_string_value(json_object_get(msg, "mode"));
        gpu_let_go(st); /* one phase at a time: asking again ends the previous one */
        /* Device memory (arbiter.h): the judge says how much the device has and, once it knows the task's
         * sizes, what this evaluation will hold on it; kgym lets evaluations reserve KG_GPU_MEMORY_SHARE of
         * the device, the rest being the processes' CUDA contexts and what no estimate foresees. */
        uint64_t total = byte_field(msg, "device_total_bytes"), want = byte_field(msg, "reserve_bytes");
        if (total)
            kg_arbiter_set_capacity(st->sup->arbiter, (uint64_t)((double)total * KG_GPU_MEMORY_SHARE));
        if (want && !st->gpu_account)
            st->gpu_account = kg_arbiter_account_new(st->sup->arbiter);
        st->gpu_pending = kg_arbiter_request_reserve(st->sup->arbiter, mode && !strcmp(mode, "exclusive")
                                                                           ? KG_GPU_EXCLUSIVE : KG_GPU_SHARED,
                                                     st->gpu_account, st->gpu_account ? want : 0);
        if (!st->gpu_pending) {
            send_line(st, json_pack("{s:s, s:s}", "type", "error", "message", "out of memory"));
            return;
        }
        st->gpu_pending_msg = msg;
        st->gpu_pending_since = kg_now_ms();
        gpu_try_grant(st);
    } else if (!strcmp(type, "gpu_release")) {
        gpu_let_go(st);
    } else if (!strcmp(type, "census")) {
        /* The judge has finished with the runner and asks, before telling it to exit, whether anything the
         * candidate started is still running (a daemon, a setsid grandchild): counted here, from /proc, by
         * the runner's uid, which is this evaluation's alone.  The runner's own answer would be worthless. */
        int n = st->runner_uid ? uid_processes(st->runner_uid, st->runner_pid, 0, st->rep->left_running_names,
                                               sizeof st->rep->left_running_names)
                               : 0;
        st->rep->left_running = n;
        send_line(st, json_pack("{s:s, s:i, s:b}", "type", "census", "processes", n, "counted", st->runner_uid != 0));
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
            if (!st->in_stage)
                st->outside_used_ms += now - st->outside_since;
            st->in_stage = 1;
            st->stage_start = now;
            st->stage_limit_s = stage_limit(st->lim, stage);
        } else if (stage && st->in_stage) {
            st->in_stage = 0;
            st->outside_since = now;
        }
    } else if (type && strcmp(type, "runner_lost") == 0) {
        const char *why = json_string_value(json_object_get(msg, "why"));
        st->runner_protocol = why && !strcmp(why, "protocol");
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

/* SIGKILL to the judge and the runner, each process and its group (the runner's group is its whole PID
 * namespace; the judge's whatever it started). */
static void kill_pair(pid_t judge, pid_t runner)
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
    kill_pair(st->rep->pid, st->rep->runner_pid);
}

/* Each runner runs as a uid of its own (KG_RUNNER_UID_BASE + slot) while kgym is root: concurrent runners
 * cannot read each other's files, signal each other or share RLIMIT_NPROC.  A slot is held with an exclusive
 * flock on a file of its own, machine-wide: every kgym process on the machine (one worker per GPU, a bench
 * next to a server) draws from the same slots, and a lock dies with its holder, so a crashed kgym frees its
 * slots.  flock belongs to the open file, so two threads of one kgym exclude each other too. */
#define KG_RUNNER_UID_BASE 61000
#define KG_RUNNER_SLOTS 1024
#define KG_RUNNER_SLOT_DIR "/tmp/kgym-runner-uids"

typedef struct {
    int slot; /* -1: none (not root, or every slot busy) */
    int fd;   /* the lock */
} runner_slot;

static runner_slot slot_take(void)
{
    runner_slot rs = {-1, -1};
    if (geteuid() != 0)
        return rs;
    if (mkdir(KG_RUNNER_SLOT_DIR, 0700) != 0 && errno != EEXIST)
        return rs;
    for (int i = 0; i < KG_RUNNER_SLOTS; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%d", KG_RUNNER_SLOT_DIR, KG_RUNNER_UID_BASE + i);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            rs.slot = i;
            rs.fd = fd;
            return rs;
        }
        close(fd);
    }
    return rs;
}

static void slot_give(runner_slot *rs)
{
    if (rs->fd >= 0)
        close(rs->fd); /* releases the flock */
    rs->fd = -1;
    rs->slot = -1;
}

/* The runner's part of the job that only kgym can choose: its uid and (on a
 * GPU) a Triton cache of its slot's own, bound into its mount namespace.
 * Returns the job this run sends (a new reference): the caller's job is left
 * as it was, so a job run twice (kgym eval's re-run alone) runs as the uid of
 * the slot it holds then, never as the one its first run gave back (another
 * evaluation may hold that one by now: a census would count its runner, and a
 * final sweep kill it).  NULL on allocation failure. */
static json_t *runner_identity(kg_supervisor *sup, json_t *caller_job, int slot)
{
    json_t *sb = json_object_get(caller_job, "sandbox");
    if (sb && json_is_false(json_object_get(sb, "enabled")))
        return json_incref(caller_job);
    /* no slot: not root (nothing to drop to) or none free; a uid the caller chose (tests) stands */
    if (slot < 0 || json_object_get(caller_job, "runner_uid"))
        return json_incref(caller_job);
    json_t *job = json_copy(caller_job);
    if (!job)
        return NULL;
    json_object_set_new(job, "runner_uid", json_integer(KG_RUNNER_UID_BASE + slot));
    if (strcmp(sup->device, "cpu") == 0)
        return job; /* the interpreter compiles nothing */
    const char *tmp = getenv("TMPDIR");
    kg_buf dir = {0};
    kg_buf_printf(&dir, "%s/kgym-triton-%d", tmp && *tmp ? tmp : "/tmp", KG_RUNNER_UID_BASE + slot);
    if (!dir.data || (mkdir(dir.data, 0700) != 0 && errno != EEXIST)) {
        kg_buf_free(&dir);
        return job;
    }
    json_object_set_new(job, "triton_cache", json_string(dir.data));
    sb = sb ? json_deep_copy(sb) : json_object(); /* its own: the writable list grows */
    json_object_set_new(job, "sandbox", sb);
    json_t *w = json_object_get(sb, "writable");
    if (!json_is_array(w)) {
        w = json_array();
        json_object_set_new(sb, "writable", w);
    }
    json_array_append_new(w, json_string(dir.data));
    kg_buf_free(&dir);
    return job;
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
        char path[64];
        struct stat stt;
        snprintf(path, sizeof path, "/proc/%ld", pid);
        if (stat(path, &stt) != 0 || stt.st_uid != uid)
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

enum { FD_PROTO, FD_JOUT, FD_JERR, FD_ROUT, FD_RERR, FD_COUNT };

int kg_supervisor_run(kg_supervisor *sup, json_t *caller_job, const kg_child_limits *limits,
                      kg_child_report *rep, kg_error *err)
{
    memset(rep, 0, sizeof *rep);
    kg_child_limits none = {0};
    const kg_child_limits *lim = limits ? limits : &none;
    /* The runner's identity first: it needs none of the descriptors below (a failure has none to close). */
    runner_slot slot = slot_take();
    json_t *job = runner_identity(sup, caller_job, slot.slot);
    if (!job) {
        slot_give(&slot);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    /* proto: kgym <-> judge; peer: judge <-> runner; a stdout and a stderr pipe for each process. */
    int proto[2] = {-1, -1}, peer[2] = {-1, -1}, jout[2] = {-1, -1}, jerr[2] = {-1, -1}, rout[2] = {-1, -1},
        rerr[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, proto) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, peer) != 0 || pipe2(jout, O_CLOEXEC) != 0 ||
        pipe2(jerr, O_CLOEXEC) != 0 || pipe2(rout, O_CLOEXEC) != 0 || pipe2(rerr, O_CLOEXEC) != 0) {
        int e = errno;
        int *all[] = {proto, peer, jout, jerr, rout, rerr};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            for (int j = 0; j < 2; j++)
                if (all[i][j] >= 0)
                    close(all[i][j]);
        slot_give(&slot);
        json_decref(job);
        return kg_error_set(err, KG_ERR_IO, "socketpair/pipe: %s", strerror(e));
    }
    int judge_fds[4] = {proto[1], jout[1], jerr[1], peer[0]};
    int runner_fds[3] = {peer[1], rout[1], rerr[1]};
    pid_t pid = 0, rpid = 0;
    char notes[2048] = "";
    json_t *sb = json_object_get(job, "sandbox");
    int pid_ns = !(json_is_false(json_object_get(sb, "enabled")) || json_is_false(json_object_get(sb, "namespaces")));
    int rc = kg_zygote_fork_pair(sup, judge_fds, runner_fds, pid_ns, &pid, &rpid, notes, sizeof notes, err);
    close(proto[1]);
    close(jout[1]);
    close(jerr[1]);
    close(peer[0]);
    close(peer[1]);
    close(rout[1]);
    close(rerr[1]);
    if (rc != KG_OK) {
        close(proto[0]); close(jout[0]); close(jerr[0]); close(rout[0]); close(rerr[0]);
        slot_give(&slot);
        json_decref(job);
        return rc;
    }
    rep->pid = pid;
    rep->runner_pid = rpid;
    rep->messages = json_array();
    json_error_t jerr_parse;
    rep->runner_notes = json_loads(notes, 0, &jerr_parse);

    /* Limits go on from outside, before the processes have their job: no
     * candidate code has run yet, and none can lift a hard limit we set. */
    pid_t both[2] = {pid, rpid};
    for (int i = 0; i < 2; i++) {
        if (lim->address_space_bytes)
            set_limit(both[i], RLIMIT_AS, lim->address_space_bytes);
        /* Files: the runner's only (the judge writes none, and sizes the shared memory the runner's outputs
         * come back in: a memfd is a file too). */
        if (lim->file_size_bytes && both[i] == rpid)
            set_limit(both[i], RLIMIT_FSIZE, lim->file_size_bytes);
        if (lim->cpu_seconds > 0)
            set_limit(both[i], RLIMIT_CPU, (unsigned long long)lim->cpu_seconds + 1);
        set_limit(both[i], RLIMIT_CORE, 0);
    }

    run_state st = {.sup = sup, .rep = rep, .lim = lim, .proto_fd = proto[0], .t0 = kg_now_ms(),
                    .nonce = json_string_value(json_object_get(job, "nonce"))};
    st.outside_since = st.t0;
    st.runner_pid = rpid;
    json_t *ruid = json_object_get(job, "runner_uid"); /* the census's and the final sweep's */
    if (json_is_integer(ruid) && json_integer_value(ruid) > 0)
        st.runner_uid = (uid_t)json_integer_value(ruid);
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
    int fds[FD_COUNT] = {proto[0], jout[0], jerr[0], rout[0], rerr[0]};
    int exited = 0, status = 0, runner_exited = 0, runner_status = 0, runner_first = 0;
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
            snprintf(st.starved, sizeof st.starved, "no GPU grant in %.0f s (arbiter: %s)",
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
        siginfo_t si;
        if (!runner_exited) {
            memset(&si, 0, sizeof si);
            if (waitid(P_PID, (id_t)rpid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == rpid) {
                runner_exited = 1;
                runner_first = !exited; /* it ended on its own, before the judge (checked first) */
            }
        }
        if (!exited) {
            memset(&si, 0, sizeof si);
            if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
                exited = 1;
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
            kill_pair(pid, rpid);
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
            ssize_t n = read(fds[i], chunk, sizeof chunk);
            if (n < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (n <= 0) {
                close(fds[i]);
                fds[i] = -1;
                continue;
            }
            progressed = 1;
            if (i == FD_PROTO) {
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
    gpu_let_go(&st);
    for (int i = 0; i < FD_COUNT; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    kill_pair(pid, rpid);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    while (waitpid(rpid, &runner_status, 0) < 0 && errno == EINTR) {
    }
    kg_reaper_untrack(pid);
    kg_reaper_untrack(rpid);
    if (st.runner_uid)
        rep->stragglers = uid_processes(st.runner_uid, 0, 1, NULL, 0);
    /* What the evaluation orphaned and has ended since (its own or an earlier one's) is reaped now, not left a
     * zombie of this process. */
    kg_supervisor_reap_orphans();
    /* Both processes and anything left of the runner's are gone, and their device memory with them: the
     * reservation goes back. */
    kg_arbiter_account_free(st.gpu_account);
    slot_give(&slot);
    json_decref(job); /* st.nonce pointed into it: no line is read after this */
    rep->wall_ms = kg_now_ms() - st.t0;
    rep->outside_stage = !st.in_stage && !st.done;
    if (!st.killed) {
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
            } else if ((judge_says_lost && runner_first) || rend == KG_END_SIGNAL) {
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
    kg_buf_free(&linebuf);
    if (st.starved[0]) {
        kg_child_report_free(rep);
        return kg_error_set(err, KG_ERR_INTERNAL, "%s", st.starved);
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
    free(rep->out.head);
    free(rep->out.tail);
    free(rep->err.head);
    free(rep->err.tail);
    memset(rep, 0, sizeof *rep);
}
