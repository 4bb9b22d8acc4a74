# TESSERA_BUILD_FUZZERS: libFuzzer harnesses (tests/fuzz/) with AddressSanitizer and
# UndefinedBehaviorSanitizer. Only clang has libFuzzer (Debian: clang + libclang-rt-14-dev); with
# another compiler the option is ignored with a warning, so a g++ build never changes.
#
# The sanitizer and coverage flags are added to every target of this build tree, not just the
# harnesses: libFuzzer steers by the coverage of the code under test (core, transport), and ASan
# must see that code's memory accesses. scripts/fuzz.sh therefore uses its own build directory.
option(TESSERA_BUILD_FUZZERS "Build the libFuzzer harnesses (clang only)" OFF)

set(TESSERA_FUZZING OFF)
if(TESSERA_BUILD_FUZZERS)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set(TESSERA_FUZZING ON)
    set(TESSERA_SANITIZERS address,undefined)
    add_compile_options(-fsanitize=fuzzer-no-link,${TESSERA_SANITIZERS} -fno-sanitize-recover=all
                        -fno-omit-frame-pointer)
    add_link_options(-fsanitize=${TESSERA_SANITIZERS})
  else()
    message(WARNING "TESSERA_BUILD_FUZZERS needs clang (libFuzzer); ${CMAKE_CXX_COMPILER_ID} found, "
                    "no harness is built. Configure with -DCMAKE_CXX_COMPILER=clang++ (scripts/fuzz.sh does).")
  endif()
endif()
