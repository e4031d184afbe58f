// Must not compile: matrix/ knows no transport (plan, submit and the fuzzers link it alone).
#include "transport/envelope_codec.h"
