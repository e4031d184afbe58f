// Must compile: the load generator sees its own headers and the common library.
#include "agent/loadgen/load_generator.h"
#include "common/status.h"
