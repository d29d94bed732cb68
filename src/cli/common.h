/*
 * common.h — what the CLI's evaluation commands share: finding the Python
 * interpreter, the harness and the device, the evaluation flags, and the
 * human-readable report.  Strings returned are malloc'd (caller frees).
 */
#ifndef KG_CLI_COMMON_H
#define KG_CLI_COMMON_H

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>

#include "kgym/error.h"
#include "eval/eval.h"

/* Option codes of the shared evaluation flags start here. */
#define KG_OPT_BASE 1000

typedef struct kg_cli_eval_flags {
    const char *python;
    const char *harness;
    const char *device;      /* as given: auto, cpu, cuda, cuda:N */
    const char *kernelbench;
    char *device_resolved;   /* "cpu" or "cuda:N" after kg_cli_setup */
    char *python_resolved;
    char *harness_resolved;
    int json;
    kg_eval_options opts;
    json_t *stage_timeouts;  /* NAME=S given on the command line */
    const char *policy_path; /* --policy FILE (default: policy/default.json beside the harness) */
    char *policy_text;       /* its content, owned; opts.policy_json points here */
    json_t *policy;          /* its content parsed, owned; opts.policy points here */
    const char *reference_cache; /* --reference-cache DIR|off (NULL: the command's default, below) */
    int reference_cache_private; /* the command's default without --reference-cache on a GPU: 1 = a private
                                  * folder for this process, removed by kg_cli_eval_flags_free (bench, serve:
                                  * the samples of one task time its reference once); 0 = no cache (eval) */
    char *reference_cache_tmp;   /* that private folder, owned (NULL: none made) */
    unsigned long long device_memory; /* --device-memory B: for the supervisor (0: the device's own) */
    int warm;                /* --warm N: pairs started ahead (-1: the command's default) */
} kg_cli_eval_flags;

/* The long options every evaluation command takes (kg_cli_eval_longopt_count of them, no zero entry): each command
 * copies them into an array of KG_CLI_EVAL_LONGOPTS_MAX + its own + 1 (the zero entry), so an option added here
 * never writes past a command's array (common.c checks the bound when it compiles; `kgym serve --help` under
 * UBSan found the fixed 64 one short). */
#define KG_CLI_EVAL_LONGOPTS_MAX 56
extern const struct option kg_cli_eval_longopts[];
extern const size_t kg_cli_eval_longopt_count;
/* The help text for them. */
extern const char kg_cli_eval_help[];

void kg_cli_eval_flags_init(kg_cli_eval_flags *f);
void kg_cli_eval_flags_free(kg_cli_eval_flags *f);
/* Handles one shared option; 1 if it was one, 0 if not, -1 on a bad value (message printed). */
int kg_cli_eval_option(kg_cli_eval_flags *f, int code, const char *arg);
/* Resolves python, harness and device and fills f->opts for the device. */
int kg_cli_setup(kg_cli_eval_flags *f, kg_error *err);
/* The supervisor options the flags ask for (after kg_cli_setup; the strings stay f's); warm pairs
 * KG_CLI_WARM_DEFAULT unless --warm says otherwise (kgym eval, one evaluation, sets its own 0). */
#define KG_CLI_WARM_DEFAULT 2
kg_supervisor_options kg_cli_supervisor_options(const kg_cli_eval_flags *f);
/* Evaluations at once where the command line does not say (bench --jobs, serve/worker --workers, rollout --jobs
 * evaluating here), after kg_cli_setup: on a GPU kg_cli_gpu_jobs_default(the machine's GPUs), on the CPU the
 * command's own `cpu_default`.  On a machine whose driver lists one GPU, ten: on the GRPO mix (one H200) ten beat
 * six in four pairs, x1.081, x1.092 (twenty-second session), x1.075 (twenty-eighth), x1.081 (twenty-ninth, with the
 * shared profile), every speedup within 2% of six's; the fleet's one GPU gave the same at ten as at six (4,070 and
 * 4,067/h).  Where it lists several, six a GPU: the driver makes and tears down contexts under one lock for the
 * whole machine, so a GPU's extra evaluations wait on the other GPUs' (the fleet on two H200s at ten a GPU 6,065/h,
 * at six 6,758/h; docs/PERFORMANCE.md, twenty-second session).  A container given one GPU of a larger host sees
 * one there, though the host's other GPUs share its driver's lock: such a fleet says --jobs / --workers.  Device
 * memory needs no smaller number: the arbiter reserves each evaluation's before its GPU work starts and a request
 * that does not fit waits (docs/evaluation-protocol.md, "Sharing a GPU"). */
#define KG_CLI_GPU_JOBS_ONE_GPU 10
#define KG_CLI_GPU_JOBS_DEFAULT 6
/* The GPUs the NVIDIA driver lists on this machine: the entries of `dir` (NULL: /proc/driver/nvidia/gpus, one
 * folder a GPU, whatever CUDA_VISIBLE_DEVICES shows this process); -1 where it cannot be read. */
int kg_cli_machine_gpus(const char *dir);
/* Evaluations at once on one GPU of a machine with `machine_gpus` GPUs (-1: not known): KG_CLI_GPU_JOBS_ONE_GPU
 * for exactly one, KG_CLI_GPU_JOBS_DEFAULT otherwise. */
int kg_cli_gpu_jobs_default(int machine_gpus);
int kg_cli_default_jobs(const kg_cli_eval_flags *f, int cpu_default);

/* The device as the service's content key names it (malloc'd): "cpu", or
 * "cuda:" + the GPU model when every GPU the NVIDIA driver lists is that
 * model; otherwise a name of this host and device alone (results are then
 * shared with no other GPU; --device-kind names the model). */
char *kg_cli_device_kind(const char *device);

/* The readable report of one result. */
void kg_cli_print_report(FILE *out, const json_t *result, int color);

int kg_cli_usage_error(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* --claim-order ORDER (bench, serve, worker): "task" sets *fifo 0 (routed by task, sched.h), "fifo" 1; -1 for
 * anything else (*fifo unchanged). */
int kg_cli_claim_order(const char *order, int *fifo);

#endif
