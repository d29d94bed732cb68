/*
 * commands.h — the kgym CLI's subcommands.  Each takes the arguments after
 * its own name (argv[0] is the subcommand name) and returns the process exit
 * status: 0 when the work was carried out, 2 for a usage error, 1 for an
 * infrastructure failure.  main.c dispatches on the name.
 */
#ifndef KG_CLI_COMMANDS_H
#define KG_CLI_COMMANDS_H

int kg_cli_eval(int argc, char **argv);
int kg_cli_bench(int argc, char **argv);
int kg_cli_extract(int argc, char **argv);
int kg_cli_serve(int argc, char **argv);  /* src/cli/cmd_serve.c */
int kg_cli_worker(int argc, char **argv); /* src/cli/cmd_serve.c */

/* RL library (src/cli/cmd_rl.c) */
int kg_cli_reward(int argc, char **argv);
int kg_cli_advantages(int argc, char **argv);
int kg_cli_metrics(int argc, char **argv);
int kg_cli_curriculum(int argc, char **argv);
int kg_cli_rejection(int argc, char **argv);
int kg_cli_rollout(int argc, char **argv); /* src/cli/cmd_rollout.c */

#endif
