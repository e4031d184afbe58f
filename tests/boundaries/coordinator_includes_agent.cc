// Must not compile: the coordinator and the agent share only schema/, common/ and pure data.
#include "agent/agent.h"
