/*
 * memcg.c — a memory cgroup around one runner: the bound on the host memory its candidate can hold.
 *
 * Why: RLIMIT_AS is the runner's bound on the CPU, but it breaks CUDA (the driver reserves huge virtual ranges),
 * so a GPU runner had none of kgym's: a candidate could hold or pin (pin_memory=True is in the language, and the
 * driver's pinned pages are not counted against RLIMIT_MEMLOCK) most of the host's memory for its evaluation's
 * length, and the kernel's OOM killer then chose whom to end, another evaluation's judge or kgym itself among
 * them (red team 40, docs/threat-model.md).  A memory cgroup counts resident and pinned pages alike, on both
 * devices, and when the runner's group is full the kernel kills inside it, only there.
 *
 * Where: a group of its own beneath the cgroup this process is in, "kgym-runner-<kgym's pid>-<runner's pid>-<n>":
 * cgroup v1's memory hierarchy (/sys/fs/cgroup/memory/<our path>, memory.limit_in_bytes), or cgroup v2
 * (/sys/fs/cgroup/<our path>, memory.max) where the memory controller is already enabled for our group's children (v2 lets no group with
 * processes of its own enable it, so kgym does not try).  Neither (no hierarchy, not writable, not root): the
 * runner is not bounded, and kg_memcg_enter says why; the evaluation goes on (the result's process.host_memory
 * says so).  The runner is moved in from outside, before it reads its job; its children (Triton's compilers)
 * inherit the group.  Pages the judge wrote first (a CPU input block the runner maps) stay the judge's.
 *
 * The group is removed after the runner and its left-overs were reaped (kg_memcg_remove); a removal that fails
 * (a process still in it) leaves the group behind, never reused (names are kgym's pid, the runner's and a count).
 * Groups of a kgym that was killed before it removed them are removed by the next kgym's first group
 * (sweep_dead_kgyms).
 */
#include "supervisor/internal.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* dir/name into path (cap bytes); 0, or -1 (ENAMETOOLONG) when it does not fit. */
static int path_of(char *path, size_t cap, const char *dir, const char *name)
{
    if (snprintf(path, cap, "%s/%s", dir, name) < (int)cap)
        return 0;
    errno = ENAMETOOLONG;
    return -1;
}

/* Writes `text` to the existing control file dir/name (never created: a name the kernel does not know is an
 * error); 0, or -1 with errno. */
static int write_file(const char *dir, const char *name, const char *text)
{
    char path[700];
    if (path_of(path, sizeof path, dir, name) != 0)
        return -1;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = kg_fd_write_all(fd, text, strlen(text));
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/* The text of the control file dir/name (malloc'd, NUL-terminated; the caller frees it), or NULL. */
static char *read_file(const char *dir, const char *name)
{
    char path[700];
    char *data = NULL;
    kg_error err;
    if (path_of(path, sizeof path, dir, name) != 0 || kg_file_read(path, 1 << 16, &data, NULL, &err) != KG_OK)
        return NULL;
    return data;
}

/* Whether the control file dir/name exists. */
static int has(const char *dir, const char *name)
{
    char path[700];
    return path_of(path, sizeof path, dir, name) == 0 && kg_file_exists(path);
}

/* This process's group in the v1 memory hierarchy ("/path") or v2's, from /proc/self/cgroup; 0, or -1. */
static int own_group(char *v1, size_t v1_cap, char *v2, size_t v2_cap)
{
    v1[0] = v2[0] = '\0';
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return -1;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *ctl = strchr(line, ':');
        char *path = ctl ? strchr(ctl + 1, ':') : NULL;
        if (!path)
            continue;
        *path++ = '\0';
        ctl++;
        if (!strcmp(line, "0") && !*ctl) {
            snprintf(v2, v2_cap, "%s", path);
            continue;
        }
        /* v1: a comma-separated list of controllers; ours is the one that names "memory" */
        for (char *save = NULL, *c = strtok_r(ctl, ",", &save); c; c = strtok_r(NULL, ",", &save))
            if (!strcmp(c, "memory"))
                snprintf(v1, v1_cap, "%s", path);
    }
    fclose(f);
    return 0;
}

/* Groups a kgym that is gone left in `parent` (killed before it could remove them: a worker the service's fault
 * tests kill, a crash): removed where empty, once a process (on its first group), so that they do not pile up run
 * after run.  A live kgym's groups, and any group a process is still in, are left alone (rmdir refuses them). */
static void sweep_dead_kgyms(const char *parent)
{
    static _Atomic int swept;
    if (swept++)
        return;
    DIR *d = opendir(parent);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        long owner;
        if (sscanf(e->d_name, "kgym-runner-%ld-", &owner) != 1 || owner <= 0 || owner == (long)getpid())
            continue;
        if (kill((pid_t)owner, 0) == 0 || errno != ESRCH)
            continue;
        char path[700];
        if (path_of(path, sizeof path, parent, e->d_name) == 0)
            (void)rmdir(path);
    }
    closedir(d);
}

int kg_memcg_enter(kg_memcg *cg, pid_t pid, unsigned long long bytes, char *why, size_t why_cap)
{
    memset(cg, 0, sizeof *cg);
    char v1[400], v2[400], parent[512];
    if (own_group(v1, sizeof v1, v2, sizeof v2) != 0) {
        snprintf(why, why_cap, "no /proc/self/cgroup: %s", strerror(errno));
        return -1;
    }
    int is_v2 = 0;
    if (v1[0] && snprintf(parent, sizeof parent, "/sys/fs/cgroup/memory%s", strcmp(v1, "/") ? v1 : "") <
                     (int)sizeof parent &&
        has(parent, "memory.limit_in_bytes")) {
        /* v1 */
    } else if (v2[0] && snprintf(parent, sizeof parent, "/sys/fs/cgroup%s", strcmp(v2, "/") ? v2 : "") <
                            (int)sizeof parent &&
               has(parent, "cgroup.subtree_control")) {
        char *ctl = read_file(parent, "cgroup.subtree_control");
        int delegated = ctl && strstr(ctl, "memory");
        free(ctl);
        if (!delegated) {
            snprintf(why, why_cap, "cgroup v2 without the memory controller for %s's children", parent);
            return -1;
        }
        is_v2 = 1;
    } else {
        snprintf(why, why_cap, "no cgroup memory controller mounted for this process's group");
        return -1;
    }
    sweep_dead_kgyms(parent);
    /* A name no other group has had: kgym's pid, the runner's and a count (a group left behind, or one of another
     * kgym's, is never taken over with its counters: red team 42). */
    static _Atomic unsigned long made;
    if (snprintf(cg->dir, sizeof cg->dir, "%s/kgym-runner-%ld-%ld-%lu", parent, (long)getpid(), (long)pid,
                 (unsigned long)++made) >= (int)sizeof cg->dir) {
        snprintf(why, why_cap, "cgroup path too long");
        cg->dir[0] = '\0';
        return -1;
    }
    if (mkdir(cg->dir, 0755) != 0) {
        snprintf(why, why_cap, "cannot make %s: %s", cg->dir, strerror(errno));
        cg->dir[0] = '\0';
        return -1;
    }
    char num[32];
    snprintf(num, sizeof num, "%llu", bytes);
    /* The limit first, then the runner: it never runs in the group unbounded. */
    if (write_file(cg->dir, is_v2 ? "memory.max" : "memory.limit_in_bytes", num) != 0) {
        snprintf(why, why_cap, "cannot set %s's limit: %s", cg->dir, strerror(errno));
        kg_memcg_remove(cg);
        return -1;
    }
    /* No swap to hide in, where the kernel counts it (v1: memory+swap no more than memory alone). */
    (void)write_file(cg->dir, is_v2 ? "memory.swap.max" : "memory.memsw.limit_in_bytes", is_v2 ? "0" : num);
    snprintf(num, sizeof num, "%ld", (long)pid);
    if (write_file(cg->dir, "cgroup.procs", num) != 0) {
        snprintf(why, why_cap, "cannot move the runner into %s: %s", cg->dir, strerror(errno));
        kg_memcg_remove(cg);
        return -1;
    }
    cg->v2 = is_v2;
    cg->limit = bytes;
    return 0;
}

int kg_memcg_oom_kills(const kg_memcg *cg)
{
    if (!cg->dir[0])
        return 0;
    char *text = read_file(cg->dir, cg->v2 ? "memory.events" : "memory.oom_control");
    const char *p = text ? strstr(text, "oom_kill ") : NULL;
    int kills = p ? atoi(p + strlen("oom_kill ")) : 0;
    free(text);
    return kills;
}

unsigned long long kg_memcg_peak(const kg_memcg *cg)
{
    if (!cg->dir[0])
        return 0;
    char *text = read_file(cg->dir, cg->v2 ? "memory.peak" : "memory.max_usage_in_bytes");
    unsigned long long peak = text ? strtoull(text, NULL, 10) : 0;
    free(text);
    return peak;
}

void kg_memcg_remove(kg_memcg *cg)
{
    if (!cg->dir[0])
        return;
    /* The runner was reaped; what it left is being killed and reaped by the caller's sweep: a short wait for the
     * group to empty, then it is left (empty groups cost nothing but an entry). */
    for (int i = 0; i < 50 && rmdir(cg->dir) != 0 && errno == EBUSY; i++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    cg->dir[0] = '\0';
}
