# gaia_cuda_program(<target> <source.cu> <output dir> [OUTPUT_NAME name])
# An ordinary CUDA program for the simulated GPU: its .cu file (kernels
# single-source through simgpu_kernel.h) compiled by g++ with
# _FORTIFY_SOURCE=2, linked against
# simgpu's libcudart.so.13 and libcuda.so.1. Built after libgaia.so, which
# it is run under.
# gaia_cuda_directory(): in a directory of such programs, enables C++ and
# keeps the project's C-only warning flags away from it.
macro(gaia_cuda_directory)
  enable_language(CXX)
  set(CMAKE_CXX_STANDARD 17)
  get_directory_property(_gaia_opts COMPILE_OPTIONS)
  set(_gaia_fixed "")
  foreach(o ${_gaia_opts})
    if(o STREQUAL "-Wstrict-prototypes" OR o STREQUAL "-Wmissing-prototypes")
      list(APPEND _gaia_fixed "$<$<COMPILE_LANGUAGE:C>:${o}>")
    else()
      list(APPEND _gaia_fixed "${o}")
    endif()
  endforeach()
  set_directory_properties(PROPERTIES COMPILE_OPTIONS "${_gaia_fixed}")
endmacro()

function(gaia_cuda_program target source outdir)
  cmake_parse_arguments(P "" "OUTPUT_NAME" "" ${ARGN})
  set_source_files_properties(${source} PROPERTIES LANGUAGE CXX)
  add_executable(${target} ${source})
  # Fortified as Ubuntu's and Fedora's compilers build optimised code by
  # default: read() into a buffer of known size becomes __read_chk(), and
  # so on, which the shim must interpose too.
  target_compile_options(${target} PRIVATE -x c++ -U_FORTIFY_SOURCE
    $<$<NOT:$<CONFIG:Debug>>:-D_FORTIFY_SOURCE=2>)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/simgpu/include
    ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(${target} PRIVATE simgpu_cudart simgpu_cuda Threads::Threads)
  if(NOT P_OUTPUT_NAME)
    set(P_OUTPUT_NAME ${target})
  endif()
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${P_OUTPUT_NAME}
    RUNTIME_OUTPUT_DIRECTORY ${outdir})
  add_dependencies(${target} gaia)
endfunction()
