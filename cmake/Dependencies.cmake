# System dependencies, all from Debian packages installed by scripts/setup.sh. A missing one fails
# with the package to install.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

macro(tessera_require found package)
  if(NOT ${found})
    message(FATAL_ERROR "Missing dependency: install the Debian package '${package}' "
                        "(or run scripts/setup.sh, which installs everything Tessera needs)")
  endif()
endmacro()

find_path(ASIO_INCLUDE_DIR asio.hpp)
tessera_require(ASIO_INCLUDE_DIR libasio-dev)
add_library(tessera_asio INTERFACE)
target_include_directories(tessera_asio SYSTEM INTERFACE ${ASIO_INCLUDE_DIR})
target_compile_definitions(tessera_asio INTERFACE ASIO_STANDALONE ASIO_NO_DEPRECATED)
target_link_libraries(tessera_asio INTERFACE Threads::Threads)

pkg_check_modules(OPENBLAS IMPORTED_TARGET openblas)
tessera_require(OPENBLAS_FOUND libopenblas-dev)

find_package(OpenSSL QUIET)
tessera_require(OpenSSL_FOUND libssl-dev)
find_package(fmt QUIET)
tessera_require(fmt_FOUND libfmt-dev)
find_package(CLI11 QUIET)
tessera_require(CLI11_FOUND libcli11-dev)

# Header-only (XXH_INLINE_ALL): the placement cache's hashes and the block keys' content digests
# (the worker's too), no shared library to ship.
find_path(XXHASH_INCLUDE_DIR xxhash.h)
tessera_require(XXHASH_INCLUDE_DIR libxxhash-dev)
add_library(tessera_xxhash INTERFACE)
target_include_directories(tessera_xxhash SYSTEM INTERFACE ${XXHASH_INCLUDE_DIR})

# The coordinator's dependencies; a worker-only build (TESSERA_WORKER_ONLY) needs none of them.
if(NOT TESSERA_WORKER_ONLY)
  find_path(METIS_INCLUDE_DIR metis.h)
  find_library(METIS_LIBRARY metis)
  tessera_require(METIS_LIBRARY libmetis-dev)
  add_library(tessera_metis INTERFACE)
  target_include_directories(tessera_metis SYSTEM INTERFACE ${METIS_INCLUDE_DIR})
  target_link_libraries(tessera_metis INTERFACE ${METIS_LIBRARY})

  find_package(yaml-cpp QUIET)
  tessera_require(yaml-cpp_FOUND libyaml-cpp-dev)
  find_package(nlohmann_json QUIET)
  tessera_require(nlohmann_json_FOUND nlohmann-json3-dev)
endif()
if(TESSERA_BUILD_TESTS)
  find_package(GTest QUIET)
  tessera_require(GTest_FOUND libgtest-dev)
endif()
