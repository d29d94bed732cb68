/*
 * proc.c — one reader of /proc/N/stat for the places that look at other
 * processes: the service's orphan guard (start time: with the pid it names one
 * process, never a later one given the same pid), the supervisor's census of
 * a runner's uid (name, state) and the catch-all reaper (state, parent).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    /* After ')': field 3 (state) ... field 22 (starttime): skip 19 fields. */
    char *p = rp + 1;
    for (int f = 3; f < 22 && *p; f++) {
        while (*p == ' ')
            p++;
        while (*p && *p != ' ')
            p++;
    }
    st->start = strtoull(p, NULL, 10);
    return 1;
}
