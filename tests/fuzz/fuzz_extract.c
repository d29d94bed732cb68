/*
 * fuzz_extract.c — libFuzzer target for kg_extract_candidate (see
 * tests/fuzz/README.md for how to build and run it).
 *
 * Besides the sanitizers' checks, it enforces the extractor's contract: the
 * status is KG_OK or KG_ERR_INVALID with a message, and accepted code is
 * non-empty, NUL-terminated at code_len, free of CR, contains ModelNew and
 * ends with exactly one newline.  A violation calls __builtin_trap() so the
 * fuzzer saves the input as a crash.
 */
#include "kgym/extract.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kg_extract_result r;
    kg_error err;
    memset(&err, 0, sizeof err);
    int rc = kg_extract_candidate((const char *)data, size, &r, &err);
    if (rc == KG_OK) {
        if (!r.code || r.code_len == 0 || strlen(r.code) != r.code_len ||
            !strstr(r.code, "ModelNew") || strchr(r.code, '\r') ||
            r.code[r.code_len - 1] != '\n' ||
            (r.code_len >= 2 && r.code[r.code_len - 2] == '\n') || r.detail[0] == '\0' ||
            r.blocks_found < 0 || r.block_index >= r.blocks_found)
            __builtin_trap();
    } else if (rc != KG_ERR_INVALID || err.message[0] == '\0' || r.code != NULL) {
        __builtin_trap();
    }
    kg_extract_result_free(&r);
    return 0;
}
