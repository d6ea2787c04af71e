// A CUDA device that is the CPU, for the simulated-CUDA test tier (tests/simcuda/README.md).
//
// PyTorch's CPU wheel has no CUDA device guard and its CUDA hooks say "not built": a tensor that
// reports device cuda:0 cannot go through autograd's engine, pinned memory or a device guard.
// This registers both, for one device, before torch reads its hooks (they are read once, at
// import): the guard keeps a current index and one default stream; the hooks say CUDA is built
// and available with one GPU, and pinned memory is plain host memory. Every kernel still runs on
// the CPU: the tensors themselves are tests/simcuda/simulator.py's subclass.
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace {

using c10::Device;
using c10::DeviceIndex;
using c10::DeviceType;
using c10::Stream;

thread_local DeviceIndex current_index = 0;

struct SimulatedGuard final : c10::impl::DeviceGuardImplInterface {
  DeviceType type() const override { return DeviceType::CUDA; }
  Device exchangeDevice(Device device) const override {
    Device previous(DeviceType::CUDA, current_index);
    current_index = device.index() < 0 ? 0 : device.index();
    return previous;
  }
  Device getDevice() const override { return Device(DeviceType::CUDA, current_index); }
  void setDevice(Device device) const override { current_index = device.index() < 0 ? 0 : device.index(); }
  void uncheckedSetDevice(Device device) const noexcept override {
    current_index = device.index() < 0 ? 0 : device.index();
  }
  Stream getStream(Device device) const override { return Stream(Stream::DEFAULT, device); }
  Stream getDefaultStream(Device device) const override { return Stream(Stream::DEFAULT, device); }
  Stream exchangeStream(Stream stream) const override { return Stream(Stream::DEFAULT, stream.device()); }
  DeviceIndex deviceCount() const noexcept override { return 1; }
  bool queryStream(const Stream&) const override { return true; }
  void synchronizeStream(const Stream&) const override {}
  void synchronizeDevice(const DeviceIndex) const override {}
  void recordDataPtrOnStream(const c10::DataPtr&, const Stream&) const override {}
};

struct SimulatedHooks final : at::CUDAHooksInterface {
  explicit SimulatedHooks(at::CUDAHooksArgs) {}
  void init() const override {}
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasCUDA() const override { return true; }
  bool hasPrimaryContext(DeviceIndex) const override { return true; }
  DeviceIndex deviceCount() const override { return 1; }
  int getNumGPUs() const override { return 1; }
  DeviceIndex current_device() const override { return current_index; }
  DeviceIndex getCurrentDevice() const override { return current_index; }
  void setCurrentDevice(DeviceIndex device) const override { current_index = device; }
  DeviceIndex exchangeDevice(DeviceIndex device) const override {
    DeviceIndex previous = current_index;
    current_index = device;
    return previous;
  }
  DeviceIndex maybeExchangeDevice(DeviceIndex device) const override { return exchangeDevice(device); }
  bool isPinnedPtr(const void*) const override { return false; }
  c10::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
  void deviceSynchronize(DeviceIndex) const override {}
};

}  // namespace

C10_REGISTER_GUARD_IMPL(CUDA, SimulatedGuard);

namespace at {
C10_REGISTER_CLASS(CUDAHooksRegistry, CUDAHooks, SimulatedHooks);
}

extern "C" int nmt_simulated_cuda_loaded() { return 1; }
