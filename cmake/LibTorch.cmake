# Finds LibTorch inside the PyPI torch wheel (torch.utils.cmake_prefix_path) and
# defines headroom_link_torch(target).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
  OUTPUT_VARIABLE HEADROOM_TORCH_PREFIX OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_QUIET RESULT_VARIABLE _torch_rc)
if(NOT _torch_rc EQUAL 0)
  message(FATAL_ERROR "HEADROOM_WITH_TORCH=ON but `import torch` fails for ${Python3_EXECUTABLE}: "
                      "run `bash scripts/setup.sh --torch`")
endif()
list(APPEND CMAKE_PREFIX_PATH ${HEADROOM_TORCH_PREFIX})
# The CUDA wheel's CMake config otherwise compiles and runs a probe for the local GPU,
# which fails on machines without one; the runtime has no CUDA kernels of its own.
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(ENV{TORCH_CUDA_ARCH_LIST} "8.0;9.0")
endif()
find_package(Torch REQUIRED)

# libtorch_cuda.so needs the NCCL, cuBLAS, ... that ship as nvidia-* wheels next to
# torch, not the (older) ones of the system CUDA toolkit: point the linker at them.
file(GLOB HEADROOM_NVIDIA_LIB_DIRS "${HEADROOM_TORCH_PREFIX}/../../../nvidia/*/lib")

function(headroom_link_torch target)
  target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
  foreach(dir ${HEADROOM_NVIDIA_LIB_DIRS})
    target_link_options(${target} PUBLIC "-Wl,-rpath-link,${dir}")
  endforeach()
endfunction()
