// Must not compile: the matrix library knows no database (plan, submit and fuzzers link it alone).
#include "results/results_store.h"
