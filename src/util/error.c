/* error.c — the kg_error record (see include/kgym/error.h). */
#include "kgym/error.h"

#include <stdarg.h>
#include <stdio.h>

int kg_error_set(kg_error *err, kg_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

void kg_error_clear(kg_error *err)
{
    if (err) {
        err->code = KG_OK;
        err->message[0] = '\0';
    }
}

const char *kg_status_name(kg_status code)
{
    switch (code) {
    case KG_OK: return "ok";
    case KG_ERR_INVALID: return "invalid";
    case KG_ERR_IO: return "io";
    case KG_ERR_NOMEM: return "nomem";
    case KG_ERR_PROTOCOL: return "protocol";
    case KG_ERR_CHILD: return "child";
    case KG_ERR_NOT_FOUND: return "not_found";
    case KG_ERR_INTERNAL: return "internal";
    case KG_ERR_CANCELLED: return "cancelled";
    }
    return "unknown";
}
