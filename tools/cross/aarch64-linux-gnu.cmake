# Cross build for linux-arm64 (CMakePresets.json: linux-arm64): Debian's cross compiler
# (gcc-aarch64-linux-gnu) and the arm64 libraries of its multiarch (libcivetweb-dev:arm64,
# libcjson-dev:arm64, zlib1g-dev:arm64); tools/deps.sh --arm64 installs them. Programs the
# build runs (tests) run under qemu-user (qemu-user-static), through the emulator below.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static -L /usr/aarch64-linux-gnu)
# headers are the same for every architecture (/usr/include); libraries come from the arm64
# multiarch directory only
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_LIBRARY_PATH /usr/lib/aarch64-linux-gnu)
# pkg-config (FindCURL asks it) reads the arm64 .pc files, not the build machine's
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
