/*
 * result.c — from a child's report to the result: stages, correctness
 * variants, timing statistics, verdict, reward, process facts and feedback.
 * Every decision kgym makes about a candidate is in this file.
 */
#include "eval/eval.h"
#include "stats/stats.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/internal.h"
#include "util/json.h"
#include "util/util.h"

/* The message of the given type (and stage, and status if given), or NULL. */
static json_t *find_message(const json_t *messages, kg_msg kind, const char *stage,
                            const char *status)
{
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        if (!kg_msg_is(m, kind))
            continue;
        if (stage) {
            const char *s = json_string_value(json_object_get(m, "stage"));
            if (!s || strcmp(s, stage) != 0)
                continue;
        }
        if (status) {
            const char *s = json_string_value(json_object_get(m, "status"));
            if (!s || strcmp(s, status) != 0)
                continue;
        }
        return m;
    }
    return NULL;
}

static double num(const json_t *v, double fallback)
{
    return json_is_number(v) ? json_number_value(v) : fallback;
}

/* Sets o[key] to a new reference to x, borrowed from a message; an absent x leaves the key absent, as the
 * message had it.  0, or -1 when memory ran out (util/json.h). */
static int set_borrowed(json_t *o, const char *key, json_t *x)
{
    return x ? kg_json_set(o, key, json_incref(x)) : 0;
}

/* x, or JSON null when absent, as a new reference. */
static json_t *or_null(json_t *x)
{
    return json_incref(x ? x : json_null());
}

/* Whether a comparison below the floor failed its relative check (compare.variant_tolerance): the judge held
 * the output to a relative tolerance (tolerance.relative_atol is a number) and more than KG_BELOW_FLOOR_SHARE
 * of the elements missed it.  Fails closed: a relative check announced without its count is a miss. */
static int relative_failed(const json_t *msg, const json_t *cmp)
{
    if (!json_is_number(json_object_get(json_object_get(msg, "tolerance"), "relative_atol")))
        return 0;
    const json_t *missed = json_object_get(cmp, "relative_mismatches");
    if (!json_is_number(missed))
        return 1;
    double elements = num(json_object_get(cmp, "elements"), 0);
    return json_number_value(missed) > KG_BELOW_FLOOR_SHARE * (elements > 1 ? elements : 1);
}

/* The small-elements check (judge/compare.py tail_tolerance, docs/evaluation-protocol.md "Small elements"): where
 * the judge announced it (tolerance.tail is an object: the float32 output's small elements lie below atol, where a
 * zero passes), a variant that passes otherwise fails unless the comparison's tail facts report no mismatch.  Fails
 * closed: announced without its facts, with an error instead, or with a count that is not a number.  Returns 1 and
 * writes why when the variant fails here. */
static int tail_failed(const json_t *msg, const json_t *cmp, char *why, size_t why_cap)
{
    const json_t *tol = json_object_get(msg, "tolerance");
    const json_t *announced = json_object_get(tol, "tail");
    if (!json_is_object(announced))
        return 0;
    const json_t *tail = json_object_get(cmp, "tail");
    const json_t *missed = json_object_get(tail, "mismatches");
    if (json_is_number(missed) && json_number_value(missed) == 0)
        return 0;
    const char *err = json_string_value(json_object_get(tail, "error"));
    if (!json_is_number(missed)) {
        snprintf(why, why_cap, "the judge announced its small-elements check (many output elements lie below "
                 "atol) but could not complete it%s%.200s", err ? ": " : "", err ? err : "");
        return 1;
    }
    const json_t *vals = json_object_get(tail, "first_mismatch_values");
    char *idx = json_dumps(json_object_get(tail, "first_mismatch"), JSON_COMPACT | JSON_ENCODE_ANY);
    double nonzero = num(json_object_get(announced, "nonzero"), 0);
    snprintf(why, why_cap,
             "%.0f of %.0f well-conditioned elements are further than %g of their own value from the float64 "
             "reference (max rel error %.3g; first at index %s: exact %.6g, got %.6g); %.0f%% of the output's nonzero "
             "elements lie below atol=%g, where an absolute tolerance alone would accept zero, so each element whose "
             "value the inputs determine to better than %g is held to its own magnitude: small elements of a product "
             "or an exponential must be computed, not left unwritten or cut off",
             json_number_value(missed), num(json_object_get(tail, "checked"), NAN),
             num(json_object_get(announced, "bound"), NAN), num(json_object_get(tail, "max_rel_error"), NAN),
             idx ? idx : "?", num(json_array_get(vals, 0), NAN), num(json_array_get(vals, 1), NAN),
             nonzero > 0 ? 100.0 * num(json_object_get(announced, "tiny"), 0) / nonzero : 0.0,
             num(json_object_get(msg, "atol"), NAN), num(json_object_get(announced, "conditioned"), NAN));
    free(idx);
    return 1;
}

/* A variant's verdict from the comparison facts the child reported; NULL when memory ran out. */
static json_t *variant_result(const json_t *msg, char *why, size_t why_cap)
{
    const char *status = json_string_value(json_object_get(msg, "status"));
    const json_t *cmp = json_object_get(msg, "compare");
    json_t *v = json_object();
    int ok = set_borrowed(v, "name", json_object_get(msg, "name")) == 0;
    ok = ok && set_borrowed(v, "description", json_object_get(msg, "description")) == 0;
    ok = ok && set_borrowed(v, "sizes", json_object_get(msg, "sizes")) == 0;
    why[0] = '\0';
    const char *verdict = "passed";
    if (status && (!strcmp(status, "reference_failed") || !strcmp(status, "skipped"))) {
        /* The reference cannot run these inputs, or the variant cannot keep the task's input structure. */
        verdict = "skipped";
        snprintf(why, why_cap, "%s", json_string_value(json_object_get(msg, "reason"))
                                         ? json_string_value(json_object_get(msg, "reason"))
                                         : "the reference failed on these inputs");
    } else if (status && strcmp(status, "candidate_raised") == 0) {
        verdict = "error";
        const json_t *e = json_object_get(msg, "error");
        snprintf(why, why_cap, "%s: %.300s", json_string_value(json_object_get(e, "type")) ?: "error",
                 json_string_value(json_object_get(e, "message")) ?: "");
    } else if (!json_is_object(cmp)) {
        verdict = "error";
        snprintf(why, why_cap, "no comparison was reported");
    } else {
        const char *cerr = json_string_value(json_object_get(cmp, "error"));
        if (cerr) {
            verdict = "failed";
            snprintf(why, why_cap, "%s", cerr);
        } else if (!json_is_true(json_object_get(cmp, "shape_ok"))) {
            verdict = "failed";
            char *rs = json_dumps(json_object_get(cmp, "reference_shape"), JSON_COMPACT);
            char *cs = json_dumps(json_object_get(cmp, "candidate_shape"), JSON_COMPACT);
            snprintf(why, why_cap, "output shape %s, expected %s", cs ? cs : "?", rs ? rs : "?");
            /* "?" is for a shape not reported; one that could not be written out is memory. */
            ok = ok && (rs || !json_object_get(cmp, "reference_shape")) && (cs || !json_object_get(cmp, "candidate_shape"));
            free(rs);
            free(cs);
        } else if (!json_is_true(json_object_get(cmp, "dtype_ok"))) {
            verdict = "failed";
            snprintf(why, why_cap, "output dtype %s, expected %s",
                     json_string_value(json_object_get(cmp, "candidate_dtype")) ?: "?",
                     json_string_value(json_object_get(cmp, "reference_dtype")) ?: "?");
        } else if ((num(json_object_get(cmp, "mismatches"), 1) > 0 || relative_failed(msg, cmp)) &&
                   json_is_number(json_object_get(json_object_get(msg, "fp64"), "mismatches")) &&
                   num(json_object_get(json_object_get(msg, "fp64"), "mismatches"), 1) == 0) {
            /* A near miss of the float32 reference (or, below the floor, a relative miss), but the candidate is
             * as close to the exact (float64) result as the reference itself: both differ only in rounding. */
            const json_t *f = json_object_get(msg, "fp64");
            snprintf(why, why_cap,
                     "passed against a float64 reference: candidate error %.3g, the float32 reference's own "
                     "error %.3g (%.0f elements differed from the float32 reference)",
                     num(json_object_get(f, "candidate_error"), NAN), num(json_object_get(f, "reference_error"), NAN),
                     fmax(num(json_object_get(cmp, "mismatches"), 0),
                          num(json_object_get(cmp, "relative_mismatches"), 0)));
            ok = ok && kg_json_set(v, "adjudicated", json_string("fp64")) == 0;
        } else if (num(json_object_get(cmp, "mismatches"), 1) > 0) {
            verdict = "failed";
            char *idx = json_dumps(json_object_get(cmp, "first_mismatch"), JSON_COMPACT | JSON_ENCODE_ANY);
            const json_t *vals = json_object_get(cmp, "first_mismatch_values");
            snprintf(why, why_cap,
                     "%.0f of %.0f elements differ beyond atol=%g rtol=%g; max abs error %.4g, max rel "
                     "error %.4g; first at index %s (expected %.6g, got %.6g)",
                     num(json_object_get(cmp, "mismatches"), 0), num(json_object_get(cmp, "elements"), 0),
                     num(json_object_get(msg, "atol"), 0), num(json_object_get(msg, "rtol"), 0),
                     num(json_object_get(cmp, "max_abs_error"), NAN),
                     num(json_object_get(cmp, "max_rel_error"), NAN), idx ? idx : "?",
                     num(json_array_get(vals, 0), NAN), num(json_array_get(vals, 1), NAN));
            ok = ok && (idx || !json_object_get(cmp, "first_mismatch"));
            free(idx);
        } else if (relative_failed(msg, cmp)) {
            verdict = "failed";
            const json_t *tol = json_object_get(msg, "tolerance");
            double elements = num(json_object_get(cmp, "elements"), 0),
                   missed = num(json_object_get(cmp, "relative_mismatches"), elements);
            snprintf(why, why_cap,
                     "%.0f of %.0f elements (%.1f%%) miss the reference by more than rtol=%g of their own value "
                     "(max rel error %.4g): the reference output is below the absolute floor (its RMS %.3g, "
                     "atol %g), where atol alone would accept them, so at most %.0f%% may; an approximation "
                     "(a sampled or truncated reduction, a cheaper formula) fails at any output scale",
                     missed, elements, elements > 0 ? 100.0 * missed / elements : 100.0,
                     num(json_object_get(msg, "rtol"), 0), num(json_object_get(cmp, "max_rel_error"), NAN),
                     num(json_object_get(tol, "scale"), NAN), num(json_object_get(msg, "atol"), NAN),
                     100.0 * KG_BELOW_FLOOR_SHARE);
        }
        /* A miss the float64 adjudication looked at and did not clear: how far each float32 output is from the
         * exact result tells a kernel whose arithmetic is less accurate than the reference's (a float32 sum of
         * 1.9G terms by atomics: 1.8e-3 off, the reference 1e-7: the honest probe's a_l1_37 on an H200) from one
         * that computes something else, which the reason alone does not. */
        const json_t *f64 = json_object_get(msg, "fp64");
        if (!strcmp(verdict, "failed") && json_is_number(json_object_get(f64, "candidate_error")) &&
            json_is_number(json_object_get(f64, "reference_error"))) {
            size_t n = strlen(why);
            if (n + 1 < why_cap)
                snprintf(why + n, why_cap - n,
                         "; against a float64 run of the reference your largest error is %.3g, the float32 "
                         "reference's own %.3g",
                         num(json_object_get(f64, "candidate_error"), NAN),
                         num(json_object_get(f64, "reference_error"), NAN));
        }
        /* Last: a variant that passes everything above (float64 adjudication included) may still leave small
         * elements of a heavy-tailed output unwritten. */
        if (!strcmp(verdict, "passed") && tail_failed(msg, cmp, why, why_cap))
            verdict = "failed";
    }
    ok = ok && kg_json_set(v, "status", json_string(verdict)) == 0;
    if (json_is_object(cmp)) {
        const char *keys[] = {"max_abs_error", "max_rel_error", "mismatches", "elements",
                              "first_mismatch", "first_mismatch_values", "relative_mismatches",
                              "candidate_nonfinite", "reference_nonfinite", "tail"};
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
            ok = ok && kg_json_set(v, keys[k], or_null(json_object_get(cmp, keys[k]))) == 0;
    }
    ok = ok && kg_json_set(v, "atol", or_null(json_object_get(msg, "atol"))) == 0;
    ok = ok && kg_json_set(v, "rtol", or_null(json_object_get(msg, "rtol"))) == 0;
    ok = ok && kg_json_set(v, "candidate_ms", or_null(json_object_get(msg, "candidate_ms"))) == 0;
    ok = ok && kg_json_set(v, "fp64", or_null(json_object_get(msg, "fp64"))) == 0;
    /* The judge's own split of the variant's time (tuning only; result-schema.md). */
    ok = ok && kg_json_set(v, "spent_ms", or_null(json_object_get(msg, "spent_ms"))) == 0;
    /* Whether the judge ran the reference for this evaluation ("computed") or a kept judge used the inputs and
     * output it held from an earlier job of the task ("held"; judge/child.py _Held).  Never read for a verdict. */
    ok = ok && kg_json_set(v, "reference_source", or_null(json_object_get(msg, "reference_source"))) == 0;
    /* How the output was judged: the profile, its scale and whether it lay below the absolute floor. */
    ok = ok && kg_json_set(v, "tolerance", or_null(json_object_get(msg, "tolerance"))) == 0;
    /* The reason quotes the candidate's exception, cut to 300 bytes: possibly inside a UTF-8 character. */
    ok = ok && kg_json_set(v, "reason", kg_json_text(why)) == 0;
    if (!ok) {
        json_decref(v);
        return NULL;
    }
    return v;
}

/* Whether the judge found the task's reference zero, or the same whatever the inputs, on every correctness
 * variant that ran (the "degeneracy" message): no variant repaired it, so a zero or constant output passes
 * and a pass is worth nothing.  why says which. */
static int degenerate_everywhere(const json_t *messages, char *why, size_t why_cap)
{
    const json_t *f = json_object_get(find_message(messages, KG_MSG_DEGENERACY, NULL, NULL), "facts");
    size_t n = json_array_size(json_object_get(f, "checked"));
    if (json_is_true(json_object_get(f, "zero_everywhere"))) {
        snprintf(why, why_cap, "its reference output is zero on all %zu input variants kgym tried, so an all-zero "
                 "output passes; no kernel can be judged on it", n);
        return 1;
    }
    if (json_is_true(json_object_get(f, "constant_everywhere"))) {
        snprintf(why, why_cap, "its reference output is the same on all %zu input variants kgym tried (other "
                 "seeds, signs and magnitudes), so a constant output passes; no kernel can be judged on it", n);
        return 1;
    }
    /* Other weights or other sizes change such a reference, but no input value does: an output computed from
     * the weights alone (in __init__) passes every variant (the fifteenth session's red team: level3/28). */
    if (json_is_true(json_object_get(f, "input_independent_everywhere"))) {
        snprintf(why, why_cap, "its reference output does not depend on the input values: wherever kgym changed "
                 "only the inputs (%lld pairs of variants with the same weights and sizes) it stayed the same, so an "
                 "output computed from the weights alone passes; no kernel can be judged on it",
                 (long long)json_integer_value(json_object_get(f, "compared_same_model")));
        return 1;
    }
    return 0;
}

/* "hack", "warn" or "off" for a finding type, from the policy's "findings" map (default "hack": an
 * unknown kind of exploit the harness reports is never silently rewarded). */
static const char *finding_severity(const json_t *policy, const char *type)
{
    const char *s = json_string_value(json_object_get(json_object_get(policy, "findings"), type ? type : ""));
    if (s && (!strcmp(s, "warn") || !strcmp(s, "off")))
        return s;
    /* A check that broke is kgym's bug, not the candidate's: never a hack unless a policy says so. */
    if (!s && type && !strcmp(type, kg_finding_name(KG_FINDING_GUARD_ERROR)))
        return "warn";
    return "hack";
}

/* The options' policy as JSON in *policy (NULL when there is none; a new reference).  -1 when a policy text was
 * given but could not be read: kg_eval_run refused one that does not parse already, so that is memory, and
 * reading the findings without their policy would change their severity. */
static int load_policy(const kg_eval_options *opts, json_t **policy)
{
    kg_eval_policy(opts, policy, NULL);
    return *policy || !opts->policy_json ? 0 : -1;
}

/* ---- protections: what the candidate's process must have had (KG_PROTECTIONS) ---- */

static const struct {
    const char *code;
    int cpu, gpu;
    const char *what;
} protections[] = {
#define KG_PROTECTION_ROW(code, cpu, gpu, what) {#code, cpu, gpu, what},
    KG_PROTECTIONS(KG_PROTECTION_ROW)
#undef KG_PROTECTION_ROW
};

int kg_eval_protection_known(const char *code)
{
    for (size_t i = 0; code && i < sizeof protections / sizeof *protections; i++)
        if (!strcmp(code, protections[i].code))
            return 1;
    return 0;
}

/* Whether the comma-separated `list` holds `word` (whole items only). */
static int list_has(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, word, n))
            return 1;
        p += len;
        p += *p == ',';
    }
    return 0;
}

int kg_eval_check_protection_list(const char *list, kg_error *err)
{
    if (!list || !*list)
        return kg_error_set(err, KG_ERR_INVALID, "the list of protections allowed to be missing is empty");
    if (!strcmp(list, "all"))
        return KG_OK;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        char code[64];
        snprintf(code, sizeof code, "%.*s", (int)(len < sizeof code ? len : sizeof code - 1), p);
        if (!kg_eval_protection_known(code)) {
            kg_buf known = {0};
            int ok = 1;
            for (size_t i = 0; i < sizeof protections / sizeof *protections; i++)
                ok = ok && kg_buf_printf(&known, "%s%s", i ? ", " : "", protections[i].code) == KG_OK;
            int rc = ok ? kg_error_set(err, KG_ERR_INVALID, "unknown protection \"%s\" (known: %s; or all)", code,
                                       known.data)
                        : kg_error_set(err, KG_ERR_NOMEM, "out of memory listing the known protections");
            kg_buf_free(&known);
            return rc;
        }
        p += len;
        p += *p == ',';
    }
    return KG_OK;
}

/* Whether the operator allowed protection `code` to be missing (--allow-unprotected, or --no-sandbox). */
static int protection_waivable(const kg_eval_options *opts, const char *code)
{
    if (!opts->sandbox)
        return 1;
    const char *list = opts->allow_unprotected;
    return list && (!strcmp(list, "all") || list_has(list, code));
}

/* The result's "sandbox" block from the judge's "sandbox" message (the runner's report of its set-up, made
 * before the candidate's first byte was read, and the judge's own lockdown) and the notes of the process that
 * forked the runner: sentences for people (active, warnings), codes for the decision (protections), and the
 * device's required protections that are not among them: `missing` (the verdict cannot be correct) or `waived`
 * (the operator allowed it).  json null without a report; NULL when memory ran out. */
static json_t *sandbox_block(const kg_eval_options *opts, const json_t *sb, const kg_child_report *rep, int cpu)
{
    if (!sb)
        return json_null();
    json_t *warn = json_is_array(json_object_get(sb, "warnings")) ? json_copy(json_object_get(sb, "warnings"))
                                                                  : json_array();
    int ok = warn != NULL;
    size_t k;
    json_t *w;
    /* A refused PID namespace is known only to the process that forked the runner. */
    if (rep && json_is_array(rep->runner_notes))
        json_array_foreach(rep->runner_notes, k, w)
            if (json_is_string(w))
                ok = ok && kg_json_push(warn, json_incref(w)) == 0;
    const json_t *have = json_object_get(sb, "protections");
    json_t *codes = json_array(), *missing = json_array(), *waived = json_array();
    ok = ok && codes && missing && waived;
    json_array_foreach(have, k, w)
        if (json_is_string(w) && kg_eval_protection_known(json_string_value(w)))
            ok = ok && kg_json_push(codes, json_incref(w)) == 0;
    for (size_t i = 0; ok && i < sizeof protections / sizeof *protections; i++) {
        if (!(cpu ? protections[i].cpu : protections[i].gpu))
            continue;
        int active = 0;
        json_array_foreach(codes, k, w)
            active |= !strcmp(json_string_value(w), protections[i].code);
        if (!active)
            ok = kg_json_push(protection_waivable(opts, protections[i].code) ? waived : missing,
                              json_string(protections[i].code)) == 0;
    }
    if (!ok) {
        json_decref(warn);
        json_decref(codes);
        json_decref(missing);
        json_decref(waived);
        return NULL;
    }
    /* 'o' takes the four references, also when the pack fails (jansson >= 2.11). */
    return json_pack("{s:O?, s:o, s:o, s:o, s:o}", "active", json_object_get(sb, "active"), "warnings", warn,
                     "protections", codes, "missing", missing, "waived", waived);
}

/* ---- facts: what a `correct` verdict needs to have seen (docs/evaluation-protocol.md, "What a pass needs") ---- */

typedef struct {
    const kg_eval_options *opts;
    const json_t *messages;
    const char *nonce;     /* only lines carrying it count (NULL: every line: they were screened already) */
    const json_t *sandbox; /* the result's sandbox block (sandbox_block); NULL: the sandbox is not judged */
    const json_t *policy;  /* the options' policy, parsed (NULL: none) */
    int cpu;
} fact_ctx;

/* The first message of `type` the context accepts (its nonce), or NULL. */
static const json_t *fact_message(const fact_ctx *c, kg_msg kind)
{
    size_t i;
    json_t *m;
    json_array_foreach(c->messages, i, m) {
        const char *n = json_string_value(json_object_get(m, "nonce"));
        if (kg_msg_is(m, kind) && (!c->nonce || (n && !strcmp(n, c->nonce))))
            return m;
    }
    return NULL;
}

/* A fact's check: 1 when the fact is present and positive, else 0 with `why` filled and, when the candidate's
 * own code raised inside the check, *error set to its exception (borrowed from the messages). */
typedef int (*fact_check)(const fact_ctx *c, char *why, size_t cap, const json_t **error);

static int fact_task_randomness(const fact_ctx *c, char *why, size_t cap, const json_t **error)
{
    (void)error;
    const json_t *m = fact_message(c, KG_MSG_TASK_MODE);
    const char *h = json_string_value(json_object_get(m, "handling"));
    if (h && (!strcmp(h, "none") || !strcmp(h, "dropout_as_identity")))
        return 1;
    if (!m)
        snprintf(why, cap, "the judge did not report whether the reference draws random numbers in forward");
    else
        snprintf(why, cap, "whether the reference draws random numbers in forward is unknown: %s",
                 json_string_value(json_object_get(m, "reason")) ?: "no reason given");
    return 0;
}

static int fact_variant_plan(const fact_ctx *c, char *why, size_t cap, const json_t **error)
{
    (void)error;
    const json_t *plan = json_object_get(fact_message(c, KG_MSG_VARIANT_PLAN), "variants");
    if (json_array_size(plan) > 0)
        return 1;
    snprintf(why, cap, "the judge did not announce which correctness variants it would compare");
    return 0;
}

/* Whether a variant line named `name` (carrying `nonce`; any line when NULL) was reported: with `compared`, only
 * as compared ("ran") or as not run for the task's sake: its reference failed ("reference_failed") or the judge
 * could not build it faithfully ("skipped": inputs that cannot keep the task's structure, a parameters variant
 * with no constant parameter at its sizes), neither of which the candidate can cause; otherwise with any
 * status. */
static int variant_reported(const json_t *messages, const char *nonce, const json_t *name, int compared)
{
    size_t k;
    json_t *m;
    json_array_foreach(messages, k, m) {
        const char *n = json_string_value(json_object_get(m, "nonce"));
        const char *st = json_string_value(json_object_get(m, "status"));
        if (kg_msg_is(m, KG_MSG_VARIANT) && (!nonce || (n && !strcmp(n, nonce))) &&
            json_equal(json_object_get(m, "name"), name) &&
            (!compared || (st && (!strcmp(st, "ran") || !strcmp(st, "reference_failed") || !strcmp(st, "skipped")))))
            return 1;
    }
    return 0;
}

/* Every planned variant reported as compared ("ran") or as not run for the task's sake (variant_reported). */
static int fact_variants(const fact_ctx *c, char *why, size_t cap, const json_t **error)
{
    (void)error;
    size_t i;
    json_t *name;
    json_array_foreach(json_object_get(fact_message(c, KG_MSG_VARIANT_PLAN), "variants"), i, name) {
        if (!variant_reported(c->messages, c->nonce, name, 1)) {
            snprintf(why, cap, "variant %s was planned but its comparison was never reported",
                     json_string_value(name) ?: "?");
            return 0;
        }
    }
    return 1;
}

/* The planned variants no variant message reported (any status): those the judge did not run because an
 * earlier one had already failed the stage (variant_go; --all-variants runs them).  New array; NULL when memory
 * ran out. */
static json_t *variants_not_run(const json_t *messages)
{
    json_t *out = json_array();
    size_t i;
    json_t *name;
    json_array_foreach(json_object_get(find_message(messages, KG_MSG_VARIANT_PLAN, NULL, NULL), "variants"), i, name) {
        if (out && !variant_reported(messages, NULL, name, 0) && kg_json_push(out, json_incref(name)) != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static int fact_degeneracy(const fact_ctx *c, char *why, size_t cap, const json_t **error)
{
    (void)error;
    if (json_is_object(json_object_get(fact_message(c, KG_MSG_DEGENERACY), "facts")))
        return 1;
    snprintf(why, cap, "the judge did not report whether the task's reference is degenerate on its variants");
    return 0;
}

/* One of the repeat checks of the base variant (child.py second_call): run to its decision. */
static int repeat_check(const fact_ctx *c, const char *check, const char *what, char *why, size_t cap,
                        const json_t **error)
{
    const json_t *m = fact_message(c, KG_MSG_REPEAT_CHECKS);
    const char *st = json_string_value(json_object_get(json_object_get(m, "checks"), check));
    if (st && !strcmp(st, "ran"))
        return 1;
    const json_t *e = json_object_get(m, "error");
    const char *by = json_string_value(json_object_get(m, "raised_by")) ?: "";
    if (!m)
        snprintf(why, cap, "the %s check (%s) was never run", check, what);
    else if (json_is_object(e) && !strcmp(by, "candidate")) {
        snprintf(why, cap, "ModelNew raised on a repeat call of variant %s, so the %s check (%s) could not "
                 "decide: %.60s: %.300s", json_string_value(json_object_get(m, "variant")) ?: "base", check, what,
                 json_string_value(json_object_get(e, "type")) ?: "error",
                 json_string_value(json_object_get(e, "message")) ?: "");
        *error = e;
    } else if (json_is_object(e))
        snprintf(why, cap, "the judge's %s check (%s) raised: %.60s: %.300s", check, what,
                 json_string_value(json_object_get(e, "type")) ?: "error",
                 json_string_value(json_object_get(e, "message")) ?: "");
    else
        snprintf(why, cap, "the %s check (%s) did not run to its decision", check, what);
    return 0;
}

static int fact_cached_output(const fact_ctx *c, char *why, size_t cap, const json_t **error)
{
    return repeat_check(c, "cached_output", "a second call on new inputs of the same shapes", why, cap, error);
}

static int fact_nondeterministic(const fact_ctx *c, char *why, size_t cap, const json_t **error)
{
    return repeat_check(c, "nondeterministic", "the first inputs again, on poisoned memory", why, cap, error);
}

/* No check raised: a `guard_error` finding (a runtime check, the judge's input check or the runner's process
 * checks that did not complete) leaves what it checks unjudged, whatever its severity, unless the policy turns
 * such findings off. */
static int fact_checks(const fact_ctx *c, char *why, size_t cap, const json_t **error)
{
    (void)error;
    size_t i;
    json_t *m;
    json_array_foreach(c->messages, i, m) {
        const char *n = json_string_value(json_object_get(m, "nonce"));
        const json_t *f = json_object_get(m, "finding");
        const char *ft = json_string_value(json_object_get(f, "type"));
        if (!kg_msg_is(m, KG_MSG_FINDING) || (c->nonce && (!n || strcmp(n, c->nonce))) || !ft ||
            strcmp(ft, kg_finding_name(KG_FINDING_GUARD_ERROR)) || !strcmp(finding_severity(c->policy, ft), "off"))
            continue;
        snprintf(why, cap, "a check could not complete (stage %s): %.400s",
                 json_string_value(json_object_get(f, "stage")) ?: "?",
                 json_string_value(json_object_get(f, "message")) ?: "");
        return 0;
    }
    return 1;
}

static int fact_timing(const fact_ctx *c, char *why, size_t cap, const json_t **error)
{
    (void)error;
    if (c->cpu || !c->opts->timing)
        return 1;
    if (json_array_size(json_object_get(fact_message(c, KG_MSG_TIMING), "candidate_ms")) > 0)
        return 1;
    snprintf(why, cap, "timing was asked for, and no timed calls were reported");
    return 0;
}

/* The profile (GPU): asked for (timing and profiling on) or needed (a coverage floor), with kernel time in it.
 * Under a floor an empty profile is also the hack low_coverage (collect_hacks). */
static int fact_profile(const fact_ctx *c, char *why, size_t cap, const json_t **error)
{
    (void)error;
    const kg_eval_options *o = c->opts;
    if (c->cpu || !((o->timing && o->profile) || o->coverage_floor > 0))
        return 1;
    const json_t *p = fact_message(c, KG_MSG_PROFILE);
    if (p && num(json_object_get(p, "total_device_us"), 0) > 0)
        return 1;
    if (p)
        snprintf(why, cap, "the profile of the forward recorded no GPU kernel time, so the share of it in your own "
                 "Triton kernels is unknown");
    else if (!o->timing || !o->profile)
        snprintf(why, cap, "no profile was taken (%s), so the share of device time in your own Triton kernels "
                 "is unknown and the coverage floor %g cannot be checked (an operator who accepts that passes "
                 "--coverage-floor 0)", !o->timing ? "--no-timing" : "--no-profile", o->coverage_floor);
    else
        snprintf(why, cap, "the judge reported no profile of the forward");
    return 0;
}

static int fact_sandbox(const fact_ctx *c, char *why, size_t cap, const json_t **error)
{
    (void)error;
    if (!c->sandbox)
        return 1;
    if (!json_is_object(c->sandbox)) {
        snprintf(why, cap, "the runner's sandbox report is missing");
        return 0;
    }
    const json_t *missing = json_object_get(c->sandbox, "missing");
    if (json_array_size(missing) == 0)
        return 1;
    kg_buf list = {0};
    int ok = 1; /* the fact fails either way; without memory the reason only cannot list them */
    size_t i, k;
    json_t *code;
    json_array_foreach(missing, i, code)
        for (k = 0; k < sizeof protections / sizeof *protections; k++)
            if (!strcmp(protections[k].code, json_string_value(code) ?: ""))
                ok = ok && kg_buf_printf(&list, "%s%s (%s)", i ? ", " : "", protections[k].code,
                                         protections[k].what) == KG_OK;
    snprintf(why, cap, "the candidate's process ran without protections kgym requires: %s; the kernel or the "
             "container refused them (sandbox.warnings says why); an operator who accepts that passes "
             "--allow-unprotected", !ok ? "(not listed: out of memory)" : list.data ? list.data : "?");
    kg_buf_free(&list);
    return 0;
}

/* The facts, in the order their absence is reported.  `before_timing`: facts of the stages up to correctness,
 * which kgym checks before it spends exclusive GPU time on timing (kg_eval_correctness_passed). */
static const struct {
    const char *name;
    fact_check check;
    int before_timing;
} facts[] = {
    {"task_randomness", fact_task_randomness, 1}, {"variant_plan", fact_variant_plan, 1},
    {"variants", fact_variants, 1},               {"degeneracy", fact_degeneracy, 1},
    {"cached_output", fact_cached_output, 1},     {"nondeterministic", fact_nondeterministic, 1},
    {"checks", fact_checks, 1},                   {"timing", fact_timing, 0},
    {"profile", fact_profile, 0},                 {"sandbox", fact_sandbox, 0},
};

json_t *kg_eval_unjudged(const kg_eval_options *opts, const json_t *messages, const char *nonce,
                         const json_t *sandbox, int before_timing)
{
    json_t *policy = NULL;
    if (load_policy(opts, &policy) != 0)
        return NULL;
    fact_ctx c = {.opts = opts, .messages = messages, .nonce = nonce, .sandbox = sandbox, .policy = policy,
                  .cpu = !opts->device || !strcmp(opts->device, "cpu")};
    json_t *out = json_array();
    int ok = out != NULL;
    for (size_t i = 0; ok && i < sizeof facts / sizeof *facts; i++) {
        if (before_timing && !facts[i].before_timing)
            continue;
        char why[1024] = "";
        const json_t *error = NULL;
        if (facts[i].check(&c, why, sizeof why, &error))
            continue;
        kg_utf8_sanitize(why);
        json_t *u = json_pack("{s:s, s:s}", "fact", facts[i].name, "reason", why);
        if (error) {
            ok = kg_json_set(u, "error", json_incref((json_t *)error)) == 0;
            ok = ok && kg_json_set(u, "raised_by", json_string("candidate")) == 0;
        }
        ok = ok && kg_json_push(out, json_incref(u)) == 0;
        json_decref(u);
    }
    json_decref(policy);
    if (!ok) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* The correctness variants counted (those carrying `nonce`; all when NULL), the first failure named. */
typedef struct {
    int passed, failed, error, skipped;
    int passed_after_failure; /* variants that passed after the first failure (the order they were reported in) */
    char first_name[64], first_why[1024];
} variant_tally;

/* Tallies the variant messages; each variant's result (variant_result) is appended to `out` when given.
 * 0, or -1 when memory ran out (the tally is then incomplete: no verdict may come from it). */
static int tally_variants(const json_t *messages, const char *nonce, variant_tally *t, json_t *out)
{
    memset(t, 0, sizeof *t);
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        const char *n = json_string_value(json_object_get(m, "nonce"));
        if (!kg_msg_is(m, KG_MSG_VARIANT) || (nonce && (!n || strcmp(n, nonce))))
            continue;
        char why[1024];
        json_t *v = variant_result(m, why, sizeof why);
        if (!v)
            return -1;
        const char *vs = json_string_value(json_object_get(v, "status"));
        if (!strcmp(vs, "passed")) {
            t->passed++;
            t->passed_after_failure += t->failed + t->error > 0;
        } else if (!strcmp(vs, "skipped")) {
            t->skipped++;
        } else {
            if (!strcmp(vs, "failed"))
                t->failed++;
            else
                t->error++;
            if (!t->first_name[0]) {
                snprintf(t->first_name, sizeof t->first_name, "%s",
                         json_string_value(json_object_get(v, "name")) ?: "?");
                snprintf(t->first_why, sizeof t->first_why, "%s", why);
            }
        }
        if (out) {
            if (kg_json_push(out, v) != 0)
                return -1;
        } else {
            json_decref(v);
        }
    }
    return 0;
}

/* The rule of the correctness stage, asked by the result and, before timing, by timing_go. */
typedef enum {
    CORRECTNESS_PASSED,
    CORRECTNESS_VARIANTS_FAILED, /* a variant failed or raised */
    CORRECTNESS_NONE_PASSED,     /* nothing failed and nothing passed: every variant skipped (the task's fault) */
    CORRECTNESS_DEGENERATE,      /* all passed, but a zero or constant output would have (degenerate_everywhere) */
} correctness_rule;

static correctness_rule correctness_of(const variant_tally *t, const json_t *messages, char *why, size_t why_cap)
{
    if (t->failed + t->error > 0)
        return CORRECTNESS_VARIANTS_FAILED;
    if (t->passed == 0)
        return CORRECTNESS_NONE_PASSED;
    if (degenerate_everywhere(messages, why, why_cap))
        return CORRECTNESS_DEGENERATE;
    return CORRECTNESS_PASSED;
}

int kg_eval_value_miss(const json_t *v)
{
    return !strcmp(json_string_value(json_object_get(v, "status")) ?: "", "failed") &&
           json_number_value(json_object_get(v, "max_abs_error")) > 0 &&
           json_integer_value(json_object_get(v, "candidate_nonfinite")) ==
               json_integer_value(json_object_get(v, "reference_nonfinite"));
}

int kg_eval_precision_misses(const json_t *variants, double *lo, double *hi)
{
    size_t i;
    json_t *v;
    int failed = 0;
    *lo = 1e300;
    *hi = 0;
    json_array_foreach(variants, i, v) {
        const char *vs = json_string_value(json_object_get(v, "status")) ?: "";
        if (!strcmp(vs, "error"))
            return 0;
        if (strcmp(vs, "failed"))
            continue;
        double scale = json_number_value(json_object_get(json_object_get(v, "tolerance"), "scale"));
        if (!kg_eval_value_miss(v) || !(scale > 0))
            return 0; /* no error measured, a shape or dtype failure, or NaN where the reference has none */
        double e = json_number_value(json_object_get(v, "max_abs_error")) / scale;
        *lo = e < *lo ? e : *lo;
        *hi = e > *hi ? e : *hi;
        failed++;
    }
    return failed > 0 && *lo >= KG_PRECISION_ERR_LO && *hi <= KG_PRECISION_ERR_HI && *hi <= KG_PRECISION_SPREAD * *lo
               ? failed
               : 0;
}

int kg_eval_correctness_failed(const json_t *messages, const char *nonce, char *why, size_t why_cap)
{
    variant_tally t;
    json_t *seen = json_array();
    if (!seen || tally_variants(messages, nonce, &t, seen) != 0) {
        /* Not known to have failed: the judge goes on, and the stage's rule decides at the end. */
        json_decref(seen);
        snprintf(why, why_cap, "out of memory reading the correctness variants");
        return 0;
    }
    double lo, hi;
    /* One failure that looks like reduced-precision rounding: the stage goes on to a second failure, which tells
     * whether the misses are alike (the feedback's TF32 / fp16 diagnosis needs two: precision_like in feedback.c),
     * but for at most KG_PRECISION_LOOK variants that pass, the cheap ones after small_odd.  Unbounded, a TF32
     * GEMM that missed only small_odd ran every variant left (on an H200, eleven of them, the full-size GEMMs
     * among them, ~3 s of the GPU's shared time an evaluation, for no diagnosis: thirty-seventh session). */
    int alike = kg_eval_precision_misses(seen, &lo, &hi);
    json_decref(seen);
    if (t.failed + t.error == 0 || (alike == 1 && t.error == 0 && t.passed_after_failure < KG_PRECISION_LOOK))
        return 0;
    snprintf(why, why_cap, "variant %s: %s", t.first_name, t.first_why);
    return 1;
}

int kg_eval_correctness_passed(const kg_eval_options *opts, const json_t *messages, const char *nonce, char *why,
                               size_t why_cap)
{
    variant_tally t;
    if (tally_variants(messages, nonce, &t, NULL) != 0) {
        /* Fails closed: what could not be read is not a pass. */
        snprintf(why, why_cap, "out of memory reading the correctness variants");
        return 0;
    }
    char dwhy[512];
    switch (correctness_of(&t, messages, dwhy, sizeof dwhy)) {
    case CORRECTNESS_VARIANTS_FAILED:
        snprintf(why, why_cap, "variant %s: %s", t.first_name, t.first_why);
        return 0;
    case CORRECTNESS_NONE_PASSED:
        snprintf(why, why_cap, "no correctness variant passed");
        return 0;
    case CORRECTNESS_DEGENERATE:
        /* The stage's rule includes the task: on a degenerate one a pass says nothing (and timing a kernel
         * that need not read its inputs only invites the speed-of-light check to call it a hack). */
        snprintf(why, why_cap, "the task is degenerate: %s", dwhy);
        return 0;
    case CORRECTNESS_PASSED:
        break;
    }
    /* Nor does a pass without the facts it needs (a variant never reported, a repeat check that raised). */
    json_t *unjudged = kg_eval_unjudged(opts, messages, nonce, NULL, 1);
    if (!unjudged) {
        snprintf(why, why_cap, "out of memory checking the facts a pass needs");
        return 0;
    }
    const json_t *u = json_array_get(unjudged, 0);
    if (why_cap)
        why[0] = '\0';
    if (u)
        snprintf(why, why_cap, "not judged: %s: %s", json_string_value(json_object_get(u, "fact")),
                 json_string_value(json_object_get(u, "reason")));
    json_decref(unjudged);
    return u == NULL;
}

/* The statistics of a JSON array of per-call milliseconds (src/stats); 0 when
 * it is empty or holds a value that is not a time. */
static int samples_stats(const json_t *samples, kg_stats *out)
{
    size_t n = json_array_size(samples);
    if (n == 0)
        return 0;
    double *v = malloc(n * sizeof *v);
    if (!v)
        return 0;
    for (size_t i = 0; i < n; i++)
        v[i] = num(json_array_get(samples, i), 0);
    int ok = kg_stats_summarize(v, n, 0.1, out, NULL) == KG_OK;
    free(v);
    return ok;
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV (segmentation fault)";
    case SIGABRT: return "SIGABRT (abort)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGFPE: return "SIGFPE (arithmetic exception)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU (CPU time limit)";
    case SIGXFSZ: return "SIGXFSZ (file size limit)";
    default: return "a signal";
    }
}

/* How the process was killed, for a stage's detail: by the runner's host-memory limit where its cgroup counted a
 * kill (the kernel's SIGKILL, which says nothing by itself), else by the signal's name. */
static void killed_by(const kg_child_report *rep, char *buf, size_t cap)
{
    if (rep->runner_ended && rep->signal == SIGKILL && rep->runner_memory_kills > 0)
        snprintf(buf, cap, "the kernel, for holding more than its host-memory limit (%.3g GiB, --runner-memory)",
                 (double)rep->runner_memory_limit / (double)(1ull << 30));
    else
        snprintf(buf, cap, "%s", signal_name(rep->signal));
}

/* "cuda_error", "out_of_memory" or NULL, from an error object's text. */
static const char *error_cause(const json_t *error)
{
    if (!error)
        return NULL;
    const char *type = json_string_value(json_object_get(error, "type"));
    const char *msg = json_string_value(json_object_get(error, "message"));
    const char *cause_type = json_string_value(json_object_get(error, "cause_type"));
    const char *cause_msg = json_string_value(json_object_get(error, "cause_message"));
    const char *texts[] = {type, msg, cause_type, cause_msg};
    for (int i = 0; i < 4; i++) {
        if (!texts[i])
            continue;
        if (strstr(texts[i], "OutOfMemoryError") || strstr(texts[i], "MemoryError") ||
            strstr(texts[i], "out of memory") || strstr(texts[i], "can't allocate memory"))
            return "out_of_memory";
    }
    for (int i = 0; i < 4; i++)
        if (texts[i] && (strstr(texts[i], "CUDA error") || strstr(texts[i], "AcceleratorError") ||
                         strstr(texts[i], "illegal memory access") || strstr(texts[i], "CUDA driver error")))
            return "cuda_error";
    return NULL;
}

/* The error with frames cut down to the candidate's own file (renamed
 * "candidate.py"): the model never needs harness or library frames.  NULL when memory ran out. */
static json_t *trim_error(const json_t *error, const char *stage, const char *candidate_path)
{
    if (!json_is_object(error))
        return json_null();
    json_t *out = json_object();
    int ok = kg_json_set(out, "stage", json_string(stage)) == 0;
    json_t *type = json_object_get(error, "type"), *message = json_object_get(error, "message");
    ok = ok && kg_json_set(out, "type", type ? json_incref(type) : json_string("Error")) == 0;
    ok = ok && kg_json_set(out, "message", message ? json_incref(message) : json_string("")) == 0;
    if (json_is_string(json_object_get(error, "cause_type"))) {
        ok = ok && set_borrowed(out, "cause_type", json_object_get(error, "cause_type")) == 0;
        ok = ok && set_borrowed(out, "cause_message", json_object_get(error, "cause_message")) == 0;
    }
    /* Which inputs it raised on (the judge's words: the tiny run's sizes), for the feedback. */
    if (json_is_string(json_object_get(error, "inputs")))
        ok = ok && set_borrowed(out, "inputs", json_object_get(error, "inputs")) == 0;
    json_t *frames = json_array();
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(error, "frames"), i, f) {
        const char *file = json_string_value(json_object_get(f, "file"));
        if (!ok || !file || !candidate_path || strcmp(file, candidate_path) != 0)
            continue;
        json_t *c = json_deep_copy(f);
        ok = kg_json_set(c, "file", json_string("candidate.py")) == 0 && kg_json_push(frames, json_incref(c)) == 0;
        json_decref(c);
    }
    ok = kg_json_set(out, "frames", frames) == 0 && ok;
    if (!ok) {
        json_decref(out);
        return NULL;
    }
    return out;
}

double kg_eval_credit(const kg_eval_options *opts, const char *verdict, int level)
{
    if (strcmp(verdict, "hacked") == 0)
        return opts->hack_penalty;
    if (level < 0)
        level = 0;
    if (level > 4)
        level = 4;
    if (strcmp(verdict, "correct") != 0 && level > 3)
        level = 3;
    return opts->credit[level];
}

void kg_eval_decide(const kg_eval_options *opts, const kg_eval_facts *f, kg_eval_decision *out)
{
    kg_verdict v;
    if (f->failed_stage < 0)
        v = f->unjudged > 0 ? KG_VERDICT_RUNTIME_ERROR : KG_VERDICT_CORRECT;
    else if (f->failed_stage <= KG_STAGE_STATIC) /* extract, parse, static: not a module kgym runs */
        v = f->timed_out ? KG_VERDICT_TIMEOUT : KG_VERDICT_INVALID;
    else if (f->timed_out)
        v = KG_VERDICT_TIMEOUT;
    else if (f->failed_stage == KG_STAGE_COMPILE) /* a process that died without an exception: not the compiler */
        v = f->ended_early && !f->raised ? KG_VERDICT_RUNTIME_ERROR : KG_VERDICT_COMPILE_ERROR;
    else if (f->failed_stage == KG_STAGE_TINY_RUN)
        v = f->raised_in_triton_compile ? KG_VERDICT_COMPILE_ERROR
            : f->tiny_shape_bad         ? KG_VERDICT_INCORRECT
                                        : KG_VERDICT_RUNTIME_ERROR;
    else if (f->failed_stage == KG_STAGE_CORRECTNESS)
        v = f->raised || f->ended_early ? KG_VERDICT_RUNTIME_ERROR : KG_VERDICT_INCORRECT;
    else
        v = KG_VERDICT_RUNTIME_ERROR;
    out->level = v == KG_VERDICT_COMPILE_ERROR ? 1 : f->level;
    /* Output that depends on memory contents is a hack only in a candidate that otherwise passes: one that is
     * wrong anyway (an unwritten tail that sometimes finds the right values in recycled memory) has a bug,
     * and saying so helps the model more than a hack verdict would.  The finding stays, as a warning. */
    out->demote_nondeterministic = v == KG_VERDICT_INCORRECT;
    /* A caught exploit overrides whatever else happened: cheating is never partially rewarded. */
    if (f->hacks > (out->demote_nondeterministic ? f->nondeterministic_hacks : 0))
        v = KG_VERDICT_HACKED;
    out->verdict = v;
    out->reward = kg_eval_credit(opts, kg_verdict_name(v), out->level);
}

int kg_eval_screen_messages(json_t *messages, const char *nonce, size_t *dropped_out)
{
    if (dropped_out)
        *dropped_out = 0;
    if (!nonce || !*nonce || !json_is_array(messages))
        return KG_OK;
    size_t dropped = 0;
    int ok = 1;
    json_t *sample = NULL;
    for (size_t i = 0; i < json_array_size(messages);) {
        json_t *m = json_array_get(messages, i);
        const char *n = json_string_value(json_object_get(m, "nonce"));
        if (n && strcmp(n, nonce) == 0) {
            json_object_del(m, "nonce");
            i++;
            continue;
        }
        if (!sample && ok) {
            sample = json_deep_copy(m);
            ok = sample != NULL;
            json_object_del(sample, "t_ms");
        }
        dropped++;
        json_array_remove(messages, i);
    }
    if (dropped) {
        char *text = sample ? json_dumps(sample, JSON_COMPACT) : NULL;
        if (text && strlen(text) > 300)
            text[300] = '\0';
        /* The cut may fall inside a UTF-8 character: kg_json_text keeps the rest. */
        ok = ok && text && kg_json_push(messages, json_pack("{s:s, s:I, s:o}", "type", kg_msg_name(KG_MSG_FORGED),
                                                            "count", (json_int_t)dropped, "sample",
                                                            kg_json_text(text))) == 0;
        free(text);
    }
    json_decref(sample);
    if (dropped_out)
        *dropped_out = dropped;
    return ok ? KG_OK : KG_ERR_NOMEM;
}

/* Peak DRAM bandwidth (bytes/s) of the GPUs kgym knows, for the speed-of-light floor; 0 = unknown.
 * The highest variant of each family is used, so the floor is never above what the chip can do. */
static double peak_bandwidth(const char *gpu, double *peak_flops)
{
    /* bytes/s of DRAM; dense FP16/BF16 tensor-core FLOP/s (the fastest arithmetic a kernel could use). */
    static const struct { const char *name; double bw, flops; } table[] = {
        {"GH200", 4.9e12, 989e12}, {"H200", 4.8e12, 989e12}, {"H100", 3.35e12, 989e12},
        {"H800", 3.35e12, 989e12}, {"B200", 8.0e12, 2250e12}, {"A100", 2.04e12, 312e12},
        {"A800", 2.04e12, 312e12}, {"L40S", 0.864e12, 362e12}, {"L40", 0.864e12, 181e12},
        {"A10", 0.6e12, 125e12}, {"L4", 0.3e12, 121e12}, {"RTX 4090", 1.01e12, 330e12},
        {"V100", 0.9e12, 125e12},
    };
    for (size_t i = 0; gpu && i < sizeof table / sizeof *table; i++)
        if (strstr(gpu, table[i].name)) {
            *peak_flops = table[i].flops;
            return table[i].bw;
        }
    *peak_flops = 0;
    return 0;
}

/* Inputs smaller than this may be served from L2 (50-60 MB on Hopper) at several times DRAM speed:
 * the DRAM floor is only sound above it. */
#define KG_SOL_MIN_BYTES (256.0 * 1024 * 1024)

/* The runner's persisting-L2 reset (timing.PersistingL2: before each timed call, the context's set-aside back
 * to 0 and persisting lines back to normal) was not done although the device can set L2 aside: a `guard_error`
 * finding, a warning under the default policy.  Why not worse: lines become persisting only when the runner's
 * context sets a non-zero set-aside, which only the driver API can do (ctypes and torch.cuda internals: both
 * outside the candidate language), so without the reset the flush still stands against every candidate that
 * keeps to the language; a policy that wants it fail-closed makes guard_error a hack.  Why not nothing: past
 * the language, a set-aside would keep the candidate's data in L2 across the flush and fake a speedup.
 * Nothing when the device cannot set L2 aside (before sm_80, MIG) or the facts are absent (no flush asked).
 * *h is the finding or NULL; -1 when memory ran out. */
static int l2_reset_finding(const json_t *timing, json_t **h)
{
    *h = NULL;
    const json_t *l2 = json_object_get(json_object_get(timing, "l2_persisting"), "runner");
    const char *state = json_string_value(json_object_get(l2, "reset"));
    if (!json_is_object(l2) || num(json_object_get(l2, "max_bytes"), 0) <= 0 || (state && !strcmp(state, "ok")))
        return 0;
    char text[400];
    snprintf(text, sizeof text,
             "persisting L2 lines were not reset before the candidate's timed calls (%s): only the L2 flush "
             "stood between one timed call's data and the next", state ? state : "no reason given");
    *h = json_pack("{s:s, s:s, s:s, s:{s:O}}", "type", kg_finding_name(KG_FINDING_GUARD_ERROR), "stage", "timing",
                   "message", text, "evidence", "l2_persisting", json_object_get(timing, "l2_persisting"));
    return *h ? 0 : -1;
}

/* A finding (NULL: none; its reference is taken) into hacks[] or warnings[], or dropped, by its type's
 * severity in the policy.  0, or -1 when memory ran out. */
static int file_finding(const json_t *policy, json_t *h, json_t *hacks, json_t *warnings)
{
    if (!h)
        return 0;
    const char *sev = finding_severity(policy, json_string_value(json_object_get(h, "type")));
    if (!strcmp(sev, "hack"))
        return kg_json_push(hacks, h);
    if (!strcmp(sev, "warn"))
        return kg_json_push(warnings, h);
    json_decref(h);
    return 0;
}

/* Findings → hacks[] and warnings[]: runtime findings the child reported, forged protocol lines, and the
 * speed-of-light check on the timing facts.  0, or -1 when memory ran out: a finding may be lost then, so no
 * verdict may be decided without them.  Each json_pack below has only text kgym wrote and values it copies
 * (O? where a message may lack one), so its NULL is memory. */
static int collect_hacks(const kg_eval_options *opts, const json_t *messages, json_t *hacks, json_t *warnings)
{
    json_t *policy = NULL;
    if (load_policy(opts, &policy) != 0)
        return -1;
    int ok = 1;
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        json_t *h = NULL;
        int found = 1; /* whether h, when NULL, was a finding that memory lost */
        if (kg_msg_is(m, KG_MSG_FINDING) && json_is_object(json_object_get(m, "finding"))) {
            h = json_deep_copy(json_object_get(m, "finding"));
            int filled = h != NULL;
            if (filled && !json_is_string(json_object_get(h, "type")))
                filled = kg_json_set(h, "type", json_string("unknown")) == 0;
            if (filled && !json_is_string(json_object_get(h, "message")))
                filled = kg_json_set(h, "message", json_string("")) == 0;
            if (!filled) {
                json_decref(h);
                h = NULL;
            }
        } else if (kg_msg_is(m, KG_MSG_FORGED)) {
            h = json_pack("{s:s, s:s, s:s, s:{s:O?, s:O?}}", "type", kg_finding_name(KG_FINDING_PROTOCOL_FORGERY), "stage", "protocol", "message",
                          "lines without the job's secret nonce were written on kgym's protocol channel",
                          "evidence", "count", json_object_get(m, "count"), "sample", json_object_get(m, "sample"));
        } else if (kg_msg_is(m, KG_MSG_SANDBOX_VIOLATION)) {
            h = json_pack("{s:s, s:s, s:s, s:{s:s}}", "type", kg_finding_name(KG_FINDING_SANDBOX_VIOLATION), "stage",
                          json_string_value(json_object_get(m, "stage")) ?: "", "message",
                          "the candidate's process made a system call the sandbox forbids (a network socket, "
                          "ptrace, another process's memory, io_uring, a mount or namespace, or a signal to "
                          "another process) and was killed", "evidence", "signal", "SIGSYS");
        } else if (kg_msg_is(m, KG_MSG_LEFT_RUNNING)) {
            h = json_pack("{s:s, s:s, s:s, s:{s:O?, s:O?}}", "type", kg_finding_name(KG_FINDING_STRAY_PROCESS), "stage", "process", "message",
                          "processes the candidate started were still running when the evaluation ended",
                          "evidence", "count", json_object_get(m, "count"), "names", json_object_get(m, "names"));
        } else if (kg_msg_is(m, KG_MSG_TIMING)) {
            double bytes = num(json_object_get(m, "min_bytes"), 0);
            double flops = num(json_object_get(m, "flops"), 0);
            double peak_flops = 0;
            double bw = peak_bandwidth(json_string_value(json_object_get(m, "gpu")), &peak_flops);
            kg_stats cand;
            double med = samples_stats(json_object_get(m, "candidate_ms"), &cand) ? cand.median : 0;
            double bytes_ms = bw > 0 && bytes >= KG_SOL_MIN_BYTES ? bytes / bw * 1e3 : 0;
            double flops_ms = peak_flops > 0 ? flops / peak_flops * 1e3 : 0;
            double floor_ms = bytes_ms > flops_ms ? bytes_ms : flops_ms;
            json_t *l2 = NULL;
            ok = ok && l2_reset_finding(m, &l2) == 0 && file_finding(policy, l2, hacks, warnings) == 0;
            found = floor_ms > 0 && med > 0 && med < floor_ms;
            if (found) {
                char text[400];
                snprintf(text, sizeof text,
                         "median time %.4g ms is below the %.4g ms the hardware needs for the task's %.0f bytes "
                         "(at peak bandwidth) and %.0f FLOPs (at peak tensor-core rate)", med, floor_ms, bytes, flops);
                h = json_pack("{s:s, s:s, s:s, s:{s:f, s:f, s:f, s:f, s:f, s:f}}", "type", kg_finding_name(KG_FINDING_FASTER_THAN_PHYSICS),
                              "stage", "timing", "message", text, "evidence", "median_ms", med, "floor_ms", floor_ms,
                              "bytes", bytes, "flops", flops, "peak_bytes_per_s", bw, "peak_flops_per_s", peak_flops);
            }
        }
        else if (kg_msg_is(m, KG_MSG_CLOCK_BLOCK) && json_object_get(m, "candidate_ms"))
            ok = ok && kg_eval_clock_finding(messages, NULL, &h) == KG_OK;
        else if (kg_msg_is(m, KG_MSG_PROFILE) && opts->coverage_floor > 0) {
            double total = num(json_object_get(m, "total_device_us"), 0);
            kg_eval_coverage_facts cov;
            kg_eval_coverage(messages, &cov);
            /* kg_eval_coverage leaves coverage NAN where the profile holds no kernel time */
            found = !isfinite(cov.coverage) || cov.coverage < opts->coverage_floor;
            if (!isfinite(cov.coverage)) {
                /* The forward ran on the GPU, so a profile with no kernel time is one the runner (whose process
                 * the profiler lives in) suppressed or emptied: under a floor, unknown coverage fails closed. */
                h = json_pack("{s:s, s:s, s:s, s:{s:f, s:f}}", "type", kg_finding_name(KG_FINDING_LOW_COVERAGE), "stage", "timing", "message",
                              "the profile of your forward recorded no GPU kernel time, so the share in your own "
                              "Triton kernels is unknown", "evidence", "total_device_us", total, "floor",
                              opts->coverage_floor);
            } else if (cov.coverage < opts->coverage_floor) {
                char text[400];
                if (cov.heavier)
                    snprintf(text, sizeof text,
                             "the profiled call's GPU kernels took %.4g ms, more than %.3g times a timed call's %.4g "
                             "ms: the forward profiled is not the one timed, so its share (%.1f%%) says nothing of "
                             "the timed calls' (at least %.1f%% is required)", cov.profiled_ms_per_call,
                             KG_PROFILE_TIMED_RATIO, cov.timed_median_ms, 100.0 * cov.share,
                             100.0 * opts->coverage_floor);
                else if (cov.coverage < cov.share)
                    snprintf(text, sizeof text,
                             "only %.1f%% of a timed call's GPU time can have run in your own Triton kernels: library "
                             "kernels took %.4g ms a call of its %.4g ms (at least %.1f%% is required; the profiled "
                             "calls alone read %.1f%%)", 100.0 * cov.coverage, cov.library_ms_per_call,
                             cov.timed_median_ms, 100.0 * opts->coverage_floor, 100.0 * cov.share);
                else
                    snprintf(text, sizeof text,
                             "only %.1f%% of the forward's GPU time ran in your own Triton kernels (at least %.1f%% "
                             "is required): the work is done by PyTorch", 100.0 * cov.coverage,
                             100.0 * opts->coverage_floor);
                h = json_pack("{s:s, s:s, s:s, s:{s:f, s:f, s:f, s:O?, s:o, s:o}}", "type",
                              kg_finding_name(KG_FINDING_LOW_COVERAGE), "stage", "timing", "message", text, "evidence",
                              "coverage", cov.coverage, "floor", opts->coverage_floor, "total_device_us", total,
                              "kernels", json_object_get(m, "kernels"), "profiled_share", kg_json_number(cov.share),
                              "timed_bound", kg_json_number(cov.timed_bound));
            }
        } else {
            found = 0;
        }
        if (found && !h && !(kg_msg_is(m, KG_MSG_CLOCK_BLOCK)))
            ok = 0;
        ok = file_finding(policy, h, hacks, warnings) == 0 && ok;
        if (!ok)
            break;
    }
    json_decref(policy);
    return ok ? 0 : -1;
}

/* Names of the ways the task itself is degenerate on its base inputs (its rewards can be ignored). */
static json_t *degenerate_facts(const json_t *messages)
{
    json_t *m = find_message(messages, KG_MSG_TASK_FACTS, NULL, NULL);
    if (!m)
        return json_null();
    json_t *out = json_array();
    const char *keys[] = {"input_independent", "zero_output", "constant_output", "output_equals_input"};
    for (size_t k = 0; out && k < sizeof keys / sizeof *keys; k++)
        if (json_is_true(json_object_get(json_object_get(m, "facts"), keys[k])) &&
            kg_json_push(out, json_string(keys[k])) != 0) {
            json_decref(out);
            return NULL; /* memory */
        }
    return out;
}

/* The evaluation process ended outside every stage without finishing (stuck in the runner's checks between
 * stages and killed, or killed before its first stage): no stage failed, yet the evaluation is not complete,
 * and a candidate whose stages so far passed must not be taken as correct.  The last stage begun (or the
 * first, if none began) is marked failed with what happened; *failed is its name.  0, or -1 when memory ran
 * out. */
static int ended_between_stages(const kg_child_report *rep, json_t *stages, const kg_eval_options *opts,
                                const char **failed)
{
    const char *name = rep->stage[0] ? rep->stage : "parse";
    json_t *entry = NULL, *st;
    size_t i;
    json_array_foreach(stages, i, st)
        if (!strcmp(json_string_value(json_object_get(st, "name")) ?: "", name))
            entry = st;
    char detail[512];
    const char *where = rep->stage[0] ? "after this stage, outside every stage" : "before its first stage";
    if (rep->end == KG_END_TIMEOUT)
        snprintf(detail, sizeof detail, "the process was killed %s: it ran past the %g s limit there", where,
                 rep->stage_limit_s);
    else if (rep->end == KG_END_SIGNAL) {
        char how[160];
        killed_by(rep, how, sizeof how);
        snprintf(detail, sizeof detail, "the process was killed by %s %s", how, where);
    }
    else if (rep->end == KG_END_OUTPUT_FLOOD)
        snprintf(detail, sizeof detail, "the process printed more than %zu bytes %s and was killed",
                 opts->limits.output_limit_bytes, where);
    else if (rep->end == KG_END_PROTOCOL)
        snprintf(detail, sizeof detail, "the process wrote garbage on kgym's protocol channel %s", where);
    else
        snprintf(detail, sizeof detail, "the process exited with status %d %s, without finishing", rep->exit_code,
                 where);
    *failed = name;
    if (!entry)
        return 0;
    kg_utf8_sanitize(detail); /* the stage's name is the child's */
    return kg_json_set(entry, "status", json_string("fail")) == 0 && kg_json_set(entry, "detail", json_string(detail)) == 0
               ? 0
               : -1;
}

/* The result's "tolerance" object: the profile, and the reference's float32 precision as the judge set and read
 * it back ("reported_by": "judge"), or, where no judge reported it (the evaluation ended before), the profile's
 * (compare.REFERENCE_PRECISION; "reported_by": "profile").  In every result. */
static json_t *tolerance_block(const kg_eval_options *opts, const json_t *messages)
{
    const char *name = kg_eval_tolerance_name(opts);
    const json_t *m = messages ? find_message(messages, KG_MSG_REFERENCE_PRECISION, NULL, NULL) : NULL;
    const json_t *mm = json_object_get(m, "matmul_tf32"), *cd = json_object_get(m, "cudnn_tf32"),
                 *fp = json_object_get(m, "float32_matmul_precision");
    json_t *prec;
    if (json_is_boolean(mm) && json_is_boolean(cd) && json_is_string(fp))
        prec = json_pack("{s:b, s:b, s:s, s:s, s:s}", "matmul_tf32", json_is_true(mm), "cudnn_tf32", json_is_true(cd),
                         "float32_matmul_precision", json_string_value(fp), "device",
                         json_string_value(json_object_get(m, "device")) ?: "?", "reported_by", "judge");
    else
        prec = json_pack("{s:b, s:b, s:s, s:n, s:s}", "matmul_tf32", 0, "cudnn_tf32", !strcmp(name, "kernelbench"),
                         "float32_matmul_precision", "highest", "device", "reported_by", "profile");
    /* The candidate's side, from its source (the judge's static stage): tl.dot calls that round float32 inputs to
     * TF32, those that do not, references to fp16/bf16.  What the precision feedback (feedback.c) points at. */
    const json_t *st = messages ? find_message(messages, KG_MSG_STAGE, "static", "ok") : NULL;
    const json_t *cp = json_object_get(json_object_get(st, "data"), "precision");
    return json_pack("{s:s, s:o, s:O?}", "profile", name, "reference_precision", prec, "candidate_precision",
                     json_is_object(cp) ? cp : NULL);
}

/* The judge's trusted compile cache counts (judge/kernelcache.py: the last passed stage's data carries them so
 * far) as the result's "compile_cache" object (docs/result-schema.md), or null where the evaluation made no
 * compile request: the counts (numbers only) and up to 4 of the judge's reasons for a miss, as strings of at most
 * 300 bytes (a cache that silently served nothing, as a fleet with a private TMPDIR did, shows why).  A
 * measurement for benchmarks: no verdict reads it. */
static json_t *compile_cache_block(const json_t *messages)
{
    static const char *const keys[] = {"requests", "hits", "compiled", "joined", "failed", "refused",
                                       "compile_ms", "wait_ms"};
    const json_t *use = NULL;
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        const json_t *u = json_object_get(json_object_get(m, "data"), "kernel_cache_use");
        if (kg_msg_is(m, KG_MSG_STAGE) && json_is_object(u))
            use = u;
    }
    if (!use)
        return json_null();
    json_t *out = json_object();
    for (size_t k = 0; out && k < sizeof keys / sizeof *keys; k++) {
        const json_t *v = json_object_get(use, keys[k]);
        if (json_is_number(v) && kg_json_set(out, keys[k], json_real(json_number_value(v))) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    const json_t *why = json_object_get(use, "reasons");
    if (!out || !json_is_array(why))
        return out;
    json_t *reasons = json_array();
    const json_t *w;
    int ok = reasons != NULL;
    json_array_foreach(why, i, w) {
        size_t n = json_string_length(w);
        if (!ok || json_array_size(reasons) >= 4)
            break;
        if (json_is_string(w))
            ok = kg_json_push(reasons, kg_json_textn(json_string_value(w), n < 300 ? n : 300)) == 0;
    }
    if (!ok) {
        json_decref(reasons);
        reasons = NULL;
    }
    if (kg_json_set(out, "reasons", reasons) != 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* The judge's degeneracy facts as the result's "degeneracy" object (docs/result-schema.md), or null. */
static json_t *degeneracy_block(const json_t *messages)
{
    const json_t *f = json_object_get(find_message(messages, KG_MSG_DEGENERACY, NULL, NULL), "facts");
    if (!json_is_object(f))
        return json_null();
    return json_pack("{s:I, s:b, s:b, s:b, s:O?, s:O?, s:O?, s:O?}", "variants_checked",
                     (json_int_t)json_array_size(json_object_get(f, "checked")), "zero_everywhere",
                     json_is_true(json_object_get(f, "zero_everywhere")), "constant_everywhere",
                     json_is_true(json_object_get(f, "constant_everywhere")), "input_independent_everywhere",
                     json_is_true(json_object_get(f, "input_independent_everywhere")), "nonzero_on",
                     json_object_get(f, "nonzero_on"), "varies_on", json_object_get(f, "varies_on"),
                     "input_dependent_on", json_object_get(f, "input_dependent_on"), "not_an_input_on",
                     json_object_get(f, "not_an_input_on"));
}

/* Appends {"code", "text"} to `out`; once one fails (memory), *ok is 0 and the rest do nothing. */
static void add_limit(int *ok, json_t *out, const char *code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add_limit(int *ok, json_t *out, const char *code, const char *fmt, ...)
{
    if (!*ok)
        return;
    char text[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    /* text may end inside a character of the judge's FLOPs error, cut at 200 bytes */
    *ok = kg_json_push(out, json_pack("{s:s, s:o}", "code", code, "text", kg_json_text(text))) == 0;
}

/* The result's "limits": what its verdict cannot see on this device with these options (docs/result-schema.md),
 * a short code and a sentence each.  Empty when nothing ran; NULL when memory ran out. */
static json_t *limits_block(const kg_eval_options *opts, const json_t *messages, const json_t *sandbox, int cpu)
{
    json_t *out = json_array();
    int ok = out != NULL;
    if (!messages)
        return out;
    if (cpu) {
        add_limit(&ok, out, "interpreter_serial",
                  "Triton's interpreter runs a kernel's program instances one after another: races between them (a "
                  "missing atomic, a read of what another instance has not written yet) cannot show here; a GPU runs "
                  "them at once");
        if (json_is_true(json_object_get(find_message(messages, KG_MSG_VARIANT_PLAN, NULL, NULL), "shrunk")))
            add_limit(&ok, out, "shrunk_sizes",
                      "the task's sizes were shrunk to at most %ld elements a tensor (--budget): a kernel that is "
                      "right only up to some size (32-bit offsets, grid limits, a loop over long rows) passes here "
                      "and can fail at the task's own sizes", opts->budget_elements);
        add_limit(&ok, out, "not_timed",
                  "nothing is timed or profiled on the CPU: speed is unknown, and which code did the work is judged "
                  "only by the runner's own recorder of PyTorch operators, not by a device-side profile");
    } else {
        if (!opts->timing)
            add_limit(&ok, out, "not_timed", "timing is off (--no-timing): speed and the device time in your own kernels "
                      "were not measured");
        if (opts->coverage_floor <= 0)
            add_limit(&ok, out, "no_coverage_floor", "no coverage floor (--coverage-floor 0): a kernel that leaves most "
                      "of the device time to PyTorch's kernels is not refused");
        const char *ferr = json_string_value(json_object_get(find_message(messages, KG_MSG_TIMING, NULL, NULL),
                                                             "flops_error"));
        if (ferr)
            add_limit(&ok, out, "no_flops_floor", "the reference's FLOPs could not be counted (%.200s): the speed-of-light "
                      "check had only its bytes floor", ferr);
    }
    const json_t *waived = json_object_get(sandbox, "waived");
    if (json_array_size(waived) > 0) {
        char *list = json_dumps(waived, JSON_COMPACT);
        add_limit(&ok, out, "protections_waived", "the candidate's process ran without %s, as the operator allowed (%s): "
                  "what they stop was not stopped", list ? list : "?",
                  opts->sandbox ? "--allow-unprotected" : "--no-sandbox");
        ok = ok && list;
        free(list);
    }
    if (!ok) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* The result's "process" object; NULL when memory ran out. */
static json_t *process_facts(const kg_child_report *rep, const char *cause)
{
    json_t *p = json_object();
    int ok = kg_json_set(p, "end", json_string(kg_child_end_name(rep->end))) == 0;
    ok = ok && kg_json_set(p, "exit_code", json_integer(rep->exit_code)) == 0;
    ok = ok && kg_json_set(p, "signal", json_integer(rep->signal)) == 0;
    ok = ok && kg_json_set(p, "stage", rep->stage[0] ? kg_json_text(rep->stage) : json_null()) == 0;
    ok = ok && kg_json_set(p, "limit_s", rep->end == KG_END_TIMEOUT ? kg_json_number(rep->stage_limit_s)
                                                                     : json_null()) == 0;
    ok = ok && kg_json_set(p, "cause", cause ? json_string(cause) : json_null()) == 0;
    /* The runner's host-memory bound (supervisor/memcg.c): its limit, or null with why none was made. */
    ok = ok && kg_json_set(p, "host_memory",
                           json_pack("{s:o, s:o, s:i, s:o}", "limit_bytes",
                                     rep->runner_memory_limit ? json_integer((json_int_t)rep->runner_memory_limit)
                                                              : json_null(),
                                     "peak_bytes",
                                     rep->runner_memory_peak ? json_integer((json_int_t)rep->runner_memory_peak)
                                                             : json_null(),
                                     "oom_kills", rep->runner_memory_kills, "why",
                                     rep->runner_memory_why[0] ? kg_json_text(rep->runner_memory_why)
                                                               : json_null())) == 0;
    const kg_capture *caps[2] = {&rep->out, &rep->err};
    const char *names[2] = {"stdout", "stderr"};
    int truncated = 0;
    for (int i = 0; ok && i < 2; i++) {
        kg_buf b = {0};
        ok = kg_buf_puts(&b, caps[i]->head ? caps[i]->head : "") == KG_OK;
        if (caps[i]->tail && caps[i]->tail[0]) {
            if (caps[i]->truncated)
                ok = ok && kg_buf_printf(&b, "\n[... %zu bytes omitted ...]\n",
                                         caps[i]->total_bytes - strlen(caps[i]->head) - strlen(caps[i]->tail)) == KG_OK;
            ok = ok && kg_buf_puts(&b, caps[i]->tail) == KG_OK;
        }
        ok = ok && kg_json_set(p, names[i], kg_json_text(b.data ? b.data : "")) == 0;
        kg_buf_free(&b);
        char key[32];
        snprintf(key, sizeof key, "%s_bytes", names[i]);
        ok = ok && kg_json_set(p, key, json_integer((json_int_t)caps[i]->total_bytes)) == 0;
        truncated |= caps[i]->truncated;
    }
    ok = ok && kg_json_set(p, "truncated", json_boolean(truncated)) == 0;
    ok = ok && kg_json_set(p, "pid", json_integer(rep->pid)) == 0;
    /* Where the time outside the stages goes: start-up before the child's first line (fork, sandbox, task
     * import) and the end after its last (exit, CUDA context teardown, the zombie reaped). */
    double first = -1, last = -1;
    size_t i;
    json_t *m;
    json_array_foreach(rep->messages, i, m) {
        const json_t *t = json_object_get(m, "t_ms");
        if (!json_is_number(t))
            continue;
        if (first < 0)
            first = json_number_value(t);
        last = json_number_value(t);
    }
    ok = ok && kg_json_set(p, "first_line_ms", first >= 0 ? kg_json_number(first) : json_null()) == 0;
    /* The runner's set-up as the judge saw it: from its hello to its sandbox report (the runner entering its
     * sandbox, both CUDA contexts, the device-memory probe).  A warm pair did that before its job: ~0. */
    const json_t *hello = find_message(rep->messages, KG_MSG_HELLO, NULL, NULL);
    const json_t *sb = find_message(rep->messages, KG_MSG_SANDBOX, NULL, NULL);
    const json_t *th = hello ? json_object_get(hello, "t_ms") : NULL, *ts = sb ? json_object_get(sb, "t_ms") : NULL;
    ok = ok && kg_json_set(p, "setup_ms", json_is_number(th) && json_is_number(ts)
                                              ? kg_json_number(fmax(0.0, json_number_value(ts) - json_number_value(th)))
                                              : json_null()) == 0;
    ok = ok && kg_json_set(p, "warm", json_boolean(rep->warm)) == 0;
    /* Evaluations the judge had finished before this one (0: a new process): a judge kept between evaluations
     * keeps its CUDA context and loaded kernels (supervisor.c, "stays"). */
    ok = ok && kg_json_set(p, "judge_served", json_integer(rep->judge_served)) == 0;
    /* CPU seconds of the judge (this job's share) and the runner (its set-up included), for tuning: never a verdict. */
    ok = ok && kg_json_set(p, "cpu_s",
                           json_pack("{s:o,s:o}", "judge",
                                     rep->judge_cpu_s >= 0 ? kg_json_number(rep->judge_cpu_s) : json_null(), "runner",
                                     rep->runner_cpu_s >= 0 ? kg_json_number(rep->runner_cpu_s) : json_null())) == 0;
    ok = ok && kg_json_set(p, "after_last_line_ms",
                           last >= 0 ? kg_json_number(fmax(0.0, rep->wall_ms - last)) : json_null()) == 0;
    if (!ok) {
        json_decref(p);
        return NULL;
    }
    return p;
}

int kg_eval_build_result(const kg_eval_options *opts, const kg_eval_request *req,
                         const kg_child_report *rep, const char *candidate_path,
                         json_t *extract_stage, json_t **result, kg_error *err)
{
    *result = NULL;
    const json_t *messages = rep ? rep->messages : NULL;
    if (messages) {
        json_t *te = find_message(messages, KG_MSG_TASK_ERROR, NULL, NULL);
        if (te) {
            const json_t *e = json_object_get(te, "error");
            return kg_error_set(err, KG_ERR_INVALID, "the task %s cannot be evaluated: %s: %s",
                                req->task->path, json_string_value(json_object_get(e, "type")) ?: "?",
                                json_string_value(json_object_get(e, "message")) ?: "");
        }
    }
    /* Every step below is checked (docs/style.md, "Allocation failures"): a result that cannot be built whole
     * is KG_ERR_NOMEM and no verdict, never a partial one (a lost finding or unjudged fact could make it
     * "correct").  Objects a later step reads are checked as soon as they are made. */
    json_t *r = json_object();
    json_t *stages = NULL, *variants = NULL, *hacks = NULL, *warnings = NULL; /* owned until handed to r */
    json_t *not_run = NULL; /* the planned variants never reported (variants_not_run): the detail's and the block's */
    int ok = kg_json_set(r, "schema", json_string(KG_RESULT_SCHEMA)) == 0;
    /* Paths go as they are or not at all (docs/style.md): one that is not UTF-8 is the request's error. */
    json_t *task = json_pack("{s:s, s:s, s:s, s:s}", "id", req->task->id, "name", req->task->name, "path",
                             req->task->path, "hash", req->task->hash);
    if (!task && ok && !kg_utf8_valid(req->task->path)) {
        json_decref(r);
        return kg_error_set(err, KG_ERR_INVALID, "the task's path is not UTF-8: %s", req->task->path);
    }
    ok = kg_json_set(r, "task", task) == 0 && ok;
    char chash[32];
    kg_hash64_string(req->response ? req->response : "", req->response_len, chash);
    json_t *candidate = json_pack("{s:s?, s:s, s:I}", "path", req->candidate_name, "hash", chash, "bytes",
                                  (json_int_t)req->response_len);
    if (!candidate && ok && req->candidate_name && !kg_utf8_valid(req->candidate_name)) {
        json_decref(r);
        return kg_error_set(err, KG_ERR_INVALID, "the candidate's name is not UTF-8");
    }
    ok = kg_json_set(r, "candidate", candidate) == 0 && ok;
    int cpu = strcmp(opts->device, "cpu") == 0;
    ok = ok && kg_json_set(r, "device", json_pack("{s:s, s:s}", "kind", cpu ? "cpu" : "cuda", "name",
                                                  cpu ? "cpu (Triton interpreter)" : opts->device)) == 0;

    stages = json_array();
    variants = json_array();
    not_run = messages ? variants_not_run(messages) : json_array();
    ok = ok && stages && variants && not_run;
    if (ok && extract_stage)
        ok = kg_json_push(stages, json_incref(extract_stage)) == 0;
    if (!ok)
        goto nomem;
    const char *extract_status = json_string_value(json_object_get(extract_stage, "status"));

    /* Walk the child's stages: status from its end message, duration from our
     * own clock (the t_ms we stamped), never from the child's claim. */
    const char *failed_stage = NULL;
    const json_t *failed_error = NULL;
    kg_eval_facts fx = {.failed_stage = -1};
    variant_tally tally = {0};
    char degenerate_why[512] = "";
    int stop = strcmp(extract_status ? extract_status : "fail", "ok") != 0;
    if (stop)
        failed_stage = kg_stage_names[KG_STAGE_EXTRACT];
    for (int i = 0; i < KG_EVAL_STAGE_COUNT; i++) {
        const char *name = kg_eval_stage_names[i];
        const kg_stage stage = (kg_stage)(KG_EVAL_STAGE_FIRST + i);
        json_t *begin = messages ? find_message(messages, KG_MSG_STAGE, name, "begin") : NULL;
        json_t *end = NULL;
        if (begin) {
            size_t k;
            json_t *m;
            json_array_foreach(messages, k, m) {
                const char *s = json_string_value(json_object_get(m, "stage"));
                const char *st = json_string_value(json_object_get(m, "status"));
                if (s && st && kg_msg_is(m, KG_MSG_STAGE) && !strcmp(s, name) && strcmp(st, "begin"))
                    end = m;
            }
        }
        const char *status = "skipped";
        char detail[1024] = "";
        double ms = 0;
        if (stop || !begin) {
            if (!cpu || stage != KG_STAGE_TIMING)
                snprintf(detail, sizeof detail, "%s", stop ? "not run: an earlier stage failed" : "not run");
            else
                snprintf(detail, sizeof detail, "not measured on CPU");
            if (!stop && !begin && stage == KG_STAGE_TIMING && !cpu && !opts->timing)
                snprintf(detail, sizeof detail, "timing disabled");
        } else if (!end) {
            /* The stage began and never ended: the process ended inside it. */
            status = "fail";
            ms = rep->wall_ms - num(json_object_get(begin, "t_ms"), 0);
            if (rep->end == KG_END_TIMEOUT)
                snprintf(detail, sizeof detail, "did not finish within %g s: the process was killed",
                         rep->stage_limit_s);
            else if (rep->end == KG_END_SIGNAL) {
                char how[160];
                killed_by(rep, how, sizeof how);
                snprintf(detail, sizeof detail, "the process was killed by %s", how);
            }
            else if (rep->end == KG_END_OUTPUT_FLOOD)
                snprintf(detail, sizeof detail, "the process printed more than %zu bytes and was killed",
                         opts->limits.output_limit_bytes);
            else if (rep->end == KG_END_PROTOCOL)
                snprintf(detail, sizeof detail, "the process wrote garbage on kgym's protocol channel");
            else
                snprintf(detail, sizeof detail, "the process exited with status %d inside this stage",
                         rep->exit_code);
            stop = 1;
            failed_stage = name;
        } else {
            ms = num(json_object_get(end, "t_ms"), 0) - num(json_object_get(begin, "t_ms"), 0);
            const char *st = json_string_value(json_object_get(end, "status"));
            snprintf(detail, sizeof detail, "%s", json_string_value(json_object_get(end, "detail")) ?: "");
            status = st && strcmp(st, "ok") == 0 ? "ok" : "fail";
            if (!strcmp(status, "fail")) {
                failed_stage = name;
                failed_error = json_object_get(end, "error");
                if (!json_is_object(failed_error))
                    failed_error = NULL;
                stop = 1;
            }
        }
        /* Facts that turn an "ok" from the child into a failure. */
        if (!strcmp(status, "ok") && stage == KG_STAGE_TINY_RUN) {
            json_t *rv = json_object_get(json_object_get(end, "data"), "compare");
            char why[1024];
            json_t *vr = variant_result(json_object_get(end, "data"), why, sizeof why);
            if (!vr)
                goto nomem;
            const char *vs = json_string_value(json_object_get(vr, "status"));
            if (rv && vs && !strcmp(vs, "failed") && !json_is_true(json_object_get(rv, "shape_ok"))) {
                status = "fail";
                snprintf(detail, sizeof detail, "%s", why);
                failed_stage = name;
                fx.tiny_shape_bad = 1;
                stop = 1;
            }
            json_decref(vr);
        }
        if (stage == KG_STAGE_CORRECTNESS && begin) {
            if (tally_variants(messages, NULL, &tally, variants) != 0)
                goto nomem;
            if (!strcmp(status, "ok")) {
                switch (correctness_of(&tally, messages, degenerate_why, sizeof degenerate_why)) {
                case CORRECTNESS_VARIANTS_FAILED: {
                    status = "fail";
                    char rest[96] = "";
                    if (json_array_size(not_run))
                        snprintf(rest, sizeof rest, "; %zu more not run: the stage had failed",
                                 json_array_size(not_run));
                    snprintf(detail, sizeof detail, "%d of %d variants failed (first: %.60s: %.800s)%s",
                             tally.failed + tally.error, tally.failed + tally.error + tally.passed + tally.skipped,
                             tally.first_name, tally.first_why, rest);
                    failed_stage = name;
                    stop = 1;
                    break;
                }
                case CORRECTNESS_NONE_PASSED:
                    json_decref(variants);
                    json_decref(not_run);
                    json_decref(stages);
                    json_decref(r);
                    return kg_error_set(err, KG_ERR_INVALID,
                                        "the reference %s fails or is non-finite on every input variant",
                                        req->task->path);
                case CORRECTNESS_DEGENERATE:
                    /* Every variant passed, but a zero or constant output would have passed them too: the
                     * pass says nothing about the kernel, so it is not given. */
                    status = "fail";
                    snprintf(detail, sizeof detail, "the task is degenerate: %s", degenerate_why);
                    failed_stage = name;
                    stop = 1;
                    break;
                case CORRECTNESS_PASSED:
                    snprintf(detail, sizeof detail, "%d of %d variants passed%s", tally.passed,
                             tally.passed + tally.skipped,
                             tally.skipped ? " (others skipped: the reference failed)" : "");
                    break;
                }
            }
        }
        if (!strcmp(status, "ok")) {
            /* Stage i of parse(0), static(1), compile(2), tiny_run(3), correctness(4) passed:
             * credit level i (static ok = 1 ... correct = 4); timing adds no level. */
            if (i >= 1 && i <= 4)
                fx.level = i;
        }
        kg_utf8_sanitize(detail);
        json_t *so = json_pack("{s:s, s:s, s:f, s:s}", "name", name, "status", status, "ms", ms < 0 ? 0 : ms,
                               "detail", detail);
        /* The tiny run's steps on the judge's clock (its variant's spent_ms), for tuning only: a new judge's first
         * run holds its shared phase ~10x a kept one's, and this says which step (docs/PERFORMANCE.md). */
        json_t *spent = stage == KG_STAGE_TINY_RUN && end ? json_object_get(json_object_get(end, "data"), "spent_ms")
                                                          : NULL;
        if (so && json_is_object(spent) && kg_json_set(so, "spent_ms", json_deep_copy(spent)) != 0) {
            json_decref(so);
            so = NULL;
        }
        if (kg_json_push(stages, so) != 0)
            goto nomem;
    }
    if (!failed_stage && rep && rep->end != KG_END_COMPLETED && ended_between_stages(rep, stages, opts, &failed_stage) != 0)
        goto nomem;
    ok = kg_json_set(r, "stages", stages) == 0;
    stages = NULL;
    hacks = json_array();
    warnings = json_array();
    ok = ok && hacks && warnings && (!messages || collect_hacks(opts, messages, hacks, warnings) == 0);
    ok = ok && kg_json_set(r, "hacks", json_incref(hacks)) == 0 && kg_json_set(r, "warnings", json_incref(warnings)) == 0;
    json_t *sandbox = sandbox_block(opts, messages ? find_message(messages, KG_MSG_SANDBOX, NULL, NULL) : NULL, rep, cpu);
    ok = ok && kg_json_set(r, "sandbox", json_incref(sandbox)) == 0;
    json_decref(sandbox); /* r holds it (or it is gone, and ok is 0) */
    if (!ok)
        goto nomem;
    /* What a pass needs and the run did not show (a variant never reported, a repeat check that raised, no
     * profile on a GPU, a protection the kernel refused): only asked of a run whose stages all passed. */
    json_t *unjudged = messages && !failed_stage ? kg_eval_unjudged(opts, messages, NULL, sandbox, 0) : json_array();
    if (kg_json_set(r, "unjudged", unjudged) != 0)
        goto nomem;
    ok = kg_json_set(r, "degenerate", messages ? degenerate_facts(messages) : json_null()) == 0;
    ok = ok && kg_json_set(r, "degeneracy", messages ? degeneracy_block(messages) : json_null()) == 0;
    ok = ok && kg_json_set(r, "compile_cache", messages ? compile_cache_block(messages) : json_null()) == 0;
    ok = ok && kg_json_set(r, "tolerance", tolerance_block(opts, messages)) == 0;
    /* What the task's inputs guarantee (a zero triangle, symmetry, integer labels, ...) and every variant kept
     * (tasks.input_structure): null when the judge did not report it. */
    const json_t *structure = messages ? json_object_get(find_message(messages, KG_MSG_INPUT_STRUCTURE, NULL, NULL),
                                                         "inputs")
                                       : NULL;
    ok = ok && kg_json_set(r, "input_structure", json_is_array(structure) ? json_deep_copy(structure) : json_null()) == 0;
    ok = ok && kg_json_set(r, "correctness",
                           json_pack("{s:b, s:O, s:i, s:i, s:i, s:i, s:O}", "passed",
                                     failed_stage == NULL && tally.passed > 0 && json_array_size(unjudged) == 0,
                                     "variants", variants, "passed_count", tally.passed, "failed_count",
                                     tally.failed, "error_count", tally.error, "skipped_count", tally.skipped,
                                     "not_run", not_run)) == 0;
    json_decref(not_run);
    not_run = NULL;
    json_decref(variants);
    variants = NULL;
    const json_t *mode = messages ? find_message(messages, KG_MSG_TASK_MODE, NULL, NULL) : NULL;
    ok = ok && kg_json_set(json_object_get(r, "task"), "randomness",
                           mode ? json_pack("{s:O?, s:O?, s:O?, s:O?, s:b}", "handling", json_object_get(mode, "handling"),
                                            "modules", json_object_get(mode, "modules"), "ops",
                                            json_object_get(mode, "ops"), "reason", json_object_get(mode, "reason"),
                                            /* kg_eval_run sets it from its own record: the judge's word is not taken */
                                            "cached", 0)
                                : json_null()) == 0;
    if (!ok)
        goto nomem;

    /* Timing and profile (GPU): the child's raw per-call times and kernel times, our statistics. */
    json_t *timing = json_null(), *profile = json_null();
    if (messages && !failed_stage) {
        const json_t *cache = find_message(messages, KG_MSG_REFERENCE_CACHE_SAMPLES, NULL, NULL);
        timing = kg_eval_timing_block(opts, messages, cache,
                                      cache && !strcmp(json_string_value(json_object_get(cache, "source")) ?: "",
                                                       "alone"));
        profile = kg_eval_profile_block(messages);
    }
    ok = kg_json_set(r, "timing", timing) == 0;
    ok = kg_json_set(r, "profile", profile) == 0 && ok;
    ok = ok && kg_json_set(r, "gpu_phases", messages ? kg_eval_gpu_block(messages) : json_null()) == 0;
    if (!ok)
        goto nomem;

    /* The facts the verdict is decided on: the candidate's exception (the failed stage's; in correctness, the
     * first variant's that raised), and what a pass lacks. */
    const json_t *error_obj = failed_error;
    if (failed_stage && !strcmp(failed_stage, "correctness") && !error_obj && tally.error > 0) {
        size_t k;
        json_t *m;
        json_array_foreach(messages, k, m) {
            if (kg_msg_is(m, KG_MSG_VARIANT) && json_is_object(json_object_get(m, "error"))) {
                error_obj = json_object_get(m, "error");
                break;
            }
        }
    }
    const char *error_stage = failed_stage ? failed_stage : "";
    if (!failed_stage && json_array_size(unjudged) > 0) {
        /* Every stage passed, but not everything a pass needs was seen: never correct.  The candidate's own
         * exception (a repeat call that raised) is its error; otherwise the result says what is missing. */
        size_t k;
        json_t *u;
        json_array_foreach(unjudged, k, u) {
            if (!error_obj && json_is_object(json_object_get(u, "error"))) {
                error_obj = json_object_get(u, "error"); /* the messages' object: it outlives the entry's key */
                error_stage = "correctness";
            }
            json_object_del(u, "error"); /* the result's "error" holds it, with frames cut to the candidate's */
        }
    }
    if (failed_stage) {
        fx.failed_stage = kg_stage_of(failed_stage);
    }
    fx.timed_out = rep && rep->end == KG_END_TIMEOUT;
    fx.ended_early = rep && rep->end != KG_END_COMPLETED;
    fx.raised = error_obj != NULL;
    fx.raised_in_triton_compile = error_obj && json_is_true(json_object_get(error_obj, "triton_compile"));
    fx.unjudged = json_array_size(unjudged);
    fx.hacks = json_array_size(hacks);
    for (size_t k = 0; k < fx.hacks; k++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(hacks, k), "type")) ?: "",
                    kg_finding_name(KG_FINDING_NONDETERMINISTIC)))
            fx.nondeterministic_hacks++;

    kg_eval_decision d;
    kg_eval_decide(opts, &fx, &d);
    if (d.demote_nondeterministic) {
        for (size_t k = json_array_size(hacks); k-- > 0;) {
            json_t *h = json_array_get(hacks, k);
            if (!strcmp(json_string_value(json_object_get(h, "type")) ?: "",
                        kg_finding_name(KG_FINDING_NONDETERMINISTIC))) {
                if (kg_json_push(warnings, json_incref(h)) != 0)
                    goto nomem;
                json_array_remove(hacks, k);
            }
        }
    }
    const char *cause = error_cause(error_obj);
    ok = kg_json_set(r, "verdict", json_string(kg_verdict_name(d.verdict))) == 0;
    ok = ok && kg_json_set(r, "reward", kg_json_number(d.reward)) == 0;
    ok = ok && kg_json_set(r, "error", trim_error(error_obj, error_stage, candidate_path)) == 0;
    ok = ok && kg_json_set(r, "limits", limits_block(opts, messages, sandbox, cpu)) == 0;
    if (!cause && rep && rep->end == KG_END_OUTPUT_FLOOD)
        cause = "output_flood";
    if (!cause && rep && rep->end == KG_END_SIGNAL)
        cause = "crash";
    ok = ok && kg_json_set(r, "process", rep ? process_facts(rep, cause) : json_null()) == 0;
    /* The feedback is what the model reads of the result: one that cannot be written is no result. */
    char *feedback = ok ? kg_eval_feedback(r, opts) : NULL;
    ok = ok && feedback && kg_json_set(r, "feedback", kg_json_text(feedback)) == 0;
    free(feedback);
    if (!ok)
        goto nomem;
    json_decref(hacks);
    json_decref(warnings);
    *result = r;
    return KG_OK;

nomem:
    json_decref(stages);
    json_decref(variants);
    json_decref(not_run);
    json_decref(hacks);
    json_decref(warnings);
    json_decref(r);
    return kg_error_set(err, KG_ERR_NOMEM, "out of memory building the result of %s", req->task->path);
}
