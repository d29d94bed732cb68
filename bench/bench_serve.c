/*
 * bench_serve.c — load generator for `kgym serve` (bounded in time and count).
 *
 *   bench_serve rps PORT PATH SECONDS CONNECTIONS   keep-alive GETs: requests/s, p50/p99 latency
 *   bench_serve latency PORT COUNT                  enqueue-to-start latency of COUNT jobs
 *
 * The latency mode submits jobs one at a time (each waits for the previous to
 * finish, so a worker is idle: this is the scheduler's own delay), then a
 * burst of COUNT at once (queueing included), and reads started_at -
 * submitted_at of every job from GET /v1/jobs/{id}.  The jobs are replies
 * without code: evaluated in C in microseconds, no Python child involved.
 * Built and run by bench/bench_serve.sh.
 */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int port;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int connect_to(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* One request on a keep-alive connection; returns the HTTP status (body in *body if given). */
static int request(int fd, const char *method, const char *path, const char *body, char **out)
{
    char head[1024];
    size_t blen = body ? strlen(body) : 0;
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     method, path, blen);
    if (write(fd, head, (size_t)n) != n || (blen && write(fd, body, blen) != (ssize_t)blen))
        return -1;
    static __thread char buf[1 << 20];
    size_t got = 0;
    char *end = NULL;
    while (!end) {
        ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
        buf[got] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    int status = atoi(buf + 9);
    char *cl = strcasestr(buf, "Content-Length:");
    size_t len = cl && cl < end ? (size_t)atol(cl + 15) : 0;
    size_t have = got - (size_t)(end + 4 - buf);
    while (have < len) {
        ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
        have += (size_t)r;
    }
    buf[got] = '\0';
    if (out)
        *out = strndup(end + 4, len);
    return status;
}

typedef struct {
    const char *path;
    double until;
    long ok, errors;
    double *lat;
    long nlat, caplat;
} load;

static void *load_main(void *arg)
{
    load *l = arg;
    int fd = connect_to();
    while (fd >= 0 && now() < l->until) {
        double t = now();
        int st = request(fd, "GET", l->path, NULL, NULL);
        if (st == 200) {
            l->ok++;
            if (l->nlat < l->caplat)
                l->lat[l->nlat++] = now() - t;
        } else {
            l->errors++;
            close(fd);
            fd = connect_to();
        }
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, long n, double p)
{
    if (n == 0)
        return 0;
    long i = (long)(p * (n - 1) + 0.5);
    return v[i];
}

static int rps(const char *path, double seconds, int conns)
{
    pthread_t th[256];
    load l[256];
    if (conns < 1 || conns > 256 || seconds <= 0 || seconds > 60) {
        fprintf(stderr, "1..256 connections, 0..60 seconds\n");
        return 2;
    }
    double t0 = now();
    for (int i = 0; i < conns; i++) {
        l[i] = (load){.path = path, .until = t0 + seconds, .caplat = 2000000};
        l[i].lat = malloc(sizeof(double) * (size_t)l[i].caplat);
        pthread_create(&th[i], NULL, load_main, &l[i]);
    }
    long ok = 0, errors = 0, n = 0;
    for (int i = 0; i < conns; i++) {
        pthread_join(th[i], NULL);
        ok += l[i].ok;
        errors += l[i].errors;
        n += l[i].nlat;
    }
    double el = now() - t0;
    double *all = malloc(sizeof(double) * (size_t)(n ? n : 1));
    long k = 0;
    for (int i = 0; i < conns; i++) {
        memcpy(all + k, l[i].lat, sizeof(double) * (size_t)l[i].nlat);
        k += l[i].nlat;
        free(l[i].lat);
    }
    qsort(all, (size_t)n, sizeof *all, cmp);
    printf("GET %s: %ld requests in %.1f s over %d connections = %.0f requests/s, %ld errors, "
           "latency p50 %.3f ms p99 %.3f ms\n",
           path, ok, el, conns, ok / el, errors, pct(all, n, 0.5) * 1e3, pct(all, n, 0.99) * 1e3);
    free(all);
    return errors ? 1 : 0;
}

static int submit(int fd, int i, char *id, size_t cap)
{
    char body[256];
    snprintf(body, sizeof body,
             "{\"reference_code\": \"import torch  # bench reference\", \"kernel_code\": \"no code here, job %d "
             "%ld\", \"force_refresh\": true}",
             i, (long)time(NULL));
    char *out = NULL;
    int st = request(fd, "POST", "/v1/jobs", body, &out);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    const char *s = json_string_value(json_object_get(j, "id"));
    snprintf(id, cap, "%s", s ? s : "");
    json_decref(j);
    free(out);
    return st == 202 && s ? 0 : -1;
}

static double queue_wait(int fd, const char *id)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/jobs/%s?wait=60", id);
    char *out = NULL;
    request(fd, "GET", path, NULL, &out);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    double w = json_number_value(json_object_get(j, "queue_wait_s"));
    int done = json_is_number(json_object_get(j, "queue_wait_s"));
    json_decref(j);
    free(out);
    return done ? w : -1;
}

static int latency(int count)
{
    if (count < 1 || count > 5000) {
        fprintf(stderr, "1..5000 jobs\n");
        return 2;
    }
    int fd = connect_to();
    if (fd < 0)
        return 1;
    double *w = calloc((size_t)count, sizeof *w);
    char (*ids)[64] = calloc((size_t)count, sizeof *ids);
    int bad = 0;
    for (int i = 0; i < count; i++) {
        if (submit(fd, i, ids[i], sizeof ids[i]) || (w[i] = queue_wait(fd, ids[i])) < 0)
            bad++;
    }
    qsort(w, (size_t)count, sizeof *w, cmp);
    printf("enqueue-to-start, one at a time (idle worker): %d jobs, p50 %.2f ms, p99 %.2f ms, max %.2f ms, %d errors\n",
           count, pct(w, count, 0.5) * 1e3, pct(w, count, 0.99) * 1e3, w[count - 1] * 1e3, bad);
    double t0 = now();
    for (int i = 0; i < count; i++)
        if (submit(fd, i + count, ids[i], sizeof ids[i]))
            bad++;
    double t1 = now();
    for (int i = 0; i < count; i++)
        if ((w[i] = queue_wait(fd, ids[i])) < 0)
            bad++;
    double t2 = now();
    qsort(w, (size_t)count, sizeof *w, cmp);
    printf("enqueue-to-start, burst of %d (queueing included): p50 %.2f ms, p99 %.2f ms; submitted at %.0f jobs/s, "
           "all done in %.2f s, %d errors\n",
           count, pct(w, count, 0.5) * 1e3, pct(w, count, 0.99) * 1e3, count / (t1 - t0), t2 - t0, bad);
    free(w);
    free(ids);
    close(fd);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 6 && !strcmp(argv[1], "rps")) {
        port = atoi(argv[2]);
        return rps(argv[3], atof(argv[4]), atoi(argv[5]));
    }
    if (argc >= 4 && !strcmp(argv[1], "latency")) {
        port = atoi(argv[2]);
        return latency(atoi(argv[3]));
    }
    fprintf(stderr, "usage: bench_serve rps PORT PATH SECONDS CONNECTIONS | latency PORT COUNT\n");
    return 2;
}
