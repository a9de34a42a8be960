// Layering probe (tests/CMakeLists.txt): includes a private header of src/estimate/. It
// compiles with estimate's include path and must not with another subsystem's.
#include "estimate/compat_common.h"
