/* Device-build stubs (scripts/gpu-prepare.sh): the GPU machine lacks the service's and agent's libraries. */
#include <stdio.h>
static int absent(const char *what) { fprintf(stderr, "kgym %s: not in this build\n", what); return 1; }
int kg_cli_serve(int argc, char **argv) { (void)argc; (void)argv; return absent("serve"); }
int kg_cli_worker(int argc, char **argv) { (void)argc; (void)argv; return absent("worker"); }
int kg_cli_rollout(int argc, char **argv) { (void)argc; (void)argv; return absent("rollout"); }
