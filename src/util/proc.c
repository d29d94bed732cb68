/*
 * proc.c — one reader of /proc/N/stat for the places that look at other
 * processes: the service's orphan guard (start time: with the pid it names one
 * process, never a later one given the same pid), the supervisor's census of
 * a runner's uid (name, state) and the catch-all reaper (state, parent); one
 * reader of the uids in /proc/N/status (the census: whose process it is); and
 * the closing of inherited descriptors before an exec.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/util.h"

int kg_proc_stat_read(long pid, kg_proc_stat *st)
{
    char path[64], buf[1024];
    memset(st, 0, sizeof *st);
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* "pid (comm) state ppid ...": the command name may hold spaces and parentheses, so it ends at the last ')'. */
    char *lp = strchr(buf, '('), *rp = strrchr(buf, ')');
    if (!lp || !rp || rp < lp)
        return 0;
    snprintf(st->comm, sizeof st->comm, "%.*s", (int)(rp - lp - 1), lp + 1);
    if (sscanf(rp + 1, " %c %ld", &st->state, &st->ppid) != 2)
        return 0;
    /* After ')': field 3 (state) ... field 14 (utime), 15 (stime), 16 (cutime), 17 (cstime), 22 (starttime). */
    char *p = rp + 1;
    unsigned long long ticks = 0;
    long long child_ticks = 0;
    for (int f = 3; f < 22 && *p; f++) {
        while (*p == ' ')
            p++;
        if (f == 14 || f == 15)
            ticks += strtoull(p, NULL, 10);
        else if (f == 16 || f == 17)
            child_ticks += strtoll(p, NULL, 10);
        while (*p && *p != ' ')
            p++;
    }
    st->start = strtoull(p, NULL, 10);
    long hz = sysconf(_SC_CLK_TCK);
    st->cpu_seconds = hz > 0 ? (double)ticks / (double)hz : -1;
    st->children_cpu_seconds = hz > 0 ? (double)(child_ticks > 0 ? child_ticks : 0) / (double)hz : -1;
    return 1;
}

int kg_proc_uids_read(long pid, unsigned long uids[4])
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1); /* "Uid:" is line 9, well inside the first read */
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *line = strstr(buf, "\nUid:");
    return line && sscanf(line + 5, "%lu %lu %lu %lu", &uids[0], &uids[1], &uids[2], &uids[3]) == 4;
}

/* getdents64's record (the kernel's struct linux_dirent64, which no libc header declares). */
struct kg_dirent64 {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

void kg_close_from(int first)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)first, ~0U, 0) == 0)
        return;
#endif
    /* Before Linux 5.9: the descriptors /proc/self/fd lists, read with the raw system call into a buffer on
     * the stack (opendir allocates, which a child of a threaded process must not do before exec). */
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        char buf[4096] __attribute__((aligned(8)));
        long n;
        while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
            for (long off = 0; off < n;) {
                const struct kg_dirent64 *d = (const struct kg_dirent64 *)(buf + off);
                int fd = 0, digits = 0;
                for (const char *c = d->name; *c >= '0' && *c <= '9' && digits < 9; c++, digits++)
                    fd = fd * 10 + (*c - '0');
                if (digits > 0 && d->name[digits] == '\0' && fd >= first && fd != dir)
                    close(fd);
                off += d->reclen;
            }
        }
        close(dir);
        if (n == 0)
            return;
    }
    /* No /proc either: every number up to the descriptor limit. */
    struct rlimit rl;
    long top = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 65536
                   ? (long)rl.rlim_cur
                   : 65536;
    for (long fd = first; fd < top; fd++)
        close((int)fd);
}
