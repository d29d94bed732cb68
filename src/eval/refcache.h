/*
 * eval/refcache.h — (internal) the reference-time cache: the PyTorch reference's raw
 * per-call times, stored once per (task content, GPU name, dtype, timing
 * protocol) so that repeated evaluations of the same task (RL training
 * evaluates each task thousands of times) time only the candidate.  Off by
 * default; the caller decides when to use it.
 *
 * Storage: one JSON file per key, DIR/<key>.json, written atomically (a temp
 * file in DIR, then rename()), so any number of threads and processes may get
 * and put at once and a reader never sees a torn file.  Concurrent puts of
 * the same key: the last rename wins, every version is complete.  A file that
 * is corrupt, truncated or of the wrong shape reads as absent and is removed;
 * the cache never stops an evaluation, so callers should treat any status
 * other than KG_OK from kg_refcache_get() as a miss.  Files are not fsync'd:
 * after a crash a file may be empty, and then it simply reads as a miss.
 *
 * Ownership: kg_refcache_open() returns a handle the caller releases with
 * kg_refcache_close(); the handle holds only the folder path and is immutable,
 * so one handle may be shared by threads.  kg_refcache_get() returns a new
 * reference the caller releases with json_decref().  kg_refcache_put() does
 * not steal its sample arguments.  Keys are written into caller storage.
 */
#ifndef KGYM_REFCACHE_H
#define KGYM_REFCACHE_H

#include <stddef.h>

#include <jansson.h>

#include "kgym/error.h"

/* The most samples one entry may hold (put rejects more; a stored file is
 * also read with a size limit, and a larger one reads as corrupt). */
#define KG_REFCACHE_MAX_SAMPLES 1000000

typedef struct kg_refcache kg_refcache;

/* Opens a cache folder, creating it and any missing parents with mode 0700
 * (an existing folder keeps its mode).  KG_ERR_INVALID for a NULL or empty
 * path or a path (or parent) that exists but is not a folder; KG_ERR_IO when
 * the folder cannot be made or is not writable.  Temp files older than an
 * hour left by a crashed writer are removed. */
int kg_refcache_open(const char *dir, kg_refcache **out, kg_error *err);
void kg_refcache_close(kg_refcache *c);

/* The folder the cache lives in (owned by the handle). */
const char *kg_refcache_dir(const kg_refcache *c);

/* The cache key: SHA-256 over a canonical serialisation (a version tag, then
 * each field as an 8-byte big-endian length followed by its bytes) of the
 * task source bytes, the GPU name, the dtype ("float32", ...) and the timing
 * protocol ("warmup=10;rounds=3;iters=50;flush=1;sets=3;mode=eager").  The
 * length prefixes make field boundaries unambiguous.  Writes 64 lowercase hex
 * characters and a NUL into out.  task_source may be NULL only when task_len
 * is 0; gpu, dtype and protocol must not be NULL (KG_ERR_INVALID). */
int kg_refcache_key(const char *task_source, size_t task_len, const char *gpu, const char *dtype,
                    const char *protocol, char out[65], kg_error *err);

/* Looks up key (exactly 64 lowercase hex characters, else KG_ERR_INVALID).
 * KG_OK: *entry is a new reference to
 *   {"key": "<key>", "reference_ms": [numbers...], "reference_device_ms": [numbers...] (optional: the same calls
 *    on the device-wide clock; absent in entries written before they were kept), "gpu": ..., "dtype": ...,
 *    "protocol": ..., "created": unix seconds, "samples": n}
 * KG_ERR_NOT_FOUND: no entry, or the stored file was corrupt, truncated or of
 * the wrong shape (it is removed).  KG_ERR_IO: the file exists but cannot be
 * read (e.g. permissions).  *entry is NULL on every status but KG_OK. */
int kg_refcache_get(kg_refcache *c, const char *key, json_t **entry, kg_error *err);

/* Whether `a` is a sample array the cache takes (1..KG_REFCACHE_MAX_SAMPLES finite, non-negative numbers);
 * 0 with the reason in why (always terminated) when not. */
int kg_refcache_samples_ok(const json_t *a, char *why, size_t why_size);

/* A reference's device-wide time is its stream time plus a synchronize's latency: at most this much more
 * (kg_refcache_device_ok), 1 ms or 5% of the call. */
#define KG_REFCACHE_MAX_GAP_MS 1.0
#define KG_REFCACHE_MAX_GAP_SHARE 0.05

/* Whether `device` is the device-wide times of the calls `stream` (valid samples) holds: valid samples too, as
 * many, none below its stream time (the device-wide clock reads after the stream's end event) and none more than
 * KG_REFCACHE_MAX_GAP_MS or KG_REFCACHE_MAX_GAP_SHARE of it above; 0 with the reason in why when not (kgym then
 * keeps the stream times alone, which only lowers a device-clock candidate's speedup). */
int kg_refcache_device_ok(const json_t *stream, const json_t *device, char *why, size_t why_size);

/* Stores reference_ms (a JSON array of 1..KG_REFCACHE_MAX_SAMPLES finite,
 * non-negative numbers) and, unless NULL, reference_device_ms (the same calls
 * on the device-wide clock: kg_refcache_device_ok) under key with the metadata,
 * atomically replacing any earlier entry.  KG_ERR_INVALID for a bad key, an
 * empty, non-array or non-numeric array, a negative or non-finite sample, a
 * device array kg_refcache_device_ok refuses, or NULL metadata; KG_ERR_IO when the file
 * cannot be written. */
int kg_refcache_put(kg_refcache *c, const char *key, const json_t *reference_ms, const json_t *reference_device_ms,
                    const char *gpu, const char *dtype, const char *protocol, kg_error *err);

#endif
