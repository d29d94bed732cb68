/* cmd_serve.c — `kgym serve` (the evaluation service) and `kgym worker`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/common.h"
#include "server/service.h"
#include "util/util.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kgym serve [options]\n"
            "\n"
            "The evaluation service: an HTTP/JSON API compatible with KernelGYM (POST /evaluate,\n"
            "/evaluate/batch, GET /status/ID, /results/ID, /health, /workers/status), kgym's own\n"
            "asynchronous API (/v1/jobs), Prometheus /metrics and a dashboard at /.  Jobs and results\n"
            "are kept in a SQLite database; a restarted server resumes its queue.  See docs/service.md.\n"
            "\n"
            "  --host ADDR         IPv4 address to listen on (127.0.0.1)\n"
            "  --port N            port (10907; 0 = any free port)\n"
            "  --port-file FILE    write the bound port there once listening\n"
            "  --db FILE           the job database (kgym-service.db)\n"
            "  --workers N         evaluation threads (on a GPU 10 on a machine with one GPU, 6 where it has\n"
            "                      several; 1 on the CPU)\n"
            "  --spare-workers N   threads beyond --workers that take jobs too, while at most --workers\n"
            "                      are evaluated at once: a job identical to one being evaluated (a\n"
            "                      retry, a GRPO group's twin) waits for its result without holding an\n"
            "                      evaluation (0; not with --redis: a fleet's other nodes could run them)\n"
            "  --max-queue N       queued jobs before 429 Too Many Requests (10000)\n"
            "  --claim-order ORDER which queued job a free evaluation thread takes: task (the default) puts\n"
            "                      a task's samples one after another on the judge kept for that task and\n"
            "                      spreads the threads over tasks (in a fleet, over GPUs); fifo takes the\n"
            "                      oldest (docs/service.md, \"Routing\")\n"
            "  --max-code-bytes N  limit of kernel_code and reference_code (262144)\n"
            "  --max-body-bytes N  limit of a request body (33554432)\n"
            "  --max-attempts N    a job interrupted N times (its process died) is failed (3)\n"
            "  --sync-timeout S    POST /evaluate waits at most S seconds, then answers pending (1800)\n"
            "  --idle-timeout S    close a connection silent for S seconds (30), or still sending its\n"
            "                      headers after S seconds\n"
            "  --body-timeout S    close a connection whose request body is not whole S seconds after\n"
            "                      its headers (120)\n"
            "  --max-connections N          open connections in all (1000)\n"
            "  --max-client-connections N   open connections from one address (64)\n"
            "  --token T           require \"Authorization: Bearer T\" (or $KGYM_TOKEN); an empty or blank\n"
            "                      one is refused.  Without a token, only requests whose Host header\n"
            "                      names this server are answered (localhost, 127.0.0.1, [::1], its address)\n"
            "  --allow-host NAME   another Host name a server without a token answers to (repeatable)\n"
            "  --redis URL         keep jobs in Redis (redis://HOST[:PORT][/DB]) for a fleet of\n"
            "                      `kgym worker` nodes; with --workers 0 this server is stateless\n"
            "  --lease S  --result-ttl S   Redis: job lease (60) and result lifetime (604800)\n"
            "  --redis-volatile    use a Redis that would lose acknowledged jobs when it restarts\n"
            "                      (appendonly no) or evicts keys; without it such a Redis is refused\n"
            "  --device-kind NAME  the device as the dedup key names it (the GPU model when every GPU\n"
            "                      here is one; cpu): results are shared only within one kind and one\n"
            "                      set of evaluation flags (an API server of a fleet uses its workers')\n"
            "\n%s",
            kg_cli_eval_help);
}

enum {
    OPT_HOST = 1, OPT_PORT, OPT_PORT_FILE, OPT_DB, OPT_WORKERS, OPT_MAX_QUEUE, OPT_MAX_CODE, OPT_MAX_BODY,
    OPT_MAX_ATTEMPTS, OPT_SYNC_TIMEOUT, OPT_TOKEN, OPT_REDIS, OPT_LEASE, OPT_TTL, OPT_GPUS, OPT_HELP,
    OPT_IDLE_TIMEOUT, OPT_MAX_CONN, OPT_MAX_CLIENT_CONN, OPT_BODY_TIMEOUT, OPT_DEVICE_KIND, OPT_REDIS_VOLATILE,
    OPT_ALLOW_HOST, OPT_SPARE_WORKERS, OPT_CLAIM_ORDER
};

static int parse_num(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static void worker_usage(FILE *out)
{
    fprintf(out,
            "usage: kgym worker --redis URL [--gpus 0,1,...] [options]\n"
            "\n"
            "A node of a Redis-backed fleet: takes jobs from the stream that `kgym serve --redis URL`\n"
            "feeds, evaluates them and writes the results back.  At-least-once: a job whose worker dies\n"
            "is claimed again by another after its lease; a job interrupted --max-attempts times is\n"
            "failed with a clear error instead of killing more workers.\n"
            "\n"
            "  --redis URL         redis://HOST[:PORT][/DB] (required)\n"
            "  --gpus LIST         one process per GPU (cuda:N); without it: --device (auto)\n"
            "  --workers N         evaluation threads per device (on a GPU 10 on a machine with one GPU, 6\n"
            "                      where it has several; 1 on the CPU)\n"
            "  --lease S           seconds before a silent worker's job is taken over (60)\n"
            "  --claim-order ORDER which queued job a free evaluation thread takes: task (the default) puts\n"
            "                      a task's samples one after another on the judge kept for that task and\n"
            "                      spreads the threads over tasks (in a fleet, over GPUs); fifo takes the\n"
            "                      oldest (docs/service.md, \"Routing\")\n"
            "  --redis-volatile    use a Redis that would lose acknowledged jobs when it restarts\n"
            "                      (appendonly no) or evicts keys; without it such a Redis is refused\n"
            "  --max-attempts N    (3)   --result-ttl S  finished jobs expire after S (604800)\n"
            "  --device-kind NAME  the device as the dedup key names it (default: the GPU model when\n"
            "                      every GPU here is one; cpu): results are shared only between workers\n"
            "                      of one kind and one set of evaluation flags\n"
            "\n%s",
            kg_cli_eval_help);
}

static int run(int argc, char **argv, int worker);

int kg_cli_serve(int argc, char **argv)
{
    return run(argc, argv, 0);
}

int kg_cli_worker(int argc, char **argv)
{
    return run(argc, argv, 1);
}

/* --gpus 0,1: one process per GPU, so each has its own zygote and CUDA
 * device; the parent forwards SIGTERM/SIGINT and waits for them all. */
static pid_t gpu_children[64];
static int n_gpu_children;
static void forward_signal(int sig)
{
    for (int i = 0; i < n_gpu_children; i++)
        kill(gpu_children[i], sig);
}

static int run(int argc, char **argv, int worker)
{
    const char *cmdname = worker ? "worker" : "serve";
    static const struct option mine[] = {
        {"host", required_argument, NULL, OPT_HOST}, {"port", required_argument, NULL, OPT_PORT},
        {"port-file", required_argument, NULL, OPT_PORT_FILE}, {"db", required_argument, NULL, OPT_DB},
        {"workers", required_argument, NULL, OPT_WORKERS}, {"max-queue", required_argument, NULL, OPT_MAX_QUEUE},
        {"max-code-bytes", required_argument, NULL, OPT_MAX_CODE},
        {"max-body-bytes", required_argument, NULL, OPT_MAX_BODY},
        {"max-attempts", required_argument, NULL, OPT_MAX_ATTEMPTS},
        {"sync-timeout", required_argument, NULL, OPT_SYNC_TIMEOUT}, {"token", required_argument, NULL, OPT_TOKEN},
        {"redis", required_argument, NULL, OPT_REDIS}, {"lease", required_argument, NULL, OPT_LEASE},
        {"result-ttl", required_argument, NULL, OPT_TTL}, {"gpus", required_argument, NULL, OPT_GPUS},
        {"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},
        {"body-timeout", required_argument, NULL, OPT_BODY_TIMEOUT},
        {"max-connections", required_argument, NULL, OPT_MAX_CONN},
        {"max-client-connections", required_argument, NULL, OPT_MAX_CLIENT_CONN},
        {"device-kind", required_argument, NULL, OPT_DEVICE_KIND},
        {"redis-volatile", no_argument, NULL, OPT_REDIS_VOLATILE},
        {"allow-host", required_argument, NULL, OPT_ALLOW_HOST},
        {"spare-workers", required_argument, NULL, OPT_SPARE_WORKERS},
        {"claim-order", required_argument, NULL, OPT_CLAIM_ORDER},
        {"help", no_argument, NULL, OPT_HELP}};
    struct option longopts[KG_CLI_EVAL_LONGOPTS_MAX + sizeof mine / sizeof *mine + 1];
    size_t n = 0;
    for (size_t i = 0; i < kg_cli_eval_longopt_count; i++)
        if (kg_cli_eval_longopts[i].name)
            longopts[n++] = kg_cli_eval_longopts[i];
    for (size_t i = 0; i < sizeof mine / sizeof *mine; i++)
        longopts[n++] = mine[i];
    longopts[n++] = (struct option){0, 0, 0, 0};

    kg_service_options o;
    kg_service_options_default(&o);
    kg_cli_eval_flags f;
    kg_cli_eval_flags_init(&f);
    f.reference_cache_private = 1; /* a task's reference timed once per process (common.h) */
    const char *token = getenv("KGYM_TOKEN");
    const char *token_from = "KGYM_TOKEN";
    const char *allow_hosts[64];
    int n_allow = 0;
    const char *gpus = NULL, *device_kind = NULL;
    char devbuf[32];
    (void)devbuf;
    int c, rc = 0, workers_given = 0;
    double v;
    optind = 1;
    opterr = 0;
#define NUM(name, lo, hi)                                                                                   \
    if (parse_num(optarg, lo, hi, &v)) {                                                                    \
        kg_cli_eval_flags_free(&f);                                                                         \
        return kg_cli_usage_error(cmdname, "--%s needs a number from %g to %g, not \"%s\"", name,          \
                                  (double)(lo), (double)(hi), optarg);                                      \
    }
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_HOST: o.host = optarg; break;
        case OPT_PORT: NUM("port", 0, 65535) o.port = (int)v; break;
        case OPT_PORT_FILE: o.port_file = optarg; break;
        case OPT_DB: o.db_path = optarg; break;
        case OPT_WORKERS: NUM("workers", 0, 256) o.workers = (int)v, workers_given = 1; break;
        case OPT_SPARE_WORKERS: NUM("spare-workers", 0, 256) o.spare_workers = (int)v; break;
        case OPT_CLAIM_ORDER:
            if (kg_cli_claim_order(optarg, &o.fifo) != 0) {
                kg_cli_eval_flags_free(&f);
                return kg_cli_usage_error(cmdname, "--claim-order is task or fifo, not \"%s\"", optarg);
            }
            break;
        case OPT_MAX_QUEUE: NUM("max-queue", 0, 1e9) o.max_queue = (long)v; break;
        case OPT_MAX_CODE: NUM("max-code-bytes", 1024, 64e6) o.max_code_bytes = (size_t)v; break;
        case OPT_MAX_BODY: NUM("max-body-bytes", 4096, 1e9) o.max_body_bytes = (size_t)v; break;
        case OPT_MAX_ATTEMPTS: NUM("max-attempts", 1, 1000) o.max_attempts = (int)v; break;
        case OPT_SYNC_TIMEOUT: NUM("sync-timeout", 0, 86400) o.sync_timeout_s = v; break;
        case OPT_IDLE_TIMEOUT: NUM("idle-timeout", 1, 3600) o.idle_timeout_s = v; break;
        case OPT_BODY_TIMEOUT: NUM("body-timeout", 1, 86400) o.body_timeout_s = v; break;
        case OPT_MAX_CONN: NUM("max-connections", 1, 100000) o.max_connections = (int)v; break;
        case OPT_MAX_CLIENT_CONN: NUM("max-client-connections", 1, 100000) o.max_client_connections = (int)v; break;
        case OPT_TOKEN: token = optarg; token_from = "--token"; break;
        case OPT_ALLOW_HOST:
            if (n_allow == (int)(sizeof allow_hosts / sizeof *allow_hosts)) {
                kg_cli_eval_flags_free(&f);
                return kg_cli_usage_error(cmdname, "--allow-host may be given at most %d times", n_allow);
            }
            allow_hosts[n_allow++] = optarg;
            break;
        case OPT_REDIS:
            if (strncmp(optarg, "redis://", 8)) {
                kg_cli_eval_flags_free(&f);
                return kg_cli_usage_error(cmdname, "--redis needs redis://HOST[:PORT][/DB], not \"%s\"", optarg);
            }
            o.redis = optarg;
            break;
        case OPT_REDIS_VOLATILE: o.redis_volatile = 1; break;
        case OPT_LEASE: NUM("lease", 1, 86400) o.lease_s = v; break;
        case OPT_TTL: NUM("result-ttl", 1, 1e9) o.result_ttl_s = v; break;
        case OPT_GPUS: gpus = optarg; break;
        case OPT_DEVICE_KIND: {
            size_t len = strlen(optarg), i = 0;
            while (i < len && optarg[i] >= ' ' && optarg[i] <= '~')
                i++;
            if (len == 0 || len > 200 || i < len) {
                kg_cli_eval_flags_free(&f);
                return kg_cli_usage_error(cmdname, "--device-kind needs 1 to 200 printable ASCII characters");
            }
            device_kind = optarg;
            break;
        }
        case OPT_HELP:
        case 'h':
            if (worker)
                worker_usage(stdout);
            else
                usage(stdout);
            kg_cli_eval_flags_free(&f);
            return 0;
        case '?':
        case ':':
            kg_cli_eval_flags_free(&f);
            return kg_cli_usage_error(cmdname, "unknown option or missing value: %s", argv[optind - 1]);
        default: {
            int r = kg_cli_eval_option(&f, c, optarg);
            if (r <= 0) {
                kg_cli_eval_flags_free(&f);
                return 2;
            }
        }
        }
    }
#undef NUM
    if (optind < argc) {
        kg_cli_eval_flags_free(&f);
        return kg_cli_usage_error(cmdname, "unexpected argument \"%s\"", argv[optind]);
    }
    if (worker && !o.redis) {
        kg_cli_eval_flags_free(&f);
        return kg_cli_usage_error(cmdname, "--redis URL is required");
    }
    if (o.spare_workers > 0 && (worker || o.redis)) {
        /* A claimed job waits here for a slot while another node of the fleet could have run it. */
        kg_cli_eval_flags_free(&f);
        return kg_cli_usage_error(cmdname, "--spare-workers is for a server that owns its queue (SQLite), not "
                                           "with --redis: a job waiting here for an evaluation slot could run on "
                                           "another node");
    }
    if (worker)
        o.no_http = 1;
    /* Before anything starts: an empty token (--token "$UNSET", KGYM_TOKEN="") would have served without auth
     * and without a word.  A worker serves no HTTP: its KGYM_TOKEN is not ours to judge. */
    if (!worker) {
        kg_error terr;
        if (kg_service_check_token(token, token_from, &terr) != KG_OK) {
            kg_cli_eval_flags_free(&f);
            return kg_cli_usage_error(cmdname, "%s", terr.message);
        }
    }
    o.allow_hosts = allow_hosts;
    o.n_allow_hosts = n_allow;
    /* The devices of --gpus: f.device points into it after the block below (a child's, or the one GPU's). */
    char devs[64][32];
    if (gpus) {
        /* Validate the whole list first, then one process per GPU. */
        char *copy = strdup(gpus), *save = NULL;
        int nd = 0;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (!*t || strspn(t, "0123456789") != strlen(t) || strlen(t) > 6 || nd >= 64) {
                free(copy);
                kg_cli_eval_flags_free(&f);
                return kg_cli_usage_error(cmdname, "--gpus takes GPU numbers like 0,1,2, not \"%s\"", gpus);
            }
            snprintf(devs[nd++], sizeof devs[0], "cuda:%s", t);
        }
        free(copy);
        if (nd == 0) {
            kg_cli_eval_flags_free(&f);
            return kg_cli_usage_error(cmdname, "--gpus is empty");
        }
        if (nd > 1) {
            for (int i = 0; i < nd; i++) {
                pid_t pid = fork();
                if (pid == 0) {
                    f.device = devs[i];
                    n_gpu_children = 0;
                    goto single;
                }
                if (pid > 0)
                    gpu_children[n_gpu_children++] = pid;
            }
            signal(SIGTERM, forward_signal);
            signal(SIGINT, forward_signal);
            /* Each child as it ends, whichever it is: one killed while another still runs is reaped at once (its
             * guardian then sees it gone and ends what it started). */
            int worst = 0, st;
            for (int left = n_gpu_children; left > 0;) {
                pid_t done = waitpid(-1, &st, 0);
                if (done < 0) {
                    if (errno == EINTR)
                        continue;
                    break; /* no child left */
                }
                int ours = 0;
                for (int i = 0; i < n_gpu_children; i++)
                    ours |= gpu_children[i] == done;
                if (!ours)
                    continue;
                left--;
                if (!WIFEXITED(st) || WEXITSTATUS(st))
                    worst = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
            }
            kg_cli_eval_flags_free(&f);
            return worst;
        }
        f.device = devs[0];
    }
single:;
    kg_error err;
    kg_error_clear(&err);
    if (kg_cli_setup(&f, &err) != KG_OK) {
        fprintf(stderr, "kgym %s: %s\n", cmdname, err.message);
        rc = err.code == KG_ERR_INVALID ? 2 : 1;
        kg_cli_eval_flags_free(&f);
        return rc;
    }
    if (!workers_given)
        o.workers = kg_cli_default_jobs(&f, o.workers);
    o.token = token;
    o.kernelbench = f.kernelbench ? f.kernelbench : getenv("KGYM_KERNELBENCH");
    o.eval = f.opts;
    o.supervisor = kg_cli_supervisor_options(&f);
    char *kind = device_kind ? kg_strdup(device_kind) : kg_cli_device_kind(f.device_resolved);
    o.device_kind = kind;
    if (!kind) {
        fprintf(stderr, "kgym %s: out of memory\n", cmdname);
        rc = 1;
    } else if (kg_service_run(&o, &err) != KG_OK) {
        fprintf(stderr, "kgym %s: %s\n", cmdname, err.message);
        rc = err.code == KG_ERR_INVALID ? 2 : 1;
    }
    free(kind);
    kg_cli_eval_flags_free(&f);
    return rc;
}
