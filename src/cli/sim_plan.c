#include "cli/cli.h"
int cli_sim(int argc, char **argv) { (void)argc; (void)argv; return 2; }
int cli_plan(int argc, char **argv) { (void)argc; (void)argv; return 2; }
