// Must compile: the agent sees its own parts, the load generator and the engine adapters.
#include "agent/run_executor.h"
#include "engines/engine_adapter.h"
#include "loadgen/load_generator.h"
