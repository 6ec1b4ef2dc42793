// placeholder
#include "zernike/zernike_internal.hpp"
