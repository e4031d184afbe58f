// Must not compile: the search's decisions (search/) do not know how a level is measured; the
// command hands them the model and the real runs as callbacks.
#include "coordinator/coordinator.h"
