/*
 * test_reaper.c — the catch-all reaper (src/supervisor/reaper.c) without
 * Python: this process is made a child subreaper, as a supervisor makes it;
 * a grandchild orphaned to it is reaped once it ends, a tracked child is left
 * for its owner's waitpid (with its exit status), and nothing is reaped while
 * the reaper is held.  Also the /proc/N/stat reader they share with the
 * orphan guard (kg_proc_stat_read).
 */
#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kg_test.h"
#include "supervisor/supervisor.h"
#include "supervisor/internal.h"
#include "util/util.h"

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
    kg_proc_stat st;
    return kg_proc_stat_read(pid, &st) && st.state == 'Z';
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

/* The reader: this process's own record, a name with spaces and parentheses, a process that is gone. */
static void proc_stat_reads_a_process(void)
{
    kg_proc_stat me;
    KG_CHECK(kg_proc_stat_read(getpid(), &me));
    KG_CHECK(me.state == 'R' && me.ppid == (long)getppid() && me.start > 0);
    int p[2];
    KG_CHECK(pipe(p) == 0);
    pid_t c = fork();
    if (c == 0) {
        prctl(PR_SET_NAME, "a) (b c) 1 2");
        char x = 1;
        if (write(p[1], &x, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char x;
    KG_CHECK(read(p[0], &x, 1) == 1);
    kg_proc_stat st;
    KG_CHECK(kg_proc_stat_read(c, &st));
    KG_CHECK(!strcmp(st.comm, "a) (b c) 1 2") && st.ppid == (long)getpid() && st.start >= me.start);
    KG_CHECK(st.state == 'S' || st.state == 'R');
    kill(c, SIGKILL);
    KG_CHECK(waitpid(c, NULL, 0) == c);
    KG_CHECK(!kg_proc_stat_read(c, &st) && st.state == 0 && st.start == 0); /* gone: 0 and a zeroed record */
    close(p[0]);
    close(p[1]);
}

static const kg_test_case cases[] = {
    {"proc_stat_reads_a_process", proc_stat_reads_a_process},
    {"orphans_are_reaped", orphans_are_reaped},
    {"tracked_children_keep_their_status", tracked_children_keep_their_status},
    {"nothing_is_reaped_while_held", nothing_is_reaped_while_held},
};

KG_TEST_MAIN("reaper", cases)
