// strata inspect: metadata, tensor table and the byte totals that size the expert cache.
#ifndef STRATA_INSPECT_H
#define STRATA_INSPECT_H

#include <stdbool.h>
#include <stdio.h>

// Print a report of the GGUF at path to out (human text, or one JSON object with json).
// 0 or negative (one error line logged).
int strata_inspect(const char *path, bool json, FILE *out);

#endif
