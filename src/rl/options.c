/* options.c — the one table of names for the RL library's enums
 * (kg_rl_option in include/kgym/rl.h).  The CLI, the Python binding and the
 * docs all use these names, so a new enum value is named here once. */
#include "kgym/rl.h"

#include <stdio.h>
#include <string.h>

#define MAX_NAMES 5

static const struct {
    const char *what;   /* for messages: "unknown <what> ..." */
    int count;          /* the enum's _COUNT */
    const char *names[MAX_NAMES];
} options[KG_OPT_COUNT] = {
    [KG_OPT_ESTIMATOR] = {"estimator", KG_ESTIMATOR_COUNT, {"grpo", "rloo", "trloo"}},
    [KG_OPT_SINGLETON] = {"singleton rule", KG_SINGLETON_COUNT, {"return", "zero"}},
    [KG_OPT_MASKED_REWARD] = {"masked-reward rule", KG_MASKED_REWARD_COUNT, {"zero", "keep"}},
    [KG_OPT_REJECTED] = {"rejected-record rule", KG_REJECTED_COUNT, {"baseline", "drop"}},
    [KG_OPT_SMALL_STD] = {"small-std rule", KG_SMALL_STD_COUNT, {"one", "keep"}},
    [KG_OPT_IS_LEVEL] = {"importance-weight level", KG_IS_LEVEL_COUNT,
                         {"token", "turn", "sequence"}},
    [KG_OPT_MRS_MODE] = {"MRS mode", KG_MRS_MODE_COUNT,
                         {"token", "turn", "turn_geo", "sequence", "geometric"}},
    [KG_OPT_PRS_MODE] = {"PRS mode", KG_PRS_MODE_COUNT, {"turn", "geometric"}},
    [KG_OPT_CURRICULUM_RULE] = {"curriculum rule", KG_CURRICULUM_RULE_COUNT,
                                {"step", "linear"}},
};

_Static_assert(KG_MRS_MODE_COUNT <= MAX_NAMES, "raise MAX_NAMES");

int kg_rl_option_parse(kg_rl_option option, const char *name, int *out, kg_error *err)
{
    if ((int)option < 0 || option >= KG_OPT_COUNT)
        return kg_error_set(err, KG_ERR_INVALID, "option family %d is unknown", (int)option);
    for (int i = 0; name && i < options[option].count; i++) {
        if (strcmp(name, options[option].names[i]) == 0) {
            *out = i;
            return KG_OK;
        }
    }
    char list[128] = "";
    size_t used = 0;
    for (int i = 0; i < options[option].count && used < sizeof list; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                         options[option].names[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return kg_error_set(err, KG_ERR_INVALID, "unknown %s \"%s\" (expected %s)",
                        options[option].what, name ? name : "(null)", list);
}

const char *kg_rl_option_name(kg_rl_option option, int value)
{
    if ((int)option < 0 || option >= KG_OPT_COUNT || value < 0 || value >= options[option].count)
        return "?";
    return options[option].names[value];
}
