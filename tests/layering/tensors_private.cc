// Layering probe (tests/CMakeLists.txt): includes a private header of the internal tensors
// library. It compiles where tensors is seen (estimate, synth) and nowhere else.
#include "tensors/activations.h"
