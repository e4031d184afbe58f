// Must not compile: engine adapters start and stop engines; they do not measure them.
#include "loadgen/load_generator.h"
