/* kinds.c — the name tables of eval/kinds.def (see eval/kinds.h). */
#include "eval/kinds.h"

#include <string.h>

const char *const kg_stage_names[KG_STAGE_COUNT] = {
#define KG_NAME_(e, name, ...) name,
    KG_STAGE_MAP(KG_NAME_)};
const char *const kg_job_status_names[KG_JOB_STATUS_COUNT] = {KG_JOB_STATUS_MAP(KG_NAME_)};
static const char *const msg_names[KG_MSG_COUNT] = {KG_MSG_MAP(KG_NAME_)};
static const char *const finding_names[KG_FINDING_COUNT] = {KG_FINDING_MAP(KG_NAME_)};
#undef KG_NAME_
static const char *const finding_rules[KG_FINDING_COUNT] = {
#define KG_RULE_(e, name, rule) rule,
    KG_FINDING_MAP(KG_RULE_)
#undef KG_RULE_
};

const char *kg_msg_name(kg_msg kind)
{
    return (int)kind >= 0 && kind < KG_MSG_COUNT ? msg_names[kind] : "?";
}

kg_stage kg_stage_of(const char *name)
{
    for (int i = 0; name && i < KG_STAGE_COUNT; i++)
        if (!strcmp(name, kg_stage_names[i]))
            return (kg_stage)i;
    return KG_STAGE_COUNT;
}

kg_msg kg_msg_kind(const json_t *msg)
{
    const char *t = json_string_value(json_object_get(msg, "type"));
    for (int i = 0; t && i < KG_MSG_COUNT; i++)
        if (!strcmp(t, msg_names[i]))
            return (kg_msg)i;
    return KG_MSG_UNKNOWN;
}

int kg_msg_is(const json_t *msg, kg_msg kind)
{
    const char *t = json_string_value(json_object_get(msg, "type"));
    return t && (int)kind >= 0 && kind < KG_MSG_COUNT && !strcmp(t, msg_names[kind]);
}

const char *kg_finding_name(kg_finding kind)
{
    return (int)kind >= 0 && kind < KG_FINDING_COUNT ? finding_names[kind] : "?";
}

const char *kg_finding_rule_of(const char *type)
{
    for (int i = 0; type && i < KG_FINDING_COUNT; i++)
        if (!strcmp(type, finding_names[i]))
            return finding_rules[i];
    return NULL;
}
