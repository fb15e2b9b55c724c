// Load and unpack benchmarks for one packed model file (driven by harness/pack/bench.py, which packs the same
// model in every layout and runs this per file). Prints one JSON object.
//
//   bench_unpack FILE unpack [--path P] [--reps N] [--layers N]   warm unpack of the quantized linears, N timings
//   bench_unpack FILE once   [--path P] [--layers N]              one unpack inside run_once(), for callgrind
//   bench_unpack FILE cold   [--load-threads T]                   evict the file, read every layer region
//   bench_unpack FILE e2e    [--path P] [--load-threads T]        evict, T threads load layers, 1 thread unpacks
//
// Cold runs drop the file from the page cache with posix_fadvise(POSIX_FADV_DONTNEED) after fdatasync and report
// the fraction of its pages still resident (mincore) before the timed reads. Reads are buffered pread of whole
// layer regions; CRCs are not checked in timed runs (the same for every layout).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "edgeflow/format.h"
#include "edgeflow/unpack.h"

using namespace edgeflow;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string file, mode, path = "auto";
  int reps = 5, layers = 1 << 30, load_threads = 2;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<const RegionInfo*> layer_regions(const PackedFile& f, int max_layers) {
  std::vector<const RegionInfo*> out;
  for (const auto& r : f.regions())
    if (r.kind == RegionKind::Layer && static_cast<int>(out.size()) < max_layers) out.push_back(&r);
  return out;
}

// A layer's bytes in memory and views of its quantized weights.
struct Layer {
  std::vector<uint8_t> bytes;
  std::vector<QuantTensor> weights;
  uint64_t n_weights = 0;
};

void index_layer(const PackedFile& f, const RegionInfo& r, Layer& l) {
  l.weights.clear();
  l.n_weights = 0;
  for (uint32_t i = r.first_tensor; i < r.first_tensor + r.n_tensors; ++i) {
    const TensorInfo& t = f.tensors()[i];
    if (!is_quantized(t.dtype)) continue;
    l.weights.push_back(QuantTensor::view(t, l.bytes.data() + (t.offset - r.offset)));
    l.n_weights += uint64_t{t.shape[0]} * t.shape[1];
  }
}

void unpack_layer(const Layer& l, int8_t* out) {
  for (const auto& q : l.weights) {
    unpack(q, 0, q.channels, out);
    out += uint64_t{q.channels} * q.dim;
  }
}

std::vector<Layer> load_warm(const PackedFile& f, int max_layers) {
  auto regions = layer_regions(f, max_layers);
  std::vector<Layer> layers(regions.size());
  for (size_t i = 0; i < regions.size(); ++i) {
    layers[i].bytes.resize(regions[i]->size);
    f.read_region(*regions[i], layers[i].bytes.data(), true);
    index_layer(f, *regions[i], layers[i]);
  }
  return layers;
}

uint64_t max_layer_weights(const std::vector<Layer>& layers) {
  uint64_t n = 0;
  for (const auto& l : layers) n = std::max(n, l.n_weights);
  return n;
}

// Kept out of line so callgrind can count exactly its instructions (--toggle-collect=run_once).
__attribute__((noinline)) void run_once(const std::vector<Layer>& layers, int8_t* out) {
  for (const auto& l : layers) unpack_layer(l, out);
}

double evict(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw FormatError(path + ": cannot open");
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  const off_t size = ::lseek(fd, 0, SEEK_END);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> vec((size + page - 1) / page);
  size_t resident = 0;
  if (map != MAP_FAILED && ::mincore(map, size, vec.data()) == 0)
    for (unsigned char v : vec) resident += v & 1;
  if (map != MAP_FAILED) ::munmap(map, size);
  ::close(fd);
  return vec.empty() ? 0.0 : double(resident) / vec.size();
}

void print_times(const char* key, const std::vector<double>& t) {
  std::printf("\"%s\": [", key);
  for (size_t i = 0; i < t.size(); ++i) std::printf("%s%.9f", i ? ", " : "", t[i]);
  std::printf("]");
}

int bench_unpack(const Args& a, const PackedFile& f, bool once) {
  auto layers = load_warm(f, a.layers);
  uint64_t weights = 0;
  for (const auto& l : layers) weights += l.n_weights;
  std::vector<int8_t> out(max_layer_weights(layers));
  if (once) {
    run_once(layers, out.data());
    std::printf("{\"mode\": \"once\", \"path\": \"%s\", \"weights\": %llu}\n", path_name(active_unpack_path()),
                static_cast<unsigned long long>(weights));
    return 0;
  }
  run_once(layers, out.data());  // warm-up: page in the output buffer and the code
  std::vector<double> times;
  for (int r = 0; r < a.reps; ++r) {
    auto t0 = Clock::now();
    run_once(layers, out.data());
    times.push_back(seconds_since(t0));
  }
  std::printf("{\"mode\": \"unpack\", \"path\": \"%s\", \"weights\": %llu, \"layers\": %zu, ",
              path_name(active_unpack_path()), static_cast<unsigned long long>(weights), layers.size());
  print_times("seconds", times);
  std::printf("}\n");
  return 0;
}

// Loader threads read layer regions (thread k takes layers k, k+T, ...); the unpack thread (this one) unpacks layers
// in order as they arrive. Timestamps of every load and unpack form the Figure 4 timeline.
int bench_e2e(const Args& a, const PackedFile& f, bool unpack_too) {
  auto regions = layer_regions(f, a.layers);
  const size_t n = regions.size();
  std::vector<Layer> layers(n);
  uint64_t out_size = 0;  // the largest layer's int8 weights
  for (size_t i = 0; i < n; ++i) {
    layers[i].bytes.resize(regions[i]->size);
    uint64_t w = 0;
    for (uint32_t k = regions[i]->first_tensor; k < regions[i]->first_tensor + regions[i]->n_tensors; ++k) {
      const TensorInfo& t = f.tensors()[k];
      if (is_quantized(t.dtype)) w += uint64_t{t.shape[0]} * t.shape[1];
    }
    out_size = std::max(out_size, w);
  }
  std::vector<int8_t> out(out_size, 1);  // (resize and this fill touch every page: no page faults are timed)
  const double resident = evict(f.path());
  std::vector<double> load_start(n), load_end(n), unpack_start(n), unpack_end(n);
  std::vector<char> ready(n, 0);
  std::mutex mu;
  std::condition_variable cv;
  std::string error;
  const auto t0 = Clock::now();
  std::vector<std::thread> loaders;
  for (int k = 0; k < a.load_threads; ++k)
    loaders.emplace_back([&, k] {
      for (size_t i = k; i < n; i += a.load_threads) {
        load_start[i] = seconds_since(t0);
        try {
          f.read_region(*regions[i], layers[i].bytes.data(), false);
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> g(mu);
          error = e.what();
        }
        load_end[i] = seconds_since(t0);
        std::lock_guard<std::mutex> g(mu);
        ready[i] = 1;
        cv.notify_all();
      }
    });
  uint64_t weights = 0;
  for (size_t i = 0; i < n; ++i) {
    {
      std::unique_lock<std::mutex> g(mu);
      cv.wait(g, [&] { return ready[i] != 0; });
    }
    if (!unpack_too) continue;
    unpack_start[i] = seconds_since(t0);
    index_layer(f, *regions[i], layers[i]);
    unpack_layer(layers[i], out.data());
    weights += layers[i].n_weights;
    unpack_end[i] = seconds_since(t0);
  }
  const double total = seconds_since(t0);
  for (auto& t : loaders) t.join();
  if (!error.empty()) throw FormatError(error);
  uint64_t bytes = 0;
  for (auto* r : regions) bytes += r->size;
  std::printf("{\"mode\": \"%s\", \"path\": \"%s\", \"load_threads\": %d, \"resident_before\": %.6f, "
              "\"bytes_read\": %llu, \"weights\": %llu, \"seconds\": %.9f, ",
              unpack_too ? "e2e" : "cold", path_name(active_unpack_path()), a.load_threads, resident,
              static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(weights), total);
  print_times("load_start", load_start);
  std::printf(", ");
  print_times("load_end", load_end);
  if (unpack_too) {
    std::printf(", ");
    print_times("unpack_start", unpack_start);
    std::printf(", ");
    print_times("unpack_end", unpack_end);
  }
  std::printf("}\n");
  return 0;
}

UnpackPath parse_path(const std::string& s) {
  for (auto p : {UnpackPath::Auto, UnpackPath::Scalar, UnpackPath::SSE, UnpackPath::AVX2, UnpackPath::Neon})
    if (s == path_name(p)) return p;
  throw std::invalid_argument("unknown --path " + s);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s FILE unpack|once|cold|e2e [--path P] [--reps N] [--layers N] [--load-threads T]\n",
                 argv[0]);
    return 2;
  }
  Args a;
  a.file = argv[1];
  a.mode = argv[2];
  try {
    for (int i = 3; i + 1 < argc; i += 2) {
      const std::string k = argv[i], v = argv[i + 1];
      if (k == "--path") a.path = v;
      else if (k == "--reps") a.reps = std::max(1, std::atoi(v.c_str()));
      else if (k == "--layers") a.layers = std::max(1, std::atoi(v.c_str()));
      else if (k == "--load-threads") a.load_threads = std::max(1, std::atoi(v.c_str()));
      else throw std::invalid_argument("unknown option " + k);
    }
    set_unpack_path(parse_path(a.path));
    const PackedFile f = PackedFile::open(a.file);
    if (a.mode == "unpack" || a.mode == "once") return bench_unpack(a, f, a.mode == "once");
    if (a.mode == "cold" || a.mode == "e2e") return bench_e2e(a, f, a.mode == "e2e");
    throw std::invalid_argument("unknown mode " + a.mode);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_unpack: %s\n", e.what());
    return 1;
  }
}
