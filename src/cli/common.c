/* common.c — runtime discovery and the shared evaluation flags of the CLI. */
#include "cli/common.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval/refcache.h"
#include "util/json.h"
#include "util/util.h"

#ifndef KG_DEFAULT_PYTHON
#define KG_DEFAULT_PYTHON ""
#endif
#ifndef KG_DEFAULT_HARNESS_DIR
#define KG_DEFAULT_HARNESS_DIR ""
#endif

enum {
    OPT_PYTHON = KG_OPT_BASE, OPT_HARNESS, OPT_DEVICE, OPT_KERNELBENCH, OPT_JSON, OPT_BUDGET,
    OPT_TINY_BUDGET, OPT_ATOL, OPT_RTOL, OPT_HALF, OPT_VARIANTS, OPT_SEED, OPT_TIMEOUT,
    OPT_STAGE_TIMEOUT, OPT_OUTPUT_LIMIT, OPT_CREDIT, OPT_NO_TIMING, OPT_TIMING_ITERS, OPT_MEMORY, OPT_RUNNER_MEMORY,
    OPT_POLICY, OPT_HACK_PENALTY, OPT_COVERAGE_FLOOR, OPT_NO_SANDBOX, OPT_TIMING_WARMUP, OPT_TIMING_ROUNDS,
    OPT_TIMING_MAX_ROUNDS, OPT_TIMING_CV, OPT_TIMING_AGREE, OPT_REFERENCE_MODE, OPT_NO_PROFILE, OPT_REFERENCE_CACHE, OPT_TIMING_ROUND_MS,
    OPT_WORKDIR_SIZE, OPT_WORKDIR_FILES,
    OPT_DEVICE_MEMORY, OPT_WARM, OPT_TOLERANCE_PROFILE, OPT_ALLOW_UNPROTECTED, OPT_ALL_VARIANTS
};

const struct option kg_cli_eval_longopts[] = {
    {"python", required_argument, NULL, OPT_PYTHON},
    {"harness", required_argument, NULL, OPT_HARNESS},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"kernelbench", required_argument, NULL, OPT_KERNELBENCH},
    {"json", no_argument, NULL, OPT_JSON},
    {"budget", required_argument, NULL, OPT_BUDGET},
    {"tiny-budget", required_argument, NULL, OPT_TINY_BUDGET},
    {"atol", required_argument, NULL, OPT_ATOL},
    {"rtol", required_argument, NULL, OPT_RTOL},
    {"tolerance-profile", required_argument, NULL, OPT_TOLERANCE_PROFILE},
    {"half", required_argument, NULL, OPT_HALF},
    {"variants", required_argument, NULL, OPT_VARIANTS},
    {"all-variants", no_argument, NULL, OPT_ALL_VARIANTS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"stage-timeout", required_argument, NULL, OPT_STAGE_TIMEOUT},
    {"output-limit", required_argument, NULL, OPT_OUTPUT_LIMIT},
    {"credit", required_argument, NULL, OPT_CREDIT},
    {"no-timing", no_argument, NULL, OPT_NO_TIMING},
    {"timing-iters", required_argument, NULL, OPT_TIMING_ITERS},
    {"memory-limit", required_argument, NULL, OPT_MEMORY},
    {"runner-memory", required_argument, NULL, OPT_RUNNER_MEMORY},
    {"device-memory", required_argument, NULL, OPT_DEVICE_MEMORY},
    {"warm", required_argument, NULL, OPT_WARM},
    {"policy", required_argument, NULL, OPT_POLICY},
    {"hack-penalty", required_argument, NULL, OPT_HACK_PENALTY},
    {"coverage-floor", required_argument, NULL, OPT_COVERAGE_FLOOR},
    {"no-sandbox", no_argument, NULL, OPT_NO_SANDBOX},
    {"allow-unprotected", required_argument, NULL, OPT_ALLOW_UNPROTECTED},
    {"timing-warmup", required_argument, NULL, OPT_TIMING_WARMUP},
    {"timing-rounds", required_argument, NULL, OPT_TIMING_ROUNDS},
    {"timing-max-rounds", required_argument, NULL, OPT_TIMING_MAX_ROUNDS},
    {"timing-cv", required_argument, NULL, OPT_TIMING_CV},
    {"timing-agree", required_argument, NULL, OPT_TIMING_AGREE},
    {"reference-mode", required_argument, NULL, OPT_REFERENCE_MODE},
    {"no-profile", no_argument, NULL, OPT_NO_PROFILE},
    {"reference-cache", required_argument, NULL, OPT_REFERENCE_CACHE},
    {"timing-round-ms", required_argument, NULL, OPT_TIMING_ROUND_MS},
    {"workdir-size", required_argument, NULL, OPT_WORKDIR_SIZE},
    {"workdir-files", required_argument, NULL, OPT_WORKDIR_FILES},
};
const size_t kg_cli_eval_longopt_count = sizeof kg_cli_eval_longopts / sizeof kg_cli_eval_longopts[0];
_Static_assert(sizeof kg_cli_eval_longopts / sizeof kg_cli_eval_longopts[0] <= KG_CLI_EVAL_LONGOPTS_MAX,
               "the commands' option arrays hold KG_CLI_EVAL_LONGOPTS_MAX shared options: raise it (common.h)");

const char kg_cli_eval_help[] =
    "Evaluation options:\n"
    "  --device D          auto (default: a GPU if one is visible, else cpu), cpu, cuda, cuda:N\n"
    "  --kernelbench DIR   KernelBench checkout for task ids like level1/19 (or $KGYM_KERNELBENCH)\n"
    "  --budget N          CPU: shrink size constants so each tensor holds <= N elements (65536)\n"
    "  --tiny-budget N     elements per tensor in the tiny run (4096)\n"
    "  --atol X --rtol X   tolerances (default by dtype and profile: fp32 1e-4, fp16/bf16 1e-2)\n"
    "  --tolerance-profile P  strict (default: atol relative to the output, the reference without\n"
    "                      TF32) or kernelbench (atol = rtol = 1e-2 as KernelBench checks, the\n"
    "                      reference at PyTorch's default precision)\n"
    "  --half LIST         add half-precision variants: fp16, bf16 or fp16,bf16 (GPU)\n"
    "  --variants LIST     run only these variants: base,scaled_x2,seed_1,signed,size_small,\n"
    "                      size_odd,size_large,size_long (CPU only),small_odd (small odd sizes,\n"
    "                      signed inputs); value ranges small_values,tiny_values,large_values,\n"
    "                      mixed_large,offset; ties (index outputs only: inputs that tie);\n"
    "                      parameters (models with a constant parameter: other values)\n"
    "  --all-variants      run every variant even after one failed (default: correctness stops at the\n"
    "                      first failing variant, the rest listed as not run: the verdict is incorrect\n"
    "                      where a later variant might have raised, or shown a hack)\n"
    "  --seed N            base seed of inputs and weights (42)\n"
    "  --timeout S         whole-evaluation limit in seconds (1200)\n"
    "  --stage-timeout NAME=S  limit one stage: parse, static, compile, tiny_run, correctness,\n"
    "                      timing (defaults 30, 30, 120, 120, 600, 300); outside=S bounds\n"
    "                      the time outside every stage, in all (60); repeatable\n"
    "  --output-limit B    kill a candidate that prints more than B bytes (8 MiB)\n"
    "  --memory-limit B    CPU: address-space limit of the evaluation process (16 GiB)\n"
    "  --runner-memory B   host memory the candidate's process may hold, resident and pinned, on any device\n"
    "                      (a memory cgroup of its own; 32 GiB; 0: none); where no cgroup can be made,\n"
    "                      the result's process.host_memory says why\n"
    "  --device-memory B   memory concurrent evaluations may reserve between them, from their task's\n"
    "                      sizes (default 90% of the GPU's; on a CPU, none: not arbitrated)\n"
    "  --warm N            judge/runner pairs started ahead of their evaluation, sandbox entered and CUDA\n"
    "                      contexts made (0-8; default 2, kgym eval 0): each holds two processes and on\n"
    "                      a GPU two contexts (~0.5 GiB each)\n"
    "  --credit LIST       staged reward: invalid,compile_error,tiny-run-failed,incorrect,correct\n"
    "                      (0,0.3,0.5,0.7,1)\n"
    "  --no-timing         GPU: skip timing\n"
    "  --policy FILE       reward-hack policy (JSON; default policy/default.json, see docs/threat-model.md)\n"
    "  --hack-penalty X    reward of verdict hacked (0; e.g. -1 to punish cheating)\n"
    "  --coverage-floor X  GPU: least share (0..1) of the forward's device time in the candidate's own\n"
    "                      Triton kernels (0.5; 0 = not checked)\n"
    "  --no-sandbox        no sandbox for the candidate's process (debugging only): every protection\n"
    "                      may be missing\n"
    "  --allow-unprotected LIST  protections the candidate's process may lack (a kernel or container\n"
    "                      that refuses them) and still be judged correct: all, or codes among\n"
    "                      pid_namespace, mount_namespace, network_namespace, ipc_namespace,\n"
    "                      uts_namespace, fresh_proc, private_tmp, own_uid, clean_environment, rlimits,\n"
    "                      landlock, seccomp, seccomp_signals, no_processes, judge_not_dumpable,\n"
    "                      source_readonly, import_path, workdir_limit, descriptors (none)\n"
    "  --workdir-size B    the candidate's writable folder (and its /dev/shm): a tmpfs of B bytes (1G)\n"
    "  --workdir-files N   ... holding at most N files and folders (10000)\n"
    "  --timing-warmup N   GPU: untimed calls of each model before timing (10) when --timing-round-ms\n"
    "                      is 0; otherwise the first round warms up for 250 ms (at least 2 calls)\n"
    "  --timing-rounds N   GPU: planned rounds of timed calls, in one exclusive GPU window (2)\n"
    "  --timing-iters N    GPU: timed calls of each model per round (50)\n"
    "  --timing-round-ms T GPU: fewer calls (>= 3) for slow kernels so a round takes ~T ms (100; 0 = off)\n"
    "  --timing-cv X       GPU: re-measure while the per-round speedups vary more than X (0.02)\n"
    "  --timing-max-rounds N  GPU: re-measuring stops at N rounds in all (6)\n"
    "  --timing-agree X    GPU: with fewer than 3 rounds, one more unless their speedups lie within X\n"
    "                      of each other (0.003; 0 = off: the CV rule alone)\n"
    "  --reference-mode M  GPU: time the reference eager (default) or compile (torch.compile)\n"
    "  --reference-cache DIR|off  GPU: reuse the reference's times per task, GPU, dtype and protocol, kept\n"
    "                      in DIR across runs (bench, serve: a private folder of the process by default; eval: off)\n"
    "  --no-profile        GPU: skip the profile (coverage of the candidate's own kernels)\n"
    "  --python PATH       Python with torch and triton (default: $KGYM_PYTHON, then the venv)\n"
    "  --harness DIR       folder holding kgym_harness (default: $KGYM_HARNESS, then built-in)\n";

int kg_cli_usage_error(const char *command, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "kgym %s: ", command);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see kgym %s --help)\n", command);
    return 2;
}

void kg_cli_eval_flags_init(kg_cli_eval_flags *f)
{
    memset(f, 0, sizeof *f);
    f->warm = -1;
    kg_eval_options_default(&f->opts, "cpu");
    f->opts.coverage_floor = -1; /* not given: the device's default (kg_cli_setup) */
    f->stage_timeouts = json_object();
}

void kg_cli_eval_flags_free(kg_cli_eval_flags *f)
{
    free(f->device_resolved);
    free(f->python_resolved);
    free(f->harness_resolved);
    free(f->policy_text);
    json_decref(f->policy);
    json_decref(f->stage_timeouts);
    kg_refcache_close(f->opts.refcache);
    f->opts.refcache = NULL;
    if (f->reference_cache_tmp)
        kg_remove_tree(f->reference_cache_tmp); /* best effort: a leftover in TMPDIR is only disk */
    free(f->reference_cache_tmp);
    f->reference_cache_tmp = NULL;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

/* "16G", "512M", "1048576" → bytes. */
static int parse_bytes(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mult = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') mult = 1024.0 * 1024 * 1024, end++;
    if (*end == 'i' || *end == 'B') end++;
    if (*end == 'B') end++;
    if (*end)
        return -1;
    *out = (unsigned long long)(v * mult);
    return 0;
}

#define BAD(fmt, ...) (fprintf(stderr, "kgym: " fmt "\n", __VA_ARGS__), -1)

int kg_cli_eval_option(kg_cli_eval_flags *f, int code, const char *arg)
{
    double d;
    long l;
    unsigned long long b;
    kg_eval_options *o = &f->opts;
    switch (code) {
    case OPT_PYTHON: f->python = arg; return 1;
    case OPT_HARNESS: f->harness = arg; return 1;
    case OPT_DEVICE: f->device = arg; return 1;
    case OPT_KERNELBENCH: f->kernelbench = arg; return 1;
    case OPT_JSON: f->json = 1; return 1;
    case OPT_BUDGET:
        if (parse_long(arg, &l) || l < 16)
            return BAD("--budget needs a number of elements >= 16, not \"%s\"", arg);
        o->budget_elements = l;
        return 1;
    case OPT_TINY_BUDGET:
        if (parse_long(arg, &l) || l < 16)
            return BAD("--tiny-budget needs a number of elements >= 16, not \"%s\"", arg);
        o->tiny_budget_elements = l;
        return 1;
    case OPT_ATOL:
    case OPT_RTOL:
        if (parse_double(arg, &d) || d < 0)
            return BAD("--%s needs a number >= 0, not \"%s\"", code == OPT_ATOL ? "atol" : "rtol", arg);
        if (code == OPT_ATOL)
            o->atol = d;
        else
            o->rtol = d;
        return 1;
    case OPT_TOLERANCE_PROFILE:
        if (!kg_eval_tolerance_profile_known(arg))
            return BAD("--tolerance-profile takes strict or kernelbench, not \"%s\"", arg);
        o->tolerance_profile = arg;
        return 1;
    case OPT_HALF: {
        char *copy = kg_strdup(arg), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (strcmp(t, "fp16") && strcmp(t, "bf16")) {
                free(copy);
                return BAD("--half takes fp16, bf16 or fp16,bf16, not \"%s\"", arg);
            }
        free(copy);
        o->half = arg;
        return 1;
    }
    case OPT_VARIANTS: {
        static const char *known[] = {"base", "scaled_x2", "seed_1", "signed", "size_small",
                                      "size_odd", "size_large", "small_odd", "size_long",
                                      "small_values", "tiny_values", "large_values", "mixed_large",
                                      "offset", "ties", "parameters"};
        char *copy = kg_strdup(arg), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int ok = 0;
            for (size_t i = 0; i < sizeof known / sizeof *known; i++)
                ok |= !strcmp(t, known[i]);
            if (!ok) {
                fprintf(stderr, "kgym: unknown variant \"%s\" in --variants\n", t);
                free(copy);
                return -1;
            }
        }
        free(copy);
        o->variants = arg;
        return 1;
    }
    case OPT_SEED:
        if (parse_long(arg, &l) || l < 0 || l > 2147483647L)
            return BAD("--seed needs a number from 0 to 2^31-1, not \"%s\"", arg);
        o->seed = (unsigned)l;
        return 1;
    case OPT_TIMEOUT:
        if (parse_double(arg, &d) || d <= 0)
            return BAD("--timeout needs seconds > 0, not \"%s\"", arg);
        o->limits.total_timeout_s = d;
        return 1;
    case OPT_STAGE_TIMEOUT: {
        const char *eq = strchr(arg, '=');
        char name[64];
        if (!eq || (size_t)(eq - arg) >= sizeof name)
            return BAD("--stage-timeout takes NAME=SECONDS, not \"%s\"", arg);
        snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
        int idx = kg_eval_stage_index(name);
        if (idx < 0 && strcmp(name, "outside"))
            return BAD("--stage-timeout: unknown stage \"%s\" (parse, static, compile, tiny_run, "
                       "correctness, timing, outside)", name);
        if (parse_double(eq + 1, &d) || d <= 0)
            return BAD("--stage-timeout %s needs seconds > 0, not \"%s\"", name, eq + 1);
        if (kg_json_set(f->stage_timeouts, name, json_real(d)) != 0)
            return BAD("--stage-timeout %s: out of memory", name);
        return 1;
    }
    case OPT_OUTPUT_LIMIT:
        if (parse_bytes(arg, &b) || b < 1024)
            return BAD("--output-limit needs bytes >= 1024 (e.g. 8M), not \"%s\"", arg);
        o->limits.output_limit_bytes = (size_t)b;
        return 1;
    case OPT_WARM:
        if (parse_long(arg, &l) || l < 0 || l > 8)
            return BAD("--warm needs a number of pairs from 0 to 8, not \"%s\"", arg);
        f->warm = (int)l;
        return 1;
    case OPT_DEVICE_MEMORY:
        if (parse_bytes(arg, &b) || b < 1)
            return BAD("--device-memory needs bytes >= 1 (e.g. 40G), not \"%s\"", arg);
        f->device_memory = b;
        return 1;
    case OPT_MEMORY:
        if (parse_bytes(arg, &b) || b < (64ull << 20))
            return BAD("--memory-limit needs bytes >= 64M (e.g. 16G), not \"%s\"", arg);
        o->limits.address_space_bytes = b;
        return 1;
    case OPT_RUNNER_MEMORY:
        if (parse_bytes(arg, &b) || (b != 0 && b < (256ull << 20)))
            return BAD("--runner-memory needs 0 or bytes >= 256M (e.g. 32G), not \"%s\"", arg);
        o->limits.runner_memory_bytes = b;
        return 1;
    case OPT_CREDIT: {
        double c[5];
        int n = 0;
        char *copy = kg_strdup(arg), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (n >= 5 || parse_double(t, &c[n])) {
                n = -1;
                break;
            }
            n++;
        }
        free(copy);
        if (n != 5)
            return BAD("--credit needs 5 comma-separated numbers, not \"%s\"", arg);
        memcpy(o->credit, c, sizeof c);
        return 1;
    }
    case OPT_NO_TIMING: o->timing = 0; return 1;
    case OPT_ALL_VARIANTS: o->all_variants = 1; return 1;
    case OPT_POLICY: f->policy_path = arg; return 1;
    case OPT_HACK_PENALTY:
        if (parse_double(arg, &d) || !(d >= -1e6 && d <= 1e6))
            return BAD("--hack-penalty needs a number, not \"%s\"", arg);
        o->hack_penalty = d;
        return 1;
    case OPT_COVERAGE_FLOOR:
        if (parse_double(arg, &d) || d < 0 || d > 1)
            return BAD("--coverage-floor needs a share from 0 to 1, not \"%s\"", arg);
        o->coverage_floor = d;
        return 1;
    case OPT_NO_SANDBOX: o->sandbox = 0; return 1;
    case OPT_WORKDIR_SIZE:
        if (parse_bytes(arg, &b) || b < (1ull << 20) || b > (1ull << 40))
            return BAD("--workdir-size needs bytes from 1M to 1T (e.g. 1G), not \"%s\"", arg);
        o->workdir_bytes = b;
        return 1;
    case OPT_WORKDIR_FILES:
        if (parse_long(arg, &l) || l < 64 || l > 100000000L)
            return BAD("--workdir-files needs a count from 64 to 100000000, not \"%s\"", arg);
        o->workdir_files = l;
        return 1;
    case OPT_ALLOW_UNPROTECTED: {
        kg_error e;
        if (kg_eval_check_protection_list(arg, &e) != KG_OK)
            return BAD("--allow-unprotected: %s", e.message);
        o->allow_unprotected = arg;
        return 1;
    }
    case OPT_TIMING_ITERS:
        if (parse_long(arg, &l) || l < 1 || l > 100000)
            return BAD("--timing-iters needs a count from 1 to 100000, not \"%s\"", arg);
        o->timing_iters = (int)l;
        return 1;
    case OPT_TIMING_WARMUP:
        if (parse_long(arg, &l) || l < 0 || l > 100000)
            return BAD("--timing-warmup needs a count from 0 to 100000, not \"%s\"", arg);
        o->timing_warmup = (int)l;
        return 1;
    case OPT_TIMING_ROUNDS:
    case OPT_TIMING_MAX_ROUNDS:
        if (parse_long(arg, &l) || l < 1 || l > 100)
            return BAD("--timing-%srounds needs a count from 1 to 100, not \"%s\"",
                       code == OPT_TIMING_ROUNDS ? "" : "max-", arg);
        if (code == OPT_TIMING_ROUNDS)
            o->timing_rounds = (int)l;
        else
            o->timing_max_rounds = (int)l;
        return 1;
    case OPT_TIMING_CV:
        if (parse_double(arg, &d) || d < 0 || d > 10)
            return BAD("--timing-cv needs a coefficient of variation from 0 to 10 (e.g. 0.02), not \"%s\"", arg);
        o->timing_cv_threshold = d;
        return 1;
    case OPT_TIMING_AGREE:
        if (parse_double(arg, &d) || d < 0 || d > 1)
            return BAD("--timing-agree needs a relative spread from 0 to 1 (e.g. 0.003; 0 = off), not \"%s\"", arg);
        o->timing_agree = d;
        return 1;
    case OPT_REFERENCE_MODE:
        if (strcmp(arg, "eager") && strcmp(arg, "compile"))
            return BAD("--reference-mode takes eager or compile, not \"%s\"", arg);
        o->reference_mode = arg;
        return 1;
    case OPT_NO_PROFILE: o->profile = 0; return 1;
    case OPT_TIMING_ROUND_MS:
        if (parse_double(arg, &d) || d < 0 || d > 3600e3)
            return BAD("--timing-round-ms needs milliseconds >= 0, not \"%s\"", arg);
        o->timing_round_ms = d;
        return 1;
    case OPT_REFERENCE_CACHE: f->reference_cache = arg; return 1;
    }
    return 0;
}

static char *find_in_path(const char *name)
{
    const char *path = getenv("PATH");
    if (!path)
        return NULL;
    char *copy = kg_strdup(path), *save = NULL, *found = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
        kg_buf b = {0};
        if (kg_buf_printf(&b, "%s/%s", dir, name) != KG_OK) {
            kg_buf_free(&b);
            break; /* memory: the search stops, and the caller's message names what was not found */
        }
        if (access(b.data, X_OK) == 0)
            found = kg_buf_release(&b);
        else
            kg_buf_free(&b);
    }
    free(copy);
    return found;
}

/* A GPU is "visible" when the NVIDIA driver lists one and CUDA_VISIBLE_DEVICES
 * does not hide them all.  Checked from C, without touching CUDA. */
static int gpu_visible(void)
{
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (cvd && (!*cvd || !strcmp(cvd, "-1")))
        return 0;
    return kg_cli_machine_gpus(NULL) > 0;
}

/* The GPU model of one /proc/driver/nvidia/gpus/<bus>/information file ("Model: \t NVIDIA H100 80GB HBM3"). */
static int gpu_model(const char *bus, char *out, size_t cap)
{
    kg_buf path = {0};
    char *text = NULL;
    size_t len = 0;
    int rc = kg_buf_printf(&path, "/proc/driver/nvidia/gpus/%s/information", bus) == KG_OK
                 ? kg_file_read(path.data, 1 << 16, &text, &len, NULL)
                 : KG_ERR_NOMEM;
    kg_buf_free(&path);
    if (rc != KG_OK)
        return -1;
    int found = 0;
    for (char *line = text; line && *line && !found; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, "Model:", 6))
            continue;
        char *v = line + 6;
        v += strspn(v, " \t");
        size_t n = strcspn(v, "\n");
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r'))
            n--;
        if (n && n < cap) {
            memcpy(out, v, n);
            out[n] = '\0';
            found = 1;
        }
    }
    free(text);
    return found ? 0 : -1;
}

char *kg_cli_device_kind(const char *device)
{
    if (!device || !strcmp(device, "cpu"))
        return kg_strdup("cpu");
    /* Which listed GPU cuda:N is depends on CUDA's device order and CUDA_VISIBLE_DEVICES, which only CUDA
     * knows (and the zygote must stay CUDA-free): the model is taken only when every GPU shares it. */
    char model[256] = "", other[256];
    int mixed = 0, n = 0;
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (gpu_model(e->d_name, n ? other : model, sizeof model) != 0)
            mixed = 1; /* unreadable: unknown */
        else if (n && strcmp(other, model))
            mixed = 1;
        n++;
    }
    if (d)
        closedir(d);
    kg_buf b = {0};
    int ok;
    if (n && !mixed && model[0]) {
        ok = kg_buf_printf(&b, "cuda:%s", model) == KG_OK;
    } else {
        /* Unknown model: a kind of this host's device alone, so that its results are never taken for another
         * GPU's (--device-kind names a model and shares them). */
        char host[128] = "host";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = '\0';
        const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
        ok = kg_buf_printf(&b, "%s@%s%s%s (GPU model unknown)", device, host, cvd ? " CUDA_VISIBLE_DEVICES=" : "",
                           cvd ? cvd : "") == KG_OK;
    }
    if (!ok) { /* NULL: out of memory, as for kg_strdup above */
        kg_buf_free(&b);
        return NULL;
    }
    return kg_buf_release(&b);
}

kg_supervisor_options kg_cli_supervisor_options(const kg_cli_eval_flags *f)
{
    return (kg_supervisor_options){.python = f->python_resolved, .harness_dir = f->harness_resolved,
                                   .device = f->device_resolved, .device_memory_bytes = f->device_memory,
                                   .warm_pairs = f->warm < 0 ? KG_CLI_WARM_DEFAULT : f->warm};
}

int kg_cli_machine_gpus(const char *dir)
{
    DIR *d = opendir(dir ? dir : "/proc/driver/nvidia/gpus");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

int kg_cli_gpu_jobs_default(int machine_gpus)
{
    return machine_gpus == 1 ? KG_CLI_GPU_JOBS_ONE_GPU : KG_CLI_GPU_JOBS_DEFAULT;
}

int kg_cli_default_jobs(const kg_cli_eval_flags *f, int cpu_default)
{
    if (!f->device_resolved || strcmp(f->device_resolved, "cpu") == 0)
        return cpu_default;
    return kg_cli_gpu_jobs_default(kg_cli_machine_gpus(NULL));
}

int kg_cli_setup(kg_cli_eval_flags *f, kg_error *err)
{
    const char *dev = f->device ? f->device : getenv("KGYM_DEVICE");
    if (!dev || !*dev || !strcmp(dev, "auto"))
        dev = gpu_visible() ? "cuda:0" : "cpu";
    if (!strcmp(dev, "cuda"))
        dev = "cuda:0";
    if (strcmp(dev, "cpu") && (strncmp(dev, "cuda:", 5) || !dev[5] || strspn(dev + 5, "0123456789") != strlen(dev + 5)))
        return kg_error_set(err, KG_ERR_INVALID, "--device must be auto, cpu, cuda or cuda:N, not \"%s\"", dev);
    f->device_resolved = kg_strdup(dev);

    const char *py = f->python ? f->python : getenv("KGYM_PYTHON");
    if (py && *py)
        f->python_resolved = strchr(py, '/') ? kg_strdup(py) : find_in_path(py);
    else if (KG_DEFAULT_PYTHON[0] && access(KG_DEFAULT_PYTHON, X_OK) == 0)
        f->python_resolved = kg_strdup(KG_DEFAULT_PYTHON);
    else
        f->python_resolved = find_in_path("python3");
    if (!f->python_resolved)
        return kg_error_set(err, KG_ERR_NOT_FOUND, "no Python found%s%s: pass --python PATH or set KGYM_PYTHON",
                            py && *py ? " named " : "", py && *py ? py : "");

    const char *h = f->harness ? f->harness : getenv("KGYM_HARNESS");
    if (h && *h) {
        f->harness_resolved = kg_strdup(h);
    } else if (KG_DEFAULT_HARNESS_DIR[0] && kg_dir_exists(KG_DEFAULT_HARNESS_DIR)) {
        f->harness_resolved = kg_strdup(KG_DEFAULT_HARNESS_DIR);
    } else {
        /* Next to the binary: <prefix>/bin/kgym → <prefix>/harness or build/kgym → ./harness. */
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
            exe[n] = '\0';
            char *slash = strrchr(exe, '/');
            if (slash)
                *slash = '\0';
            kg_buf b = {0};
            if (kg_buf_printf(&b, "%s/../harness", exe) != KG_OK) {
                kg_buf_free(&b);
                return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
            }
            if (kg_dir_exists(b.data))
                f->harness_resolved = kg_buf_release(&b);
            else
                kg_buf_free(&b);
        }
    }
    if (!f->harness_resolved)
        return kg_error_set(err, KG_ERR_NOT_FOUND, "no harness folder found: pass --harness or set KGYM_HARNESS");

    /* Device-dependent defaults, then what the command line said on top. */
    kg_eval_options given = f->opts;
    kg_eval_options_default(&f->opts, f->device_resolved);
    kg_eval_options def_cpu;
    kg_eval_options_default(&def_cpu, "cpu");
    f->opts.budget_elements = given.budget_elements;
    f->opts.tiny_budget_elements = given.tiny_budget_elements;
    f->opts.atol = given.atol;
    f->opts.rtol = given.rtol;
    f->opts.tolerance_profile = given.tolerance_profile;
    f->opts.half = given.half;
    f->opts.variants = given.variants;
    f->opts.all_variants = given.all_variants;
    f->opts.seed = given.seed;
    memcpy(f->opts.credit, given.credit, sizeof given.credit);
    f->opts.timing = given.timing;
    f->opts.hack_penalty = given.hack_penalty;
    if (given.coverage_floor >= 0)
        f->opts.coverage_floor = given.coverage_floor;
    f->opts.sandbox = given.sandbox;
    f->opts.workdir_bytes = given.workdir_bytes;
    f->opts.workdir_files = given.workdir_files;
    f->opts.allow_unprotected = given.allow_unprotected;
    f->opts.timing_iters = given.timing_iters;
    f->opts.timing_warmup = given.timing_warmup;
    f->opts.timing_round_ms = given.timing_round_ms;
    f->opts.timing_rounds = given.timing_rounds;
    f->opts.timing_max_rounds = given.timing_max_rounds < given.timing_rounds ? given.timing_rounds
                                                                              : given.timing_max_rounds;
    f->opts.timing_cv_threshold = given.timing_cv_threshold;
    f->opts.timing_agree = given.timing_agree;
    f->opts.reference_mode = given.reference_mode;
    f->opts.profile = given.profile;
    /* The reference's times: where the caller named a folder, there; "off", nowhere; otherwise the command's
     * default: bench and serve time a task's reference once per process (the samples of an RL group share the
     * task), in a private folder made here and removed at the end (nothing outlives the process to go stale:
     * another driver, clocks or load on the next run). */
    const char *rc_dir = f->reference_cache && strcmp(f->reference_cache, "off") ? f->reference_cache : NULL;
    if (!f->reference_cache && f->reference_cache_private && strcmp(f->device_resolved, "cpu")) {
        int trc = kg_temp_dir("kgym-refcache", &f->reference_cache_tmp, err);
        if (trc != KG_OK) {
            char why[sizeof err->message];
            snprintf(why, sizeof why, "%s", err->message);
            return kg_error_set(err, trc, "the reference-time cache: %s (--reference-cache DIR names another "
                                "folder, --reference-cache off runs without)", why);
        }
        rc_dir = f->reference_cache_tmp;
    }
    if (rc_dir) {
        int crc = kg_refcache_open(rc_dir, &f->opts.refcache, err);
        if (crc != KG_OK)
            return crc;
    }
    f->opts.limits.total_timeout_s = given.limits.total_timeout_s;
    f->opts.limits.output_limit_bytes = given.limits.output_limit_bytes;
    f->opts.limits.runner_memory_bytes = given.limits.runner_memory_bytes;
    if (given.limits.address_space_bytes != def_cpu.limits.address_space_bytes)
        f->opts.limits.address_space_bytes = given.limits.address_space_bytes;
    /* The policy: the file named, else the repository's default beside the harness; C reads it (and
     * checks it is a JSON object) so that users can tighten or relax it without touching the harness. */
    kg_buf ppath = {0};
    if ((f->policy_path ? kg_buf_puts(&ppath, f->policy_path)
                        : kg_buf_printf(&ppath, "%s/../policy/default.json", f->harness_resolved)) != KG_OK) {
        kg_buf_free(&ppath);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    if (f->policy_path || kg_file_exists(ppath.data)) {
        size_t plen = 0;
        int prc = kg_file_read(ppath.data, 4u << 20, &f->policy_text, &plen, err);
        if (prc == KG_OK) {
            json_error_t jerr;
            json_t *pj = json_loads(f->policy_text, 0, &jerr);
            if (!json_is_object(pj)) {
                prc = kg_error_set(err, KG_ERR_INVALID, "policy %s is not a JSON object (line %d: %s)", ppath.data,
                                   jerr.line, jerr.text);
                json_decref(pj);
            } else {
                f->policy = pj; /* parsed once for the process: every evaluation reads this (opts.policy) */
                f->opts.policy = pj;
            }
        }
        if (prc != KG_OK) {
            kg_buf_free(&ppath);
            return prc;
        }
        f->opts.policy_json = f->policy_text;
    }
    kg_buf_free(&ppath);
    const char *key;
    json_t *v;
    json_object_foreach(f->stage_timeouts, key, v) {
        int idx = kg_eval_stage_index(key);
        if (idx >= 0)
            f->opts.stage_timeout_s[idx] = json_number_value(v);
        else if (!strcmp(key, "outside"))
            f->opts.limits.outside_stages_s = json_number_value(v);
    }
    return KG_OK;
}

int kg_cli_claim_order(const char *order, int *fifo)
{
    if (!strcmp(order, "task"))
        *fifo = 0;
    else if (!strcmp(order, "fifo"))
        *fifo = 1;
    else
        return -1;
    return 0;
}
