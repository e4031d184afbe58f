// Must compile: the agent sees its own parts, the load generator and the engine adapters.
#include "agent/engines/engine_adapter.h"
#include "agent/loadgen/load_generator.h"
#include "agent/run_executor.h"
