# Sourced by the scripts that configure a build directory (build.sh, fuzz.sh, cross-arm64.sh,
# package.sh): a new build directory uses Ninja when it is installed (setup.sh installs it). Ninja
# compiles any target's files as soon as the headers they need exist, where make builds a target's
# dependencies first; with one unity batch per target (CMakeLists.txt) make left a core idle for
# much of a 2-core build. An existing build directory keeps the generator it was made with, and a
# CMAKE_GENERATOR the caller set wins.
if [ -z "${CMAKE_GENERATOR:-}" ] && command -v ninja > /dev/null; then
  export CMAKE_GENERATOR=Ninja
fi
