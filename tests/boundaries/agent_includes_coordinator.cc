// Must not compile: agent/ may not include the coordinator (they are different processes).
#include "coordinator/coordinator.h"
