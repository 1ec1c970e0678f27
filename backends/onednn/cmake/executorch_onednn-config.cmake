# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
# find_package(executorch_onednn CONFIG): the oneDNN delegate's runtime library, installed by
# `cmake --install` (or inside the pip package, executorch/backends/onednn/cmake/executorch_onednn).
#
#   find_package(executorch CONFIG REQUIRED)
#   find_package(executorch_onednn CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE executorch::runtime executorch::kernels_optimized executorch_onednn::backend)
#
# The library registers "OneDnnBackend" with ExecuTorch when it is loaded; nothing references its
# symbols, so executorch_onednn::backend keeps it on the link line (--no-as-needed).
include("${CMAKE_CURRENT_LIST_DIR}/executorch_onednn_targets.cmake")
# A link feature, since flags spelled around the library in INTERFACE_LINK_LIBRARIES are deduplicated
# against the same flags elsewhere on the line and lose their place.
set(CMAKE_LINK_LIBRARY_USING_EXECUTORCH_ONEDNN_KEEP "LINKER:--push-state,--no-as-needed" "<LINK_ITEM>"
                                                    "LINKER:--pop-state"
)
set(CMAKE_LINK_LIBRARY_USING_EXECUTORCH_ONEDNN_KEEP_SUPPORTED TRUE)
if(NOT TARGET executorch_onednn::backend)
  add_library(executorch_onednn::backend INTERFACE IMPORTED)
  set_target_properties(
    executorch_onednn::backend
    PROPERTIES INTERFACE_LINK_LIBRARIES
               "$<LINK_LIBRARY:EXECUTORCH_ONEDNN_KEEP,executorch_onednn::executorch_backend_onednn>"
  )
endif()
set(executorch_onednn_FOUND TRUE)
