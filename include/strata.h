// strata's public API (docs/architecture.md, "Seam 3"): the header the CLI, the server and
// examples/ include, and nothing else of the library.
//
// Errors: functions return 0 (or a count) on success and a negative code on failure: -errno
// values from the system, or one of the STRATA_E* codes below.
#ifndef STRATA_H
#define STRATA_H

#define STRATA_EFORMAT   (-1001)  // malformed input file or data
#define STRATA_EUNSUP    (-1002)  // valid but unsupported (architecture, type, feature)
#define STRATA_EARG      (-1003)  // bad argument from the caller / user
#define STRATA_ENOMEM    (-1004)  // allocation failed or over the memory budget
#define STRATA_EIO       (-1005)  // I/O failed after retries

// Where the forward pass runs: auto picks a GPU backend when one is built in and finds a device.
enum strata_backend_kind { STRATA_BACKEND_AUTO, STRATA_BACKEND_CPU, STRATA_BACKEND_CUDA, STRATA_BACKEND_COUNT };

#endif
