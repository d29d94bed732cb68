/*
 * kg_stores.h — what the job-store tests share (test_store.c, test_route_red.c, test_sched.c): a redis-server of a
 * test's own, on a free loopback port, in a folder the test owns (its appendonly file; a machine without
 * redis-server skips those cases: kg_test_redis_start returns 0); a job with a routing group; the jobs table as
 * SQLite databases made before routing had it.
 */
#ifndef KG_TEST_STORES_H
#define KG_TEST_STORES_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

/* The jobs table of a database made before jobs had a routing group (no grp column). */
#define KG_TEST_JOBS_BEFORE_ROUTING                                                                                \
    "CREATE TABLE jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,"                           \
    " status TEXT NOT NULL, key TEXT NOT NULL, request TEXT NOT NULL, result TEXT, error TEXT,"                    \
    " verdict TEXT, reward REAL, speedup REAL, coverage REAL, label TEXT, worker TEXT,"                             \
    " cached_from TEXT, attempts INTEGER NOT NULL DEFAULT 0, submitted_at REAL NOT NULL"                            \
    " DEFAULT 0, started_at REAL NOT NULL DEFAULT 0, finished_at REAL NOT NULL DEFAULT 0);"

/* Puts a queued job id (its own key, an empty request) of routing group `group` (NULL: none). */
static inline int kg_test_put_grouped(kg_store *s, const char *id, const char *group)
{
    kg_job j;
    memset(&j, 0, sizeof j);
    j.id = (char *)id;
    j.key = (char *)id;
    j.request = "{}";
    j.group = (char *)group;
    kg_error err;
    return kg_store_put(s, &j, 0, &err);
}

/* Binds a loopback TCP socket to `port` (0: one the kernel picks) and lets it go: the port it got, 0 when it could
 * not bind. */
static inline int kg_test_port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int got = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                      getsockname(fd, (struct sockaddr *)&a, &len) == 0
                  ? ntohs(a.sin_port)
                  : 0;
    if (fd >= 0)
        close(fd);
    return got;
}

/* Starts redis-server with --appendonly yes in dir and waits (up to 5 s) until it listens.  Returns its pid and
 * fills *port and url ("redis://127.0.0.1:PORT"); 0 when there is no redis-server or it did not come up. */
static inline pid_t kg_test_redis_start(const char *dir, int *port, char url[64])
{
    url[0] = '\0';
    if (system("command -v redis-server >/dev/null 2>&1") != 0)
        return 0;
    /* Below the ephemeral range (tests/integration/serve/ports.py says why: no outgoing connection, the polling below
     * included, can take the port or connect to itself on it); a port the kernel gives where that span is small. */
    int high = 32768;
    FILE *range = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (range) {
        if (fscanf(range, "%d", &high) != 1)
            high = 32768;
        fclose(range);
    }
    *port = 0;
    unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    for (int tries = 0; high - 10000 >= 1000 && tries < 200 && !*port; tries++)
        *port = kg_test_port_free(10000 + (int)(rand_r(&seed) % (unsigned)(high - 10000)));
    if (!*port && !(*port = kg_test_port_free(0)))
        return 0;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", *port);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
        }
        execlp("redis-server", "redis-server", "--port", portstr, "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "yes", "--dir", dir, (char *)NULL);
        _exit(127);
    }
    if (pid < 0)
        return 0;
    for (int i = 0; i < 100; i++) {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)*port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int up = c >= 0 && connect(c, (struct sockaddr *)&to, sizeof to) == 0;
        if (c >= 0)
            close(c);
        if (up) {
            snprintf(url, 64, "redis://127.0.0.1:%d", *port);
            return pid;
        }
        usleep(50 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return 0;
}

static inline void kg_test_redis_stop(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
    }
}

#endif
