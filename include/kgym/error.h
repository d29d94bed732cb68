/*
 * kgym/error.h — status codes and the error record every kgym function fills.
 *
 * Convention (libuv/curl style): functions return a kg_status (0 on success,
 * a negative code otherwise) and, when given a non-NULL kg_error, write a
 * human-readable message naming what went wrong.  Nothing in kgym aborts on
 * bad input.  kg_error is caller-owned storage; no allocation happens here.
 */
#ifndef KGYM_ERROR_H
#define KGYM_ERROR_H

#include <stddef.h>

#include "kgym/export.h"

typedef enum {
    KG_OK = 0,
    KG_ERR_INVALID = -1,   /* bad input: usage, malformed file, bad field */
    KG_ERR_IO = -2,        /* a system call or file operation failed */
    KG_ERR_NOMEM = -3,     /* allocation failed */
    KG_ERR_PROTOCOL = -4,  /* the Python side broke the protocol */
    KG_ERR_CHILD = -5,     /* a zygote or child process could not be run */
    KG_ERR_NOT_FOUND = -6, /* a named file, task or field does not exist */
    KG_ERR_INTERNAL = -7,  /* a bug in kgym itself */
    KG_ERR_CANCELLED = -8  /* the caller stopped it (a job cancelled while it ran) */
} kg_status;

typedef struct kg_error {
    kg_status code;
    char message[1024];
} kg_error;

/* Records code and a printf-style message in err (if non-NULL); returns code
 * so callers can write `return kg_error_set(err, KG_ERR_IO, "...")`. */
KG_API int kg_error_set(kg_error *err, kg_status code, const char *fmt, ...)
           __attribute__((format(printf, 3, 4)));

/* Clears err to KG_OK with an empty message. */
KG_API void kg_error_clear(kg_error *err);

/* A short constant name for a status code ("invalid", "io", ...). */
KG_API const char *kg_status_name(kg_status code);

#endif
