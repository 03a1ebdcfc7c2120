// Subcommands of the strata CLI and the argument parsers they share.
#ifndef STRATA_CLI_H
#define STRATA_CLI_H

#include <stdint.h>

int cli_run(int argc, char **argv);
int cli_eval(int argc, char **argv);
int cli_demo(int argc, char **argv);

// Parsers print "strata: NAME: ..." and return non-zero on bad input.
int cli_parse_int(const char *s, const char *name, long lo, long hi, int *out);
int cli_parse_u64(const char *s, const char *name, uint64_t *out);
int cli_parse_float(const char *s, const char *name, double lo, double hi, float *out);
// "1,2,3" -> malloc'd array (caller frees).
int cli_parse_ids(const char *s, const char *name, int32_t **out, int *n);

#endif
