# tessera_add_library(<name> SOURCES ... [PUBLIC deps...] [PRIVATE deps...])
# One static library per module folder: target tessera_<name> with alias tessera::<name>, public
# headers in the folder's include/, our warnings, and position-independent code so the Python
# module can link every library into one shared object.
function(tessera_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC;PRIVATE" ${ARGN})
  string(REPLACE "/" "_" target "tessera_${name}")
  string(REPLACE "/" "_" alias "${name}")
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(tessera::${alias} ALIAS ${target})
  target_include_directories(${target} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC} PRIVATE tessera::warnings ${ARG_PRIVATE})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()
