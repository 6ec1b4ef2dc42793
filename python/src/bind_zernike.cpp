// Bindings of the zernike family: being written (this session); the module links without them for now.
#include "bindings.hpp"

namespace cubekit::python {

void bind_zernike(py::module_&) {}

}  // namespace cubekit::python
