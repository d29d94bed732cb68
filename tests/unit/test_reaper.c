/*
 * test_reaper.c — the catch-all reaper (src/supervisor/reaper.c) without
 * Python: this process is made a child subreaper, as a supervisor makes it;
 * a grandchild orphaned to it is reaped once it ends, a tracked child is left
 * for its owner's waitpid (with its exit status), and nothing is reaped while
 * the reaper is held.
 */
#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kg_test.h"
#include "kgym/supervisor.h"
#include "supervisor/internal.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A child that forks a grandchild (it writes its pid to fd) and exits at once: the grandchild is orphaned to us
 * and exits after ms.  The child itself is waited for here.  Returns the grandchild's pid. */
static pid_t orphan_ending_in(long ms)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    pid_t child = fork();
    if (child == 0) {
        pid_t g = fork();
        if (g == 0) {
            sleep_ms(ms);
            _exit(0);
        }
        if (write(p[1], &g, sizeof g) != (ssize_t)sizeof g)
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    pid_t g = -1;
    if (read(p[0], &g, sizeof g) != (ssize_t)sizeof g)
        g = -1;
    close(p[0]);
    waitpid(child, NULL, 0);
    return g;
}

/* A zombie of ours: /proc/N/stat says Z. */
static int is_zombie(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] == 'Z';
}

static int wait_zombie(pid_t pid)
{
    for (int i = 0; i < 200 && !is_zombie(pid); i++)
        sleep_ms(10);
    return is_zombie(pid);
}

static void orphans_are_reaped(void)
{
    KG_CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
    pid_t g = orphan_ending_in(0);
    KG_CHECK(g > 0);
    KG_CHECK(wait_zombie(g)); /* ended, re-parented to us: a zombie until reaped */
    KG_CHECK(kg_supervisor_reap_orphans() >= 1);
    KG_CHECK(!is_zombie(g) && kill(g, 0) == -1 && errno == ESRCH);
    KG_CHECK(waitpid(g, NULL, WNOHANG) == -1 && errno == ECHILD);
}

static void tracked_children_keep_their_status(void)
{
    pid_t c = fork();
    if (c == 0)
        _exit(7);
    kg_reaper_track(c);
    KG_CHECK(wait_zombie(c));
    kg_supervisor_reap_orphans();
    int status = 0;
    KG_CHECK(waitpid(c, &status, 0) == c && WIFEXITED(status) && WEXITSTATUS(status) == 7);
    kg_reaper_untrack(c);
}

static void nothing_is_reaped_while_held(void)
{
    pid_t g = orphan_ending_in(0);
    KG_CHECK(g > 0 && wait_zombie(g));
    kg_reaper_hold();
    KG_CHECK(kg_supervisor_reap_orphans() == 0); /* waits 0.2 s for the hold at most, then leaves */
    KG_CHECK(is_zombie(g));
    kg_reaper_release();
    KG_CHECK(kg_supervisor_reap_orphans() >= 1 && !is_zombie(g));
}

static const kg_test_case cases[] = {
    {"orphans_are_reaped", orphans_are_reaped},
    {"tracked_children_keep_their_status", tracked_children_keep_their_status},
    {"nothing_is_reaped_while_held", nothing_is_reaped_while_held},
};

KG_TEST_MAIN("reaper", cases)
