/* Device-build stubs (scripts/gpu-prepare.sh): the GPU machine lacks the service's and agent's libraries.  The
 * fleet build (.gpu/build.sh --fleet, -DKG_FLEET) compiles the service with a carried libmicrohttpd and stubs only
 * the agent (libcurl). */
#include <stdio.h>
static int absent(const char *what) { fprintf(stderr, "kgym %s: not in this build\n", what); return 1; }
#ifndef KG_FLEET
int kg_cli_serve(int argc, char **argv) { (void)argc; (void)argv; return absent("serve"); }
int kg_cli_worker(int argc, char **argv) { (void)argc; (void)argv; return absent("worker"); }
#endif
int kg_cli_rollout(int argc, char **argv) { (void)argc; (void)argv; return absent("rollout"); }
