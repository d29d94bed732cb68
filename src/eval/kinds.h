/*
 * eval/kinds.h — (internal) the enums and names of eval/kinds.def: stages, job statuses, protocol messages, runner
 * commands and replies, findings.  Names are static strings; nothing here allocates.
 */
#ifndef KGYM_EVAL_KINDS_H
#define KGYM_EVAL_KINDS_H

#include <jansson.h>

#include "eval/kinds.def"

typedef enum {
#define KG_STAGE_ENUM_(e, name, who) KG_STAGE_##e,
    KG_STAGE_MAP(KG_STAGE_ENUM_)
#undef KG_STAGE_ENUM_
    KG_STAGE_COUNT
} kg_stage;

typedef enum {
#define KG_JOB_ENUM_(e, name) KG_JOB_##e,
    KG_JOB_STATUS_MAP(KG_JOB_ENUM_)
#undef KG_JOB_ENUM_
    KG_JOB_STATUS_COUNT
} kg_job_status;

typedef enum {
    KG_MSG_UNKNOWN = -1, /* no "type", or one no list names */
#define KG_MSG_ENUM_(e, name, from) KG_MSG_##e,
    KG_MSG_MAP(KG_MSG_ENUM_)
#undef KG_MSG_ENUM_
    KG_MSG_COUNT
} kg_msg;

typedef enum {
#define KG_FINDING_ENUM_(e, name, rule) KG_FINDING_##e,
    KG_FINDING_MAP(KG_FINDING_ENUM_)
#undef KG_FINDING_ENUM_
    KG_FINDING_COUNT
} kg_finding;

/* Names in list order: kg_stage_names[KG_STAGE_PARSE] is "parse". */
extern const char *const kg_stage_names[KG_STAGE_COUNT];
/* The stage a name names; KG_STAGE_COUNT for NULL or a name the list lacks. */
kg_stage kg_stage_of(const char *name);
extern const char *const kg_job_status_names[KG_JOB_STATUS_COUNT];

/* "type" of a message (KG_MSG_MAP). */
const char *kg_msg_name(kg_msg kind);
/* The kind of a protocol message by its "type" member; KG_MSG_UNKNOWN for anything else (NULL included). */
kg_msg kg_msg_kind(const json_t *msg);
/* 1 when msg's "type" is kind's name. */
int kg_msg_is(const json_t *msg, kg_msg kind);

/* "type" of a finding; the rule it stands for, said to the model ("" when it is no rule of the candidate's);
 * NULL / "" out of range.  kg_finding_rule_of: the rule of a finding type by name, NULL when unknown. */
const char *kg_finding_name(kg_finding kind);
const char *kg_finding_rule_of(const char *type);

#endif
