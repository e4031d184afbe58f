// Must compile: the search sees the performance model's error bands.
#include "perfmodel/error_bands.h"
#include "search/search_loop.h"
