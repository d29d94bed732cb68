/*
 * task/task.h — (internal) finding a task: a KernelBench-format reference file given by
 * path, or by id ("level1/19", "level2/40_Matmul_Scaling_ResidualAdd") inside
 * a KernelBench checkout.  The file itself is loaded and checked by the
 * harness; C only needs to find it, name it and hash it.
 * Ownership: kg_task strings are malloc'd; kg_task_free() releases them.
 */
#ifndef KGYM_TASK_H
#define KGYM_TASK_H

#include <stddef.h>

#include "kgym/error.h"

typedef struct kg_task {
    char *path;   /* the reference file */
    char *id;     /* "level1/19" for KernelBench ids, else the file's stem */
    char *name;   /* the file's stem, e.g. "19_ReLU" */
    char *source; /* the file's text */
    char hash[32];
} kg_task;

/* spec: a path to a .py file, or an id resolved inside kernelbench_dir (which
 * may be NULL: then $KGYM_KERNELBENCH, else an error naming the flag). */
int kg_task_resolve(const char *kernelbench_dir, const char *spec, kg_task *task, kg_error *err);
void kg_task_free(kg_task *task);

/* A task given as reference source text (the service receives code, not
 * paths): writes it to <dir>/task-<hash>.py (dir is a private folder the
 * caller owns and removes; an existing file of that name is reused, since
 * the name is the content hash) and fills task as kg_task_resolve would.
 * id names the task in results (NULL: its hash). */
int kg_task_from_source(const char *source, size_t len, const char *id, const char *dir,
                        kg_task *task, kg_error *err);

/* The routing group of a task given by its text (store.h kg_route): the SHA-256 (hex) of its bytes up to the first
 * NUL, which is the key kept judges serve by (pair.c hashes the task file the judge loads) wherever the text is that
 * file whole: kg_task_from_source writes it so, and a file holding a NUL gets another key (its jobs then find no
 * kept judge by routing, nothing worse).  "" in out and -1 for NULL. */
int kg_task_group(const char *source, char out[65]);

#endif
