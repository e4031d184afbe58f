// Must not compile: a run's record (record/) is built by the agent and by virtual runs alike; it
// may not reach into the agent process.
#include "agent/run_executor.h"
