/*
 * util.h — small helpers shared by every kgym subsystem: growable buffers,
 * files and folders, the monotonic clock, content hashes.
 *
 * Ownership: kg_buf owns its data until kg_buf_release() hands it to the
 * caller or kg_buf_free() frees it; kg_file_read() returns malloc'd memory the
 * caller frees.  Nothing here keeps global state.
 */
#ifndef KG_UTIL_H
#define KG_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <stdarg.h>
#include <string.h>
#include <sys/types.h>

#include "kgym/error.h"

typedef struct kg_buf {
    char *data; /* always NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
} kg_buf;

int kg_buf_append(kg_buf *b, const void *data, size_t len);
int kg_buf_puts(kg_buf *b, const char *s);
int kg_buf_printf(kg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int kg_buf_vprintf(kg_buf *b, const char *fmt, va_list ap);
/* Returns the data (caller frees; "" if empty) and resets b. NULL on OOM. */
char *kg_buf_release(kg_buf *b);
void kg_buf_free(kg_buf *b);

/* Lines from a descriptor, the one way kgym splits a stream into lines (lines.c): the zygote's control socket,
 * a warm pair's first answer and the judge's protocol stream (src/supervisor).  What a read brings beyond a
 * line stays in the reader for the next one, so a reader lives as long as its stream (one per stream, zeroed
 * to start: `kg_lines r = {0}`).  A line longer than the caller's `max` bytes (without its '\n') is refused
 * (KG_LINES_TOO_LONG), never cut: the rest of a cut line would be read as the next one.  A line is returned
 * NUL-terminated in place, without its '\n' (it may hold NUL bytes of its own: use *len); it stays valid until
 * the next call on the reader.  kg_lines_free releases the buffer (the descriptor is the caller's). */
typedef struct kg_lines {
    kg_buf buf;     /* bytes read and not yet returned, from data + start */
    size_t start;
    size_t scanned; /* of those, how many are known to hold no '\n' (a long line is searched once, not again
                     * from its first byte after every read) */
} kg_lines;
#define KG_LINES_EOF (-1)      /* the stream ended (or a read failed) before a whole line */
#define KG_LINES_TIMEOUT (-2)  /* no whole line within the time given */
#define KG_LINES_TOO_LONG (-3) /* the line (whole or not) is longer than max */
#define KG_LINES_NOMEM (-4)    /* bytes read could not be kept */
/* The next whole line of what was read: 1 (*line, *len set), 0 when none is whole yet, KG_LINES_TOO_LONG. */
int kg_lines_next(kg_lines *r, size_t max, char **line, size_t *len);
/* One read(2) of fd into the reader, for a caller that polls several descriptors: the count (> 0), 0 at the
 * stream's end, -1 with errno (EINTR and EAGAIN included: read again), or KG_LINES_NOMEM. */
ssize_t kg_lines_fill(kg_lines *r, int fd);
/* Waits up to timeout_ms (monotonic) for the next whole line of fd: 1 (*line, *len set), KG_LINES_EOF,
 * KG_LINES_TIMEOUT, KG_LINES_TOO_LONG or KG_LINES_NOMEM. */
int kg_lines_read(kg_lines *r, int fd, size_t max, double timeout_ms, char **line, size_t *len);
void kg_lines_free(kg_lines *r);

/* Reads an open descriptor to its end (name is for messages, e.g. "stdin");
 * *data is malloc'd and NUL-terminated. max_bytes = 0: no limit. */
int kg_fd_read(int fd, const char *name, size_t max_bytes, char **data, size_t *len, kg_error *err);
/* Reads a whole file; *data is malloc'd and NUL-terminated. max_bytes = 0: no limit. */
int kg_file_read(const char *path, size_t max_bytes, char **data, size_t *len, kg_error *err);
int kg_file_write(const char *path, const void *data, size_t len, kg_error *err); /* mode 0600 */
/* The same with the permission bits of a new file (the umask applies): 0644 for reports people share. */
int kg_file_write_mode(const char *path, const void *data, size_t len, unsigned mode, kg_error *err);
/* Writes all of data to fd (retrying short writes and EINTR): 0, or -1 with errno set. */
int kg_fd_write_all(int fd, const void *data, size_t len);

/* Replaces a file atomically, the one way kgym does: the data goes to a new
 * temporary file beside it (KG_FILE_TEMP_PREFIX + its name + pid + counter,
 * so a sweeper can find a crashed writer's leftovers), fsync'd, renamed over
 * path, and the folder fsync'd.  A reader sees the old file or the new one,
 * never part of one, and after a crash the file is one or the other.  mode as
 * for kg_file_write_mode.  On failure the temporary file is removed and path
 * is untouched.  kg_file_write_atomic is the whole of it for data in memory;
 * to stream, kg_atomic_begin opens f->fd, the caller writes to it, then
 * kg_atomic_commit (which ends f, success or not) or kg_atomic_abort. */
#define KG_FILE_TEMP_PREFIX ".tmp-"
int kg_file_write_atomic(const char *path, const void *data, size_t len, unsigned mode, kg_error *err);
typedef struct kg_atomic_file {
    int fd;     /* write here between begin and commit */
    char *tmp;  /* owned: the temporary file's name */
    char *path; /* owned: the file it replaces */
} kg_atomic_file;
int kg_atomic_begin(kg_atomic_file *f, const char *path, unsigned mode, kg_error *err);
int kg_atomic_commit(kg_atomic_file *f, kg_error *err);
void kg_atomic_abort(kg_atomic_file *f);
int kg_file_exists(const char *path);
int kg_dir_exists(const char *path);
/* Makes a private folder (mode 0700) under $TMPDIR or /tmp; *path is malloc'd. */
int kg_temp_dir(const char *prefix, char **path, kg_error *err);
/* Removes a folder and everything under it (no symlink following). */
int kg_remove_tree(const char *path);
/* kg_temp_dir for a folder another process may have to clean up: *lock_fd holds an flock on the folder for as long
 * as the caller keeps it open (O_CLOEXEC; close it after removing the folder), and the folder is marked as locked.
 * A process killed before it removed the folder leaves it unlocked, and kg_temp_sweep removes it. */
int kg_temp_dir_owned(const char *prefix, char **path, int *lock_fd, kg_error *err);
/* Removes this uid's marked prefix-XXXXXX folders under $TMPDIR or /tmp whose lock is free (their maker gone);
 * returns how many. */
int kg_temp_sweep(const char *prefix);

/* Milliseconds on the monotonic clock: for durations and deadlines. */
double kg_now_ms(void);
/* Seconds since the Unix epoch (wall clock, with fractions): for times that are shown or stored (a job's
 * submitted_at, a heartbeat), never for measuring a wait. */
double kg_wall_s(void);

/* Timed waits on the monotonic clock, the one clock of every wait in kgym: a condition variable made by
 * kg_cond_init measures pthread_cond_timedwait's deadline on CLOCK_MONOTONIC, and kg_deadline_in fills such a
 * deadline `seconds` from now.  On CLOCK_REALTIME (the default) a clock step (NTP, an operator's date) made
 * a 5 s drain last hours or end at once.  kg_cond_init returns 0, or an errno value. */
int kg_cond_init(pthread_cond_t *cond);
void kg_deadline_in(struct timespec *ts, double seconds);

/* Retry pauses, one rule for every retry loop: the pause before retry
 * `attempt` (1 = the first retry) is base_s * 2^(attempt-1), or the server's
 * Retry-After when it sent one (retry_after_s >= 0; pass -1 for none), and
 * never more than max_s.  kg_backoff_sleep waits that long on the monotonic
 * clock, through signals; a caller that must stay wakeable (a stopping
 * scheduler) waits on its own condition variable instead. */
typedef struct kg_backoff {
    double base_s; /* the first retry's pause */
    double max_s;  /* the longest pause */
} kg_backoff;
double kg_backoff_delay(const kg_backoff *b, int attempt, double retry_after_s);
void kg_backoff_sleep(double seconds);

/* FNV-1a 64-bit: a content hash for tasks and candidates (identity, not security). */
uint64_t kg_hash64(const void *data, size_t len);
/* Writes "fnv1a64:<16 hex>" into out (at least 25 bytes). */
void kg_hash64_string(const void *data, size_t len, char out[32]);

/* SHA-256 (OpenSSL's libcrypto, the only SHA-256 in kgym; util/hash.c): a content key two different inputs never
 * share in practice, for what a client controls (the service's dedup keys and
 * reference files): FNV-1a collisions can be made on purpose.  Writes
 * "sha256:<64 hex>" into out (KG_SHA256_STRLEN bytes); KG_ERR_INTERNAL if
 * libcrypto fails. */
#define KG_SHA256_STRLEN 72
int kg_sha256_string(const void *data, size_t len, char out[KG_SHA256_STRLEN]);
/* The same digest as 64 lowercase hex characters and a NUL (no prefix). */
int kg_sha256_hex(const void *data, size_t len, char out[65]);

/* One field of a key: bytes and their count (text need not end in NUL).
 * KG_HASH_STR(s) makes one from a NUL-terminated string. */
typedef struct kg_hash_field {
    const void *data;
    size_t len;
} kg_hash_field;
#define KG_HASH_STR(s) ((kg_hash_field){(s), strlen(s)})
/* A key over several fields: SHA-256 over each field's length (8 bytes,
 * big-endian) followed by its bytes, so that different lists of fields never
 * hash the same bytes (a '|'-joined key confuses ("a|b","c") with
 * ("a","b|c")).  Start the list with a tag naming the key's kind and
 * version.  Writes 64 hex characters and a NUL; KG_ERR_INVALID for a NULL
 * field with a length, KG_ERR_NOMEM or KG_ERR_INTERNAL if libcrypto fails. */
int kg_sha256_fields(const kg_hash_field *fields, size_t n, char out[65], kg_error *err);

/* Replaces every byte that is not part of valid UTF-8 with '?', in place,
 * so text a candidate printed can go into JSON. */
void kg_utf8_sanitize(char *s);
/* Whether s is UTF-8 as jansson accepts it (json_string would not fail on it). */
int kg_utf8_valid(const char *s);

/* strdup (NULL in, NULL out). */
char *kg_strdup(const char *s);

/* A process as /proc/N/stat shows it.  kg_proc_stat_read() returns 1, or 0
 * (and a zeroed record) when the process is gone or the file unreadable. */
typedef struct kg_proc_stat {
    char comm[64];            /* its command name (cut to 63 bytes) */
    char state;               /* R, S, D, Z, ... */
    long ppid;
    unsigned long long start; /* clock ticks after boot: with the pid it names one process */
    double cpu_seconds;       /* CPU it has used, user + system (its own, not its children's) */
    double children_cpu_seconds; /* its ended children's it waited for, user + system (cutime + cstime) */
} kg_proc_stat;
int kg_proc_stat_read(long pid, kg_proc_stat *st);
/* A process's real, effective, saved and filesystem uids (the "Uid:" line of /proc/N/status, which any process
 * may read, whatever the other's dumpability or uids).  1, or 0 when it is gone or the line unreadable. */
int kg_proc_uids_read(long pid, unsigned long uids[4]);

/* Closes every descriptor numbered `first` or more (close_range(2), else each one /proc/self/fd lists, else
 * every number below RLIMIT_NOFILE): for a child between fork and exec, so that nothing kgym or its caller
 * holds open (a results file, a terminal, a database) reaches the program it starts.  Async-signal-safe. */
void kg_close_from(int first);

#endif
