// The element type names now live in dtype.hpp (EnumNames<DType>, options.hpp); this file stays
// only because src/CMakeLists.txt lists it and can go with that line.
#include "cubekit/dtype.hpp"
