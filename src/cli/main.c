/*
 * main.c — the kgym command: dispatches to a subcommand (src/cli/cmd_*.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

#define KG_VERSION "0.1.0"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"eval", kg_cli_eval, "evaluate one candidate kernel against a task"},
    {"bench", kg_cli_bench, "evaluate many (task, candidate) pairs, with a summary"},
    {"extract", kg_cli_extract, "show the code kgym takes from a model's reply"},
    {"reward", kg_cli_reward, "rewards from evaluation results (JSONL)"},
    {"advantages", kg_cli_advantages, "GRPO / RLOO / TRLOO advantages over trajectories (JSONL)"},
    {"rejection", kg_cli_rejection, "profiling-based (PRS) and mismatch (MRS) rejection sampling"},
    {"metrics", kg_cli_metrics, "compile/correct/hack rates and Fast@p per turn, with a plot"},
    {"serve", kg_cli_serve, "the evaluation service: HTTP API (KernelGYM-compatible), queue, SQLite"},
    {"worker", kg_cli_worker, "a GPU node of a Redis-backed service fleet"},
    {"curriculum", kg_cli_curriculum, "adaptive level curriculum: schedule and seeded sampler"},
    {"rollout", kg_cli_rollout, "multi-turn rollouts against a model server: trajectories and a report"},
};

static void usage(FILE *out)
{
    fprintf(out, "kgym %s — a kernel gym: evaluates candidate Triton kernels for RL\n\n"
                 "usage: kgym COMMAND [options]   (kgym COMMAND --help for its options)\n\ncommands:\n",
            KG_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
}

/* Every command's status passes through here: what it printed is flushed and closed, and an output that could not
 * be written (a full disk, /dev/full, a closed pipe's reader gone) is an error, not a silent exit 0 over a
 * truncated result a training loop would then read.  A command that already failed keeps its own status. */
static int finished(int rc)
{
    errno = 0;
    int bad = fflush(stdout) != 0 || ferror(stdout);
    int err = errno;
    if (fclose(stdout) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    if (!bad)
        return rc;
    fprintf(stderr, "kgym: could not write the standard output: %s\n", err ? strerror(err) : "write error");
    return rc ? rc : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return finished(argc < 2 ? 2 : 0);
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("kgym %s\n", KG_VERSION);
        return finished(0);
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name))
            return finished(commands[i].run(argc - 1, argv + 1));
    fprintf(stderr, "kgym: unknown command \"%s\"\n\n", argv[1]);
    usage(stderr);
    return 2;
}
