# Read by llama.cpp's CMake build (the crate llama-cpp-sys-2 passes CMAKE_* variables
# from the environment to CMake; scripts/cpu-config.sh sets CMAKE_PROJECT_INCLUDE to
# this file), after each project() call.
#
# llama.cpp's `common` library (argument parsing, chat templates, JSON, an HTTP
# client: 54 of the 128 files the crate compiles, about half of the compile time) is
# built because the crate's wrappers link it, but the embedded backend runs none of
# its code on a hot path: the model's arithmetic is ggml's, and sampling and the
# grammar are the `llama` library's. So `common` and the HTTP client it links are
# compiled without optimisation (measured on a 2-core AMD EPYC: 451 s of compile time
# at -O3, 322 s at -O0; docs/results.md) and as a unity build (its 53 files, which
# each parse the same large JSON and template headers, merged 8 to a file: 9 objects
# instead of 54; the crate's whole llama.cpp build 396 -> 326 s on that machine). ggml and llama
# keep llama.cpp's own flags and layout (llama.cpp itself builds `llama` as a unity
# build), so the model computes exactly what llama.cpp's own build does: their
# archives are byte for byte the same with and without this file's changes.
get_property(_otb_hooked GLOBAL PROPERTY OTB_LLAMA_COMMON_HOOKED)
if(NOT _otb_hooked)
  set_property(GLOBAL PROPERTY OTB_LLAMA_COMMON_HOOKED ON)
  function(_otb_unoptimised_common)
    foreach(t llama-common llama-common-base cpp-httplib)
      if(TARGET ${t})
        target_compile_options(${t} PRIVATE -O0)
        set_target_properties(${t} PROPERTIES UNITY_BUILD ON)
      endif()
    endforeach()
  endfunction()
  cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _otb_unoptimised_common)
endif()
