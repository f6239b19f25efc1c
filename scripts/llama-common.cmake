# Read by llama.cpp's CMake build (the crate llama-cpp-sys-2 passes CMAKE_* variables
# from the environment to CMake; scripts/cpu-config.sh sets CMAKE_PROJECT_INCLUDE to
# this file), after each project() call.
#
# llama.cpp's `common` library (argument parsing, chat templates, JSON, an HTTP
# client: 54 of the 128 files the crate compiles, about half of its compile time),
# the HTTP client it links (`cpp-httplib`) and `vendor-hash` (used by llama.cpp's
# multimodal tools only) are built because the crate's CMake options ask for them,
# but the embedded backend calls none of their code: the model's arithmetic is
# ggml's, and tokenising, sampling, the grammar and the KV cache are the `llama`
# library's. So each is compiled from one empty file (llama-common-stub.cpp), and the
# crate links an empty `libllama-common.a`. The crate's own wrapper file
# (wrapper_common.cpp, compiled by its build script) still defines all its
# `llama_rs_*` functions; the two the backend reaches (the grammar sampler and
# `accept`, which catch a C++ exception) call only the `llama` library, and the
# others (JSON schema to grammar, parameter fitting, llama.cpp's own speculative
# decoding) are removed by the linker's section garbage collection, which rustc
# always asks for. Calling one of those from Rust would fail to link (an undefined
# `common_*` symbol): that is the price of this file, and the way to notice it.
# Measured on a 2-core AMD EPYC (docs/log/2026-11-27-first-build.md): `common` at -O3 was 451 s of
# compile time, -O0 322 s, then -O0 as a unity build; now nothing.
#
# ggml and llama keep llama.cpp's own flags and layout, so the model computes
# exactly what llama.cpp's own build does: their archives are byte for byte the same
# with and without this file.
get_property(_otb_hooked GLOBAL PROPERTY OTB_LLAMA_COMMON_HOOKED)
if(NOT _otb_hooked)
  set_property(GLOBAL PROPERTY OTB_LLAMA_COMMON_HOOKED ON)
  set(_otb_stub "${CMAKE_CURRENT_LIST_DIR}/llama-common-stub.cpp")
  function(_otb_unbuilt_common)
    foreach(t llama-common cpp-httplib vendor-hash)
      if(TARGET ${t})
        set_property(TARGET ${t} PROPERTY SOURCES "${_otb_stub}")
        set_property(TARGET ${t} PROPERTY UNITY_BUILD OFF)
      endif()
    endforeach()
  endfunction()
  cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _otb_unbuilt_common)
endif()
