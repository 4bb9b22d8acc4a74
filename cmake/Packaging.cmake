# Install rules and Debian packages. Two install components, one package each:
#   worker       -> tessera-worker: the daemon, its systemd unit, a postinst that makes the secret
#                   directory /etc/tessera (root, 0700); links only Asio (headers), OpenSSL,
#                   OpenBLAS, fmt and libstdc++ at run time.
#   coordinator  -> tessera: the `tessera` program (coordinator, local clusters, studies, plots
#                   with gnuplot), the cluster configs as examples, the docs.
# `cmake --install BUILD --prefix DIR` installs both; scripts/package.sh configures with
# CMAKE_INSTALL_PREFIX=/usr and runs cpack; a TESSERA_WORKER_ONLY build installs and packs only the
# worker (scripts/cross-arm64.sh). Package dependencies come from dpkg-shlibdeps.
include(GNUInstallDirs)

set(TESSERA_WORKER_DOCDIR ${CMAKE_INSTALL_DATAROOTDIR}/doc/tessera-worker)
set(TESSERA_DOCDIR ${CMAKE_INSTALL_DATAROOTDIR}/doc/tessera)

install(TARGETS tessera-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT worker)

# deploy/tessera-worker.service names /usr/local/bin (the manual install its header describes);
# the installed copy names where this build installs the program and its documentation.
file(READ ${PROJECT_SOURCE_DIR}/deploy/tessera-worker.service tessera_unit)
string(REPLACE "/usr/local/bin/tessera-worker" "${CMAKE_INSTALL_FULL_BINDIR}/tessera-worker" tessera_unit "${tessera_unit}")
string(REPLACE "file:///usr/local/share/doc/tessera-worker/deploy.md"
               "file://${CMAKE_INSTALL_PREFIX}/${TESSERA_WORKER_DOCDIR}/deploy.md" tessera_unit "${tessera_unit}")
if(NOT tessera_unit MATCHES "ExecStart=${CMAKE_INSTALL_FULL_BINDIR}/tessera-worker ")
  message(FATAL_ERROR "deploy/tessera-worker.service: ExecStart no longer names /usr/local/bin/tessera-worker, "
                      "which cmake/Packaging.cmake replaces by the installed path; update one of them")
endif()
file(WRITE ${CMAKE_BINARY_DIR}/deploy/tessera-worker.service "${tessera_unit}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/deploy/tessera-worker.service)
# systemd reads units from /usr/lib/systemd/system and /usr/local/lib/systemd/system alike.
install(FILES ${CMAKE_BINARY_DIR}/deploy/tessera-worker.service
        DESTINATION lib/systemd/system COMPONENT worker)
install(FILES docs/deploy.md DESTINATION ${TESSERA_WORKER_DOCDIR} COMPONENT worker)

if(NOT TESSERA_WORKER_ONLY)
  install(TARGETS tessera RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT coordinator)
  # Every page of docs/ (they link to each other, and docs/index.md is the way in), next to README.
  file(GLOB tessera_doc_pages ${PROJECT_SOURCE_DIR}/docs/*.md)
  install(FILES README.md ${tessera_doc_pages} DESTINATION ${TESSERA_DOCDIR} COMPONENT coordinator)
  file(GLOB tessera_example_configs ${PROJECT_SOURCE_DIR}/configs/*.yaml)
  install(FILES ${tessera_example_configs} DESTINATION ${TESSERA_DOCDIR}/examples/configs COMPONENT coordinator)
endif()

set(CPACK_PACKAGE_NAME tessera)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Tessera")
set(CPACK_PACKAGE_CONTACT "Tessera maintainers <tessera@localhost>")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEB_COMPONENT_INSTALL ON)
if(TESSERA_WORKER_ONLY)
  set(CPACK_COMPONENTS_ALL worker)
else()
  set(CPACK_COMPONENTS_ALL worker coordinator)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <package>_<version>_<arch>.deb
if(TESSERA_DEB_ARCHITECTURE)  # set by a cross toolchain file (cmake/toolchains/)
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${TESSERA_DEB_ARCHITECTURE})
endif()
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)  # debug symbols stay in the build tree

set(CPACK_DEBIAN_WORKER_PACKAGE_NAME tessera-worker)
# First line: the summary apt shows; the rest: the long description.
set(CPACK_DEBIAN_WORKER_DESCRIPTION
    "Tessera compute node daemon\ntessera-worker answers a Tessera coordinator's GEMM and graph jobs over TCP (port 7070 in the shipped systemd unit) after an HMAC-SHA256 handshake with the cluster secret in /etc/tessera/secret.")
set(CPACK_DEBIAN_WORKER_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/deploy/debian/postinst ${PROJECT_SOURCE_DIR}/deploy/debian/prerm
    ${PROJECT_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_WORKER_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_COORDINATOR_PACKAGE_NAME tessera)
set(CPACK_DEBIAN_COORDINATOR_DESCRIPTION
    "Tessera coordinator: balanced matrix multiplication on mixed clusters\ntessera plans, runs and verifies matrix multiplications and graph algorithms on a cluster of tessera-worker nodes, measures the nodes, and replays studies with plots.")
# gnuplot draws the studies' plots; tessera-worker is needed for `tessera up` (local clusters).
set(CPACK_DEBIAN_COORDINATOR_PACKAGE_RECOMMENDS "tessera-worker (= ${PROJECT_VERSION}), gnuplot-nox")

include(CPack)
