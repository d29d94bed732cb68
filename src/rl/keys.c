/* keys.c — composite-key sort used to group records (see rl_internal.h). */
#include "rl_internal.h"

#include <stdlib.h>

static int cmp_i64(int64_t x, int64_t y)
{
    return (x > y) - (x < y);
}

static int compare_keys(const void *pa, const void *pb)
{
    const kg_rl_key *a = pa, *b = pb;
    int c = cmp_i64(a->a, b->a);
    if (!c)
        c = cmp_i64(a->b, b->b);
    if (!c)
        c = cmp_i64(a->c, b->c);
    if (!c)
        c = (a->index > b->index) - (a->index < b->index);
    return c;
}

void kg_rl_sort_keys(kg_rl_key *keys, size_t n)
{
    if (n > 1)
        qsort(keys, n, sizeof *keys, compare_keys);
}

kg_rl_key *kg_rl_keys_by_id(const int64_t *id, size_t n)
{
    kg_rl_key *keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys)
        return NULL;
    for (size_t i = 0; i < n; i++)
        keys[i] = (kg_rl_key){id[i], 0, 0, i};
    kg_rl_sort_keys(keys, n);
    return keys;
}

size_t kg_rl_run_end(const kg_rl_key *keys, size_t n, size_t start)
{
    size_t end = start + 1;
    while (end < n && keys[end].a == keys[start].a)
        end++;
    return end;
}
