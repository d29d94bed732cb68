/*
 * test_supervisor.c — the supervisor against real Python children: every way
 * a child can end (completed, timeout, crash, exit, output flood, protocol
 * garbage), bounded capture, process-group cleanup, and zygote restart.
 * Uses the real harness and the fixtures under tests/fixtures.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kg_test.h"
#include "kgym/supervisor.h"
#include "util/util.h"

static kg_supervisor *sup;

static json_t *job_for(const char *candidate, char **workdir)
{
    kg_temp_dir("kgym-test", workdir, NULL);
    kg_buf cand = {0}, task = {0};
    kg_buf_printf(&cand, "%s/tests/fixtures/candidates/%s.py", KG_SOURCE_ROOT, candidate);
    kg_buf_printf(&task, "%s/tests/fixtures/tasks/add_one.py", KG_SOURCE_ROOT);
    json_t *job = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i}", "type", "job", "workdir", *workdir,
                            "candidate", cand.data, "task", task.data, "device", "cpu", "budget", 65536,
                            "tiny_budget", 4096, "seed", 42);
    /* These fixtures kill their own process (ctypes, os._exit, os.write): reward hacks to the default policy.
     * This test is about the process layer, so the reward-hack checks are off ("policy": false). */
    json_object_set_new(job, "policy", json_false());
    kg_buf_free(&cand);
    kg_buf_free(&task);
    return job;
}

static kg_child_limits limits(void)
{
    kg_child_limits l = {0};
    l.total_timeout_s = 60;
    l.default_stage_timeout_s = 30;
    l.capture_bytes = 4096;
    l.output_limit_bytes = 1u << 20;
    return l;
}

static int run(const char *candidate, const kg_child_limits *lim, kg_child_report *rep)
{
    char *dir = NULL;
    json_t *job = job_for(candidate, &dir);
    kg_error err;
    int rc = kg_supervisor_run(sup, job, lim, rep, &err);
    if (rc != KG_OK)
        fprintf(stderr, "  run %s: %s\n", candidate, err.message);
    json_decref(job);
    kg_remove_tree(dir);
    free(dir);
    return rc;
}

static int has_message(const kg_child_report *rep, const char *type)
{
    size_t i;
    json_t *m;
    json_array_foreach(rep->messages, i, m) {
        const char *t = json_string_value(json_object_get(m, "type"));
        if (t && !strcmp(t, type))
            return 1;
    }
    return 0;
}

/* After a run no process of the child's group may be left. */
static int group_gone(pid_t pid)
{
    return kill(-pid, 0) == -1 && errno == ESRCH;
}

static void completes_and_timestamps(void)
{
    kg_child_limits l = limits();
    kg_child_report rep;
    KG_CHECK(run("ok", &l, &rep) == KG_OK);
    KG_CHECK(rep.end == KG_END_COMPLETED);
    KG_CHECK(rep.exit_code == 0);
    KG_CHECK(has_message(&rep, "hello"));
    KG_CHECK(has_message(&rep, "variant"));
    KG_CHECK(has_message(&rep, "done"));
    /* Every message carries our own clock, non-decreasing. */
    double last = -1;
    size_t i;
    json_t *m;
    json_array_foreach(rep.messages, i, m) {
        json_t *t = json_object_get(m, "t_ms");
        KG_CHECK(json_is_number(t));
        KG_CHECK(json_number_value(t) >= last);
        last = json_number_value(t);
    }
    KG_CHECK(group_gone(rep.pid));
    kg_child_report_free(&rep);
}

static void stage_timeout_kills_the_group(void)
{
    kg_child_limits l = limits();
    json_t *stages = json_pack("{s:f}", "tiny_run", 2.0);
    l.stage_timeouts_s = stages;
    kg_child_report rep;
    double t0 = kg_now_ms();
    KG_CHECK(run("hang", &l, &rep) == KG_OK);
    double took = kg_now_ms() - t0;
    KG_CHECK(rep.end == KG_END_TIMEOUT);
    KG_CHECK_STR(rep.stage, "tiny_run");
    KG_CHECK_NEAR(rep.stage_limit_s, 2.0, 1e-9);
    KG_CHECK(took < 20000);
    KG_CHECK(rep.signal == SIGKILL);
    KG_CHECK(group_gone(rep.pid));
    kg_child_report_free(&rep);
    json_decref(stages);
}

static void total_timeout(void)
{
    kg_child_limits l = limits();
    l.total_timeout_s = 3;
    l.default_stage_timeout_s = 0;
    kg_child_report rep;
    KG_CHECK(run("hang_import", &l, &rep) == KG_OK);
    KG_CHECK(rep.end == KG_END_TIMEOUT);
    KG_CHECK_STR(rep.stage, "compile");
    KG_CHECK_NEAR(rep.stage_limit_s, 3.0, 1e-9);
    kg_child_report_free(&rep);
}

static void crash_is_a_signal(void)
{
    kg_child_limits l = limits();
    kg_child_report rep;
    KG_CHECK(run("segfault", &l, &rep) == KG_OK);
    KG_CHECK(rep.end == KG_END_SIGNAL);
    KG_CHECK(rep.signal == SIGSEGV);
    KG_CHECK_STR(rep.stage, "tiny_run");
    kg_child_report_free(&rep);
}

static void early_exit_code(void)
{
    kg_child_limits l = limits();
    kg_child_report rep;
    KG_CHECK(run("exit_early", &l, &rep) == KG_OK);
    KG_CHECK(rep.end == KG_END_EXIT);
    KG_CHECK(rep.exit_code == 7);
    KG_CHECK(!has_message(&rep, "done"));
    kg_child_report_free(&rep);
}

static void output_flood_is_bounded(void)
{
    kg_child_limits l = limits();
    kg_child_report rep;
    KG_CHECK(run("flood", &l, &rep) == KG_OK);
    KG_CHECK(rep.end == KG_END_OUTPUT_FLOOD);
    KG_CHECK(rep.out.total_bytes > (1u << 20));
    KG_CHECK(strlen(rep.out.head) == 4096);
    KG_CHECK(strlen(rep.out.tail) <= 4096);
    KG_CHECK(rep.out.truncated);
    KG_CHECK(group_gone(rep.pid));
    kg_child_report_free(&rep);
}

static void small_output_is_kept_whole(void)
{
    kg_child_limits l = limits();
    kg_child_report rep;
    KG_CHECK(run("chatty", &l, &rep) == KG_OK);
    KG_CHECK(rep.end == KG_END_COMPLETED);
    KG_CHECK(strstr(rep.out.head, "debug: forward called with") != NULL);
    KG_CHECK(!rep.out.truncated);
    KG_CHECK(rep.out.total_bytes == strlen(rep.out.head) + strlen(rep.out.tail));
    kg_child_report_free(&rep);
}

static void protocol_garbage_is_killed(void)
{
    kg_child_limits l = limits();
    kg_child_report rep;
    KG_CHECK(run("protocol_garbage", &l, &rep) == KG_OK);
    KG_CHECK(rep.end == KG_END_PROTOCOL);
    kg_child_report_free(&rep);
}

static void dead_zygote_is_restarted(void)
{
    int starts = kg_supervisor_starts(sup);
    pid_t z = kg_supervisor_zygote_pid(sup);
    KG_CHECK(z > 0);
    kill(z, SIGKILL);
    usleep(100 * 1000);
    kg_child_limits l = limits();
    kg_child_report rep;
    KG_CHECK(run("ok", &l, &rep) == KG_OK);
    KG_CHECK(rep.end == KG_END_COMPLETED);
    KG_CHECK(kg_supervisor_starts(sup) == starts + 1);
    KG_CHECK(kg_supervisor_zygote_pid(sup) != z);
    kg_child_report_free(&rep);
}

static void next_run_unaffected(void)
{
    /* After every kind of death above, an honest child still completes. */
    kg_child_limits l = limits();
    kg_child_report rep;
    KG_CHECK(run("ok", &l, &rep) == KG_OK);
    KG_CHECK(rep.end == KG_END_COMPLETED);
    kg_child_report_free(&rep);
}

static void bad_options(void)
{
    kg_supervisor *s = NULL;
    kg_error err;
    kg_supervisor_options o = {.python = "/nonexistent/python", .harness_dir = KG_DEFAULT_HARNESS_DIR,
                               .device = "cpu"};
    KG_CHECK(kg_supervisor_open(&o, &s, &err) == KG_ERR_NOT_FOUND);
    KG_CHECK(strstr(err.message, "/nonexistent/python") != NULL);
    o.python = "/bin/sh";
    o.device = "tpu";
    KG_CHECK(kg_supervisor_open(&o, &s, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "tpu") != NULL);
    o.device = "cpu";
    o.harness_dir = "/nonexistent";
    KG_CHECK(kg_supervisor_open(&o, &s, &err) == KG_ERR_NOT_FOUND);
    /* A Python that cannot import the harness: the error quotes its stderr. */
    o.harness_dir = KG_DEFAULT_HARNESS_DIR;
    o.python = "/bin/false";
    KG_CHECK(kg_supervisor_open(&o, &s, &err) == KG_ERR_CHILD);
    KG_CHECK(s == NULL);
}

static const kg_test_case cases[] = {
    {"completes_and_timestamps", completes_and_timestamps},
    {"stage_timeout_kills_the_group", stage_timeout_kills_the_group},
    {"total_timeout", total_timeout},
    {"crash_is_a_signal", crash_is_a_signal},
    {"early_exit_code", early_exit_code},
    {"output_flood_is_bounded", output_flood_is_bounded},
    {"small_output_is_kept_whole", small_output_is_kept_whole},
    {"protocol_garbage_is_killed", protocol_garbage_is_killed},
    {"dead_zygote_is_restarted", dead_zygote_is_restarted},
    {"next_run_unaffected", next_run_unaffected},
    {"bad_options", bad_options},
};

int main(void)
{
    const char *python = getenv("KGYM_PYTHON");
    kg_supervisor_options o = {.python = python && *python ? python : KG_DEFAULT_PYTHON,
                               .harness_dir = KG_DEFAULT_HARNESS_DIR, .device = "cpu"};
    kg_error err;
    if (kg_supervisor_open(&o, &sup, &err) != KG_OK) {
        fprintf(stderr, "cannot start the supervisor: %s\n", err.message);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    int rc = kg_test_main("supervisor", cases, sizeof cases / sizeof cases[0]);
    kg_supervisor_close(sup);
    return rc;
}
