/*
 * refcache.c — the reference-time cache (src/eval/refcache.h): SHA-256
 * keys over length-prefixed fields (util/hash.c), one JSON file per key,
 * written atomically (kg_file_write_atomic's temp file, fsync and rename),
 * corrupt files read as misses and are removed.
 * No state beyond the folder path, so no locks.
 */
#include "eval/refcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/json.h"
#include "util/util.h"

struct kg_refcache {
    char *dir;
};

/* The largest file get() reads: MAX_SAMPLES numbers at ~25 bytes each plus
 * metadata fits comfortably. */
#define REFCACHE_MAX_FILE_BYTES ((size_t)64 << 20)
/* Temp files older than this are a crashed writer's leftovers. */
#define REFCACHE_STALE_TEMP_S 3600
/* kg_atomic_begin's temporary files (util.h) */
#define REFCACHE_TEMP_PREFIX KG_FILE_TEMP_PREFIX
/* Changing the key's serialisation must change this tag. */
#define REFCACHE_KEY_TAG "kgym-refcache-key-v1"

/* ---- keys --------------------------------------------------------------- */

int kg_refcache_key(const char *task_source, size_t task_len, const char *gpu, const char *dtype,
                    const char *protocol, char out[65], kg_error *err)
{
    if (!out)
        return kg_error_set(err, KG_ERR_INVALID, "refcache key: no output buffer");
    out[0] = '\0';
    if (!task_source && task_len)
        return kg_error_set(err, KG_ERR_INVALID, "refcache key: task source is NULL but its length is %zu",
                            task_len);
    if (!gpu || !dtype || !protocol)
        return kg_error_set(err, KG_ERR_INVALID, "refcache key: the %s is missing",
                            !gpu ? "GPU name" : !dtype ? "dtype" : "timing protocol");
    /* Length-prefixed fields (kg_sha256_fields): the key files on disk were
     * named by this encoding before it moved to util/hash.c, so they stay
     * valid (tests/unit/test_refcache.c pins one key). */
    const kg_hash_field fields[] = {
        KG_HASH_STR(REFCACHE_KEY_TAG),
        {task_source ? task_source : "", task_len},
        KG_HASH_STR(gpu),
        KG_HASH_STR(dtype),
        KG_HASH_STR(protocol),
    };
    return kg_sha256_fields(fields, sizeof fields / sizeof fields[0], out, err);
}

/* Exactly 64 lowercase hex digits: the only names that become file names. */
static int check_key(const char *key, kg_error *err)
{
    if (!key)
        return kg_error_set(err, KG_ERR_INVALID, "refcache: no key");
    size_t i = 0;
    for (; key[i] && i < 64; i++)
        if (!((key[i] >= '0' && key[i] <= '9') || (key[i] >= 'a' && key[i] <= 'f')))
            break;
    if (i != 64 || key[64] != '\0') {
        char shown[80];
        snprintf(shown, sizeof shown, "%.72s", key);
        kg_utf8_sanitize(shown);
        return kg_error_set(err, KG_ERR_INVALID,
                            "refcache: bad key \"%s\" (expected 64 lowercase hex characters)", shown);
    }
    return KG_OK;
}

/* ---- opening ------------------------------------------------------------ */

static int make_dirs(char *path, kg_error *err)
{
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(path, 0700) != 0) {
            int e = errno;
            struct stat st;
            if (e == EEXIST && stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {
                int rc = kg_error_set(err, KG_ERR_INVALID,
                                      "refcache: %s exists and is not a folder", path);
                *p = saved;
                return rc;
            }
            if (e != EEXIST) {
                int rc = kg_error_set(err, e == ENOTDIR ? KG_ERR_INVALID : KG_ERR_IO,
                                      "refcache: cannot make folder %s: %s", path, strerror(e));
                *p = saved;
                return rc;
            }
        }
        *p = saved;
        if (!saved)
            return KG_OK;
    }
}

static void remove_stale_temps(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, REFCACHE_TEMP_PREFIX, strlen(REFCACHE_TEMP_PREFIX)) != 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            now - st.st_mtime > REFCACHE_STALE_TEMP_S)
            unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
}

/* Whether nobody but this process's user (and root) can change what the folder holds: a cached reference time sets
 * every later speedup of its task, so an entry planted by another local user (every input of the key is knowable)
 * would set them at will.  The folder must be ours and not writable by group or others; every folder above it must
 * belong to us or root and be unwritable by others unless sticky (/tmp: others cannot rename or remove what is
 * ours there).  Refused with the reason otherwise. */
static int only_ours(const char *path, kg_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return kg_error_set(err, KG_ERR_IO, "refcache: cannot stat cache folder %s: %s", path, strerror(errno));
    if (st.st_uid != geteuid())
        return kg_error_set(err, KG_ERR_INVALID, "refcache: cache folder %s belongs to uid %ld, not to kgym's (%ld): "
                            "another user could plant reference times in it", path, (long)st.st_uid,
                            (long)geteuid());
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return kg_error_set(err, KG_ERR_INVALID, "refcache: cache folder %s is writable by %s: another user could "
                            "plant reference times in it (chmod go-w it, or choose another folder)", path,
                            st.st_mode & S_IWOTH ? "others" : "its group");
    char *up = realpath(path, NULL);
    if (!up)
        return kg_error_set(err, KG_ERR_IO, "refcache: cannot resolve cache folder %s: %s", path, strerror(errno));
    int rc = KG_OK;
    for (char *slash = strrchr(up, '/'); rc == KG_OK && slash; slash = strrchr(up, '/')) {
        slash[slash == up] = '\0'; /* the parent ("/" for a folder at the root) */
        if (stat(up, &st) != 0)
            rc = kg_error_set(err, KG_ERR_IO, "refcache: cannot stat %s: %s", up, strerror(errno));
        else if ((st.st_uid != 0 && st.st_uid != geteuid()) ||
                 ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)))
            rc = kg_error_set(err, KG_ERR_INVALID, "refcache: cache folder %s lies in %s, which another user can "
                              "change (owner uid %ld, mode %03o): choose a folder only kgym's user can write", path,
                              up, (long)st.st_uid, (unsigned)(st.st_mode & 07777));
        if (slash == up)
            break;
    }
    free(up);
    return rc;
}

int kg_refcache_open(const char *dir, kg_refcache **out, kg_error *err)
{
    if (out)
        *out = NULL;
    if (!out)
        return kg_error_set(err, KG_ERR_INVALID, "refcache: no output handle");
    if (!dir || !*dir)
        return kg_error_set(err, KG_ERR_INVALID, "refcache: no cache folder given");
    char *path = kg_strdup(dir);
    if (!path)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        path[--n] = '\0';
    int rc = make_dirs(path, err);
    if (rc == KG_OK)
        rc = only_ours(path, err);
    if (rc == KG_OK && access(path, W_OK | X_OK) != 0)
        rc = kg_error_set(err, KG_ERR_IO, "refcache: cache folder %s is not writable: %s", path,
                          strerror(errno));
    kg_refcache *c = rc == KG_OK ? malloc(sizeof *c) : NULL;
    if (rc == KG_OK && !c)
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    if (rc != KG_OK) {
        free(path);
        return rc;
    }
    c->dir = path;
    remove_stale_temps(path);
    *out = c;
    return KG_OK;
}

void kg_refcache_close(kg_refcache *c)
{
    if (!c)
        return;
    free(c->dir);
    free(c);
}

const char *kg_refcache_dir(const kg_refcache *c)
{
    return c ? c->dir : NULL;
}

/* ---- entries ------------------------------------------------------------ */

int kg_refcache_samples_ok(const json_t *a, char *why, size_t why_size)
{
    if (!json_is_array(a)) {
        snprintf(why, why_size, "reference_ms is not an array");
        return 0;
    }
    size_t n = json_array_size(a);
    if (n == 0 || n > KG_REFCACHE_MAX_SAMPLES) {
        snprintf(why, why_size, "reference_ms has %zu samples (expected 1..%d)", n,
                 KG_REFCACHE_MAX_SAMPLES);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(a, i);
        if (!json_is_number(v)) {
            snprintf(why, why_size, "reference_ms[%zu] is not a number", i);
            return 0;
        }
        double x = json_number_value(v);
        if (!isfinite(x) || x < 0) {
            snprintf(why, why_size, "reference_ms[%zu] is %g (times must be finite and >= 0)", i, x);
            return 0;
        }
    }
    return 1;
}

int kg_refcache_device_ok(const json_t *stream, const json_t *device, char *why, size_t why_size)
{
    if (!kg_refcache_samples_ok(device, why, why_size))
        return 0;
    if (json_array_size(device) != json_array_size(stream)) {
        snprintf(why, why_size, "%zu device-wide times for %zu samples", json_array_size(device),
                 json_array_size(stream));
        return 0;
    }
    for (size_t k = 0; k < json_array_size(device); k++) {
        double s = json_number_value(json_array_get(stream, k)), d = json_number_value(json_array_get(device, k));
        if (d < s) {
            snprintf(why, why_size, "device-wide time %zu is below its stream time (the device-wide clock reads later)",
                     k);
            return 0;
        }
        /* A reference leaves no work on other streams: its device-wide time is its stream time plus a synchronize's
         * latency (0.03-0.25 ms on an H200).  More is a host that stalled, or no reference's times at all. */
        if (d > s + fmax(KG_REFCACHE_MAX_GAP_MS, KG_REFCACHE_MAX_GAP_SHARE * s)) {
            snprintf(why, why_size, "device-wide time %zu is %.4g ms after its stream time (at most %g ms or %g%%)", k,
                     d - s, KG_REFCACHE_MAX_GAP_MS, 100 * KG_REFCACHE_MAX_GAP_SHARE);
            return 0;
        }
    }
    return 1;
}

static int check_entry(const json_t *e, const char *key, char *why, size_t why_size)
{
    if (!json_is_object(e)) {
        snprintf(why, why_size, "not a JSON object");
        return 0;
    }
    const char *fields[] = {"key", "gpu", "dtype", "protocol"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (!json_is_string(json_object_get(e, fields[i]))) {
            snprintf(why, why_size, "\"%s\" is missing or not a string", fields[i]);
            return 0;
        }
    if (strcmp(json_string_value(json_object_get(e, "key")), key) != 0) {
        snprintf(why, why_size, "it names another key");
        return 0;
    }
    const json_t *samples = json_object_get(e, "reference_ms");
    if (!kg_refcache_samples_ok(samples, why, why_size))
        return 0;
    /* The device-wide times are optional (entries from before they were kept), but when present they are the
     * same calls: as many, and as valid. */
    const json_t *device = json_object_get(e, "reference_device_ms");
    if (device && !kg_refcache_device_ok(samples, device, why, why_size))
        return 0;
    const json_t *created = json_object_get(e, "created"), *count = json_object_get(e, "samples");
    if (!json_is_integer(created) || json_integer_value(created) < 0) {
        snprintf(why, why_size, "\"created\" is missing or not a non-negative integer");
        return 0;
    }
    if (!json_is_integer(count) || json_integer_value(count) < 0 ||
        (size_t)json_integer_value(count) != json_array_size(samples)) {
        snprintf(why, why_size, "\"samples\" does not match the number of samples");
        return 0;
    }
    return 1;
}

static char *entry_path(const kg_refcache *c, const char *key)
{
    kg_buf b = {0};
    if (kg_buf_printf(&b, "%s/%s.json", c->dir, key) != KG_OK) {
        kg_buf_free(&b);
        return NULL;
    }
    return kg_buf_release(&b);
}

/* Removes the unusable file at path, but only if it is still the one that
 * was read (same device and inode; with read_st NULL, only a symbolic link):
 * a writer may have just renamed a good entry over it.  The window between
 * lstat() and unlink() remains; losing that race costs one extra miss, never
 * a wrong answer.  Returns 1 when something was removed. */
static int discard(const char *path, const struct stat *read_st)
{
    struct stat now;
    if (lstat(path, &now) != 0 || S_ISDIR(now.st_mode))
        return 0;
    if (read_st ? (now.st_dev != read_st->st_dev || now.st_ino != read_st->st_ino) : !S_ISLNK(now.st_mode))
        return 0;
    return unlink(path) == 0;
}

int kg_refcache_get(kg_refcache *c, const char *key, json_t **entry, kg_error *err)
{
    if (entry)
        *entry = NULL;
    if (!c || !entry)
        return kg_error_set(err, KG_ERR_INVALID, "refcache get: no cache or no output");
    int rc = check_key(key, err);
    if (rc != KG_OK)
        return rc;
    char *path = entry_path(c, key);
    if (!path)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");

    char why[256] = "";
    struct stat st;
    int have_st = 0;
    /* O_NOFOLLOW: entries are regular files we wrote; O_NONBLOCK: a FIFO
     * planted under an entry's name must not hang an evaluation. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT) {
            rc = kg_error_set(err, KG_ERR_NOT_FOUND, "refcache: no entry %s", key);
        } else if (e == ELOOP) {
            snprintf(why, sizeof why, "it is a symbolic link");
        } else {
            rc = kg_error_set(err, KG_ERR_IO, "refcache: cannot open %s: %s", path, strerror(e));
        }
    } else if (fstat(fd, &st) != 0) {
        rc = kg_error_set(err, KG_ERR_IO, "refcache: cannot stat %s: %s", path, strerror(errno));
    } else {
        have_st = 1;
        if (!S_ISREG(st.st_mode)) {
            snprintf(why, sizeof why, "it is not a regular file");
        } else if ((size_t)st.st_size > REFCACHE_MAX_FILE_BYTES) {
            snprintf(why, sizeof why, "it is larger than %zu bytes", REFCACHE_MAX_FILE_BYTES);
        } else {
            char *data = NULL;
            size_t len = 0;
            kg_error rerr;
            int r = kg_fd_read(fd, path, REFCACHE_MAX_FILE_BYTES, &data, &len, &rerr);
            if (r == KG_ERR_INVALID) {
                snprintf(why, sizeof why, "it is larger than %zu bytes", REFCACHE_MAX_FILE_BYTES);
            } else if (r != KG_OK) {
                rc = kg_error_set(err, (kg_status)r, "refcache: %s", rerr.message);
            } else {
                json_error_t jerr;
                json_t *e = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
                if (!e)
                    snprintf(why, sizeof why, "it is not valid JSON: %s", jerr.text);
                else if (!check_entry(e, key, why, sizeof why))
                    json_decref(e);
                else
                    *entry = e;
            }
            free(data);
        }
    }
    if (fd >= 0)
        close(fd);
    if (why[0]) {
        int removed = discard(path, have_st ? &st : NULL);
        rc = kg_error_set(err, KG_ERR_NOT_FOUND, "refcache: entry %s was unusable (%s)%s", key, why,
                          removed ? " and was removed" : "");
    }
    free(path);
    return rc;
}

/* A copy of a sample array, every number as a real (NULL when memory runs out). */
static json_t *samples_copy(const json_t *from)
{
    json_t *samples = json_array();
    for (size_t i = 0; samples && i < json_array_size(from); i++)
        if (json_array_append_new(samples, json_real(json_number_value(json_array_get(from, i)))) != 0) {
            json_decref(samples);
            samples = NULL;
        }
    return samples;
}

static int build_entry(const char *key, const json_t *reference_ms, const json_t *reference_device_ms,
                       const char *gpu, const char *dtype, const char *protocol, json_t **out, kg_error *err)
{
    *out = NULL;
    json_t *e = json_object();
    if (!e)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    int ok = kg_json_set(e, "key", json_string(key)) == 0;
    ok = kg_json_set(e, "reference_ms", samples_copy(reference_ms)) == 0 && ok;
    if (reference_device_ms)
        ok = kg_json_set(e, "reference_device_ms", samples_copy(reference_device_ms)) == 0 && ok;
    if (!ok) {
        json_decref(e);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    const json_t *samples = json_object_get(e, "reference_ms");
    const char *names[] = {"gpu", "dtype", "protocol"};
    const char *values[] = {gpu, dtype, protocol};
    for (int i = 0; i < 3; i++) {
        json_t *s = json_string(values[i]);
        if (!s) { /* jansson refuses invalid UTF-8 */
            json_decref(e);
            return kg_error_set(err, KG_ERR_INVALID, "refcache put: the %s is not valid UTF-8", names[i]);
        }
        ok = kg_json_set(e, names[i], s) == 0 && ok; /* takes s either way */
    }
    ok = ok && kg_json_set(e, "created", json_integer((json_int_t)time(NULL))) == 0;
    ok = ok && kg_json_set(e, "samples", json_integer((json_int_t)json_array_size(samples))) == 0;
    if (!ok) {
        json_decref(e);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    *out = e;
    return KG_OK;
}

int kg_refcache_put(kg_refcache *c, const char *key, const json_t *reference_ms, const json_t *reference_device_ms,
                    const char *gpu, const char *dtype, const char *protocol, kg_error *err)
{
    if (!c)
        return kg_error_set(err, KG_ERR_INVALID, "refcache put: no cache");
    int rc = check_key(key, err);
    if (rc != KG_OK)
        return rc;
    if (!gpu || !dtype || !protocol)
        return kg_error_set(err, KG_ERR_INVALID, "refcache put: the %s is missing",
                            !gpu ? "GPU name" : !dtype ? "dtype" : "timing protocol");
    char why[256];
    if (!kg_refcache_samples_ok(reference_ms, why, sizeof why))
        return kg_error_set(err, KG_ERR_INVALID, "refcache put: %s", why);
    if (reference_device_ms && !kg_refcache_device_ok(reference_ms, reference_device_ms, why, sizeof why))
        return kg_error_set(err, KG_ERR_INVALID, "refcache put: the device-wide times: %s", why);

    json_t *e;
    rc = build_entry(key, reference_ms, reference_device_ms, gpu, dtype, protocol, &e, err);
    if (rc != KG_OK)
        return rc;
    char *text = json_dumps(e, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(e);
    kg_buf dst = {0};
    if (!text || kg_buf_printf(&dst, "%s/%s.json", c->dir, key) != KG_OK) {
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        goto out;
    }
    kg_atomic_file f;
    if ((rc = kg_atomic_begin(&f, dst.data, 0600, err)) != KG_OK)
        goto out;
    if (kg_fd_write_all(f.fd, text, strlen(text)) != 0 || kg_fd_write_all(f.fd, "\n", 1) != 0) {
        rc = kg_error_set(err, KG_ERR_IO, "refcache: cannot write %s: %s", dst.data, strerror(errno));
        kg_atomic_abort(&f);
        goto out;
    }
    rc = kg_atomic_commit(&f, err);
out:
    free(text);
    kg_buf_free(&dst);
    return rc;
}
