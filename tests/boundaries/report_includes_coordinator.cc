// Must not compile: reports read the results database only; they never reach a running sweep.
#include "coordinator/coordinator.h"
