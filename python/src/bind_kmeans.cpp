// Bindings of the kmeans family: being written (this session); the module links without them for now.
#include "bindings.hpp"

namespace cubekit::python {

void bind_kmeans(py::module_&) {}

}  // namespace cubekit::python
