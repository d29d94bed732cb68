/*
 * test_agent.c — the agent loop's pure parts: templates, the feedback a
 * model reads (every error of a structured result), context selection
 * (best-k, trimming), chat response parsing, the post-run annotation
 * (advantages, PRS, best-of-turns) and the chat client's failure path.
 * The loop itself runs against a fake server in tests/integration/test_rollout.sh.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kg_test.h"
#include "agent/agent.h"
#include "util/util.h"

static int has(const char *hay, const char *needle)
{
    int ok = hay && strstr(hay, needle) != NULL;
    if (!ok)
        fprintf(stderr, "  missing \"%s\"\n", needle);
    return ok;
}

static void test_templates(void)
{
    char *dir = NULL;
    kg_error err;
    KG_CHECK(kg_temp_dir("kgym-agent-test", &dir, &err) == KG_OK);
    kg_buf p = {0};
    kg_buf_printf(&p, "%s/first_turn.md", dir);
    const char *ft = "Task {{task_id}}:\n{{reference_code}}\n{{example}}|{{unknown}}|{{ open";
    kg_file_write(p.data, ft, strlen(ft), &err);
    kg_buf_free(&p);
    kg_buf_printf(&p, "%s/feedback.md", dir);
    const char *fb = "T{{turn}} L{{turns_left}} V{{verdict}} R{{reward}}\n{{evaluation}}";
    kg_file_write(p.data, fb, strlen(fb), &err);
    kg_buf_free(&p);

    kg_prompts pr;
    KG_CHECK(kg_prompts_load(dir, &pr, &err) == KG_OK);
    KG_CHECK_STR(pr.example, ""); /* example.md is optional */
    kg_task task = {.path = "t.py", .id = "level1/19", .name = "19_ReLU", .source = "x = '{{task_id}}'"};
    char *out = NULL;
    KG_CHECK(kg_prompt_first_turn(&pr, &task, &out, &err) == KG_OK);
    /* Substituted once: the reference's own "{{task_id}}" is not expanded. */
    KG_CHECK_STR(out, "Task level1/19:\nx = '{{task_id}}'\n|{{unknown}}|{{ open");
    free(out);

    json_t *res = json_pack("{s:s, s:f, s:[], s:s}", "verdict", "incorrect", "reward", 0.7, "stages", "feedback",
                            "summary");
    KG_CHECK(kg_prompt_feedback(&pr, res, 0.25, 2, 1, &out, &err) == KG_OK);
    KG_CHECK_STR(out, "T2 L1 Vincorrect R0.25\nsummary"); /* the evaluation is the result's feedback */
    free(out);
    json_decref(res);
    kg_prompts_free(&pr);
    kg_remove_tree(dir);
    free(dir);

    /* The shipped prompts load and carry the task, the rules and the example. */
    KG_CHECK(kg_prompts_load(NULL, &pr, &err) == KG_OK);
    task.source = "class Model(nn.Module): pass  # REFERENCE";
    KG_CHECK(kg_prompt_first_turn(&pr, &task, &out, &err) == KG_OK);
    KG_CHECK(has(out, "# REFERENCE"));
    KG_CHECK(has(out, "ModelNew"));
    KG_CHECK(has(out, "@triton.jit"));
    KG_CHECK(has(out, "scaled_relu_kernel")); /* the worked example */
    KG_CHECK(!strstr(out, "{{"));
    free(out);
    kg_prompts_free(&pr);
    KG_CHECK(kg_prompts_load("/nonexistent/prompts", &pr, &err) == KG_ERR_NOT_FOUND);
}

/* Rollouts show the model the result's feedback, the text verl and KernelGYM clients train on: one renderer
 * (src/eval/feedback.c), not a second rendering of the structured result. */
static void test_feedback_render(void)
{
    kg_error err;
    json_t *r = json_pack("{s:s, s:f, s:s}", "verdict", "incorrect", "reward", 0.7, "feedback",
                          "Wrong output: 1 of 3 checked input variants failed.");
    char *out = NULL;
    KG_CHECK(kg_feedback_render(r, &out, &err) == KG_OK);
    KG_CHECK_STR(out, "Wrong output: 1 of 3 checked input variants failed.");
    free(out);

    /* Without a feedback string (a result another tool wrote): the same renderer's text of the result. */
    json_object_del(r, "feedback");
    json_object_set_new(r, "error", json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:s}]}", "type", "RuntimeError",
                                              "message", "index out of bounds", "frames", "file", "candidate.py",
                                              "line", 33, "function", "forward", "code", "k[grid](x)"));
    json_object_set_new(r, "verdict", json_string("runtime_error"));
    char *want = kg_eval_feedback(r, NULL);
    KG_CHECK(kg_feedback_render(r, &out, &err) == KG_OK);
    KG_CHECK_STR(out, want);
    KG_CHECK(has(out, "RuntimeError: index out of bounds") && has(out, "candidate.py line 33, in forward"));
    free(out);
    free(want);
    json_decref(r);

    /* A huge message is cut once, by that renderer, and the text stays valid UTF-8. */
    kg_buf big = {0};
    kg_buf_puts(&big, "HEAD");
    for (int i = 0; i < 5000; i++)
        kg_buf_puts(&big, "é");
    kg_buf_puts(&big, "TAIL");
    r = json_pack("{s:s, s:{s:s, s:s}}", "verdict", "runtime_error", "error", "type", "E", "message", big.data);
    KG_CHECK(kg_feedback_render(r, &out, &err) == KG_OK);
    KG_CHECK(has(out, "HEAD") && out && strlen(out) < 4000);
    json_t *s = json_string(out);
    KG_CHECK(s != NULL);
    json_decref(s);
    free(out);
    json_decref(r);
    kg_buf_free(&big);

    KG_CHECK(kg_feedback_render(NULL, &out, &err) == KG_ERR_INVALID);
}

static int kept_eq(json_t *kept, const int *want, size_t n)
{
    if (json_array_size(kept) != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (json_integer_value(json_array_get(kept, i)) != want[i])
            return 0;
    return 1;
}

static void test_context(void)
{
    kg_error err;
    kg_turn_view t[4] = {{1, "r1", "f1", 0.5}, {2, "r2", "f2", 0.0}, {3, "r3", "f3", 0.0}, {4, "r4", "f4", 0.5}};
    json_t *m = NULL, *kept = NULL;
    KG_CHECK(kg_agent_context("TASK", t, 4, 0, 0, &m, &kept, &err) == KG_OK);
    KG_CHECK(json_array_size(m) == 9 && kept_eq(kept, (int[]){1, 2, 3, 4}, 4));
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(m, 0), "content")), "TASK");
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(m, 7), "role")), "assistant");
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(m, 8), "content")), "f4");
    json_decref(m);
    json_decref(kept);
    /* Best 1 by reward: a tie goes to the later turn. */
    KG_CHECK(kg_agent_context("TASK", t, 4, 1, 0, &m, &kept, &err) == KG_OK);
    KG_CHECK(kept_eq(kept, (int[]){4}, 1) && json_array_size(m) == 3);
    json_decref(m);
    json_decref(kept);
    KG_CHECK(kg_agent_context("TASK", t, 4, 2, 0, &m, &kept, &err) == KG_OK);
    KG_CHECK(kept_eq(kept, (int[]){1, 4}, 2)); /* chronological order */
    json_decref(m);
    json_decref(kept);
    /* Budget: "TASK" (4) + 4 per pair; 13 chars keep the task and the last two pairs. */
    KG_CHECK(kg_agent_context("TASK", t, 4, 0, 13, &m, &kept, &err) == KG_OK);
    KG_CHECK(kept_eq(kept, (int[]){3, 4}, 2));
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(m, 0), "content")), "TASK");
    json_decref(m);
    json_decref(kept);
    /* Even a tiny budget keeps the task and the latest pair. */
    KG_CHECK(kg_agent_context("TASK", t, 4, 0, 1, &m, &kept, &err) == KG_OK);
    KG_CHECK(kept_eq(kept, (int[]){4}, 1) && json_array_size(m) == 3);
    json_decref(m);
    json_decref(kept);
    KG_CHECK(kg_agent_context("TASK", NULL, 0, 2, 10, &m, NULL, &err) == KG_OK);
    KG_CHECK(json_array_size(m) == 1);
    json_decref(m);
}

static void test_chat_parse(void)
{
    kg_error err;
    kg_chat_reply r;
    memset(&r, 0, sizeof r);
    const char *ok = "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"hi\"},\"finish_reason\":"
                     "\"length\"}],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3}}";
    KG_CHECK(kg_chat_parse_response(ok, strlen(ok), &r, &err) == KG_OK);
    KG_CHECK_STR(r.content, "hi");
    KG_CHECK_STR(r.finish_reason, "length");
    KG_CHECK(r.prompt_tokens == 12 && r.completion_tokens == 3);
    const char *reason = "{\"choices\":[{\"message\":{\"content\":null,\"reasoning_content\":\"R\"}}]}";
    KG_CHECK(kg_chat_parse_response(reason, strlen(reason), &r, &err) == KG_OK);
    KG_CHECK_STR(r.content, "R");
    KG_CHECK(r.prompt_tokens == -1 && r.finish_reason == NULL);
    const char *bad[] = {"", "{\"choices\": []}", "[1]", "{\"choices\":[{\"message\":{\"role\":\"assist"};
    for (size_t i = 0; i < 4; i++)
        KG_CHECK(kg_chat_parse_response(bad[i], strlen(bad[i]), &r, &err) == KG_ERR_PROTOCOL);
    kg_chat_reply_free(&r);
}

static json_t *record(int sample, int turn, const char *verdict, double reward, double coverage)
{
    json_t *res = json_pack("{s:s, s:f, s:[]}", "verdict", verdict, "reward", 1.0, "hacks");
    if (coverage >= 0)
        json_object_set_new(res, "profile", json_pack("{s:f}", "coverage", coverage));
    return json_pack("{s:s, s:i, s:i, s:f, s:o}", "task", "t1", "sample", sample, "turn", turn, "reward", reward,
                     "result", res);
}

static void test_annotate(void)
{
    kg_error err;
    kg_advantage_config adv;
    kg_advantage_config_default(&adv, KG_ESTIMATOR_TRLOO);
    kg_prs_config prs;
    kg_prs_config_default(&prs);
    json_t *recs = json_array();
    json_array_append_new(recs, record(0, 1, "incorrect", 0.0, -1));
    json_array_append_new(recs, record(0, 2, "correct", 0.5, 0.35));
    json_array_append_new(recs, record(1, 1, "correct", 0.5, 0.9));
    json_array_append_new(recs, record(1, 2, "correct", 1.0, 0.2));
    KG_CHECK(kg_agent_annotate(recs, &adv, &prs, 7, &err) == KG_OK);
    /* Returns: s0 = [0.5, 0.5], s1 = [1.5, 1.0]; TRLOO in groups of two.  PRS
     * decides first: a rejected turn gets advantage 0 but stays in the other's
     * baseline (record 3, p = 0; record 1 is a p = 0.5 draw). */
    const double want_g[] = {0.5, 0.5, 1.5, 1.0}, want_a[] = {-1.0, -0.5, 1.0, 0.5};
    const double want_p[] = {1.0, 0.5, 1.0, 0.0};
    const int want_best[] = {0, 1, 0, 1};
    for (size_t i = 0; i < 4; i++) {
        json_t *r = json_array_get(recs, i);
        KG_CHECK_NEAR(json_number_value(json_object_get(r, "return")), want_g[i], 1e-12);
        int kept = json_is_true(json_object_get(r, "prs_keep"));
        KG_CHECK_NEAR(json_number_value(json_object_get(r, "advantage")), kept ? want_a[i] : 0.0, 1e-12);
        KG_CHECK_NEAR(json_number_value(json_object_get(r, "prs_prob")), want_p[i], 1e-12);
        KG_CHECK(json_is_boolean(json_object_get(r, "prs_keep")));
        KG_CHECK(json_is_true(json_object_get(r, "best")) == want_best[i]);
        KG_CHECK_STR(json_string_value(json_object_get(r, "estimator")), "trloo");
    }
    KG_CHECK(json_is_true(json_object_get(json_array_get(recs, 0), "prs_keep"))); /* p = 1 */
    KG_CHECK(json_is_false(json_object_get(json_array_get(recs, 3), "prs_keep"))); /* p = 0 */

    kg_metrics_report m;
    KG_CHECK(kg_agent_metrics(recs, &m, &err) == KG_OK);
    KG_CHECK(m.n_turns == 2 && m.samples == 2);
    KG_CHECK_NEAR(m.per_turn[0].correct_rate, 0.5, 1e-12);
    KG_CHECK_NEAR(m.per_turn[1].correct_rate, 1.0, 1e-12);
    kg_metrics_report_free(&m);

    /* A correct turn without coverage (CPU): PRS is not decided, not guessed. */
    json_array_append_new(recs, record(2, 1, "correct", 0.5, -1));
    KG_CHECK(kg_agent_annotate(recs, &adv, &prs, 7, &err) == KG_OK);
    KG_CHECK(json_is_null(json_object_get(json_array_get(recs, 0), "prs_keep")));
    /* Best of turns: earliest on ties. */
    json_array_append_new(recs, record(2, 2, "correct", 0.5, -1));
    KG_CHECK(kg_agent_annotate(recs, &adv, NULL, 7, &err) == KG_OK);
    KG_CHECK(json_is_true(json_object_get(json_array_get(recs, 4), "best")));
    KG_CHECK(json_is_false(json_object_get(json_array_get(recs, 5), "best")));

    /* Void turns: sample 2 scored 0.5 then 0.5 (kept); add a regression. */
    json_array_append_new(recs, record(2, 3, "incorrect", 0.0, -1));
    KG_CHECK(kg_agent_mask_void_turns(recs, &err) == KG_OK);
    KG_CHECK(json_is_false(json_object_get(json_array_get(recs, 6), "mask")));
    KG_CHECK(json_is_true(json_object_get(json_array_get(recs, 0), "mask"))); /* 0 at turn 1: nothing before */
    KG_CHECK(json_is_true(json_object_get(json_array_get(recs, 5), "mask")));
    KG_CHECK(kg_agent_annotate(recs, &adv, NULL, 7, &err) == KG_OK);
    KG_CHECK(json_number_value(json_object_get(json_array_get(recs, 6), "advantage")) == 0.0);
    json_array_remove(recs, 6);

    /* Bad records are named, not crashed on. */
    json_array_append_new(recs, json_pack("{s:s, s:i, s:i}", "task", "t1", "sample", 9, "turn", 1));
    KG_CHECK(kg_agent_annotate(recs, &adv, &prs, 7, &err) == KG_ERR_INVALID);
    KG_CHECK(has(err.message, "record 6"));
    json_decref(recs);
}

static void test_chat_unreachable(void)
{
    /* A loopback port nobody listens on: connection refused, retried, reported. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    KG_CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", ntohs(a.sin_port));
    kg_chat_config cfg;
    kg_chat_config_default(&cfg);
    cfg.url = url;
    cfg.model = "m";
    cfg.max_retries = 2;
    cfg.backoff_base_s = 0.01;
    cfg.timeout_s = 2;
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", "hi");
    kg_chat_request req[2] = {{msgs, "a"}, {msgs, NULL}};
    kg_chat_reply rep[2];
    kg_error err;
    double t0 = kg_now_ms();
    KG_CHECK(kg_chat_batch(&cfg, 2, req, rep, NULL, NULL, &err) == KG_OK);
    KG_CHECK(kg_now_ms() - t0 < 5000);
    for (int i = 0; i < 2; i++) {
        KG_CHECK(!rep[i].ok && rep[i].attempts == 3 && rep[i].error[0]);
        kg_chat_reply_free(&rep[i]);
    }
    cfg.url = NULL;
    KG_CHECK(kg_chat_batch(&cfg, 2, req, rep, NULL, NULL, &err) == KG_ERR_INVALID);
    cfg.url = url;
    cfg.concurrency = 0;
    KG_CHECK(kg_chat_batch(&cfg, 2, req, rep, NULL, NULL, &err) == KG_ERR_INVALID);
    json_decref(msgs);
}

int main(void)
{
    static const kg_test_case cases[] = {
        {"templates", test_templates},
        {"feedback_render", test_feedback_render},
        {"context", test_context},
        {"chat_parse", test_chat_parse},
        {"annotate", test_annotate},
        {"chat_unreachable", test_chat_unreachable},
    };
    return kg_test_main("agent", cases, sizeof cases / sizeof *cases);
}
