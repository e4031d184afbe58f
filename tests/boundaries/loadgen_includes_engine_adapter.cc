// Must not compile: the load generator knows a URL, never an engine.
#include "engines/engine_adapter.h"
