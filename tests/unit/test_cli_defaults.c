/* test_cli_defaults.c — how many evaluations a GPU runs at once where the command line does not say
 * (cli/common.h kg_cli_gpu_jobs_default): ten on a machine whose driver lists one GPU, six a GPU where it lists
 * several or cannot be read; the count read from a folder laid out like /proc/driver/nvidia/gpus. */
#include "kg_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/common.h"

static void test_jobs_by_machine_gpus(void)
{
    KG_CHECK(kg_cli_gpu_jobs_default(1) == KG_CLI_GPU_JOBS_ONE_GPU);
    KG_CHECK(kg_cli_gpu_jobs_default(2) == KG_CLI_GPU_JOBS_DEFAULT);
    KG_CHECK(kg_cli_gpu_jobs_default(8) == KG_CLI_GPU_JOBS_DEFAULT);
    KG_CHECK(kg_cli_gpu_jobs_default(0) == KG_CLI_GPU_JOBS_DEFAULT);
    KG_CHECK(kg_cli_gpu_jobs_default(-1) == KG_CLI_GPU_JOBS_DEFAULT);
    KG_CHECK(KG_CLI_GPU_JOBS_ONE_GPU == 10 && KG_CLI_GPU_JOBS_DEFAULT == 6);
}

/* The driver's folder holds one entry a GPU (named by its PCI address); dot entries are not GPUs. */
static void test_machine_gpus_counts_entries(void)
{
    char root[] = "/tmp/kg_gpus_XXXXXX", path[256];
    KG_CHECK(mkdtemp(root) != NULL);
    KG_CHECK(kg_cli_machine_gpus(root) == 0);
    snprintf(path, sizeof path, "%s/0000:18:00.0", root);
    KG_CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/.hidden", root);
    KG_CHECK(mkdir(path, 0700) == 0);
    KG_CHECK(kg_cli_machine_gpus(root) == 1);
    KG_CHECK(kg_cli_gpu_jobs_default(kg_cli_machine_gpus(root)) == 10);
    snprintf(path, sizeof path, "%s/0000:2a:00.0", root);
    KG_CHECK(mkdir(path, 0700) == 0);
    KG_CHECK(kg_cli_machine_gpus(root) == 2);
    KG_CHECK(kg_cli_gpu_jobs_default(kg_cli_machine_gpus(root)) == 6);
    snprintf(path, sizeof path, "%s/missing", root);
    KG_CHECK(kg_cli_machine_gpus(path) == -1);
    rmdir(path);
    snprintf(path, sizeof path, "%s/0000:18:00.0", root);
    rmdir(path);
    snprintf(path, sizeof path, "%s/0000:2a:00.0", root);
    rmdir(path);
    snprintf(path, sizeof path, "%s/.hidden", root);
    rmdir(path);
    KG_CHECK(rmdir(root) == 0);
}

static const kg_test_case cases[] = {
    {"jobs_by_machine_gpus", test_jobs_by_machine_gpus},
    {"machine_gpus_counts_entries", test_machine_gpus_counts_entries},
};

KG_TEST_MAIN("cli_defaults", cases)
