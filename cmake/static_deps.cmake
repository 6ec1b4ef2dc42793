# CUBEKIT_STATIC_DEPS=ON (scripts/gpu-pack only): link matio (with HDF5 and its szip/aec/zlib),
# LAPACK (OpenBLAS's, or the reference one with its BLAS; gfortran, quadmath), libpng, libjpeg and
# libdeflate statically, so that the GPU pack carries none of their shared libraries. HDF5's shared library alone drags in libcurl and its TLS,
# Kerberos and LDAP chain (~5 MB of the compressed pack); a static link keeps only the objects the
# binaries use. Same Debian builds of the same libraries, so the results do not change. Included
# after the find_package calls: it repoints their imported targets at the static archives.
function(_cubekit_static_archive var name)
  find_library(${var} NAMES ${name} NO_CACHE)
  if(NOT ${var})
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${name} OUTPUT_VARIABLE _path
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(IS_ABSOLUTE "${_path}" AND EXISTS "${_path}")
      set(${var} "${_path}")
    else()
      message(FATAL_ERROR "CUBEKIT_STATIC_DEPS: ${name} not found")
    endif()
  endif()
  set(${var} "${${var}}" PARENT_SCOPE)
endfunction()

foreach(lib matio hdf5_serial sz aec z lapack blas gfortran quadmath png16 jpeg)
  _cubekit_static_archive(_static_${lib} lib${lib}.a)
endforeach()

set_target_properties(PkgConfig::MATIO PROPERTIES INTERFACE_LINK_LIBRARIES
  "${_static_matio};${_static_hdf5_serial};${_static_sz};${_static_aec};${_static_z};dl;m")
if(CUBEKIT_OPENBLAS)  # OpenBLAS's archive holds its BLAS and LAPACK
  _cubekit_static_archive(_static_openblas libopenblas.a)
  set(_static_lapack "${_static_openblas}")
  set(_static_blas "")
endif()
set_target_properties(LAPACK::LAPACK PROPERTIES INTERFACE_LINK_LIBRARIES
  "${_static_lapack};${_static_blas};${_static_gfortran};${_static_quadmath};m")
function(_cubekit_repoint target archive)
  if(TARGET ${target})
    set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${archive}" IMPORTED_LOCATION_RELEASE "${archive}"
                                               IMPORTED_LOCATION_DEBUG "${archive}")
  endif()
endfunction()
_cubekit_repoint(PNG::PNG "${_static_png16}")
_cubekit_repoint(JPEG::JPEG "${_static_jpeg}")
_cubekit_repoint(ZLIB::ZLIB "${_static_z}")
if(TARGET cubekit::libdeflate)
  _cubekit_static_archive(_static_deflate libdeflate.a)
  _cubekit_repoint(cubekit::libdeflate "${_static_deflate}")
endif()
message(STATUS "cubekit: static matio/HDF5, LAPACK/BLAS, libpng, libjpeg, libdeflate (CUBEKIT_STATIC_DEPS)")
