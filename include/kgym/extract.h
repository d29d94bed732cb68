/*
 * kgym/extract.h — pull the candidate module out of a model's raw reply.
 *
 * Language models answer with chat text around Python code.  This module
 * finds the Python source that defines `class ModelNew` (fenced block,
 * "# Kernel Implementation" marker, unterminated fence, or the whole reply)
 * after stripping chat-template debris and <think> sections, and returns it
 * normalised (LF line ends, no BOM, one final newline, tabs untouched).
 *
 * Memory: kg_extract_candidate() mallocs result->code; the caller releases it
 * with kg_extract_result_free().  Nothing else is allocated for the caller.
 * The input is read only within [text, text + len) and need not be
 * NUL-terminated.  Pure function of its input: thread-safe, no globals.
 */
#ifndef KGYM_EXTRACT_H
#define KGYM_EXTRACT_H

#include <stddef.h>

#include "kgym/error.h"

/* Replies larger than this are rejected (a real reply is a few KiB; this
 * bounds memory at a few times the input). */
#define KG_EXTRACT_MAX_INPUT ((size_t)16 * 1024 * 1024)

typedef enum {
    KG_EXTRACT_FENCED = 1,   /* a ``` or ~~~ fenced block (with or without a language tag) */
    KG_EXTRACT_MARKER,       /* text after a "# Kernel Implementation" marker line */
    KG_EXTRACT_UNTERMINATED, /* an opening fence that never closes: the rest of the text */
    KG_EXTRACT_RAW           /* no fence at all: the whole text looked like Python */
} kg_extract_source;

typedef struct {
    char *code;               /* malloc'd, NUL-terminated, normalised; free with kg_extract_result_free */
    size_t code_len;          /* strlen(code) */
    kg_extract_source source; /* where the code came from */
    int blocks_found;         /* fenced blocks in the text searched (unterminated included); also set on failure */
    int block_index;          /* which block was taken (0-based), -1 for marker / raw */
    int from_think;           /* 1: no code outside <think>, so the code came from inside it */
    char detail[256];         /* one line: what was taken and why */
} kg_extract_result;

/*
 * Finds the candidate module in text[0..len).  Returns KG_OK and fills *out;
 * KG_ERR_INVALID (out->code NULL) with err->message saying why nothing usable
 * was found, worded so a model can act on it; KG_ERR_NOMEM when allocation
 * fails.  *out is always initialised, so kg_extract_result_free(out) is safe
 * after any return.
 *
 * Selection, in order: the text is cut to the last assistant turn when chat
 * role tokens are present; template tokens (<|im_end|>, </s>, ...) are
 * removed; <think> sections are set aside.  Among fenced blocks that are
 * tagged Python (python, py, python3, triton, ...) or untagged, and
 * "# Kernel Implementation" marker sections, the LAST one (in reading order)
 * with a line `class ModelNew(` or `class ModelNew:` is taken.  Blocks tagged
 * with another language are never taken.  With no fence and no marker, the
 * whole text is taken if it looks like Python and defines ModelNew (leading
 * prose lines dropped).  Only if the text outside <think> has no fence, no
 * marker and no Python is the content of the <think> section searched.
 *
 * Fences inside a Python block: a closing fence line inside a triple-quoted
 * string does not close the block (so docstrings may contain ``` lines),
 * unless that reading leaves the block open to the end of the text, in which
 * case the first closing fence closes it (markdown's rule).  A fence line
 * with a language tag outside a string closes an open Python block
 * implicitly (models forget closing fences) and opens the next one.
 */
KG_API int kg_extract_candidate(const char *text, size_t len, kg_extract_result *out,
                                kg_error *err);

/* Frees r->code and resets *r; safe on NULL and on an already-freed result. */
KG_API void kg_extract_result_free(kg_extract_result *r);

/* "fenced_block", "marker", "unterminated_fence", "raw"; "unknown" otherwise. */
KG_API const char *kg_extract_source_name(kg_extract_source s);

#endif
