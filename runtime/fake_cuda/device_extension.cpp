// The driverless CUDA device of models/import/fake_cuda_device.py, built by torch's
// cpp_extension when an import or a fake-CUDA reference first needs it. LibTorch C++,
// so it lives in runtime/, not in the CMake build (no target lists it).
#include <torch/extension.h>
#include <ATen/Context.h>
#include <ATen/detail/AcceleratorHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace {

c10::Device TheDevice() { return c10::Device(c10::DeviceType::CUDA, 0); }

// Everything a guard is asked during a step on fake tensors, answered for one device
// that never runs anything: streams are the default stream, events are always ready.
struct NoDriverCudaGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::CUDA; }
  c10::Device exchangeDevice(c10::Device) const override { return TheDevice(); }
  c10::Device getDevice() const override { return TheDevice(); }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void record(void**, const c10::Stream&, const c10::DeviceIndex,
              const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
};

bool AlwaysHasPrimaryContext(const void*, c10::DeviceIndex) { return true; }

// The vtable slot of AcceleratorHooksInterface::hasPrimaryContext in the CUDA hooks.
void PatchHasPrimaryContext() {
  const at::AcceleratorHooksInterface& hooks =
      at::globalContext().getAcceleratorHooksInterface(c10::kCUDA);
  void** vtable = *reinterpret_cast<void** const*>(&hooks);
  auto member = &at::AcceleratorHooksInterface::hasPrimaryContext;
  static_assert(sizeof(member) >= sizeof(uintptr_t));
  uintptr_t word = 0;
  std::memcpy(&word, &member, sizeof(word));
  if ((word & 1) == 0) throw std::runtime_error("hasPrimaryContext is not a virtual member");
  void** slot = &vtable[(word - 1) / sizeof(void*)];
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(slot) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(slot + 1);
  if (mprotect(reinterpret_cast<void*>(begin), end - begin, PROT_READ | PROT_WRITE) != 0)
    throw std::runtime_error("mprotect of the CUDA hooks' vtable failed");
  *slot = reinterpret_cast<void*>(&AlwaysHasPrimaryContext);
}

}  // namespace

void install() {
  static NoDriverCudaGuard guard;
  c10::impl::device_guard_impl_registry[static_cast<size_t>(c10::DeviceType::CUDA)].store(
      &guard);
  PatchHasPrimaryContext();
}
