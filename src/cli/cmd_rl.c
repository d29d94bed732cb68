/* cmd_rl.c — the RL subcommands: reward, advantages, metrics, curriculum and
 * rejection.  Each reads JSONL (a file or stdin), calls the C API of
 * include/kgym/rl.h and writes JSONL or a table; usage and the field names
 * read are in docs/rl.md.  Exit status: 0 done, 2 bad arguments, 1 bad input
 * data or an I/O failure (the message names the line). */
#include "cli/commands.h"
#include "kgym/rl.h"
#include "rl/rl_jsonl.h"
#include "util/json.h"
#include "util/util.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SETS 32

/* ------------------------------------------------------------- helpers */

static const struct {
    const char *cmd, *text;
} help_texts[] = {
    {"reward", "usage: kgym reward --fn drkernel|staged|tritonrl|speedup [--set NAME=VALUE]... "
               "[FILE]\n"
               "  Adds \"reward\" to each evaluation result / trajectory record (JSONL).\n"
               "  NAME: correct_weight speed_weight speedup_cap speedup_lower_bound\n"
               "        coverage_weight failure_reward hack_penalty timeout_penalty "
               "regression_penalty\n"},
    {"advantages", "usage: kgym advantages --estimator grpo|rloo|trloo [--gamma G] "
                   "[--std-normalize]\n"
                   "                       [--std-eps E] [--singleton return|zero]\n"
                   "                       [--masked-reward zero|keep] [--rejected baseline|drop]\n"
                   "                       [--small-std one|keep]\n"
                   "                       [--fn NAME [--set NAME=VALUE]...] [FILE]\n"
                   "  Adds \"return\" and \"advantage\" to each trajectory record (JSONL).\n"
                   "  Defaults are Dr. Kernel's: a group of one gets A = G (--singleton), a\n"
                   "  turn with \"mask\": 0 has its reward zeroed before returns\n"
                   "  (--masked-reward), a record with \"keep\": false gets A = 0 but stays in\n"
                   "  its group's baseline (--rejected), and --std-normalize replaces a std\n"
                   "  below --std-eps by 1 (--small-std).\n"},
    {"rejection", "usage: kgym rejection --method prs [--mode turn|geometric] [--seed N]\n"
                  "                      [--threshold 0.3] [--factor 0.1] [--speedup-threshold S]\n"
                  "                      [--coverage time|kernels] [FILE]\n"
                  "       kgym rejection --method mrs [--mode token|turn|turn_geo|sequence|"
                  "geometric]\n"
                  "                      [--delta 0.001] [--veto 1e-4]\n"
                  "                      [--is-cap C [--is-level token|turn|sequence]] [FILE]\n"
                  "       kgym rejection --method group [--by turn|prompt] [--min-std 1e-3]\n"
                  "                      [--min-group-size N] [FILE]\n"
                  "  Adds \"keep\" to each record (a record that already has \"keep\": false\n"
                  "  stays rejected); statistics go to stderr.  prs: coverage-based, per turn\n"
                  "  or on the trajectory's geometric mean; --coverage kernels judges on\n"
                  "  profile.kernel_coverage (share of distinct kernels) instead of the time\n"
                  "  share.  mrs: trainer/rollout mismatch (default mode geometric; \"mask\": 0\n"
                  "  turns are left out of it).  group:\n"
                  "  drops (prompt, turn) groups, or with --by prompt whole prompts judged on\n"
                  "  each trajectory's last-turn reward, whose reward std (N-1) is below\n"
                  "  --min-std or that have fewer than --min-group-size records.\n"},
    {"metrics", "usage: kgym metrics [--format table|json] [--thresholds 1,1.2,1.5,2,3]\n"
                "                    [--plot FILE.svg] [FILE]\n"
                "  Compile/correct/hack rates, Fast@p and geomean speedup per turn and\n"
                "  best-of-turns.\n"},
    {"curriculum", "usage: kgym curriculum [--state FILE] [--config FILE] [--seed N]\n"
                   "                       [--record FILE|-] [--sample N [--tasks FILE]]\n"
                   "  Records outcomes, then prints the level shares or N sampled levels/tasks;\n"
                   "  --state is loaded if present and saved back.  Each --record is one\n"
                   "  training step.  Default rule (Beyond TritonRL's): level 2 starts at 0.1\n"
                   "  and gains \"step\" 0.05 per step while the mean of level 1's last\n"
                   "  \"step_window\" 5 step accuracies (once \"min_steps\" 5 exist) is at\n"
                   "  least \"target\" 0.4, up to \"end\" 0.5.  --config JSON: {\"rule\":\n"
                   "  \"step\"|\"linear\", \"step\", \"step_window\", \"min_steps\", \"window\",\n"
                   "  \"levels\": [{\"start\", \"end\", \"target\"}, ...]}; linear: start +\n"
                   "  (end - start)·min(acc/target, 1) over the last \"window\" outcomes.\n"},
};

/* --help / -h anywhere: the usage on stdout and exit 0. */
static int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

static int print_help(const char *cmd)
{
    for (size_t i = 0; i < sizeof help_texts / sizeof help_texts[0]; i++)
        if (strcmp(help_texts[i].cmd, cmd) == 0)
            fputs(help_texts[i].text, stdout);
    puts("  Input fields, formulas and defaults: docs/rl.md.");
    return 0;
}

static int usage(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, "kgym %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(kgym %s --help; docs/rl.md)\n", cmd);
    return 2;
}

static int fail(const char *cmd, const kg_error *err)
{
    fprintf(stderr, "kgym %s: %s\n", cmd, err->message);
    return 1;
}

/* The next option of argv, read by getopt_long over the command's table as the other commands read theirs
 * (long options only: "--name value" or "--name=value"; has_arg says which take a value).  Returns 1 with *name
 * and *value (NULL for a flag) set, 0 when the options are over (getopt_long has moved the positional arguments to
 * argv[optind..]), or 2, the usage status, after saying what was wrong. */
static int next_option(const char *cmd, int argc, char **argv, const struct option *opts, const char **name,
                       const char **value)
{
    int idx = -1;
    int c = getopt_long(argc, argv, ":", opts, &idx);
    if (c == -1)
        return 0;
    const char *arg = argv[optind - 1];
    if (c == ':')
        return usage(cmd, "option %s needs a value", arg);
    if (c != 0 || idx < 0) {
        if (strncmp(arg, "--", 2) != 0) {
            char shown[3] = {'-', (char)optopt, '\0'};
            return usage(cmd, "unknown option %s", optopt > ' ' && optopt < 127 ? shown : arg);
        }
        /* A flag given a value ("--std-normalize=1") is refused as well: name it so. */
        const char *eq = strchr(arg, '=');
        for (const struct option *o = opts; eq && o->name; o++)
            if (o->has_arg == no_argument && strlen(o->name) == (size_t)(eq - arg - 2) &&
                !strncmp(o->name, arg + 2, (size_t)(eq - arg - 2)))
                return usage(cmd, "option %s takes no value", arg);
        return usage(cmd, "unknown option %s", arg);
    }
    *name = opts[idx].name;
    *value = optarg;
    return 1;
}

/* Starts reading a command's options (getopt_long keeps its place in globals). */
static void options_begin(void)
{
    optind = 1;
    opterr = 0;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (*s == '-')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || errno)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static int read_rows(const char *cmd, const char *path, kg_rl_rows *rows)
{
    kg_error err;
    FILE *in = stdin;
    const char *source = "stdin";
    if (path && strcmp(path, "-") != 0) {
        in = fopen(path, "re");
        if (!in) {
            fprintf(stderr, "kgym %s: cannot open %s: %s\n", cmd, path, strerror(errno));
            return 1;
        }
        source = path;
    }
    int rc = kg_rl_rows_read(in, source, rows, &err);
    if (in != stdin)
        fclose(in);
    return rc ? fail(cmd, &err) : 0;
}

static int row_fail(const char *cmd, const kg_rl_row *row, const char *what)
{
    char where[256];
    kg_rl_row_describe(row, where, sizeof where);
    fprintf(stderr, "kgym %s: %s: %s\n", cmd, where, what);
    return 1;
}

/* --set NAME=VALUE, applied after --fn chose the defaults. */
static int apply_sets(const char *cmd, kg_reward_config *cfg, const char **sets, int n_sets)
{
    for (int s = 0; s < n_sets; s++) {
        char name[64];
        const char *eq = strchr(sets[s], '=');
        double v;
        if (!eq || (size_t)(eq - sets[s]) >= sizeof name || parse_double(eq + 1, &v))
            return usage(cmd, "--set wants NAME=NUMBER, not \"%s\"", sets[s]);
        memcpy(name, sets[s], (size_t)(eq - sets[s]));
        name[eq - sets[s]] = '\0';
        kg_error err;
        if (kg_reward_config_set(cfg, name, v, &err)) {
            fprintf(stderr, "kgym %s: %s\n", cmd, err.message);
            return 2;
        }
    }
    return 0;
}

/* Rewards of every row from its evaluation result, each row checked on its
 * own first so that an error names its line. */
static int compute_rewards(const char *cmd, const kg_rl_rows *rows, const kg_reward_config *cfg,
                           const int64_t *traj, double *reward)
{
    kg_rl_outcomes t;
    kg_error err;
    if (kg_rl_rows_outcomes(rows, &t, &err))
        return fail(cmd, &err);
    int rc = 0;
    for (size_t i = 0; i < rows->n && !rc; i++) {
        kg_eval_outcome o;
        double r;
        kg_outcome_columns_get(&t.cols, i, &o, NULL);
        if (kg_reward_compute(cfg, &o, NULL, &r, &err))
            rc = row_fail(cmd, &rows->rows[i], err.message);
    }
    int32_t *turn = rc ? NULL : malloc((rows->n ? rows->n : 1) * sizeof *turn);
    if (!rc && !turn)
        rc = fail(cmd, &(kg_error){KG_ERR_NOMEM, "out of memory"});
    for (size_t i = 0; !rc && i < rows->n; i++)
        turn[i] = rows->rows[i].turn;
    if (!rc && kg_reward_batch(cfg, &t.cols, traj, turn, reward, &err))
        rc = fail(cmd, &err);
    free(turn);
    kg_rl_outcomes_free(&t);
    return rc;
}

/* rec[key] = value, checked (util/json.h): when it fails rec is dropped and
 * NULL returned, which emit() reports as out of memory. */
static json_t *with(json_t *rec, const char *key, json_t *value)
{
    if (kg_json_set(rec, key, value) != 0) {
        json_decref(rec);
        return NULL;
    }
    return rec;
}

static int emit(const char *cmd, json_t *rec)
{
    kg_error err;
    int rc = rec ? kg_rl_print_json(stdout, rec, &err)
                 : kg_error_set(&err, KG_ERR_NOMEM, "out of memory");
    return rc ? fail(cmd, &err) : 0;
}

/* -------------------------------------------------------------- reward */

int kg_cli_reward(int argc, char **argv)
{
    const char *cmd = "reward", *fn_name = NULL, *path = NULL, *sets[MAX_SETS];
    if (wants_help(argc, argv))
        return print_help(cmd);
    static const struct option opts[] = {{"fn", required_argument, NULL, 0}, {"set", required_argument, NULL, 0},
                                         {NULL, 0, NULL, 0}};
    int n_sets = 0, kind;
    const char *name, *value;
    options_begin();
    while ((kind = next_option(cmd, argc, argv, opts, &name, &value)) == 1) {
        if (strcmp(name, "fn") == 0)
            fn_name = value;
        else if (strcmp(name, "set") == 0 && n_sets < MAX_SETS)
            sets[n_sets++] = value;
        else
            return usage(cmd, "too many %s", "--set");
    }
    if (kind)
        return kind;
    if (optind < argc)
        path = argv[optind];
    if (optind + 1 < argc)
        return usage(cmd, "unexpected argument %s", argv[optind + 1]);
    if (!fn_name)
        return usage(cmd, "%s", "--fn drkernel|staged|tritonrl|speedup is required");
    kg_reward_config cfg;
    kg_reward_fn fn;
    kg_error err;
    if (kg_reward_fn_parse(fn_name, &fn, &err))
        return usage(cmd, "%s", err.message);
    kg_reward_config_default(&cfg, fn);
    int rc = apply_sets(cmd, &cfg, sets, n_sets);
    if (rc)
        return rc;
    kg_rl_rows rows;
    if (read_rows(cmd, path, &rows))
        return 1;
    size_t n = rows.n ? rows.n : 1;
    int64_t *traj = malloc(n * sizeof *traj);
    double *reward = malloc(n * sizeof *reward);
    if (!traj || !reward)
        rc = fail(cmd, &(kg_error){KG_ERR_NOMEM, "out of memory"});
    if (!rc && kg_rl_rows_ids(&rows, 0, NULL, NULL, traj, &err))
        rc = fail(cmd, &err);
    if (!rc)
        rc = kg_rl_rows_check_turns(&rows, traj, 0, &err) ? fail(cmd, &err) : 0;
    if (!rc)
        rc = compute_rewards(cmd, &rows, &cfg, traj, reward);
    for (size_t i = 0; !rc && i < rows.n; i++) {
        json_t *rec = with(kg_rl_row_record(&rows.rows[i]), "reward", kg_json_number(reward[i]));
        rc = emit(cmd, rec);
        json_decref(rec);
    }
    free(traj);
    free(reward);
    kg_rl_rows_free(&rows);
    return rc;
}

/* ---------------------------------------------------------- advantages */

/* The advantage rules set by name: --singleton, --masked-reward, --rejected,
 * --small-std. */
static int *advantage_rule(kg_advantage_config *cfg, const char *name, kg_rl_option *option)
{
    static const struct {
        const char *flag;
        kg_rl_option option;
    } rules[] = {{"singleton", KG_OPT_SINGLETON}, {"masked-reward", KG_OPT_MASKED_REWARD},
                 {"rejected", KG_OPT_REJECTED}, {"small-std", KG_OPT_SMALL_STD}};
    int *fields[] = {(int *)&cfg->singleton, (int *)&cfg->masked_reward, (int *)&cfg->rejected,
                     (int *)&cfg->small_std};
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        if (strcmp(name, rules[i].flag) == 0) {
            *option = rules[i].option;
            return fields[i];
        }
    }
    return NULL;
}

int kg_cli_advantages(int argc, char **argv)
{
    const char *cmd = "advantages", *est_name = NULL, *fn_name = NULL, *path = NULL,
               *sets[MAX_SETS];
    if (wants_help(argc, argv))
        return print_help(cmd);
    int n_sets = 0;
    kg_advantage_config cfg;
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_TRLOO);
    static const struct option opts[] = {
        {"estimator", required_argument, NULL, 0}, {"gamma", required_argument, NULL, 0},
        {"std-eps", required_argument, NULL, 0},   {"std-normalize", no_argument, NULL, 0},
        {"singleton", required_argument, NULL, 0}, {"masked-reward", required_argument, NULL, 0},
        {"rejected", required_argument, NULL, 0},  {"small-std", required_argument, NULL, 0},
        {"fn", required_argument, NULL, 0},        {"set", required_argument, NULL, 0},
        {NULL, 0, NULL, 0}};
    int kind;
    const char *name, *value;
    options_begin();
    while ((kind = next_option(cmd, argc, argv, opts, &name, &value)) == 1) {
        int *rule;
        kg_rl_option option;
        if (strcmp(name, "estimator") == 0) {
            est_name = value;
        } else if (strcmp(name, "gamma") == 0) {
            if (parse_double(value, &cfg.gamma))
                return usage(cmd, "--gamma wants a number, not %s", value);
        } else if (strcmp(name, "std-eps") == 0) {
            if (parse_double(value, &cfg.std_eps))
                return usage(cmd, "--std-eps wants a number, not %s", value);
        } else if (strcmp(name, "std-normalize") == 0) {
            cfg.normalize_std = 1;
        } else if ((rule = advantage_rule(&cfg, name, &option)) != NULL) {
            kg_error perr;
            if (kg_rl_option_parse(option, value, rule, &perr))
                return usage(cmd, "%s (--singleton, --masked-reward, --rejected, --small-std)",
                             perr.message);
        } else if (strcmp(name, "fn") == 0) {
            fn_name = value;
        } else if (strcmp(name, "set") == 0 && n_sets < MAX_SETS) {
            sets[n_sets++] = value;
        } else {
            return usage(cmd, "too many %s", "--set");
        }
    }
    if (kind)
        return kind;
    if (optind < argc)
        path = argv[optind];
    if (optind + 1 < argc)
        return usage(cmd, "unexpected argument %s", argv[optind + 1]);
    kg_error err;
    if (!est_name)
        return usage(cmd, "%s", "--estimator grpo|rloo|trloo is required");
    if (kg_estimator_parse(est_name, &cfg.estimator, &err))
        return usage(cmd, "%s", err.message);
    if (cfg.normalize_std && cfg.estimator != KG_ESTIMATOR_GRPO)
        return usage(cmd, "%s", "--std-normalize applies to --estimator grpo only");
    kg_reward_config rcfg;
    if (fn_name) {
        kg_reward_fn fn;
        if (kg_reward_fn_parse(fn_name, &fn, &err))
            return usage(cmd, "%s", err.message);
        kg_reward_config_default(&rcfg, fn);
        int rc = apply_sets(cmd, &rcfg, sets, n_sets);
        if (rc)
            return rc;
    } else if (n_sets) {
        return usage(cmd, "%s", "--set needs --fn");
    }

    kg_rl_rows rows;
    if (read_rows(cmd, path, &rows))
        return 1;
    size_t n = rows.n ? rows.n : 1;
    int64_t *prompt = malloc(n * sizeof *prompt), *sample = malloc(n * sizeof *sample),
            *traj = malloc(n * sizeof *traj);
    int32_t *turn = malloc(n * sizeof *turn);
    uint8_t *mask = malloc(n), *keep = malloc(n);
    double *reward = malloc(n * sizeof *reward), *adv = malloc(n * sizeof *adv),
           *ret = malloc(n * sizeof *ret);
    int rc = 0;
    if (!prompt || !sample || !traj || !turn || !mask || !keep || !reward || !adv || !ret)
        rc = fail(cmd, &(kg_error){KG_ERR_NOMEM, "out of memory"});
    if (!rc && kg_rl_rows_ids(&rows, 1, prompt, sample, traj, &err))
        rc = fail(cmd, &err);
    if (!rc)
        rc = kg_rl_rows_check_turns(&rows, traj, cfg.estimator == KG_ESTIMATOR_RLOO, &err)
                 ? fail(cmd, &err)
                 : 0;
    if (!rc && fn_name)
        rc = compute_rewards(cmd, &rows, &rcfg, traj, reward);
    for (size_t i = 0; !rc && i < rows.n; i++) {
        const kg_rl_row *row = &rows.rows[i];
        turn[i] = row->turn;
        mask[i] = (uint8_t)row->mask;
        keep[i] = (uint8_t)row->keep;
        if (fn_name)
            continue;
        if (row->bare_result)
            rc = row_fail(cmd, row, "an evaluation result carries the evaluator's staged "
                                    "credit, not an RL reward: pass --fn NAME (e.g. --fn "
                                    "staged) to compute the reward");
        else if (!row->has_reward)
            rc = row_fail(cmd, row, "no \"reward\" (add it with `kgym reward --fn NAME`, or "
                                    "pass --fn NAME)");
        else
            reward[i] = row->reward;
    }
    if (!rc && kg_advantages(&cfg, rows.n, prompt, sample, turn, reward, mask, keep, adv, ret,
                               &err))
        rc = fail(cmd, &err);
    for (size_t i = 0; !rc && i < rows.n; i++) {
        json_t *rec = kg_rl_row_record(&rows.rows[i]);
        if (fn_name)
            rec = with(rec, "reward", kg_json_number(reward[i]));
        rec = with(rec, "return", kg_json_number(ret[i]));
        rec = with(rec, "advantage", kg_json_number(adv[i]));
        rc = emit(cmd, rec);
        json_decref(rec);
    }
    free(prompt); free(sample); free(traj); free(turn); free(mask); free(keep);
    free(reward); free(adv); free(ret);
    kg_rl_rows_free(&rows);
    return rc;
}

/* ------------------------------------------------------------- metrics */

static int parse_thresholds(const char *list, double *out, size_t *n)
{
    *n = 0;
    char buf[512];
    if (strlen(list) >= sizeof buf)
        return -1;
    strcpy(buf, list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (*n == KG_METRICS_MAX_THRESHOLDS || parse_double(tok, &out[*n]))
            return -1;
        (*n)++;
    }
    return *n ? 0 : -1;
}

static int write_file(const char *cmd, const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "kgym %s: cannot write %s: %s\n", cmd, path, strerror(errno));
        return 1;
    }
    return 0;
}

int kg_cli_metrics(int argc, char **argv)
{
    const char *cmd = "metrics", *path = NULL, *plot = NULL, *format = "table";
    if (wants_help(argc, argv))
        return print_help(cmd);
    double thresholds[KG_METRICS_MAX_THRESHOLDS];
    size_t n_thresholds = 0;
    static const struct option opts[] = {{"format", required_argument, NULL, 0},
                                         {"thresholds", required_argument, NULL, 0},
                                         {"plot", required_argument, NULL, 0},
                                         {NULL, 0, NULL, 0}};
    int kind;
    const char *name, *value;
    options_begin();
    while ((kind = next_option(cmd, argc, argv, opts, &name, &value)) == 1) {
        if (strcmp(name, "format") == 0) {
            if (strcmp(value, "table") != 0 && strcmp(value, "json") != 0)
                return usage(cmd, "--format wants table or json, not %s", value);
            format = value;
        } else if (strcmp(name, "thresholds") == 0) {
            if (parse_thresholds(value, thresholds, &n_thresholds))
                return usage(cmd, "--thresholds wants up to 16 numbers like 1,1.2,2, not %s",
                             value);
        } else {
            plot = value; /* "plot" */
        }
    }
    if (kind)
        return kind;
    if (optind < argc)
        path = argv[optind];
    if (optind + 1 < argc)
        return usage(cmd, "unexpected argument %s", argv[optind + 1]);
    kg_rl_rows rows;
    if (read_rows(cmd, path, &rows))
        return 1;
    size_t n = rows.n ? rows.n : 1;
    int64_t *traj = malloc(n * sizeof *traj);
    int32_t *turn = malloc(n * sizeof *turn);
    kg_rl_outcomes t;
    memset(&t, 0, sizeof t);
    kg_metrics_report report;
    memset(&report, 0, sizeof report);
    kg_error err;
    int rc = 0;
    if (!traj || !turn)
        rc = fail(cmd, &(kg_error){KG_ERR_NOMEM, "out of memory"});
    if (!rc && kg_rl_rows_ids(&rows, 0, NULL, NULL, traj, &err))
        rc = fail(cmd, &err);
    if (!rc)
        rc = kg_rl_rows_check_turns(&rows, traj, 0, &err) ? fail(cmd, &err) : 0;
    if (!rc && kg_rl_rows_outcomes(&rows, &t, &err))
        rc = fail(cmd, &err);
    for (size_t i = 0; !rc && i < rows.n; i++) {
        turn[i] = rows.rows[i].turn;
        if (!isnan(t.speedup[i]) && !(t.speedup[i] > 0))
            rc = row_fail(cmd, &rows.rows[i], "timing.speedup must be > 0");
    }
    if (!rc && kg_metrics_compute(&t.cols, traj, turn, n_thresholds ? thresholds : NULL,
                                  n_thresholds, &report, &err))
        rc = fail(cmd, &err);
    char *text = NULL;
    if (!rc && (strcmp(format, "json") == 0 ? kg_metrics_json(&report, &text, &err)
                                            : kg_metrics_table(&report, &text, &err)))
        rc = fail(cmd, &err);
    if (!rc)
        printf("%s\n", text);
    free(text);
    text = NULL;
    if (!rc && plot) {
        if (kg_metrics_svg(&report, &text, &err))
            rc = fail(cmd, &err);
        else
            rc = write_file(cmd, plot, text);
    }
    free(text);
    kg_metrics_report_free(&report);
    kg_rl_outcomes_free(&t);
    free(traj);
    free(turn);
    kg_rl_rows_free(&rows);
    return rc;
}

/* ----------------------------------------------------------- rejection */

/* Acceptance statistics: one JSON line on stderr, apart from the records. */
static void print_stats(json_t *stats)
{
    if (stats)
        kg_rl_print_json(stderr, stats, NULL);
    json_decref(stats);
}

static int run_prs(const char *cmd, const kg_rl_rows *rows, const kg_prs_config *cfg,
                   uint64_t seed, int kernel_coverage)
{
    kg_rl_outcomes t;
    kg_error err;
    if (kg_rl_rows_outcomes(rows, &t, &err))
        return fail(cmd, &err);
    /* Dr. Kernel's COVERAGE_RS_KEY=num_coverage: the share of the distinct
     * kernels instead of the share of device time */
    for (size_t i = 0; kernel_coverage && i < rows->n; i++)
        t.coverage[i] = kg_rl_row_result_number(&rows->rows[i], "profile", "kernel_coverage");
    size_t n = rows->n ? rows->n : 1;
    uint8_t *keep = malloc(n), *live = malloc(n);
    int64_t *traj = malloc(n * sizeof *traj);
    double *prob = malloc(n * sizeof *prob);
    int rc = 0;
    if (!keep || !live || !traj || !prob)
        rc = fail(cmd, &(kg_error){KG_ERR_NOMEM, "out of memory"});
    if (!rc && kg_rl_rows_ids(rows, 0, NULL, NULL, traj, &err))
        rc = fail(cmd, &err);
    /* the geometric mean runs over turns still in the loss */
    for (size_t i = 0; !rc && i < rows->n; i++)
        live[i] = (uint8_t)(rows->rows[i].mask && rows->rows[i].keep);
    for (size_t i = 0; !rc && i < rows->n; i++) {
        kg_eval_outcome o;
        double p;
        kg_outcome_columns_get(&t.cols, i, &o, NULL);
        if (kg_prs_keep_probability(cfg, &o, &p, &err))
            rc = row_fail(cmd, &rows->rows[i], err.message);
    }
    kg_rng rng;
    kg_rng_seed(&rng, seed);
    kg_prs_stats st;
    if (!rc && kg_prs_sample(cfg, &rng, &t.cols, traj, live, keep, prob, &st, &err))
        rc = fail(cmd, &err);
    for (size_t i = 0; !rc && i < rows->n; i++) {
        json_t *rec = with(kg_rl_row_record(&rows->rows[i]), "keep", json_boolean(rows->rows[i].keep && keep[i]));
        rec = with(rec, "keep_probability", kg_json_number(prob[i]));
        rc = emit(cmd, rec);
        json_decref(rec);
    }
    if (!rc) {
        json_t *stats = json_pack("{s:s, s:s, s:I, s:I, s:o, s:I, s:I, s:o, s:f}", "method", "prs",
                                  "mode", kg_rl_option_name(KG_OPT_PRS_MODE, (int)cfg->mode),
                                  "total", (json_int_t)st.total, "kept", (json_int_t)st.kept,
                                  "acceptance_rate", kg_json_number(st.acceptance_rate),
                                  "correct", (json_int_t)st.correct, "correct_kept",
                                  (json_int_t)st.correct_kept, "correct_acceptance_rate",
                                  kg_json_number(st.correct_acceptance_rate),
                                  "expected_correct_kept", st.expected_correct_kept);
        print_stats(stats);
    }
    free(keep);
    free(live);
    free(traj);
    free(prob);
    kg_rl_outcomes_free(&t);
    return rc;
}

static int run_mrs(const char *cmd, const kg_rl_rows *rows, const kg_mrs_config *cfg,
                   double is_cap, kg_is_level level)
{
    size_t n = rows->n ? rows->n : 1;
    int64_t *traj = malloc(n * sizeof *traj), *offsets = malloc((n + 1) * sizeof *offsets);
    uint8_t *keep = malloc(n), *mask = malloc(n), *token_keep = NULL;
    double *ratio = malloc(n * sizeof *ratio), *flat = NULL, *weights = NULL;
    kg_error err;
    kg_mrs_stats st;
    int rc = 0;
    if (!traj || !offsets || !keep || !mask || !ratio)
        rc = fail(cmd, &(kg_error){KG_ERR_NOMEM, "out of memory"});
    if (!rc && kg_rl_rows_ids(rows, 0, NULL, NULL, traj, &err))
        rc = fail(cmd, &err);
    if (!rc && kg_rl_rows_log_ratios(rows, &flat, offsets, &err))
        rc = fail(cmd, &err);
    size_t len = rc ? 0 : (size_t)offsets[rows->n];
    if (!rc && cfg->mode == KG_MRS_TOKEN && !(token_keep = malloc(len ? len : 1)))
        rc = fail(cmd, &(kg_error){KG_ERR_NOMEM, "out of memory"});
    for (size_t i = 0; !rc && i < rows->n; i++)
        mask[i] = (uint8_t)rows->rows[i].mask;
    if (!rc && kg_mrs_filter(cfg, rows->n, traj, offsets, flat, mask, keep, ratio, token_keep,
                             &st, &err))
        rc = fail(cmd, &err);
    if (!rc && is_cap > 0) {
        weights = malloc((len ? len : 1) * sizeof *weights);
        if (!weights)
            rc = fail(cmd, &(kg_error){KG_ERR_NOMEM, "out of memory"});
        else if (kg_truncated_is_weights(is_cap, level, rows->n, traj, offsets, flat, weights,
                                         &err))
            rc = fail(cmd, &err);
    }
    for (size_t i = 0; !rc && i < rows->n; i++) {
        json_t *rec = with(kg_rl_row_record(&rows->rows[i]), "keep", json_boolean(rows->rows[i].keep && keep[i]));
        rec = with(rec, "mismatch_ratio", kg_json_number(ratio[i]));
        if (token_keep) {
            json_t *tk = json_array();
            for (int64_t t = offsets[i]; tk && t < offsets[i + 1]; t++)
                if (kg_json_push(tk, json_boolean(token_keep[t])) != 0) {
                    json_decref(tk);
                    tk = NULL;
                }
            rec = with(rec, "token_keep", tk);
        }
        if (weights) {
            json_t *w = json_array();
            for (int64_t t = offsets[i]; w && t < offsets[i + 1]; t++)
                if (kg_json_push(w, kg_json_number(weights[t])) != 0) {
                    json_decref(w);
                    w = NULL;
                }
            rec = with(rec, "is_weights", w);
        }
        rc = emit(cmd, rec);
        json_decref(rec);
    }
    if (!rc) {
        json_t *stats = json_pack(
            "{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:o}", "method", "mrs", "mode",
            kg_rl_option_name(KG_OPT_MRS_MODE, (int)cfg->mode), "trajectories",
            (json_int_t)st.trajectories, "trajectories_kept", (json_int_t)st.trajectories_kept,
            "turns", (json_int_t)st.turns, "turns_kept", (json_int_t)st.turns_kept,
            "turns_vetoed", (json_int_t)st.turns_vetoed, "acceptance_rate",
            kg_json_number(st.turns ? (double)st.turns_kept / (double)st.turns : NAN));
        print_stats(stats);
    }
    free(traj); free(offsets); free(keep); free(mask); free(token_keep); free(ratio); free(flat);
    free(weights);
    return rc;
}

/* The low-variance group filter over (prompt, turn) groups of records, or
 * (by_prompt) over prompts with one reward per trajectory: its last turn's,
 * as Dr. Kernel does with is_get_last_turn; a trajectory's decision then
 * applies to all its turns. */
static int run_group(const char *cmd, const kg_rl_rows *rows, const kg_group_filter_config *cfg,
                     int by_prompt)
{
    size_t n = rows->n ? rows->n : 1;
    int64_t *prompt = malloc(n * sizeof *prompt), *traj = malloc(n * sizeof *traj),
            *group = malloc(n * sizeof *group);
    size_t *rep = malloc(n * sizeof *rep); /* trajectory -> row of its last turn */
    double *reward = malloc(n * sizeof *reward);
    uint8_t *keep = malloc(n);
    kg_error err;
    int rc = 0;
    size_t m = 0, rejected = 0;
    if (!prompt || !traj || !group || !rep || !reward || !keep)
        rc = fail(cmd, &(kg_error){KG_ERR_NOMEM, "out of memory"});
    if (!rc && kg_rl_rows_ids(rows, 1, prompt, NULL, traj, &err))
        rc = fail(cmd, &err);
    if (!rc && kg_rl_rows_check_turns(rows, traj, 0, &err))
        rc = fail(cmd, &err);
    for (size_t i = 0; !rc && i < rows->n; i++)
        if (!rows->rows[i].has_reward)
            rc = row_fail(cmd, &rows->rows[i], "no \"reward\" (add it with `kgym reward`)");
    for (size_t i = 0; !rc && i < rows->n; i++) {
        const kg_rl_row *row = &rows->rows[i];
        if (!by_prompt) {
            group[m] = prompt[i] * ((int64_t)1 << 32) + ((int64_t)row->turn - INT32_MIN);
            reward[m++] = row->reward;
            continue;
        }
        size_t t = (size_t)traj[i]; /* dense: < rows->n */
        if (t >= m) {
            for (; m <= t; m++)
                rep[m] = SIZE_MAX;
        }
        if (rep[t] == SIZE_MAX || rows->rows[rep[t]].turn < row->turn)
            rep[t] = i;
    }
    for (size_t t = 0; !rc && by_prompt && t < m; t++) {
        group[t] = prompt[rep[t]];
        reward[t] = rows->rows[rep[t]].reward;
    }
    if (!rc && kg_group_filter(cfg, m, group, reward, keep, &rejected, &err))
        rc = fail(cmd, &err);
    for (size_t i = 0; !rc && i < rows->n; i++) {
        int k = by_prompt ? keep[traj[i]] : keep[i];
        json_t *rec = with(kg_rl_row_record(&rows->rows[i]), "keep", json_boolean(rows->rows[i].keep && k));
        rc = emit(cmd, rec);
        json_decref(rec);
    }
    if (!rc)
        print_stats(json_pack("{s:s, s:I}", "method", "group", "groups_rejected",
                              (json_int_t)rejected));
    free(prompt); free(traj); free(group); free(rep); free(reward); free(keep);
    return rc;
}

int kg_cli_rejection(int argc, char **argv)
{
    const char *cmd = "rejection", *method = NULL, *path = NULL, *mode = NULL;
    if (wants_help(argc, argv))
        return print_help(cmd);
    uint64_t seed = 0;
    kg_prs_config prs;
    kg_prs_config_default(&prs);
    kg_mrs_config mrs;
    kg_mrs_config_default(&mrs);
    double is_cap = 0;
    kg_is_level level = KG_IS_TOKEN;
    kg_group_filter_config group;
    kg_group_filter_config_default(&group);
    int by_prompt = 0, kernel_coverage = 0;
    static const struct option opts[] = {
        {"method", required_argument, NULL, 0},   {"seed", required_argument, NULL, 0},
        {"threshold", required_argument, NULL, 0}, {"factor", required_argument, NULL, 0},
        {"speedup-threshold", required_argument, NULL, 0}, {"delta", required_argument, NULL, 0},
        {"veto", required_argument, NULL, 0},     {"is-cap", required_argument, NULL, 0},
        {"is-level", required_argument, NULL, 0}, {"min-std", required_argument, NULL, 0},
        {"min-group-size", required_argument, NULL, 0}, {"by", required_argument, NULL, 0},
        {"mode", required_argument, NULL, 0},     {"coverage", required_argument, NULL, 0},
        {NULL, 0, NULL, 0}};
    int kind;
    const char *name, *value;
    options_begin();
    while ((kind = next_option(cmd, argc, argv, opts, &name, &value)) == 1) {
        double *target = strcmp(name, "threshold") == 0           ? &prs.threshold
                         : strcmp(name, "factor") == 0            ? &prs.factor
                         : strcmp(name, "speedup-threshold") == 0 ? &prs.speedup_threshold
                         : strcmp(name, "delta") == 0             ? &mrs.delta
                         : strcmp(name, "veto") == 0              ? &mrs.veto_threshold
                         : strcmp(name, "is-cap") == 0            ? &is_cap
                         : strcmp(name, "min-std") == 0           ? &group.min_std
                                                                  : NULL;
        kg_error err;
        if (target) {
            if (parse_double(value, target))
                return usage(cmd, "a number is needed, not %s", value);
        } else if (strcmp(name, "method") == 0) {
            method = value;
        } else if (strcmp(name, "seed") == 0) {
            if (parse_u64(value, &seed))
                return usage(cmd, "--seed wants a non-negative integer, not %s", value);
        } else if (strcmp(name, "is-level") == 0) {
            if (kg_is_level_parse(value, &level, &err))
                return usage(cmd, "%s", err.message);
        } else if (strcmp(name, "min-group-size") == 0) {
            uint64_t v;
            if (parse_u64(value, &v) || v > 1000000)
                return usage(cmd, "--min-group-size wants an integer 0..1000000, not %s", value);
            group.min_group_size = (size_t)v;
        } else if (strcmp(name, "by") == 0) {
            if (strcmp(value, "prompt") != 0 && strcmp(value, "turn") != 0)
                return usage(cmd, "--by wants turn or prompt, not %s", value);
            by_prompt = strcmp(value, "prompt") == 0;
        } else if (strcmp(name, "mode") == 0) {
            mode = value;
        } else { /* "coverage" */
            if (strcmp(value, "time") != 0 && strcmp(value, "kernels") != 0)
                return usage(cmd, "--coverage wants time or kernels, not %s", value);
            kernel_coverage = strcmp(value, "kernels") == 0;
        }
    }
    if (kind)
        return kind;
    if (optind < argc)
        path = argv[optind];
    if (optind + 1 < argc)
        return usage(cmd, "unexpected argument %s", argv[optind + 1]);
    if (!method || (strcmp(method, "prs") != 0 && strcmp(method, "mrs") != 0 &&
                    strcmp(method, "group") != 0))
        return usage(cmd, "%s", "--method prs|mrs|group is required");
    if (mode) {
        int v, is_prs = strcmp(method, "prs") == 0;
        kg_error err;
        if (!is_prs && strcmp(method, "mrs") != 0)
            return usage(cmd, "%s", "--mode applies to --method prs and --method mrs");
        if (kg_rl_option_parse(is_prs ? KG_OPT_PRS_MODE : KG_OPT_MRS_MODE, mode, &v, &err))
            return usage(cmd, "--mode: %s", err.message);
        if (is_prs)
            prs.mode = (kg_prs_mode)v;
        else
            mrs.mode = (kg_mrs_mode)v;
    }
    if (is_cap < 0)
        return usage(cmd, "%s", "--is-cap must be > 0");
    if (!(group.min_std >= 0))
        return usage(cmd, "%s", "--min-std must be >= 0");
    kg_rl_rows rows;
    if (read_rows(cmd, path, &rows))
        return 1;
    int rc = strcmp(method, "prs") == 0   ? run_prs(cmd, &rows, &prs, seed, kernel_coverage)
             : strcmp(method, "mrs") == 0 ? run_mrs(cmd, &rows, &mrs, is_cap, level)
                                          : run_group(cmd, &rows, &group, by_prompt);
    kg_rl_rows_free(&rows);
    return rc;
}

/* ---------------------------------------------------------- curriculum */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    int c;
    while (mem && (c = fgetc(f)) != EOF)
        fputc(c, mem);
    fclose(f);
    if (mem)
        fclose(mem);
    return text;
}

static int open_curriculum(const char *cmd, const char *state, const char *config, uint64_t seed,
                           kg_curriculum **out)
{
    kg_error err;
    char *text = state ? slurp(state) : NULL;
    if (text) {
        int rc = kg_curriculum_load(text, out, &err);
        free(text);
        if (rc)
            fprintf(stderr, "kgym %s: %s: %s\n", cmd, state, err.message);
        return rc ? 1 : 0;
    }
    if (state && errno != ENOENT) {
        fprintf(stderr, "kgym %s: cannot read %s: %s\n", cmd, state, strerror(errno));
        return 1;
    }
    kg_curriculum_config cfg;
    kg_curriculum_config_default(&cfg);
    if (config) {
        text = slurp(config);
        if (!text) {
            fprintf(stderr, "kgym %s: cannot read %s: %s\n", cmd, config, strerror(errno));
            return 1;
        }
        int rc = kg_curriculum_config_from_json(text, &cfg, &err);
        free(text);
        if (rc) {
            fprintf(stderr, "kgym %s: %s: %s\n", cmd, config, err.message);
            return 1;
        }
    }
    return kg_curriculum_create(&cfg, seed, out, &err) ? fail(cmd, &err) : 0;
}

static int record_outcomes(const char *cmd, kg_curriculum *cur, const char *path)
{
    kg_rl_rows rows;
    if (read_rows(cmd, path, &rows))
        return 1;
    size_t levels = kg_curriculum_get_config(cur)->n_levels;
    int rc = 0;
    for (size_t i = 0; !rc && i < rows.n; i++) {
        const kg_rl_row *row = &rows.rows[i];
        int level = kg_rl_row_level(row);
        if (level < 1 || (size_t)level > levels) {
            char what[128];
            snprintf(what, sizeof what, "level %d is not 1..%zu (give \"level\", or a task id "
                                        "like \"level1/19\")", level, levels);
            rc = row_fail(cmd, row, what);
            break;
        }
        json_t *correct = json_object_get(row->root, "correct");
        int ok;
        if (json_is_boolean(correct)) {
            ok = json_is_true(correct);
        } else {
            kg_eval_outcome o;
            kg_error err;
            if (kg_rl_row_outcome(row, &o, &err)) {
                rc = fail(cmd, &err);
                break;
            }
            ok = kg_outcome_is_correct(&o);
        }
        kg_curriculum_record(cur, (size_t)level - 1, ok, NULL);
    }
    /* one --record is one training step (the step rule's unit) */
    kg_error err;
    if (!rc && kg_curriculum_end_step(cur, &err))
        rc = fail(cmd, &err);
    kg_rl_rows_free(&rows);
    return rc;
}

/* Task ids by level (1-based) from a JSONL file of {"id", "level"} or
 * {"task": {"id"}} lines; the level falls back to the id's "level<K>". */
static int sample_tasks(const char *cmd, kg_curriculum *cur, size_t count, const char *tasks)
{
    kg_rl_rows rows;
    memset(&rows, 0, sizeof rows);
    if (tasks && read_rows(cmd, tasks, &rows))
        return 1;
    int rc = 0;
    for (size_t i = 0; !rc && i < rows.n; i++) {
        json_t *id = json_object_get(rows.rows[i].root, "id");
        if (json_is_string(id))
            rows.rows[i].prompt = json_string_value(id);
        if (!rows.rows[i].prompt)
            rc = row_fail(cmd, &rows.rows[i], "a task line needs \"id\"");
    }
    for (size_t d = 0; !rc && d < count; d++) {
        size_t level;
        kg_error err;
        if (kg_curriculum_sample_level(cur, &level, &err)) {
            rc = fail(cmd, &err);
            break;
        }
        json_t *out = json_pack("{s:I}", "level", (json_int_t)level + 1);
        if (tasks) {
            size_t matching = 0, pick = 0;
            for (size_t i = 0; i < rows.n; i++)
                matching += (size_t)kg_rl_row_level(&rows.rows[i]) == level + 1;
            if (!matching) {
                fprintf(stderr, "kgym %s: no task of level %zu in %s\n", cmd, level + 1, tasks);
                json_decref(out);
                rc = 1;
                break;
            }
            kg_curriculum_sample_index(cur, matching, &pick, NULL);
            for (size_t i = 0; i < rows.n; i++) {
                if ((size_t)kg_rl_row_level(&rows.rows[i]) == level + 1 && pick-- == 0) {
                    out = with(out, "task", kg_json_text(rows.rows[i].prompt));
                    break;
                }
            }
        }
        rc = emit(cmd, out);
        json_decref(out);
    }
    kg_rl_rows_free(&rows);
    return rc;
}

static int print_summary(const char *cmd, const kg_curriculum *cur)
{
    size_t levels = kg_curriculum_get_config(cur)->n_levels;
    double shares[KG_CURRICULUM_MAX_LEVELS];
    kg_error err;
    if (kg_curriculum_shares(cur, shares, &err))
        return fail(cmd, &err);
    json_t *s = json_array(), *a = json_array(), *o = json_array();
    int ok = s && a && o;
    for (size_t k = 0; ok && k < levels; k++)
        ok = kg_json_push(s, kg_json_number(shares[k])) == 0 &&
             kg_json_push(a, kg_json_number(kg_curriculum_accuracy(cur, k))) == 0 &&
             kg_json_push(o, json_integer((json_int_t)kg_curriculum_observed(cur, k))) == 0;
    if (!ok) {
        json_decref(s);
        json_decref(a);
        json_decref(o);
        return emit(cmd, NULL);
    }
    json_t *root = json_pack("{s:I, s:o, s:o, s:o}", "levels", (json_int_t)levels, "shares", s,
                             "accuracy", a, "observed", o);
    int rc = emit(cmd, root);
    json_decref(root);
    return rc;
}

static int save_state(const char *cmd, const kg_curriculum *cur, const char *path)
{
    char *text = NULL;
    kg_error err;
    if (kg_curriculum_save(cur, &text, &err))
        return fail(cmd, &err);
    /* atomic: a crash never leaves a half-written state file */
    int rc = kg_file_write_atomic(path, text, strlen(text), 0666, &err);
    free(text);
    return rc ? fail(cmd, &err) : 0;
}

int kg_cli_curriculum(int argc, char **argv)
{
    const char *cmd = "curriculum", *state = NULL, *config = NULL, *record = NULL,
               *tasks = NULL;
    if (wants_help(argc, argv))
        return print_help(cmd);
    uint64_t seed = 0, count = 0;
    int sampling = 0;
    static const struct option opts[] = {
        {"state", required_argument, NULL, 0},  {"config", required_argument, NULL, 0},
        {"seed", required_argument, NULL, 0},   {"record", required_argument, NULL, 0},
        {"sample", required_argument, NULL, 0}, {"tasks", required_argument, NULL, 0},
        {NULL, 0, NULL, 0}};
    int kind;
    const char *name, *value;
    options_begin();
    while ((kind = next_option(cmd, argc, argv, opts, &name, &value)) == 1) {
        if (strcmp(name, "state") == 0)
            state = value;
        else if (strcmp(name, "config") == 0)
            config = value;
        else if (strcmp(name, "record") == 0)
            record = value;
        else if (strcmp(name, "tasks") == 0)
            tasks = value;
        else if (strcmp(name, "seed") == 0) {
            if (parse_u64(value, &seed))
                return usage(cmd, "--seed wants a non-negative integer, not %s", value);
        } else { /* "sample" */
            if (parse_u64(value, &count) || count > 100000000)
                return usage(cmd, "--sample wants a count, not %s", value);
            sampling = 1;
        }
    }
    if (kind)
        return kind;
    if (optind < argc)
        return usage(cmd, "unexpected argument %s (outcomes go in --record FILE|-)", argv[optind]);
    if (tasks && !sampling)
        return usage(cmd, "%s", "--tasks needs --sample N");
    kg_curriculum *cur = NULL;
    if (open_curriculum(cmd, state, config, seed, &cur))
        return 1;
    int rc = record ? record_outcomes(cmd, cur, record) : 0;
    if (!rc)
        rc = sampling ? sample_tasks(cmd, cur, (size_t)count, tasks) : print_summary(cmd, cur);
    if (!rc && state)
        rc = save_state(cmd, cur, state);
    kg_curriculum_free(cur);
    return rc;
}
