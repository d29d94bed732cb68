/* test_cli_report.c — the readable report of one result (cli/report.c kg_cli_print_report): the timing lines, with
 * the rounds kgym re-measured and why (timing.checks), from made-up results whose text is known. */
#include "kg_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"

/* The report of `text` (a result's JSON), as a string the caller frees. */
static char *report_of(const char *text)
{
    json_error_t e;
    json_t *r = json_loads(text, 0, &e);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = r ? open_memstream(&buf, &len) : NULL;
    if (out) {
        kg_cli_print_report(out, r, 0);
        fclose(out);
    }
    json_decref(r);
    return buf;
}

#define TIMING(extra)                                                                                              \
    "{\"verdict\": \"correct\", \"timing\": {\"reference_ms\": {\"median\": 1.5, \"cv\": 0.01}, "                   \
    "\"candidate_ms\": {\"median\": 1.0, \"cv\": 0.01}, \"speedup\": 1.5, \"gpu\": \"NVIDIA H200\", "             \
    "\"rounds_run\": 3" extra "}}"

static void test_remeasured_rounds_say_why(void)
{
    char *r = report_of(TIMING(", \"remeasured\": 1, \"checks\": [{\"rounds\": 2, \"more\": true, "
                               "\"reason\": \"disagree\", \"clock_basis\": \"device\"}, {\"rounds\": 3, "
                               "\"more\": false, \"reason\": \"stable\", \"clock_basis\": \"stream\"}]"));
    KG_CHECK(r && strstr(r, "speedup 1.50x  [NVIDIA H200]\n"));
    KG_CHECK(r && strstr(r, "           3 rounds, 1 re-measured: disagree (device-wide clock)\n"));
    KG_CHECK(r && !strstr(r, "stable"));
    free(r);
    r = report_of(TIMING(", \"remeasured\": 2, \"checks\": [{\"more\": true, \"reason\": \"short\", "
                         "\"clock_basis\": \"stream\"}, {\"more\": true, \"reason\": \"cv\", \"clock_basis\": "
                         "\"stream\"}]"));
    KG_CHECK(r && strstr(r, "3 rounds, 2 re-measured: short, cv\n"));
    free(r);
    /* A result from before timing.checks: the count, and that the reason was not recorded. */
    r = report_of(TIMING(", \"remeasured\": 1"));
    KG_CHECK(r && strstr(r, "3 rounds, 1 re-measured: why not recorded\n"));
    free(r);
}

static void test_planned_rounds_add_no_line(void)
{
    char *r = report_of(TIMING(", \"remeasured\": 0, \"checks\": [{\"rounds\": 2, \"more\": false, "
                               "\"reason\": \"stable\", \"clock_basis\": \"stream\"}]"));
    KG_CHECK(r && strstr(r, "speedup 1.50x") && !strstr(r, "re-measured"));
    free(r);
}

static const kg_test_case cases[] = {
    {"remeasured_rounds_say_why", test_remeasured_rounds_say_why},
    {"planned_rounds_add_no_line", test_planned_rounds_add_no_line},
};

KG_TEST_MAIN("cli_report", cases)
