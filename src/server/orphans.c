/*
 * orphans.c — no evaluation outlives its server.  The judge and runner of an
 * evaluation are children of the server (its subreaper); a server killed
 * with SIGKILL leaves them to PID 1, and a hanging candidate would run on for
 * ever.  Every process a server starts inherits KGYM_SERVE_OWNER=pid:start
 * (its environment block, which /proc/N/environ shows even after the
 * sandbox cleans os.environ); a process whose owner is gone is an orphan.
 * A guardian process, forked before any thread, waits for its server to end
 * (a pipe's EOF) and kills the orphans at once; and every server start kills
 * those any dead server left (a guardian killed with its server, say).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "server/server.h"
#include "util/util.h"

#define OWNER_VAR "KGYM_SERVE_OWNER="

/* A process's start time (clock ticks after boot): with the pid it names one
 * process, never a later one given the same pid.  0 if it is gone. */
static unsigned long long start_time(long pid)
{
    kg_proc_stat st;
    return kg_proc_stat_read(pid, &st) ? st.start : 0;
}

/* A zombie is not alive: its process is gone, only its exit status waits for a parent that may never read it (a
 * `kgym worker --gpus` child SIGKILLed while its parent still waited for another child). */
static int owner_alive(long pid, unsigned long long start)
{
    kg_proc_stat st;
    return kg_proc_stat_read(pid, &st) && st.start == start && st.state != 'Z' && st.state != 'X';
}

/* The owner named in a process's environment block (0: none). */
static int owner_of(long pid, long *owner, unsigned long long *start)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    /* Read in pieces; a variable may straddle two reads, so keep a tail. */
    char buf[8192 + 128];
    size_t keep = 0;
    int found = 0;
    for (;;) {
        ssize_t n = read(fd, buf + keep, sizeof buf - 1 - keep);
        if (n <= 0)
            break;
        size_t len = keep + (size_t)n;
        buf[len] = '\0';
        for (size_t i = 0; i < len && !found; i++) {
            if ((i == 0 || buf[i - 1] == '\0') && len - i > strlen(OWNER_VAR) &&
                !memcmp(buf + i, OWNER_VAR, strlen(OWNER_VAR)))
                found = sscanf(buf + i + strlen(OWNER_VAR), "%ld:%llu", owner, start) == 2;
        }
        if (found)
            break;
        keep = len < 128 ? len : 128;
        memmove(buf, buf + len - keep, keep);
    }
    close(fd);
    return found;
}

int kg_server_kill_orphans(void)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    long me = (long)getpid();
    int killed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        long pid = strtol(e->d_name, NULL, 10), owner = 0;
        unsigned long long start = 0;
        if (pid == me || !owner_of(pid, &owner, &start) || owner == pid)
            continue;
        if (!owner_alive(owner, start) && kill((pid_t)pid, SIGKILL) == 0)
            killed++;
    }
    closedir(d);
    return killed;
}

int kg_server_guard(kg_error *err)
{
    char val[64];
    unsigned long long start = start_time((long)getpid());
    snprintf(val, sizeof val, "%ld:%llu", (long)getpid(), start);
    /* Overwrites a mark inherited from a parent: this server owns what it starts. */
    if (setenv("KGYM_SERVE_OWNER", val, 1) != 0)
        return kg_error_set(err, KG_ERR_IO, "setenv: %s", strerror(errno));
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return kg_error_set(err, KG_ERR_IO, "pipe: %s", strerror(errno));
    long server = (long)getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return kg_error_set(err, KG_ERR_IO, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        /* The guardian: holds nothing of the server's but the pipe's read
         * end.  Its own owner mark is its server's, so it skips itself by pid. */
        close(p[1]);
        /* Holds no terminal or pipe of the caller's open (a shell reading the
         * server's output would wait for it). */
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
        }
        signal(SIGINT, SIG_IGN); /* a terminal's Ctrl-C is for the server */
        signal(SIGTERM, SIG_DFL);
        char c;
        while (read(p[0], &c, 1) < 0 && errno == EINTR) {
        }
        /* EOF: the server closed it or died.  Wait until it is gone (a clean
         * stop exits right after), then end what it left. */
        for (int i = 0; i < 600 && owner_alive(server, start); i++)
            usleep(100 * 1000);
        kg_server_kill_orphans();
        _exit(0);
    }
    close(p[0]);
    /* The write end stays open, never written, for the server's life; it
     * closes with the process, however it ends. */
    return KG_OK;
}
