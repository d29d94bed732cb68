/*
 * zygote.c — starting, watching and restarting the Python zygote, and asking
 * it to fork evaluation children (see src/supervisor/supervisor.h).
 *
 * Control protocol (docs/protocol.md): after start the zygote writes one line
 * "ready {json}".  Each request is the line "fork\n" sent with three file
 * descriptors attached (SCM_RIGHTS): the child's protocol socket, its stdout
 * pipe and its stderr pipe.  The zygote answers "forked <pid>\n" once the
 * intermediate process has exited, i.e. once the child is re-parented to us.
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
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"

/* The longest lines the zygote may answer with (without '\n'): its "ready {info}" line, and "forked <pid>
 * <notes>".  A longer one is a broken zygote: it is stopped (kg_lines refuses a line it would have to cut). */
#define KG_READY_LINE_MAX 8191
#define KG_FORKED_LINE_MAX 4095

/* The last ~2 KB of the zygote's log, for error messages. */
static void log_tail(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    char *data = NULL;
    size_t len = 0;
    if (!path || kg_file_read(path, 0, &data, &len, NULL) != KG_OK)
        return;
    size_t keep = len > cap - 1 ? cap - 1 : len;
    memcpy(out, data + len - keep, keep);
    out[keep] = '\0';
    free(data);
}

/* CUDA_VISIBLE_DEVICES for the zygote of "cuda:N": the N-th entry of the
 * caller's own list when it has one, so "cuda:1" means what torch would mean. */
static void visible_device(const char *device, char *out, size_t cap)
{
    int index = atoi(device + 5);
    const char *env = getenv("CUDA_VISIBLE_DEVICES");
    if (!env || !*env) {
        snprintf(out, cap, "%d", index);
        return;
    }
    const char *p = env;
    for (int i = 0; i < index && p; i++) {
        p = strchr(p, ',');
        if (p)
            p++;
    }
    if (!p) {
        snprintf(out, cap, "%d", index);
        return;
    }
    size_t n = strcspn(p, ",");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

/* Whether the caller's variable `entry` ("NAME=value") stays out of the zygote's environment: a secret
 * (kgym's service token, API keys: the same words as sandbox.py's _ENV_SECRET) or a kgym variable the
 * harness does not read, and the variables set below.  The zygote's initial environment is the runner's too
 * (it is forked from it, and /proc/self/environ shows that block whatever os.environ becomes), so what is
 * dropped here is nowhere in a candidate's process. */
static int env_dropped(const char *entry)
{
    static const char *const secret[] = {"TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL"};
    static const char *const kept_kgym[] = {"KGYM_SERVE_OWNER=", "KGYM_TENSORS=", "KGYM_JUDGE_PROFILE=",
                                            "KGYM_KERNEL_CACHE=", "KGYM_SETUP_SPLIT=", "KGYM_EXIT_PHASE=",
                                            "KGYM_RUNNER_CONNECTIONS=", "KGYM_FAULT_JUDGE_CHANNEL=",
                                            "KGYM_STAGE_RESERVE="};
    static const char *const ours[] = {"PYTHONPATH=", "PYTHONDONTWRITEBYTECODE=", "PYTHONNOUSERSITE=",
                                       "TRITON_INTERPRET=", "CUDA_VISIBLE_DEVICES=",
                                       "PYTORCH_NVML_BASED_CUDA_CHECK="};
    size_t name_len = strcspn(entry, "=");
    char name[256];
    if (name_len >= sizeof name)
        return 1; /* no honest variable has a 256-byte name */
    for (size_t i = 0; i < name_len; i++)
        name[i] = (char)(entry[i] >= 'a' && entry[i] <= 'z' ? entry[i] - 32 : entry[i]);
    name[name_len] = '\0';
    for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
        if (!strncmp(entry, ours[i], strlen(ours[i])))
            return 1;
    for (size_t i = 0; i < sizeof secret / sizeof secret[0]; i++)
        if (strstr(name, secret[i]))
            return 1;
    if (!strncmp(name, "KGYM_", 5)) {
        for (size_t i = 0; i < sizeof kept_kgym / sizeof kept_kgym[0]; i++)
            if (!strncmp(entry, kept_kgym[i], strlen(kept_kgym[i])))
                return 0;
        return 1;
    }
    return 0;
}

/* The zygote's environment: the caller's without env_dropped's, plus `extra` (NULL-terminated "NAME=value"
 * strings).  Made before fork (it allocates); NULL on allocation failure.  Free with free_env. */
static char **zygote_env(char *const *extra)
{
    extern char **environ;
    size_t n = 0, m = 0;
    for (char **e = environ; e && *e; e++)
        n++;
    for (char *const *e = extra; *e; e++)
        m++;
    char **env = calloc(n + m + 1, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (char **e = environ; e && *e; e++)
        if (!env_dropped(*e) && !(env[k++] = kg_strdup(*e)))
            goto fail;
    for (char *const *e = extra; *e; e++)
        if (!(env[k++] = kg_strdup(*e)))
            goto fail;
    return env;
fail:
    for (size_t i = 0; i < k; i++)
        free(env[i]);
    free(env);
    return NULL;
}

static void free_env(char **env)
{
    for (char **e = env; e && *e; e++)
        free(*e);
    free(env);
}

void kg_zygote_stop(kg_supervisor *sup)
{
    if (sup->control_fd >= 0) {
        close(sup->control_fd);
        sup->control_fd = -1;
    }
    kg_lines_free(&sup->control_lines); /* what the old control socket said is not the next zygote's */
    if (sup->zygote_pid > 0) {
        kill(sup->zygote_pid, SIGKILL);
        while (waitpid(sup->zygote_pid, NULL, 0) < 0 && errno == EINTR) {
        }
        kg_reaper_untrack(sup->zygote_pid);
        sup->zygote_pid = 0;
    }
}

int kg_zygote_alive(kg_supervisor *sup)
{
    if (sup->zygote_pid <= 0 || sup->control_fd < 0)
        return 0;
    int status;
    pid_t r = waitpid(sup->zygote_pid, &status, WNOHANG);
    if (r == sup->zygote_pid) {
        kg_reaper_untrack(sup->zygote_pid);
        sup->zygote_pid = 0;
        close(sup->control_fd);
        sup->control_fd = -1;
        kg_lines_free(&sup->control_lines);
        return 0;
    }
    return 1;
}

int kg_zygote_start(kg_supervisor *sup, kg_error *err)
{
    kg_zygote_stop(sup);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return kg_error_set(err, KG_ERR_IO, "socketpair: %s", strerror(errno));
    int log_fd = open(sup->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (log_fd < 0) {
        close(sv[0]);
        close(sv[1]);
        return kg_error_set(err, KG_ERR_IO, "cannot open %s: %s", sup->log_path, strerror(errno));
    }
    char visible[64] = "";
    int is_cpu = strcmp(sup->device, "cpu") == 0;
    if (!is_cpu)
        visible_device(sup->device, visible, sizeof visible);
    const char *old_path = getenv("PYTHONPATH");
    kg_buf pythonpath = {0}, visible_var = {0};
    /* Whole or not at all: a PYTHONPATH cut short would import another harness. */
    int built = kg_buf_printf(&pythonpath, "PYTHONPATH=%s", sup->harness_dir) == 0 &&
                (!old_path || !*old_path || kg_buf_printf(&pythonpath, ":%s", old_path) == 0) &&
                kg_buf_printf(&visible_var, "CUDA_VISIBLE_DEVICES=%s", is_cpu ? "" : visible) == 0;
    /* The CPU runs kernels in Triton's interpreter; a GPU zygote asks NVML, not the driver, whether CUDA is
     * there: it must stay CUDA-free so that its forked children can initialise it. */
    /* One hardware work queue a context (CUDA_DEVICE_MAX_CONNECTIONS=1, unless the caller chose a number) for the
     * judge: the driver makes and tears down a context under one lock for the whole machine, and a context with
     * fewer queues takes it half as long (bench/driver_probe.py on two H200s: 4.8 contexts a second with the
     * driver's default of 8, 9.4 with 1); the judge uses one stream.  Paired on an H200 (twentieth session,
     * `sh bench/grpo.sh 6 --baseline build/kgym --head-env CUDA_DEVICE_MAX_CONNECTIONS=1`): x1.145, set-up's
     * shared phases 47.6 -> 28.9 s, speedups within 1.08% of the run without.  The runner keeps it too through its
     * clean environment (judge/child.py _runner_connections: x1.11 more, twenty-first session), unless
     * KGYM_RUNNER_CONNECTIONS=0.  Inert on the CPU. */
    int own_connections = getenv("CUDA_DEVICE_MAX_CONNECTIONS") == NULL;
    char *extra[] = {pythonpath.data, "PYTHONDONTWRITEBYTECODE=1", "PYTHONNOUSERSITE=1", visible_var.data,
                     is_cpu ? "TRITON_INTERPRET=1" : "PYTORCH_NVML_BASED_CUDA_CHECK=1",
                     own_connections ? "CUDA_DEVICE_MAX_CONNECTIONS=1" : NULL, NULL};
    char **env = built ? zygote_env(extra) : NULL;
    kg_buf_free(&visible_var);
    if (!env) {
        close(sv[0]);
        close(sv[1]);
        close(log_fd);
        kg_buf_free(&pythonpath);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }

    /* Ours to wait for from fork() on: tracked before the catch-all reaper may look (reaper.c). */
    kg_reaper_hold();
    pid_t pid = fork();
    if (pid > 0)
        kg_reaper_track(pid);
    if (pid != 0)
        kg_reaper_release();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        close(log_fd);
        kg_buf_free(&pythonpath);
        free_env(env);
        return kg_error_set(err, KG_ERR_CHILD, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        /* The zygote.  Only async-signal-safe work from here to exec (kgym has threads).  Each descriptor it
         * keeps is first moved above the standard numbers (whichever numbers the caller left free, none is then
         * overwritten before it is copied), then copied to 0-3, which clears close-on-exec; every other
         * descriptor is closed: nothing kgym or its caller holds open (kgym bench's results file, a caller's
         * fd 3) reaches the zygote, the judge or the runner. */
        int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        int in_fd = fcntl(null_fd, F_DUPFD_CLOEXEC, 10), log_hi = fcntl(log_fd, F_DUPFD_CLOEXEC, 10),
            control = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
        if (null_fd < 0 || in_fd < 0 || log_hi < 0 || control < 0 || dup2(in_fd, 0) != 0 || dup2(in_fd, 1) != 1 ||
            dup2(log_hi, 2) != 2 || dup2(control, 3) != 3)
            _exit(127);
        kg_close_from(4);
        /* Die with us: an orphaned zygote would hold GPU memory forever. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char *argv[] = {(char *)sup->python, "-m", "kgym_harness.zygote", "--control-fd", "3",
                        "--device", (char *)sup->device, NULL};
        execve(sup->python, argv, env);
        dprintf(2, "kgym: cannot execute %s: %s\n", sup->python, strerror(errno));
        _exit(127);
    }
    close(sv[1]);
    close(log_fd);
    kg_buf_free(&pythonpath);
    free_env(env);
    sup->zygote_pid = pid;
    sup->control_fd = sv[0];
    sup->starts++;

    char *line = NULL;
    size_t len = 0;
    int n = kg_lines_read(&sup->control_lines, sup->control_fd, KG_READY_LINE_MAX, sup->start_timeout_s * 1000.0,
                          &line, &len);
    if (n == KG_LINES_TOO_LONG || n == KG_LINES_NOMEM) {
        kg_zygote_stop(sup);
        return kg_error_set(err, n == KG_LINES_NOMEM ? KG_ERR_NOMEM : KG_ERR_PROTOCOL,
                            n == KG_LINES_NOMEM ? "out of memory reading the zygote's ready line"
                                                : "the zygote's ready line is longer than %d bytes",
                            KG_READY_LINE_MAX);
    }
    if (n < 0 || strncmp(line, "ready ", 6) != 0) {
        char tail[2048];
        kg_zygote_stop(sup);
        log_tail(sup->log_path, tail, sizeof tail);
        return kg_error_set(err, KG_ERR_CHILD,
                            "the Python zygote (%s -m kgym_harness.zygote, PYTHONPATH=%s) %s%s%s",
                            sup->python, sup->harness_dir,
                            n == KG_LINES_TIMEOUT ? "did not become ready in time" : "failed to start",
                            tail[0] ? ":\n" : "", tail);
    }
    json_t *info = json_loads(line + 6, 0, NULL);
    if (!info || !json_is_object(info)) {
        json_decref(info);
        kg_zygote_stop(sup);
        return kg_error_set(err, KG_ERR_PROTOCOL, "the zygote's ready line is not JSON: %.200s",
                            line);
    }
    json_decref(sup->info);
    sup->info = info;
    return KG_OK;
}

/* One request ("fork" for a judge, "runner" or "runner-bare" for a runner) on a live zygote,
 * with `nfds` descriptors.  The answer is "forked <pid> <notes>": notes (a JSON
 * array of the intermediate's warnings, e.g. a refused PID namespace) are
 * copied to `notes` when given. */
static int request_once(kg_supervisor *sup, const char *what, const int *fds, int nfds, pid_t *child,
                        char *notes, size_t notes_cap)
{
    char msg[16];
    int len = snprintf(msg, sizeof msg, "%s\n", what);
    if (kg_send_with_fds(sup->control_fd, msg, (size_t)len, fds, nfds) != 0)
        return -1;
    char *line = NULL;
    size_t line_len = 0;
    if (kg_lines_read(&sup->control_lines, sup->control_fd, KG_FORKED_LINE_MAX, 30000.0, &line, &line_len) != 1)
        return -1; /* the caller stops this zygote: nothing of the line is left to be read as the next answer */
    long pid = 0;
    int used = 0;
    if (sscanf(line, "forked %ld%n", &pid, &used) != 1 || pid <= 0)
        return -1;
    *child = (pid_t)pid;
    if (notes && notes_cap) {
        const char *rest = line + used;
        while (*rest == ' ')
            rest++;
        snprintf(notes, notes_cap, "%s", rest);
        size_t n = strlen(notes);
        while (n && (notes[n - 1] == '\n' || notes[n - 1] == '\r'))
            notes[--n] = '\0';
    }
    return 0;
}

int kg_zygote_fork_pair(kg_supervisor *sup, const int judge_fds[4], const int runner_fds[3], int runner_pid_ns,
                        pid_t *judge, pid_t *runner, char *notes, size_t notes_cap, kg_error *err)
{
    int rc = KG_OK;
    *judge = *runner = 0;
    pthread_mutex_lock(&sup->lock);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!kg_zygote_alive(sup)) {
            rc = kg_zygote_start(sup, err);
            if (rc != KG_OK)
                break;
        }
        /* The judge and the runner are ours once their intermediate has exited, before the zygote answers:
         * the reaper is held until they are tracked (reaper.c). */
        kg_reaper_hold();
        int forked = !judge_fds || request_once(sup, "fork", judge_fds, 4, judge, NULL, 0) == 0;
        if (forked && judge_fds)
            kg_reaper_track(*judge);
        kg_reaper_release();
        if (forked) {
            kg_reaper_hold();
            int both = request_once(sup, runner_pid_ns ? "runner" : "runner-bare", runner_fds, 3, runner, notes,
                                    notes_cap) == 0;
            if (both)
                kg_reaper_track(*runner);
            kg_reaper_release();
            if (both) {
                rc = KG_OK;
                break;
            }
            /* A judge without its runner is of no use: it goes, and so does the zygote that failed (a kept
             * judge is the caller's). */
            if (judge_fds) {
                kill(*judge, SIGKILL);
                while (waitpid(*judge, NULL, 0) < 0 && errno == EINTR) {
                }
                kg_reaper_untrack(*judge);
                *judge = 0;
            }
        }
        /* A zygote that cannot answer a fork is broken: replace it. */
        kg_zygote_stop(sup);
        rc = kg_error_set(err, KG_ERR_CHILD, "the zygote did not answer a fork request");
    }
    pthread_mutex_unlock(&sup->lock);
    return rc;
}
