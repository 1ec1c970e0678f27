# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
# oneDNN for the delegate: a pinned upstream release built from source as a static, CPU-only library
# with its THREADPOOL runtime (runtime/WorkerPool.h runs it), linked into the delegate with its
# symbols hidden. Built once per machine and settings, at configure time, into a cache that every later
# build (pip install, the tests, CI) reuses:
#   ${ONEDNN_CACHE_DIR}/onednn-<version>-<key>/   the installed library, <key> hashing the settings below
# The source, in this order: ONEDNN_SOURCE (a CMake or environment variable: the release archive,
# hash-checked, or an unpacked tree), the archive in ../shared/third_party/ beside the repository, or a
# git fetch of the pinned commit.
# The release is patched first (_onednn_patches). Setting dnnl_DIR to another oneDNN >= 3.13 built with
# ONEDNN_CPU_RUNTIME=THREADPOOL skips all this (and the patch).
# Defines the imported target DNNL::dnnl.

set(EXECUTORCH_ONEDNN_DNNL_VERSION 3.13.1)
set(_onednn_git_repository "https://github.com/uxlfoundation/oneDNN.git")
set(_onednn_git_commit 5f93c2194d41d36dc55eb736ce00899b8946e7a3) # tag v3.13.1
# The `git archive` of that tag, as kept in ../shared/third_party/oneDNN-v3.13.1.tar.xz.
set(_onednn_archive_name "oneDNN-v${EXECUTORCH_ONEDNN_DNNL_VERSION}.tar.xz")
set(_onednn_archive_sha256 1d71dc4461cdb32159483b02030d6582cc901f49ee7f560d105d532cf97ee753)

# The environment's ONEDNN_SOURCE is the default, so a checkout anywhere can name the archive for every
# build the scripts start (pip's wheel build included) without passing CMake arguments through them.
set(ONEDNN_SOURCE
    "$ENV{ONEDNN_SOURCE}"
    CACHE PATH "oneDNN ${EXECUTORCH_ONEDNN_DNNL_VERSION} source: its release archive or an unpacked tree"
)
if(DEFINED ENV{EXECUTORCH_ONEDNN_CACHE})
  set(_onednn_default_cache "$ENV{EXECUTORCH_ONEDNN_CACHE}")
elseif(DEFINED ENV{XDG_CACHE_HOME})
  set(_onednn_default_cache "$ENV{XDG_CACHE_HOME}/executorch-onednn")
else()
  set(_onednn_default_cache "$ENV{HOME}/.cache/executorch-onednn")
endif()
set(ONEDNN_CACHE_DIR
    "${_onednn_default_cache}"
    CACHE PATH "Where built oneDNN libraries are kept, one directory per version and settings"
)

# oneDNN's build settings, given to its configure as an initial cache (-C), which keeps the list of
# primitives one value. Only what the delegate uses: the forward primitives of runtime/ (INNER_PRODUCT,
# PRELU and GROUP_NORMALIZATION are kept for the ops planned next), every CPU instruction set, no
# graph API, no profiling hooks.
set(_onednn_settings
    [=[
set(CMAKE_BUILD_TYPE Release CACHE STRING "")
set(CMAKE_POSITION_INDEPENDENT_CODE ON CACHE BOOL "")
set(ONEDNN_LIBRARY_TYPE STATIC CACHE STRING "")
set(ONEDNN_CPU_RUNTIME THREADPOOL CACHE STRING "")
set(ONEDNN_GPU_RUNTIME NONE CACHE STRING "")
set(ONEDNN_BUILD_GRAPH OFF CACHE BOOL "")
set(ONEDNN_ENABLE_WORKLOAD INFERENCE CACHE STRING "")
set(ONEDNN_ENABLE_PRIMITIVE "BATCH_NORMALIZATION;BINARY;CONCAT;CONVOLUTION;DECONVOLUTION;ELTWISE;GROUP_NORMALIZATION;INNER_PRODUCT;LAYER_NORMALIZATION;MATMUL;POOLING;PRELU;REDUCTION;REORDER;RESAMPLING;SOFTMAX;SUM" CACHE STRING "")
set(ONEDNN_BUILD_TESTS OFF CACHE BOOL "")
set(ONEDNN_BUILD_EXAMPLES OFF CACHE BOOL "")
set(ONEDNN_BUILD_DOC OFF CACHE BOOL "")
set(ONEDNN_ENABLE_JIT_PROFILING OFF CACHE BOOL "")
set(ONEDNN_ENABLE_ITT_TASKS OFF CACHE BOOL "")
]=]
)
set(_onednn_settings_file "executorch-onednn-settings.cmake")

# Changes to the release, applied to our copy of its source before the build and part of the cache key:
# - stream_impl: 3.13.1 leaves a threadpool stream's verbose-profiler flag uninitialized (its other
#   constructor sets it false). Read as true, every execute() with the verbose log on (set_verbose(),
#   ONEDNN_VERBOSE) runs its primitive, then reports dnnl_unimplemented: init() and execute() failed
#   in 2 of 10 fresh processes here. test/cpp/OneDnnBuildTest.cpp provokes it every time.
set(_onednn_patches "stream_impl-verbose-profiler-initialized")
function(_onednn_patch source)
  set(file "${source}/src/common/stream_impl.hpp")
  file(READ "${file}" text)
  set(before ": flags_(stream_flags::in_order), threadpool_(threadpool) {}")
  set(after ": use_verbose_profiler_(false), flags_(stream_flags::in_order), threadpool_(threadpool) {}")
  string(FIND "${text}" "${before}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "oneDNN: ${file} lacks the line our patch changes; is it ${EXECUTORCH_ONEDNN_DNNL_VERSION}?")
  endif()
  string(REPLACE "${before}" "${after}" text "${text}")
  file(WRITE "${file}" "${text}")
endfunction()

function(_onednn_run what log)
  execute_process(
    COMMAND ${ARGN}
    OUTPUT_FILE "${log}"
    ERROR_FILE "${log}.err"
    RESULT_VARIABLE result
  )
  if(NOT result EQUAL 0)
    file(READ "${log}.err" errors)
    file(READ "${log}" output)
    string(LENGTH "${output}" length)
    if(length GREATER 4000)
      math(EXPR start "${length} - 4000")
      string(SUBSTRING "${output}" ${start} -1 output)
    endif()
    message(FATAL_ERROR "oneDNN: ${what} failed (${result}); ${log}:\n${output}\n${errors}")
  endif()
endfunction()

# The source tree to build: unpacked from the archive into `work`, or fetched there.
function(_onednn_source_tree work out_var)
  set(archive "${ONEDNN_SOURCE}")
  if(NOT archive)
    get_filename_component(
      shared "${PROJECT_SOURCE_DIR}/../shared/third_party/${_onednn_archive_name}" ABSOLUTE
    )
    if(EXISTS "${shared}")
      set(archive "${shared}")
    endif()
  endif()
  if(archive AND IS_DIRECTORY "${archive}")
    message(STATUS "oneDNN: copying ${archive}") # patched, so not in place
    file(COPY "${archive}/" DESTINATION "${work}/copied")
    set(${out_var} "${work}/copied" PARENT_SCOPE)
    return()
  endif()
  if(archive)
    file(SHA256 "${archive}" hash)
    if(NOT hash STREQUAL _onednn_archive_sha256)
      message(FATAL_ERROR "oneDNN: ${archive} has sha256 ${hash}, not ${_onednn_archive_sha256} (the "
                          "v${EXECUTORCH_ONEDNN_DNNL_VERSION} release); refusing to build from it")
    endif()
    message(STATUS "oneDNN: unpacking ${archive}")
    file(ARCHIVE_EXTRACT INPUT "${archive}" DESTINATION "${work}/unpacked")
    set(${out_var} "${work}/unpacked/oneDNN-${EXECUTORCH_ONEDNN_DNNL_VERSION}" PARENT_SCOPE)
    return()
  endif()
  message(
    STATUS
      "oneDNN: no ONEDNN_SOURCE and no ${shared}; fetching ${_onednn_git_repository} at ${_onednn_git_commit} "
      "(without network access, set ONEDNN_SOURCE to the release archive ${_onednn_archive_name})"
  )
  include(FetchContent)
  FetchContent_Populate(
    onednn_source QUIET
    GIT_REPOSITORY "${_onednn_git_repository}"
    GIT_TAG "${_onednn_git_commit}"
    SOURCE_DIR "${work}/fetched"
    BINARY_DIR "${work}/fetched-unused"
    SUBBUILD_DIR "${work}/fetched-subbuild"
  )
  set(${out_var} "${work}/fetched" PARENT_SCOPE)
endfunction()

function(_onednn_build prefix)
  set(work "${prefix}.work")
  file(REMOVE_RECURSE "${work}")
  file(MAKE_DIRECTORY "${work}")
  _onednn_source_tree("${work}" source)
  _onednn_patch("${source}")
  cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)
  message(STATUS "oneDNN: building ${EXECUTORCH_ONEDNN_DNNL_VERSION} once for this machine into ${prefix} "
                 "(about 40 minutes on 2 cores; log: ${work}/build.log)"
  )
  set(toolchain -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER} -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER})
  if(CMAKE_MAKE_PROGRAM)
    list(APPEND toolchain -DCMAKE_MAKE_PROGRAM=${CMAKE_MAKE_PROGRAM})
  endif()
  file(WRITE "${work}/${_onednn_settings_file}" "${_onednn_settings}")
  _onednn_run(
    "configuring" "${work}/configure.log" "${CMAKE_COMMAND}" -G "${CMAKE_GENERATOR}" -C
    "${work}/${_onednn_settings_file}" -S "${source}" -B "${work}/build"
    "-DCMAKE_INSTALL_PREFIX=${prefix}" ${toolchain}
  )
  _onednn_run(
    "building" "${work}/build.log" "${CMAKE_COMMAND}" --build "${work}/build" --parallel ${cores}
  )
  _onednn_run("installing" "${work}/install.log" "${CMAKE_COMMAND}" --install "${work}/build")
  # Written last: a prefix without it is an unfinished build.
  file(COPY "${work}/${_onednn_settings_file}" DESTINATION "${prefix}")
  file(REMOVE_RECURSE "${work}")
endfunction()

# A oneDNN of our choosing, unless the caller named one (a dnnl_DIR this file did not set). A dnnl_DIR
# inside our cache is ours too: a build directory configured before _EXECUTORCH_ONEDNN_CACHED_DNNL_DIR
# existed would otherwise keep an outdated build (the unpatched one, 2026-12-03).
string(FIND "${dnnl_DIR}" "${ONEDNN_CACHE_DIR}/onednn-" _onednn_dir_in_cache)
if(NOT dnnl_DIR OR dnnl_DIR STREQUAL _EXECUTORCH_ONEDNN_CACHED_DNNL_DIR OR _onednn_dir_in_cache EQUAL 0)
  enable_language(C) # oneDNN's build compiles C, with the same compilers as ours
  set(_onednn_identity "${EXECUTORCH_ONEDNN_DNNL_VERSION};${_onednn_git_commit};${_onednn_patches};${_onednn_settings}")
  string(SHA256 _onednn_key "${_onednn_identity};${CMAKE_CXX_COMPILER_ID};${CMAKE_CXX_COMPILER_VERSION}")
  string(SUBSTRING "${_onednn_key}" 0 12 _onednn_key)
  set(_onednn_prefix "${ONEDNN_CACHE_DIR}/onednn-${EXECUTORCH_ONEDNN_DNNL_VERSION}-${_onednn_key}")
  if(NOT EXISTS "${_onednn_prefix}/${_onednn_settings_file}")
    file(MAKE_DIRECTORY "${ONEDNN_CACHE_DIR}")
    # Two builds configuring at once (pip and the tests) build it once.
    file(LOCK "${_onednn_prefix}.lock" TIMEOUT 7200)
    if(NOT EXISTS "${_onednn_prefix}/${_onednn_settings_file}")
      _onednn_build("${_onednn_prefix}")
    endif()
    file(LOCK "${_onednn_prefix}.lock" RELEASE)
  endif()
  set(dnnl_DIR "${_onednn_prefix}/lib/cmake/dnnl" CACHE PATH "oneDNN's CMake package" FORCE)
  # Recognized at the next configure, which checks the cache again (the settings may have changed).
  set(_EXECUTORCH_ONEDNN_CACHED_DNNL_DIR "${dnnl_DIR}" CACHE INTERNAL "")
  message(STATUS "oneDNN: ${_onednn_prefix}")
endif()
find_package(dnnl ${EXECUTORCH_ONEDNN_DNNL_VERSION} CONFIG REQUIRED)

# The runtime drives oneDNN through a threadpool (Threading.cpp): another runtime would run it on
# threads the backend option "num_threads" does not control, or not at all.
get_target_property(_onednn_include_dirs DNNL::dnnl INTERFACE_INCLUDE_DIRECTORIES)
find_file(
  _onednn_config_header oneapi/dnnl/dnnl_config.h
  PATHS ${_onednn_include_dirs}
  NO_DEFAULT_PATH NO_CACHE
)
file(STRINGS "${_onednn_config_header}" _onednn_runtime REGEX "#define DNNL_CPU_THREADING_RUNTIME ")
if(NOT _onednn_runtime MATCHES "DNNL_RUNTIME_THREADPOOL")
  message(FATAL_ERROR "oneDNN at ${dnnl_DIR} was not built with ONEDNN_CPU_RUNTIME=THREADPOOL "
                      "(${_onednn_runtime}); see backends/onednn/setup.md")
endif()
