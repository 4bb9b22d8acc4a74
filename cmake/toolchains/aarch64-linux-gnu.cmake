# Cross-compiling for 64-bit ARM Linux (Raspberry Pi 4/5 with a 64-bit OS) on a Debian x86 machine
# with Debian's multiarch toolchain: crossbuild-essential-arm64 gives aarch64-linux-gnu-g++, and
# `dpkg --add-architecture arm64` + `apt install libopenblas-dev:arm64 ...` puts the arm64 libraries
# in /usr/lib/aarch64-linux-gnu beside the native ones (headers are shared in /usr/include).
# scripts/cross-arm64.sh installs all of that and uses this file with -DTESSERA_WORKER_ONLY=ON.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Multiarch: find_library/find_package look in lib/aarch64-linux-gnu, never in the x86 folder.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# pkg-config must answer with the arm64 .pc files only (openblas.pc differs per architecture).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# The Debian architecture name of the packages CPack makes from this build.
set(TESSERA_DEB_ARCHITECTURE arm64)
# Programs run at build time are host programs; the rest is found the multiarch way above.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
