/*
 * kg_fault.h — fault injection for the unit tests, in the manner of SQLite's: jansson's allocator fails its Nth
 * allocation, so a test can run one build for every N and check it gives the unfailed output or an error naming
 * memory, never a partial one (docs/style.md).  Header-only; one copy per test program.
 */
#ifndef KG_FAULT_H
#define KG_FAULT_H

#include <stdlib.h>

#include <jansson.h>

static long kg_fault_count, kg_fault_at;

static void *kg_fault_malloc(size_t n)
{
    if (kg_fault_at && ++kg_fault_count == kg_fault_at)
        return NULL;
    if (!kg_fault_at)
        kg_fault_count++;
    return malloc(n);
}

/* From now on jansson's fail_at-th allocation fails (0: none fails, each is counted). */
static void kg_fault_arm(long fail_at)
{
    kg_fault_count = 0;
    kg_fault_at = fail_at;
    json_set_alloc_funcs(kg_fault_malloc, free);
}

/* jansson allocates normally again; after kg_fault_arm(0), kg_fault_count holds how many allocations were made. */
static void kg_fault_disarm(void)
{
    json_set_alloc_funcs(malloc, free);
    kg_fault_at = 0;
}

#endif
