// trainsim-calibrate: the device, its driver and the library versions.
#include <fstream>
#include <sstream>

#include <cublasLt.h>
#include <cublas_api.h>
#include <nccl.h>

#include "cuda_util.hpp"

namespace trainsim::calibrate {

int cuda_device_count(std::string& why) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        why = fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
        (void)cudaGetLastError();
        return 0;
    }
    if (n == 0) why = "cudaGetDeviceCount found no device";
    return n;
}

DeviceProps device_props(int device) {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    DeviceProps d;
    d.name = prop.name;
    d.cc_major = prop.major;
    d.cc_minor = prop.minor;
    d.sm_count = prop.multiProcessorCount;
    d.memory_bytes = static_cast<double>(prop.totalGlobalMem);
    check_cuda(cudaDeviceGetAttribute(&d.sm_clock_khz, cudaDevAttrClockRate, device),
               "cudaDeviceGetAttribute");
    check_cuda(cudaDeviceGetAttribute(&d.memory_clock_khz, cudaDevAttrMemoryClockRate, device),
               "cudaDeviceGetAttribute");
    return d;
}

DeviceInfo device_info(int device) {
    const DeviceProps props = device_props(device);
    DeviceInfo info;
    info.name = props.name;
    info.sm_count = props.sm_count;
    info.memory_bytes = props.memory_bytes;
    int driver_api = 0, runtime = 0;
    check_cuda(cudaDriverGetVersion(&driver_api), "cudaDriverGetVersion");
    check_cuda(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
    std::ifstream proc("/proc/driver/nvidia/version");
    std::stringstream text;
    text << proc.rdbuf();
    const auto module = driver_version_from_proc(text.str());
    info.driver = module ? *module : "CUDA driver API " + cuda_version_string(driver_api);
    info.cuda = cuda_version_string(runtime);
    info.libraries["cuda_driver_api"] = cuda_version_string(driver_api);
    info.libraries["cublasLt"] = cublas_version_string(static_cast<std::int64_t>(cublasLtGetVersion()));
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
        info.libraries["cublas"] = fmt::format("{}.{}.{}", major, minor, patch);
    int nccl = 0;
    if (ncclGetVersion(&nccl) == ncclSuccess) info.libraries["nccl"] = nccl_version_string(nccl);
    return info;
}

}  // namespace trainsim::calibrate
