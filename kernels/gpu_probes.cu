#include "kernels/gpu_probes.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace servesweep::kernels {
namespace {

constexpr float kTriadScalar = 3.0f;
constexpr size_t kSamples = 1 << 16;   // elements checked against the host reference

std::string Describe(cudaError_t rc) { return cudaGetErrorString(rc); }

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// Times `launch` with CUDA events: warm-up, then `repeats` timed runs; median seconds.
template <typename Launch>
double TimeMedianSeconds(cudaStream_t stream, int warmup, int repeats, Launch launch) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int i = 0; i < warmup; ++i) launch();
  cudaStreamSynchronize(stream);
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    cudaEventRecord(start, stream);
    launch();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    seconds.push_back(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return Median(seconds);
}

__global__ void CopyKernel(const float4* __restrict__ in, float4* __restrict__ out, size_t n4) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += size_t{gridDim.x} * blockDim.x) {
    out[i] = in[i];
  }
}

__global__ void TriadKernel(float4* __restrict__ a, const float4* __restrict__ b,
                            const float4* __restrict__ c, float s, size_t n4) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += size_t{gridDim.x} * blockDim.x) {
    const float4 x = b[i], y = c[i];
    a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
  }
}

// Pseudo-random values in [0.5, 1.5), a pure function of (index, seed): never zero, so a kernel
// that writes nothing cannot pass, and the host recomputes any element without a host copy.
__host__ __device__ inline float Value(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ULL + seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 29;
  return 0.5f + static_cast<float>(x >> 40) / static_cast<float>(1ULL << 24);
}

__global__ void FillValues(float* data, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    data[i] = Value(i, seed);
  }
}

// Copies kSamples evenly spaced elements of a device array back in one strided copy.
bool GatherSamples(const float* device, size_t n, size_t* step, std::vector<float>* samples) {
  *step = std::max<size_t>(1, n / kSamples);
  const size_t count = (n + *step - 1) / *step;
  samples->resize(count);
  return cudaMemcpy2D(samples->data(), sizeof(float), device, *step * sizeof(float), sizeof(float),
                      count, cudaMemcpyDeviceToHost) == cudaSuccess;
}

// Checks sampled elements of `device` against expected(i).
template <typename Expected>
bool CheckSamples(const float* device, size_t n, Expected expected) {
  size_t step = 0;
  std::vector<float> samples;
  if (!GatherSamples(device, n, &step, &samples)) return false;
  for (size_t k = 0; k < samples.size(); ++k) {
    const float want = expected(k * step);
    if (std::fabs(samples[k] - want) > 1e-5f * std::fabs(want)) return false;
  }
  return true;
}

void HbmProbes(int gpu, const GpuProbeSettings& settings, cudaStream_t stream,
               std::vector<ProbeFigure>& out) {
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  int l2_bytes = 0;
  cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, gpu);
  // Three arrays each at least 8x L2 (H200: 60 MB L2 -> 512 MiB), at most a quarter of free memory.
  const size_t floor_bytes = std::max<size_t>(size_t{256} << 20, size_t(l2_bytes) * 8);
  for (size_t array_bytes : {floor_bytes, floor_bytes * 2, floor_bytes * 4}) {
    if (array_bytes * 3 > free_bytes / 4 * 3) break;
    const size_t n = array_bytes / sizeof(float) / 4 * 4;
    const std::string size_text = std::to_string(array_bytes >> 20) + " MiB per array";
    float *a = nullptr, *b = nullptr, *c = nullptr;
    cudaError_t rc = cudaMalloc(&a, n * sizeof(float));
    if (rc == cudaSuccess) rc = cudaMalloc(&b, n * sizeof(float));
    if (rc == cudaSuccess) rc = cudaMalloc(&c, n * sizeof(float));
    const size_t n4 = n / 4;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, gpu);
    const int blocks = sms * 8, threads = 256;
    if (rc == cudaSuccess) {
      FillValues<<<blocks, threads, 0, stream>>>(b, n, 1);
      FillValues<<<blocks, threads, 0, stream>>>(c, n, 2);
      rc = cudaStreamSynchronize(stream);
    }
    auto copy = [&] {
      CopyKernel<<<blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(b),
                                                 reinterpret_cast<float4*>(a), n4);
    };
    auto triad = [&] {
      TriadKernel<<<blocks, threads, 0, stream>>>(reinterpret_cast<float4*>(a),
                                                  reinterpret_cast<const float4*>(b),
                                                  reinterpret_cast<const float4*>(c), kTriadScalar, n4);
    };
    // Runs `launch` once and checks it against expected(i), then times it; bytes_moved counts
    // bytes read plus written per launch.
    auto check_then_time = [&](const char* name, auto launch, double bytes_moved, auto expected) {
      if (rc != cudaSuccess) {
        out.push_back({name, gpu, "failed", 0, "GB/s", size_text + ": " + Describe(rc)});
        return;
      }
      launch();
      cudaError_t launched = cudaGetLastError();
      if (launched == cudaSuccess) launched = cudaStreamSynchronize(stream);
      if (launched != cudaSuccess || !CheckSamples(a, n, expected)) {
        out.push_back({name, gpu, "failed", 0, "GB/s",
                       size_text + ": " + (launched == cudaSuccess ? "wrong result" : Describe(launched))});
        return;
      }
      const double s = TimeMedianSeconds(stream, settings.warmup, settings.repeats, launch);
      out.push_back({name, gpu, s > 0 ? "ok" : "failed", s > 0 ? bytes_moved / s / 1e9 : 0, "GB/s",
                     size_text});
    };
    check_then_time("hbm.copy", copy, 2.0 * array_bytes, [](size_t i) { return Value(i, 1); });
    check_then_time("hbm.triad", triad, 3.0 * array_bytes,
                    [](size_t i) { return Value(i, 1) + kTriadScalar * Value(i, 2); });
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
  }
}

void HostLinkProbes(int gpu, const GpuProbeSettings& settings, cudaStream_t stream,
                    std::vector<ProbeFigure>& out) {
  const size_t bytes = size_t{1} << 30;
  const size_t n = bytes / sizeof(float);
  float* pinned = nullptr;
  float* device = nullptr;
  if (cudaMallocHost(&pinned, bytes) != cudaSuccess || cudaMalloc(&device, bytes) != cudaSuccess) {
    out.push_back({"h2d", gpu, "failed", 0, "GB/s", "cannot allocate 1 GiB pinned + device"});
    cudaFreeHost(pinned);
    return;
  }
  for (size_t i = 0; i < n; ++i) pinned[i] = Value(i, 3);
  auto h2d = [&] { cudaMemcpyAsync(device, pinned, bytes, cudaMemcpyHostToDevice, stream); };
  auto d2h = [&] { cudaMemcpyAsync(pinned, device, bytes, cudaMemcpyDeviceToHost, stream); };
  h2d();
  const bool h2d_ok = cudaStreamSynchronize(stream) == cudaSuccess &&
                      CheckSamples(device, n, [](size_t i) { return Value(i, 3); });
  if (h2d_ok) {
    const double s = TimeMedianSeconds(stream, settings.warmup, settings.repeats, h2d);
    out.push_back({"h2d", gpu, s > 0 ? "ok" : "failed", s > 0 ? bytes / s / 1e9 : 0, "GB/s", "1 GiB pinned"});
    std::fill(pinned, pinned + n, 0.0f);
    d2h();
    cudaStreamSynchronize(stream);
    bool d2h_ok = true;
    for (size_t i = 0; i < n; i += n / kSamples) d2h_ok = d2h_ok && pinned[i] == Value(i, 3);
    if (d2h_ok) {
      const double d = TimeMedianSeconds(stream, settings.warmup, settings.repeats, d2h);
      out.push_back({"d2h", gpu, d > 0 ? "ok" : "failed", d > 0 ? bytes / d / 1e9 : 0, "GB/s", "1 GiB pinned"});
    } else {
      out.push_back({"d2h", gpu, "failed", 0, "GB/s", "wrong result"});
    }
  } else {
    out.push_back({"h2d", gpu, "failed", 0, "GB/s", "wrong result"});
  }
  cudaFree(device);
  cudaFreeHost(pinned);
}

// Checks sampled outputs of C = A^T B (column-major, A stored k x m) against host dot products.
bool CheckGemm(const std::vector<float>& a, const std::vector<float>& b, const void* c_device,
               bool c_is_bf16, int m, int n, int k, double tolerance) {
  std::mt19937 random(4);
  for (int s = 0; s < 64; ++s) {
    const int i = static_cast<int>(random() % m), j = static_cast<int>(random() % n);
    double want = 0;
    for (int p = 0; p < k; ++p) want += double(a[size_t(i) * k + p]) * b[size_t(j) * k + p];
    float got = 0;
    const size_t offset = size_t(j) * m + i;
    if (c_is_bf16) {
      __nv_bfloat16 value;
      cudaMemcpy(&value, static_cast<const __nv_bfloat16*>(c_device) + offset, sizeof(value),
                 cudaMemcpyDeviceToHost);
      got = __bfloat162float(value);
    } else {
      cudaMemcpy(&got, static_cast<const float*>(c_device) + offset, sizeof(got), cudaMemcpyDeviceToHost);
    }
    if (std::fabs(got - want) > tolerance) return false;
  }
  return true;
}

// Inputs quantised the way the GPU sees them, so the host reference matches the device's inputs.
std::vector<float> GemmInput(size_t count, uint64_t seed, bool fp8) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (auto& v : values) {
    float x = dist(random);
    if (x == 0.0f) x = 0.5f;
    v = fp8 ? float(__nv_fp8_e4m3(x)) : __bfloat162float(__float2bfloat16(x));
  }
  return values;
}

void GemmProbe(int gpu, const GpuProbeSettings& settings, cudaStream_t stream, bool fp8,
               std::vector<ProbeFigure>& out) {
  const char* name = fp8 ? "gemm.fp8" : "gemm.bf16";
  const int m = settings.gemm_size, n = settings.gemm_size, k = settings.gemm_size;
  const std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  const size_t element = fp8 ? 1 : 2;
  // A is stored k x m (transposed, "TN" as fp8 requires), B k x n, C m x n in bf16.
  const auto host_a = GemmInput(size_t(k) * m, 5, fp8), host_b = GemmInput(size_t(k) * n, 6, fp8);
  std::vector<unsigned char> packed_a(host_a.size() * element), packed_b(host_b.size() * element);
  for (size_t i = 0; i < host_a.size(); ++i) {
    if (fp8) {
      packed_a[i] = __nv_fp8_e4m3(host_a[i]).__x;
    } else {
      reinterpret_cast<__nv_bfloat16*>(packed_a.data())[i] = __float2bfloat16(host_a[i]);
    }
  }
  for (size_t i = 0; i < host_b.size(); ++i) {
    if (fp8) {
      packed_b[i] = __nv_fp8_e4m3(host_b[i]).__x;
    } else {
      reinterpret_cast<__nv_bfloat16*>(packed_b.data())[i] = __float2bfloat16(host_b[i]);
    }
  }
  void *a = nullptr, *b = nullptr, *c = nullptr, *workspace = nullptr;
  const size_t workspace_bytes = size_t{64} << 20;
  cudaError_t rc = cudaMalloc(&a, packed_a.size());
  if (rc == cudaSuccess) rc = cudaMalloc(&b, packed_b.size());
  if (rc == cudaSuccess) rc = cudaMalloc(&c, size_t(m) * n * sizeof(__nv_bfloat16));
  if (rc == cudaSuccess) rc = cudaMalloc(&workspace, workspace_bytes);
  if (rc == cudaSuccess) rc = cudaMemcpy(a, packed_a.data(), packed_a.size(), cudaMemcpyHostToDevice);
  if (rc == cudaSuccess) rc = cudaMemcpy(b, packed_b.data(), packed_b.size(), cudaMemcpyHostToDevice);
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  bool ready = rc == cudaSuccess && cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS &&
               cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
  const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
  ready = ready &&
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)) == CUBLAS_STATUS_SUCCESS &&
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof(none)) == CUBLAS_STATUS_SUCCESS &&
          cublasLtMatrixLayoutCreate(&la, in_type, k, m, k) == CUBLAS_STATUS_SUCCESS &&
          cublasLtMatrixLayoutCreate(&lb, in_type, k, n, k) == CUBLAS_STATUS_SUCCESS &&
          cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, m, n, m) == CUBLAS_STATUS_SUCCESS &&
          cublasLtMatmulPreferenceCreate(&preference) == CUBLAS_STATUS_SUCCESS &&
          cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &workspace_bytes, sizeof(workspace_bytes)) == CUBLAS_STATUS_SUCCESS &&
          cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, preference, 1, &heuristic, &found) ==
              CUBLAS_STATUS_SUCCESS &&
          found > 0;
  const float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t matmul_status = CUBLAS_STATUS_SUCCESS;
  auto matmul = [&] {
    matmul_status = cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, c, lc, c, lc,
                                   &heuristic.algo, workspace, workspace_bytes, stream);
  };
  if (rc != cudaSuccess) {
    out.push_back({name, gpu, "failed", 0, "TFLOP/s", shape + ": " + Describe(rc)});
  } else if (!ready) {
    out.push_back({name, gpu, "failed", 0, "TFLOP/s", shape + ": cuBLASLt found no algorithm"});
  } else if (matmul(), matmul_status != CUBLAS_STATUS_SUCCESS) {
    out.push_back({name, gpu, "failed", 0, "TFLOP/s",
                   shape + ": cublasLtMatmul: " + cublasLtGetStatusString(matmul_status)});
  } else {
    // Inputs are exact in their type and accumulation is fp32; the bf16 output rounds to
    // 2^-8 relative, and sums of k products of +-1 values have magnitude ~sqrt(k).
    const double tolerance = 0.02 * std::sqrt(double(k)) + 0.01;
    const bool correct = cudaStreamSynchronize(stream) == cudaSuccess &&
                         CheckGemm(host_a, host_b, c, true, m, n, k, tolerance);
    const double s = correct ? TimeMedianSeconds(stream, settings.warmup, settings.repeats, matmul) : 0;
    if (correct && s > 0) {
      out.push_back({name, gpu, "ok", 2.0 * m * n * k / s / 1e12, "TFLOP/s", shape});
    } else {
      out.push_back({name, gpu, "failed", 0, "TFLOP/s", shape + ": wrong result"});
    }
  }
  if (preference) cublasLtMatmulPreferenceDestroy(preference);
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (desc) cublasLtMatmulDescDestroy(desc);
  if (lt) cublasLtDestroy(lt);
  cudaFree(workspace);
  cudaFree(c);
  cudaFree(b);
  cudaFree(a);
}

}  // namespace

std::vector<ProbeFigure> RunGpuProbes(int gpu, const GpuProbeSettings& settings) {
  std::vector<ProbeFigure> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || gpu >= count) return out;
  cudaSetDevice(gpu);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, gpu);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  HbmProbes(gpu, settings, stream, out);
  GemmProbe(gpu, settings, stream, false, out);
  const bool has_fp8 = prop.major * 10 + prop.minor >= 89;
  if (settings.fp8 && has_fp8) {
    GemmProbe(gpu, settings, stream, true, out);
  } else {
    out.push_back({"gemm.fp8", gpu, "skipped", 0, "TFLOP/s",
                   has_fp8 ? "fp8 not requested" : "no fp8 tensor cores (sm < 89)"});
  }
  HostLinkProbes(gpu, settings, stream, out);
  cudaStreamDestroy(stream);
  // Release the context (~0.5 GiB): the engines started later need the memory.
  cudaDeviceReset();
  return out;
}

}  // namespace servesweep::kernels
