// Must compile: the load generator sees its own headers and the common library.
#include "common/status.h"
#include "loadgen/load_generator.h"
