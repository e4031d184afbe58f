// Must not compile: the load generator knows a URL, never an engine.
#include "agent/engines/engine_adapter.h"
