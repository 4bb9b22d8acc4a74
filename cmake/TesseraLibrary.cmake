# tessera_add_library(<name> SOURCES ... [SEPARATE ...] [PUBLIC deps...] [PRIVATE deps...])
# One static library per module folder: target tessera_<name> with alias tessera::<name>, public
# headers in the folder's include/, our warnings, and position-independent code so the Python
# module can link every library into one shared object. SEPARATE sources are compiled on their own,
# outside the unity batches (CMakeLists.txt): a class with external linkage there holds types from
# the file's anonymous namespace, which GCC warns about once the file is included in a batch.
function(tessera_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;SEPARATE;PUBLIC;PRIVATE" ${ARGN})
  string(REPLACE "/" "_" target "tessera_${name}")
  string(REPLACE "/" "_" alias "${name}")
  add_library(${target} STATIC ${ARG_SOURCES} ${ARG_SEPARATE})
  if(ARG_SEPARATE)
    set_source_files_properties(${ARG_SEPARATE} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  endif()
  add_library(tessera::${alias} ALIAS ${target})
  target_include_directories(${target} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC} PRIVATE tessera::warnings ${ARG_PRIVATE})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()
