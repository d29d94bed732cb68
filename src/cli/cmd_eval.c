/* cmd_eval.c — `kgym eval`: one candidate against one task. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/common.h"
#include "eval/eval.h"
#include "kgym/extract.h"
#include "task/task.h"
#include "util/util.h"

#define KG_MAX_RESPONSE_BYTES (16u << 20)

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kgym eval --task FILE|ID --kernel FILE [options]\n"
            "\n"
            "Evaluates one candidate Triton module (or a model's raw reply: the code is extracted)\n"
            "against a KernelBench-format reference, in stages: extract, parse, static, compile,\n"
            "tiny_run, correctness on several input variants, and timing on a GPU.\n"
            "\n"
            "  --task FILE|ID      the reference: a .py file, or a KernelBench id (level1/19) with\n"
            "                      --kernelbench DIR\n"
            "  --id ID             same as --task ID\n"
            "  --kernel FILE       the candidate module or raw model output ('-' reads stdin)\n"
            "  --response FILE     same as --kernel\n"
            "  --json              machine-readable output (docs/result-schema.md)\n"
            "\n%s\n"
            "Exit status: 0 when the evaluation was carried out (whatever the verdict), 2 for a usage\n"
            "error, 1 when kgym could not evaluate (no Python, a broken task, ...).\n",
            kg_cli_eval_help);
}

enum { OPT_TASK = 1, OPT_KERNEL, OPT_HELP };

int kg_cli_eval(int argc, char **argv)
{
    static const struct option own[] = {
        {"task", required_argument, NULL, OPT_TASK}, {"id", required_argument, NULL, OPT_TASK},
        {"kernel", required_argument, NULL, OPT_KERNEL}, {"response", required_argument, NULL, OPT_KERNEL},
        {"help", no_argument, NULL, OPT_HELP}};
    struct option longopts[KG_CLI_EVAL_LONGOPTS_MAX + sizeof own / sizeof *own + 1];
    size_t n = 0;
    for (size_t i = 0; i < kg_cli_eval_longopt_count; i++)
        longopts[n++] = kg_cli_eval_longopts[i];
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        longopts[n++] = own[i];
    longopts[n++] = (struct option){0, 0, 0, 0};

    kg_cli_eval_flags f;
    kg_cli_eval_flags_init(&f);
    const char *task_spec = NULL, *kernel = NULL;
    int c, rc = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == OPT_TASK) {
            task_spec = optarg;
        } else if (c == OPT_KERNEL) {
            kernel = optarg;
        } else if (c == OPT_HELP || c == 'h') {
            usage(stdout);
            kg_cli_eval_flags_free(&f);
            return 0;
        } else if (c == '?' || c == ':') {
            kg_cli_eval_flags_free(&f);
            return kg_cli_usage_error("eval", "unknown option or missing value: %s", argv[optind - 1]);
        } else {
            int r = kg_cli_eval_option(&f, c, optarg);
            if (r <= 0) {
                kg_cli_eval_flags_free(&f);
                return 2;
            }
        }
    }
    if (optind < argc) {
        kg_cli_eval_flags_free(&f);
        return kg_cli_usage_error("eval", "unexpected argument \"%s\"", argv[optind]);
    }
    if (!task_spec || !kernel) {
        kg_cli_eval_flags_free(&f);
        return kg_cli_usage_error("eval", "--task and --kernel are required");
    }
    kg_error err;
    kg_error_clear(&err);
    kg_task task;
    memset(&task, 0, sizeof task);
    char *response = NULL;
    size_t response_len = 0;
    kg_supervisor *sup = NULL;
    json_t *result = NULL;
    kg_eval_extraction extraction;
    memset(&extraction, 0, sizeof extraction);

    if (kg_cli_setup(&f, &err) != KG_OK) {
        rc = err.code == KG_ERR_INVALID ? 2 : 1;
        goto fail;
    }
    if (kg_task_resolve(f.kernelbench, task_spec, &task, &err) != KG_OK) {
        rc = 2;
        goto fail;
    }
    if ((!strcmp(kernel, "-") ? kg_fd_read(0, "the candidate on stdin", KG_MAX_RESPONSE_BYTES, &response,
                                            &response_len, &err)
                              : kg_file_read(kernel, KG_MAX_RESPONSE_BYTES, &response, &response_len, &err)) !=
        KG_OK) {
        rc = 2;
        goto fail;
    }
    /* A reply with no usable code is answered by C alone (verdict invalid): no Python is started for it. */
    kg_eval_extract(response, response_len, &extraction); /* once: kg_eval_run takes it (req.extracted) */
    int usable = extraction.rc == KG_OK;
    kg_supervisor_options so = kg_cli_supervisor_options(&f);
    if (f.warm < 0)
        so.warm_pairs = 0; /* one evaluation (and its re-run alone): a pair started ahead would go unused */
    if (usable && kg_supervisor_open(&so, &sup, &err) != KG_OK) {
        rc = 1;
        goto fail;
    }
    kg_eval_request req = {.task = &task, .response = response, .response_len = response_len,
                           .candidate_name = strcmp(kernel, "-") ? kernel : NULL, .extracted = &extraction};
    if (kg_eval_run(sup, &f.opts, &req, &result, &err) != KG_OK) {
        rc = 1;
        goto fail;
    }
    if (f.json) {
        char *text = json_dumps(result, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (text) {
            puts(text);
            free(text);
        }
    } else {
        kg_cli_print_report(stdout, result, isatty(1));
    }
    goto done;
fail:
    fprintf(stderr, "kgym eval: %s\n", err.message);
done:
    json_decref(result);
    kg_supervisor_close(sup);
    kg_eval_extraction_free(&extraction);
    free(response);
    kg_task_free(&task);
    kg_cli_eval_flags_free(&f);
    return rc;
}
