/*
 * red10_oldworker.c — a worker of release a848176^ (the job store before routing) that claims once and finishes
 * what it got: test_route_red.c's mixed_release_fleet runs it when KG_RED_OLD_WORKER names it.  Not built by make;
 * build it from the old store next to this tree's other objects (make build first):
 *   mkdir -p /tmp/old/src/store; for f in backend.h memory.c redis.c sqlite.c store.c store.h; do
 *     git show a848176^:src/store/$f > /tmp/old/src/store/$f; done
 *   gcc -std=c11 -D_GNU_SOURCE -I/tmp/old/src -Iinclude -Isrc $(pkg-config --cflags jansson sqlite3 hiredis) \
 *     -o /tmp/old/oldworker tests/unit/red10_oldworker.c /tmp/old/src/store/*.c build/release/src/util/*.o \
 *     build/release/src/rl/*.o build/release/src/stats/*.o $(pkg-config --libs jansson sqlite3 hiredis libcrypto) -lm -lpthread
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "store/store.h"
int main(int argc, char **argv)
{
    kg_store *s = NULL;
    kg_error err;
    if (argc < 4 || kg_store_open(argv[1], &s, &err) != KG_OK) {
        fprintf(stderr, "open: %s\n", argc < 4 ? "usage" : err.message);
        return 2;
    }
    kg_store_require_durable(s, 1, &err);
    kg_store_configure(s, atof(argv[2]), 3, 3600);
    kg_job j;
    int rc = kg_store_claim(s, argv[3], &j, &err);
    if (rc == KG_OK) {
        printf("claimed %s\n", j.id);
        kg_store_finish(s, j.id, "done", "{\"verdict\":\"correct\",\"reward\":1.0}", NULL, &err);
        kg_job_free(&j);
    } else
        printf("none (%s)\n", err.message);
    kg_store_close(s);
    return 0;
}
