// edgeflow-run: cold-start inference on a packed model file (docs/format.md).
//
//   edgeflow-run MODEL.efpk [--prompt FILE | --tokens 1,2,3] [options]      (no prompt option: ids from stdin)
//
// Loads the model layer by layer on I/O threads while earlier layers already compute, prefills the prompt in
// chunks, prints the first token (and greedily decodes --new-tokens more), and optionally writes a JSON report and
// a Chrome trace. Exit codes (also in --help): see kUsage.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "edgeflow/format.h"
#include "edgeflow/unpack.h"
#include "engine.h"
#include "loader.h"

using namespace edgeflow;

namespace {

const char* kUsage = R"(usage: edgeflow-run MODEL.efpk [options]

Prompt (token ids separated by spaces, newlines or commas; default: read from stdin):
  --prompt FILE         read the ids from FILE ("-" for stdin)
  --tokens LIST         the ids on the command line, e.g. 1,2,3
Options:
  --threads N           threads of the CPU executor and of the accelerator emulator each (default 2)
  --io-threads N        threads reading the model file (default 1)
  --unpack-threads N    threads unpacking layers, one layer each (default 1)
  --chunk N             prefill chunk size in tokens (default 128)
  --ctx N               context length limit, prompt + new tokens (default: the model's max_position_embeddings)
  --new-tokens N        greedily decode N tokens after the first one (default 0)
  --evict-cache         drop the model file from the page cache (posix_fadvise DONTNEED) before starting
  --direct-io           read with O_DIRECT (bypasses the page cache)
  --no-verify           skip the CRC-32 check of every payload while unpacking
  --repeat-prefill N    after the cold prefill, run the prompt N more times with the weights in memory and report
                        the median warm prefill speed
  --json                print a JSON report on stdout instead of the generated token ids
  --trace FILE          write a Chrome trace-event JSON of every task (open in ui.perfetto.dev)
Exit codes:
  0 success   2 bad command line or option value   3 a file cannot be opened or read
  4 the model file is invalid or corrupt   5 the request does not fit the model (prompt longer than the context,
  token id outside the vocabulary, empty prompt)   1 any other error
)";

enum Exit { kOk = 0, kOther = 1, kUsageError = 2, kIoError = 3, kBadModel = 4, kBadRequest = 5 };

struct ExitError : std::runtime_error {
    ExitError(int code, const std::string& m) : std::runtime_error(m), code(code) {}
    int code;
};

struct Args {
    std::string model, prompt_file, tokens_arg, trace_file;
    EngineOptions engine;
    LoadOptions load;
    int new_tokens = 0, repeat_prefill = 0;
    bool evict = false, json = false, have_tokens_arg = false;
};

int parse_int(const std::string& flag, const char* v, int lo) {
    char* end = nullptr;
    errno = 0;
    const long x = v ? std::strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo || x > 1 << 30)
        throw ExitError(kUsageError, flag + " needs an integer >= " + std::to_string(lo) + (v ? std::string(", got '") + v + "'" : ""));
    return int(x);
}

Args parse_args(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string f = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) throw ExitError(kUsageError, f + " needs a value");
            return argv[++i];
        };
        if (f == "-h" || f == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        } else if (f == "--prompt") a.prompt_file = value();
        else if (f == "--tokens") a.tokens_arg = value(), a.have_tokens_arg = true;
        else if (f == "--threads") a.engine.threads = parse_int(f, value(), 1);
        else if (f == "--io-threads") a.engine.io_threads = parse_int(f, value(), 1);
        else if (f == "--unpack-threads") a.engine.unpack_threads = parse_int(f, value(), 1);
        else if (f == "--chunk") a.engine.chunk = parse_int(f, value(), 1);
        else if (f == "--ctx") a.engine.ctx = parse_int(f, value(), 1);
        else if (f == "--new-tokens") a.new_tokens = parse_int(f, value(), 0);
        else if (f == "--repeat-prefill") a.repeat_prefill = parse_int(f, value(), 0);
        else if (f == "--evict-cache") a.evict = true;
        else if (f == "--direct-io") a.load.direct_io = true;
        else if (f == "--no-verify") a.load.verify_crc = false;
        else if (f == "--json") a.json = true;
        else if (f == "--trace") a.trace_file = value();
        else if (!f.empty() && f[0] == '-' && f != "-") throw ExitError(kUsageError, "unknown option " + f);
        else if (a.model.empty()) a.model = f;
        else throw ExitError(kUsageError, "unexpected argument " + f);
    }
    if (a.model.empty()) throw ExitError(kUsageError, "no model file given");
    if (a.have_tokens_arg && !a.prompt_file.empty()) throw ExitError(kUsageError, "give --prompt or --tokens, not both");
    return a;
}

std::vector<int32_t> parse_tokens(std::istream& in, const std::string& what) {
    std::vector<int32_t> toks;
    std::string word;
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(text.begin(), text.end(), ',', ' ');
    std::istringstream ss(text);
    while (ss >> word) {
        char* end = nullptr;
        errno = 0;
        const long v = std::strtol(word.c_str(), &end, 10);
        if (*end || errno || v < 0 || v > 0x7fffffff)
            throw ExitError(kBadRequest, what + ": '" + word + "' is not a token id (a non-negative integer)");
        toks.push_back(int32_t(v));
    }
    if (toks.empty()) throw ExitError(kBadRequest, what + ": the prompt is empty");
    return toks;
}

std::vector<int32_t> read_prompt(const Args& a) {
    if (a.have_tokens_arg) {
        std::istringstream in(a.tokens_arg);
        return parse_tokens(in, "--tokens");
    }
    if (a.prompt_file.empty() || a.prompt_file == "-") return parse_tokens(std::cin, "stdin");
    std::ifstream f(a.prompt_file);
    if (!f) throw ExitError(kIoError, "cannot open prompt file " + a.prompt_file + ": " + std::strerror(errno));
    return parse_tokens(f, a.prompt_file);
}

void check_readable(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw ExitError(kIoError, "cannot open model file " + path + ": " + std::strerror(errno));
    ::close(fd);
}

void evict_from_page_cache(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw ExitError(kIoError, "cannot open model file " + path + ": " + std::strerror(errno));
    const int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    if (rc != 0) throw ExitError(kIoError, "posix_fadvise(DONTNEED) on " + path + " failed: " + std::strerror(rc));
}

// Bytes of the file in the page cache now (mincore over a read-only mapping), to show that eviction worked.
long resident_bytes(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return -1;
    struct stat st {};
    long resident = -1;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        void* p = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            const long page = sysconf(_SC_PAGESIZE);
            std::vector<unsigned char> vec((size_t(st.st_size) + page - 1) / page);
            if (mincore(p, size_t(st.st_size), vec.data()) == 0) {
                resident = 0;
                for (unsigned char v : vec) resident += (v & 1) ? page : 0;
            }
            munmap(p, size_t(st.st_size));
        }
    }
    ::close(fd);
    return resident;
}

// Peak resident set of this process: VmHWM from /proc/self/status. (getrusage's ru_maxrss survives execve, so
// after a fork from a large parent, e.g. Python, it reports the parent's size.) -1 where /proc is unavailable.
long peak_rss_bytes() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.compare(0, 6, "VmHWM:") == 0) return std::atol(line.c_str() + 6) * 1024L;
    return -1;
}

int run(const Args& a) {
    const std::vector<int32_t> prompt = read_prompt(a);
    check_readable(a.model);
    if (a.evict) evict_from_page_cache(a.model);
    const long resident_at_start = a.json ? resident_bytes(a.model) : -1;

    const double t_start = now_s();  // the TTFT clock starts here: after argument parsing and eviction
    Engine engine(open_packed_model(a.model, a.load), a.engine);
    const std::vector<float> logits = engine.prefill(prompt, false, a.new_tokens);
    const int32_t first = argmax(logits.data(), engine.config().vocab);
    const double t_first = now_s();
    const double p0 = engine.prefill_start_s(), p1 = engine.prefill_end_s();  // the cold prefill's pipeline
    if (a.json) {  // the report opens with the first token, flushed now: its arrival marks TTFT even when decoding
        std::printf("{\n  \"first_token\": %d,\n", first);
        std::fflush(stdout);
    }

    const double t_decode0 = now_s();  // decode runs on the prefill's CPU lane and weights: no graph to switch to
    std::vector<int32_t> generated{first};
    for (int i = 0; i < a.new_tokens; ++i) generated.push_back(engine.decode_step(generated.back()));
    const double t_decoded = now_s();

    std::vector<double> warm;
    for (int r = 0; r < a.repeat_prefill; ++r) {
        const double t0 = now_s();
        engine.prefill(prompt, false, 0);
        warm.push_back(double(prompt.size()) / (now_s() - t0));
    }
    std::sort(warm.begin(), warm.end());

    const auto events = engine.trace().events();
    if (!a.trace_file.empty()) engine.trace().write_chrome_json(a.trace_file);
    if (!a.json) {
        for (size_t i = 0; i < generated.size(); ++i) std::printf("%s%d", i ? " " : "", generated[i]);
        std::printf("\n");
        return kOk;
    }
    // Only the first prefill's tasks belong to the TTFT.
    std::vector<TraceEvent> cold;
    for (const auto& e : events)
        if (e.t0 < t_first) cold.push_back(e);
    const TtftBreakdown b = breakdown(cold, p0, p1);
    const double ttft = t_first - t_start;
    std::printf("  \"model\": \"%s\",\n", a.model.c_str());
    std::printf("  \"gemm_kernel\": \"%s\", \"unpack_path\": \"%s\",\n", engine.gemm_kernel(),
                path_name(active_unpack_path()));
    std::printf("  \"threads\": %d, \"io_threads\": %d, \"unpack_threads\": %d, \"chunk\": %d, \"direct_io\": %s, "
                "\"verify_crc\": %s,\n",
                a.engine.threads, a.engine.io_threads, a.engine.unpack_threads, a.engine.chunk, a.load.direct_io ? "true" : "false",
                a.load.verify_crc ? "true" : "false");
    std::printf("  \"prompt_tokens\": %zu, \"new_tokens\": %d,\n", prompt.size(), a.new_tokens);
    std::printf("  \"ttft_s\": %.6f,\n", ttft);
    std::printf("  \"ttft_breakdown_s\": {\"setup\": %.6f, \"io\": %.6f, \"unpack\": %.6f, \"compute\": %.6f, "
                "\"idle\": %.6f},\n",
                (p0 - t_start) + (t_first - p1),
                b.io_s, b.unpack_s, b.compute_s, b.idle_s);
    std::printf("  \"busy_s\": {\"io\": %.6f, \"unpack\": %.6f, \"cpu\": %.6f, \"accel\": %.6f},\n", b.io_busy_s,
                b.unpack_busy_s, b.cpu_busy_s, b.accel_busy_s);
    std::printf("  \"cold_prefill_tokens_per_s\": %.3f,\n", double(prompt.size()) / (p1 - p0));
    if (!warm.empty()) std::printf("  \"warm_prefill_tokens_per_s\": %.3f,\n", warm[warm.size() / 2]);
    std::printf("  \"decode_s\": %.6f,\n", t_decoded - t_first);
    std::printf("  \"prefill_end_to_decode_s\": %.6f,\n", t_decode0 - p1);
    if (a.new_tokens > 0) std::printf("  \"decode_tokens_per_s\": %.3f,\n", a.new_tokens / (t_decoded - t_first));
    std::printf("  \"bytes_read\": %llu,\n", static_cast<unsigned long long>(engine.bytes_read()));
    std::printf("  \"model_resident_bytes_at_start\": %ld,\n", resident_at_start);
    std::printf("  \"peak_rss_bytes\": %ld,\n", peak_rss_bytes());
    std::printf("  \"tokens\": [");
    for (size_t i = 0; i < generated.size(); ++i) std::printf("%s%d", i ? ", " : "", generated[i]);
    std::printf("]\n}\n");
    return kOk;
}

}  // namespace

int main(int argc, char** argv) {
    now_s();  // start the clock's epoch
    try {
        return run(parse_args(argc, argv));
    } catch (const ExitError& e) {
        std::fprintf(stderr, "edgeflow-run: %s\n", e.what());
        if (e.code == kUsageError) std::fprintf(stderr, "(edgeflow-run --help for usage)\n");
        return e.code;
    } catch (const IoError& e) {
        std::fprintf(stderr, "edgeflow-run: %s\n", e.what());
        return kIoError;
    } catch (const FormatError& e) {
        std::fprintf(stderr, "edgeflow-run: invalid model file: %s\n", e.what());
        return kBadModel;
    } catch (const EngineError& e) {
        std::fprintf(stderr, "edgeflow-run: %s\n", e.what());
        return kBadRequest;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "edgeflow-run: error: %s\n", e.what());
        return kOther;
    }
}
