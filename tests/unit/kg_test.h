/*
 * kg_test.h — the tiny unit-test framework of kgym's C tests.
 *
 * Each tests/unit/test_*.c is its own program: it lists its cases in a
 * kg_test_case array and calls kg_test_main().  A failed KG_CHECK records the
 * file and line and lets the case continue, so one run shows every failure.
 * The last line printed is "N passed, N failed", which tests/run.sh sums.
 */
#ifndef KG_TEST_H
#define KG_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

typedef struct {
    const char *name;
    void (*fn)(void);
} kg_test_case;

static int kg_test_failures_in_case;

#define KG_CHECK(cond)                                                          \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                     \
            kg_test_failures_in_case++;                                         \
        }                                                                       \
    } while (0)

#define KG_CHECK_STR(a, b)                                                          \
    do {                                                                            \
        const char *kg_a_ = (a), *kg_b_ = (b);                                      \
        if (!kg_a_ || !kg_b_ || strcmp(kg_a_, kg_b_) != 0) {                        \
            fprintf(stderr, "  %s:%d: %s == %s failed: \"%s\" vs \"%s\"\n",        \
                    __FILE__, __LINE__, #a, #b, kg_a_ ? kg_a_ : "(null)",           \
                    kg_b_ ? kg_b_ : "(null)");                                      \
            kg_test_failures_in_case++;                                             \
        }                                                                           \
    } while (0)

#define KG_CHECK_NEAR(a, b, tol)                                                    \
    do {                                                                            \
        double kg_a_ = (a), kg_b_ = (b);                                            \
        if (!(fabs(kg_a_ - kg_b_) <= (tol))) {                                      \
            fprintf(stderr, "  %s:%d: %s ~= %s failed: %.17g vs %.17g\n", __FILE__, \
                    __LINE__, #a, #b, kg_a_, kg_b_);                                \
            kg_test_failures_in_case++;                                             \
        }                                                                           \
    } while (0)

static inline int kg_test_main(const char *suite, const kg_test_case *cases,
                               size_t count)
{
    int passed = 0, failed = 0;
    /* KG_TEST_ONLY=word runs only the cases whose name holds it (a developer's shortcut; make test sets none). */
    const char *only = getenv("KG_TEST_ONLY");
    for (size_t i = 0; i < count; i++) {
        if (only && *only && !strstr(cases[i].name, only))
            continue;
        kg_test_failures_in_case = 0;
        cases[i].fn();
        if (kg_test_failures_in_case == 0) {
            passed++;
            printf("ok   %s.%s\n", suite, cases[i].name);
        } else {
            failed++;
            printf("FAIL %s.%s\n", suite, cases[i].name);
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#define KG_TEST_MAIN(suite, cases) \
    int main(void) { return kg_test_main(suite, cases, sizeof(cases) / sizeof(cases[0])); }

#endif
