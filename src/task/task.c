/* task.c — resolving task files and KernelBench ids (see src/task/task.h). */
#include "task/task.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

#define KG_MAX_TASK_BYTES (4u << 20)

static char *stem_of(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 3 && strcmp(base + n - 3, ".py") == 0)
        n -= 3;
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, base, n);
        s[n] = '\0';
    }
    return s;
}

/* "level1/19", "level1/19_ReLU", "level1/19_ReLU.py", "L1/19", "1/19" → level and
 * the file name prefix to look for. */
static int parse_id(const char *spec, int *level, char *prefix, size_t cap)
{
    const char *p = spec;
    if (strncmp(p, "level", 5) == 0)
        p += 5;
    else if (*p == 'L' || *p == 'l')
        p += 1;
    if (!isdigit((unsigned char)*p))
        return -1;
    *level = atoi(p);
    while (isdigit((unsigned char)*p))
        p++;
    if (*p != '/' || !isdigit((unsigned char)p[1]))
        return -1;
    p++;
    snprintf(prefix, cap, "%s", p);
    size_t n = strlen(prefix);
    if (n > 3 && strcmp(prefix + n - 3, ".py") == 0)
        prefix[n - 3] = '\0';
    return 0;
}

static int find_in_level(const char *dir, int level, const char *prefix, char **path,
                         kg_error *err)
{
    kg_buf folder = {0};
    if (kg_buf_printf(&folder, "%s/level%d", dir, level) != KG_OK)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    DIR *d = opendir(folder.data);
    if (!d) {
        int rc = kg_error_set(err, KG_ERR_NOT_FOUND, "no folder %s (is %s a KernelBench checkout?)",
                              folder.data, dir);
        kg_buf_free(&folder);
        return rc;
    }
    /* The id's number must match the file's number exactly: "1" must not
     * find "10_…" or "100_…". */
    char number[64];
    size_t digits = strspn(prefix, "0123456789");
    snprintf(number, sizeof number, "%.*s", (int)digits, prefix);
    int want = atoi(number);
    int has_name = prefix[digits] == '_';
    char *found = NULL;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        size_t len = strlen(n);
        if (len < 4 || strcmp(n + len - 3, ".py") != 0 || !isdigit((unsigned char)n[0]))
            continue;
        if (atoi(n) != want || n[strspn(n, "0123456789")] != '_')
            continue;
        if (has_name && strncmp(n + strspn(n, "0123456789"), prefix + digits,
                                strlen(prefix + digits)) != 0)
            continue;
        kg_buf p = {0};
        int named = kg_buf_printf(&p, "%s/%s", folder.data, n) == KG_OK;
        free(found);
        found = named ? realpath(p.data, NULL) : NULL; /* absolute: the child runs in its own folder */
        kg_buf_free(&p);
        if (!named) {
            closedir(d);
            kg_buf_free(&folder);
            return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        }
        break;
    }
    closedir(d);
    if (!found) {
        int rc = kg_error_set(err, KG_ERR_NOT_FOUND, "no problem %s in %s", prefix, folder.data);
        kg_buf_free(&folder);
        return rc;
    }
    kg_buf_free(&folder);
    *path = found;
    return KG_OK;
}

int kg_task_resolve(const char *kernelbench_dir, const char *spec, kg_task *task, kg_error *err)
{
    memset(task, 0, sizeof *task);
    if (!spec || !*spec)
        return kg_error_set(err, KG_ERR_INVALID, "no task given");
    int level = 0;
    char prefix[256];
    char *path = NULL;
    char *id = NULL;
    if (kg_file_exists(spec)) {
        /* Absolute: the child runs in its own folder. */
        path = realpath(spec, NULL);
    } else if (parse_id(spec, &level, prefix, sizeof prefix) == 0) {
        if (!kernelbench_dir || !*kernelbench_dir)
            kernelbench_dir = getenv("KGYM_KERNELBENCH");
        if (!kernelbench_dir || !*kernelbench_dir)
            return kg_error_set(err, KG_ERR_INVALID,
                                "task id \"%s\" needs --kernelbench DIR (or $KGYM_KERNELBENCH)", spec);
        int rc = find_in_level(kernelbench_dir, level, prefix, &path, err);
        if (rc != KG_OK)
            return rc;
        kg_buf b = {0};
        /* NULL on failure: checked with the task's other strings below */
        id = kg_buf_printf(&b, "level%d/%d", level, atoi(prefix)) == KG_OK ? kg_buf_release(&b) : NULL;
        kg_buf_free(&b);
        if (!id) {
            free(path);
            return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        }
    } else {
        return kg_error_set(err, KG_ERR_NOT_FOUND,
                            "task \"%s\" is neither a file nor a KernelBench id like level1/19", spec);
    }
    size_t len = 0;
    int rc = kg_file_read(path, KG_MAX_TASK_BYTES, &task->source, &len, err);
    if (rc != KG_OK) {
        free(path);
        free(id);
        return rc;
    }
    task->path = path;
    task->name = stem_of(path);
    task->id = id ? id : kg_strdup(task->name);
    kg_hash64_string(task->source, len, task->hash);
    if (!task->path || !task->name || !task->id) {
        kg_task_free(task);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    return KG_OK;
}

void kg_task_free(kg_task *task)
{
    if (!task)
        return;
    free(task->path);
    free(task->id);
    free(task->name);
    free(task->source);
    memset(task, 0, sizeof *task);
}

int kg_task_from_source(const char *source, size_t len, const char *id, const char *dir,
                        kg_task *task, kg_error *err)
{
    memset(task, 0, sizeof *task);
    if (!source || !dir || !*dir)
        return kg_error_set(err, KG_ERR_INVALID, "no task source or folder given");
    if (len > KG_MAX_TASK_BYTES)
        return kg_error_set(err, KG_ERR_INVALID, "the reference source is larger than %u bytes",
                            KG_MAX_TASK_BYTES);
    /* SHA-256, not FNV-1a: the service writes references clients send into
     * one folder, and a reference made to collide with another's name would
     * be evaluated in its place. */
    char hash[KG_SHA256_STRLEN];
    if (kg_sha256_string(source, len, hash) != KG_OK)
        return kg_error_set(err, KG_ERR_INTERNAL, "SHA-256 of the reference failed");
    /* "sha256:<hex>": the hex part names the file (no ':' in module paths). */
    const char *hex = strchr(hash, ':') ? strchr(hash, ':') + 1 : hash;
    kg_buf p = {0};
    if (kg_buf_printf(&p, "%s/task-%s.py", dir, hex) != KG_OK) {
        kg_buf_free(&p);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    if (!kg_file_exists(p.data)) {
        /* Atomic, so a concurrent evaluation of the same task never
         * imports a half-written file. */
        int rc = kg_file_write_atomic(p.data, source, len, 0600, err);
        if (rc != KG_OK) {
            kg_buf_free(&p);
            return rc;
        }
    }
    task->source = malloc(len + 1);
    if (task->source) {
        memcpy(task->source, source, len);
        task->source[len] = '\0';
    }
    task->name = kg_strdup(hex);
    task->id = kg_strdup(id && *id ? id : hex);
    kg_hash64_string(source, len, task->hash); /* the task's hash as kg_task_load reports it */
    task->path = kg_buf_release(&p);
    if (!task->source || !task->name || !task->id || !task->path) {
        kg_task_free(task);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    return KG_OK;
}

int kg_task_group(const char *source, char out[65])
{
    out[0] = '\0';
    if (!source || kg_sha256_hex(source, strlen(source), out) != KG_OK) {
        out[0] = '\0';
        return -1;
    }
    return 0;
}
