/* cmd_extract.c — `kgym extract`: show what kgym would take from a model's reply. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "kgym/extract.h"
#include "util/util.h"

int kg_cli_extract(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: kgym extract [FILE|-]\n\n"
                   "Prints the candidate module kgym extracts from a model's raw reply (stdin by\n"
                   "default); the reason on stderr and exit status 3 when nothing usable is found.\n");
            return 0;
        }
        if (path) {
            fprintf(stderr, "kgym extract: one input at most (see kgym extract --help)\n");
            return 2;
        }
        path = argv[i];
    }
    char *text = NULL;
    size_t len = 0;
    kg_error err;
    kg_error_clear(&err);
    /* stdin is read whole: the extractor itself rejects an oversized reply with its reason. */
    int rc_read = !path || !strcmp(path, "-") ? kg_fd_read(0, "stdin", 0, &text, &len, &err)
                                              : kg_file_read(path, KG_EXTRACT_MAX_INPUT + 1, &text, &len, &err);
    if (rc_read != KG_OK) {
        fprintf(stderr, "kgym extract: %s\n", err.message);
        return 2;
    }
    kg_extract_result r;
    int rc = kg_extract_candidate(text, len, &r, &err);
    free(text);
    if (rc != KG_OK) {
        fprintf(stderr, "kgym extract: %s\n", err.message);
        kg_extract_result_free(&r);
        return rc == KG_ERR_INVALID ? 3 : 1;
    }
    fwrite(r.code, 1, r.code_len, stdout);
    fprintf(stderr, "kgym extract: %s [%s]\n", r.detail, kg_extract_source_name(r.source));
    kg_extract_result_free(&r);
    return 0;
}
