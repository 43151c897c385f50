// The few CUDA driver calls the CLI needs to put inputs on a GPU, read
// outputs back, and time work on a stream (`kfuse bench`). The driver is loaded with dlopen("libcuda.so.1"): linking
// libcuda (or its stub) would stop the CLI from starting on machines
// without a GPU.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace kfcli {

class CudaDriver {
 public:
  // The driver with device 0's primary context current on this thread, or
  // null with the reason in *why (no driver, stub driver, no device, ...).
  static std::unique_ptr<CudaDriver> open(std::string* why);
  ~CudaDriver();

  const std::string& device_name() const { return name_; }
  // Each throws std::runtime_error naming the failed driver call.
  void* allocate(size_t bytes);
  void release(void* ptr);
  void to_device(void* dst, const void* src, size_t bytes);
  void to_host(void* dst, const void* src, size_t bytes);
  void synchronize();
  // cuDeviceGetAttribute of device 0 (a CUdevice_attribute value).
  int attribute(int attribute);
  static constexpr int kL2CacheSize = 38;  // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE

  // Streams and events are the driver's CUstream / CUevent handles.
  void* create_stream();
  void destroy_stream(void* stream);
  void synchronize_stream(void* stream);
  void* create_event();  // with timing
  void destroy_event(void* event);
  void record_event(void* event, void* stream);
  // Milliseconds between two recorded events (both must have completed).
  float elapsed_ms(void* start, void* end);
  // Stream-ordered device-to-device copy and byte fill.
  void copy_async(void* dst, const void* src, size_t bytes, void* stream);
  void fill_async(void* dst, unsigned char byte, size_t bytes, void* stream);

  struct Api;

 private:
  CudaDriver() = default;
  void check(int result, const char* call);

  void* library_ = nullptr;
  std::unique_ptr<Api> api_;
  int device_ = 0;
  void* context_ = nullptr;
  std::string name_;
};

}  // namespace kfcli
