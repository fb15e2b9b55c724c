// edgeflow-run: cold-start inference on a packed model file (docs/format.md).
//
//   edgeflow-run MODEL.efpk [--prompt-text FILE | --prompt FILE | --tokens 1,2,3] [options]  (default: ids on stdin)
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
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "edgeflow/format.h"
#include "edgeflow/unpack.h"
#include "attention.h"
#include "engine.h"
#include "gemm16.h"
#include "loader.h"
#include "ops.h"
#include "tokenizer.h"

using namespace edgeflow;

namespace {

const std::string kUsage = R"(usage: edgeflow-run MODEL.efpk [options]

Prompt (token ids separated by spaces, newlines or commas; default: read from stdin):
  --prompt-text FILE    the prompt as UTF-8 text, tokenized inside the TTFT clock by the tokenizer file
  --tokenizer FILE      the tokenizer file for --prompt-text (default: MODEL.efpk.tok, written beside the packed model)
  --tokenize-only       with --prompt-text: print the prompt's token ids and exit (no model is read)
  --prompt FILE         read the ids from FILE ("-" for stdin)
  --tokens LIST         the ids on the command line, e.g. 1,2,3
Options:
  --threads N           compute threads of the whole engine, shared by the CPU lane (unpacking included) and the
                        accelerator lane (default )" + std::to_string(defaults::kThreads) + R"(); the I/O thread only waits in pread
  --accel-threads N     the accelerator lane's share of --threads (default threads / 2; the CPU lane gets the rest;
                        with --threads 1 one worker serves both lanes in priority order, deterministically)
  --policy NAME         pipeline scheduling: llmnpu-static | place | place+priority | place+priority+steal
                        (default )" + std::string(defaults::kPolicy) + R"(; see the engine README)
  --steal-threshold N   an idle CPU worker steals when the accelerator queue holds more than N tasks (default )" + std::to_string(defaults::kStealThreshold) + R"()
  --no-lane-help        idle threads do not help the other lane's data-parallel work (strict lanes, as on a phone)
  --io-threads N        threads reading the model file (default 1)
  --chunk N             prefill chunk size in tokens (default )" + std::to_string(defaults::kChunk) + R"()
  --ctx N               context length limit, prompt + new tokens (default: the model's max_position_embeddings)
  --new-tokens N        greedily decode N tokens after the first one (default 0)
  --evict-cache         drop the model file from the page cache (posix_fadvise DONTNEED) before starting
  --direct-io           read with O_DIRECT (bypasses the page cache; exit 3 where the filesystem refuses it)
  --buffered-io         read through the page cache (default: O_DIRECT when none of the file is cached, else
                        buffered; --json's io_mode says which and why)
  --no-verify           skip the CRC-32 check of every payload while unpacking
  --float-outputs       ignore the file's output grids: the accelerator lane hands back float outputs (a CPU-only
                        system, which no NPU computes; 8-bit activations only)
  --repeat-prefill N    after the cold prefill, run the prompt N more times with the weights in memory and report
                        the median warm prefill speed
  --json                print a JSON report on stdout instead of the generated token ids
  --trace FILE          write a Chrome trace-event JSON of every task (open in ui.perfetto.dev)
  --profile-ops FILE    write every compute task of every prefill (stage, layer, chunk, lane, thread, start, end,
                        stolen) as JSON: the operator cost table of harness/pipeline_sim.py
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
    std::string model, prompt_file, tokens_arg, trace_file, profile_file, prompt_text_file, tokenizer_file;
    EngineOptions engine;
    LoadOptions load;
    int new_tokens = 0, repeat_prefill = 0;
    bool evict = false, json = false, have_tokens_arg = false, tokenize_only = false;
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
            std::fputs(kUsage.c_str(), stdout);
            std::exit(0);
        } else if (f == "--prompt") a.prompt_file = value();
        else if (f == "--prompt-text") a.prompt_text_file = value();
        else if (f == "--tokenizer") a.tokenizer_file = value();
        else if (f == "--tokenize-only") a.tokenize_only = true;
        else if (f == "--tokens") a.tokens_arg = value(), a.have_tokens_arg = true;
        else if (f == "--threads") a.engine.threads = parse_int(f, value(), 1);
        else if (f == "--accel-threads") a.engine.accel_threads = parse_int(f, value(), 0);
        else if (f == "--policy") a.engine.policy = value();
        else if (f == "--steal-threshold") a.engine.steal_threshold = parse_int(f, value(), 0);
        else if (f == "--no-lane-help") a.engine.lane_help = false;
        else if (f == "--profile-ops") a.profile_file = value();
        else if (f == "--io-threads") a.engine.io_threads = parse_int(f, value(), 1);
        else if (f == "--chunk") a.engine.chunk = parse_int(f, value(), 1);
        else if (f == "--ctx") a.engine.ctx = parse_int(f, value(), 1);
        else if (f == "--new-tokens") a.new_tokens = parse_int(f, value(), 0);
        else if (f == "--repeat-prefill") a.repeat_prefill = parse_int(f, value(), 0);
        else if (f == "--evict-cache") a.evict = true;
        else if (f == "--direct-io") a.load.io = IoMode::Direct;
        else if (f == "--buffered-io") a.load.io = IoMode::Buffered;
        else if (f == "--no-verify") a.load.verify_crc = false;
        else if (f == "--float-outputs") a.load.float_outputs = true;
        else if (f == "--json") a.json = true;
        else if (f == "--trace") a.trace_file = value();
        else if (!f.empty() && f[0] == '-' && f != "-") throw ExitError(kUsageError, "unknown option " + f);
        else if (a.model.empty()) a.model = f;
        else throw ExitError(kUsageError, "unexpected argument " + f);
    }
    if (a.model.empty()) throw ExitError(kUsageError, "no model file given");
    if (int(a.have_tokens_arg) + int(!a.prompt_file.empty()) + int(!a.prompt_text_file.empty()) > 1)
        throw ExitError(kUsageError, "give one of --prompt-text, --prompt and --tokens");
    if (a.tokenize_only && a.prompt_text_file.empty())
        throw ExitError(kUsageError, "--tokenize-only needs --prompt-text");
    if (a.tokenizer_file.empty()) a.tokenizer_file = a.model + ".tok";
    try {
        a.engine.validate();
    } catch (const EngineError& e) {
        throw ExitError(kUsageError, e.what());
    }
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

std::string read_text(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw ExitError(kIoError, "cannot open prompt text " + path + ": " + std::strerror(errno));
    return std::string(std::istreambuf_iterator<char>(f), {});
}

Tokenizer load_tokenizer(const std::string& tokenizer_file) {
    try {
        return Tokenizer::load(tokenizer_file);
    } catch (const std::runtime_error& e) {
        throw ExitError(kIoError, std::string(e.what()) + " (harness/engine/tokenizer_file.py writes it beside the "
                                  "packed model)");
    }
}

// Prompt text -> ids (inside the TTFT clock: llama.cpp and MNN tokenize too).
std::vector<int32_t> tokenize(const Tokenizer& tok, const std::string& text) {
    std::vector<int32_t> ids;
    try {
        ids = tok.encode(text);
    } catch (const std::invalid_argument& e) {
        throw ExitError(kBadRequest, e.what());
    }
    if (ids.empty()) throw ExitError(kBadRequest, "the prompt text is empty");
    return ids;
}

// JSON string of a token's bytes: a token may hold part of a multi-byte character; such bytes become U+FFFD.
std::string json_string(const std::string& bytes) {
    std::string out = "\"";
    for (size_t i = 0; i < bytes.size(); ++i) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        if (c == '"' || c == '\\') out += '\\', out += char(c);
        else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else if (c < 0x80) out += char(c);
        else {
            const size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
            bool ok = len && i + len <= bytes.size();
            for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(bytes[i + k]) >> 6) == 0x2;
            if (ok) out += bytes.substr(i, len), i += len - 1;
            else out += "\\ufffd";
        }
    }
    return out + "\"";
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

// Peak resident set of this process: VmHWM from /proc/self/status. (getrusage's ru_maxrss survives execve, so
// after a fork from a large parent, e.g. Python, it reports the parent's size.) -1 where /proc is unavailable.
long peak_rss_bytes() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.compare(0, 6, "VmHWM:") == 0) return std::atol(line.c_str() + 6) * 1024L;
    return -1;
}

// Per-lane busy and idle time of one prefill: a lane's capacity is its threads times the prefill's span; busy is
// the time they ran tasks (their own, or stolen ones) or helped data-parallel jobs; bubble rate = idle / capacity.
void print_lanes(const char* key, const PrefillStats& ps) {
    std::printf("  \"%s\": {", key);
    const char* lanes[] = {"cpu", "accel"};
    for (int i = 0; i < 2; ++i) {
        int n = 0, tasks = 0, stolen = 0;
        double task = 0, help = 0;
        for (const auto& w : ps.workers)
            if (w.lane == lanes[i]) ++n, task += w.task_s, help += w.help_s, tasks += w.tasks, stolen += w.stolen;
        const double cap = n * ps.span_s, idle = std::max(0.0, cap - task - help);
        std::printf("%s\"%s\": {\"threads\": %d, \"task_s\": %.6f, \"help_s\": %.6f, \"busy_s\": %.6f, "
                    "\"idle_s\": %.6f, \"bubble_rate\": %.4f, \"tasks\": %d, \"stolen\": %d}",
                    i ? ", " : "", lanes[i], n, task, help, task + help, idle, cap > 0 ? idle / cap : 0.0, tasks,
                    stolen);
    }
    std::printf(", \"span_s\": %.6f},\n", ps.span_s);
}

void write_profile(const std::string& path, const std::vector<TraceEvent>& events, const Engine& engine, int chunk) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw ExitError(kIoError, "cannot write profile file " + path + ": " + std::strerror(errno));
    const SchedOptions& so = engine.sched();
    std::fprintf(f, "{\"policy\": \"%s\", \"threads\": %d, \"accel_threads\": %d, \"steal_threshold\": %d, "
                 "\"n_layers\": %d, \"chunk\": %d, \"lane_help\": %s, \"tasks\": [\n", policy_name(so.policy), so.threads,
                 so.accel_share(), so.steal_threshold, engine.config().n_layers, chunk, so.lane_help ? "true" : "false");
    bool first = true;
    const auto& prefills = engine.prefill_stats();
    for (const auto& e : events) {
        int prefill = -1;  // 0 = the cold prefill, 1.. the warm ones (--repeat-prefill); decode tasks are left out
        for (size_t i = 0; i < prefills.size(); ++i)
            if (e.t0 >= prefills[i].t0 && e.t0 <= prefills[i].t1) prefill = int(i);
        if (prefill < 0 || (e.cat != "cpu" && e.cat != "accel")) continue;
        std::fprintf(f, "%s{\"prefill\": %d, \"stage\": \"%s\", \"layer\": %d, \"chunk\": %d, \"lane\": \"%s\", "
                     "\"thread\": \"%s\", \"t0\": %.9f, \"t1\": %.9f, \"stolen\": %s}",
                     first ? "" : ",\n", prefill, e.name.c_str(), e.layer, e.chunk, e.cat.c_str(), e.track.c_str(),
                     e.t0, e.t1, e.stolen ? "true" : "false");
        first = false;
    }
    std::fprintf(f, "\n]}\n");
    if (std::fclose(f) != 0) throw ExitError(kIoError, "cannot write profile file " + path);
}

int run(const Args& a) {
    const bool from_text = !a.prompt_text_file.empty();
    const std::string text = from_text ? read_text(a.prompt_text_file) : std::string();
    std::vector<int32_t> prompt = from_text ? std::vector<int32_t>() : read_prompt(a);
    if (a.tokenize_only) {
        prompt = tokenize(load_tokenizer(a.tokenizer_file), text);
        for (size_t i = 0; i < prompt.size(); ++i) std::printf("%s%d", i ? " " : "", prompt[i]);
        std::printf("\n");
        return kOk;
    }
    check_readable(a.model);
    if (a.evict) {
        evict_from_page_cache(a.model);
        if (from_text) evict_from_page_cache(a.tokenizer_file);
    }
    const long resident_at_start = a.json ? resident_bytes(a.model) : -1;

    const double t_start = now_s();  // the TTFT clock starts here: after argument parsing and eviction
    std::optional<Tokenizer> tok;     // kept for the first token's text
    if (from_text) prompt = tokenize(tok.emplace(load_tokenizer(a.tokenizer_file)), text);
    const double tokenize_s = now_s() - t_start;
    Engine engine(open_packed_model(a.model, a.load), a.engine);
    const std::vector<float> logits = engine.prefill(prompt, 1, a.new_tokens);
    const int32_t first = argmax(logits.data(), engine.config().vocab);
    const double t_first = now_s();
    const double p0 = engine.prefill_start_s(), p1 = engine.prefill_end_s();  // the cold prefill's pipeline
    if (a.json) {  // the report opens with the first token, flushed now: its arrival marks TTFT even when decoding
        std::printf("{\n  \"first_token\": %d,\n", first);
        std::fflush(stdout);
        if (tok) {  // after the timed event; a model may have more embedding rows than its tokenizer has tokens
            std::printf("  \"first_token_text\": %s,\n", size_t(first) < tok->vocab_size()
                        ? json_string(tok->token_bytes(first)).c_str() : "null");
        }
    }

    const double t_decode0 = now_s();  // decode runs on the prefill's CPU lane and weights: no graph to switch to
    std::vector<int32_t> generated{first};
    for (int i = 0; i < a.new_tokens; ++i) generated.push_back(engine.decode_step(generated.back()));
    const double t_decoded = now_s();

    std::vector<double> warm;
    for (int r = 0; r < a.repeat_prefill; ++r) {
        const double t0 = now_s();
        engine.prefill(prompt, 1, 0);
        warm.push_back(double(prompt.size()) / (now_s() - t0));
    }
    std::sort(warm.begin(), warm.end());

    const auto events = engine.trace().events();
    if (!a.trace_file.empty()) engine.trace().write_chrome_json(a.trace_file);
    if (!a.profile_file.empty()) write_profile(a.profile_file, events, engine, a.engine.chunk);
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
    std::printf("  \"gemm_kernel\": \"%s\", \"gemm16_kernel\": \"%s\", \"unpack_path\": \"%s\", "
                "\"crc32_kernel\": \"%s\",\n",
                engine.gemm_kernel(), best_gemm16_kernel().name, path_name(active_unpack_path()), crc32_kernel().name);
    std::printf("  \"attention_kernel\": \"%s\", \"decode_attention_kernel\": \"%s\", \"lm_head_kernel\": \"%s\",\n",
                best_attention_kernel().name, decode_attention_kernel().name, lm_head_kernel().name);
    std::printf("  \"numerics\": \"%s\", \"a16_linears\": %d,\n", engine.numerics(), engine.a16_linears());
    // unpack_threads 0: unpacking runs on the compute threads (--threads is every thread that computes)
    std::printf("  \"threads\": %d, \"io_threads\": %d, \"io_cpu_s\": %.6f, \"unpack_threads\": 0, \"chunk\": %d, "
                "\"io_mode\": \"%s\", \"verify_crc\": %s,\n",
                a.engine.threads, a.engine.io_threads, engine.io_cpu_s(), a.engine.chunk, engine.io_mode().c_str(),
                a.load.verify_crc ? "true" : "false");
    const SchedOptions& so = engine.sched();
    std::printf("  \"policy\": \"%s\", \"cpu_threads\": %d, \"accel_threads\": %d, \"steal_threshold\": %d, "
                "\"lane_help\": %s,\n",
                policy_name(so.policy), so.cpu_share(), so.accel_share(), so.steal_threshold,
                so.lane_help ? "true" : "false");
    const auto& stats = engine.prefill_stats();
    print_lanes("lanes", stats.front());
    if (stats.size() > 1) print_lanes("warm_lanes", stats.back());  // the last warm prefill
    {  // total time per operator stage in the cold prefill (all lanes, stolen tasks under their stage)
        std::map<std::string, double> op;
        for (const auto& e : cold) op[e.name] += e.t1 - e.t0;
        std::printf("  \"op_s\": {");
        bool first = true;
        for (const auto& [name, t] : op) std::printf("%s\"%s\": %.6f", first ? "" : ", ", name.c_str(), t), first = false;
        std::printf("},\n");
    }
    std::printf("  \"prompt_tokens\": %zu, \"new_tokens\": %d,\n", prompt.size(), a.new_tokens);
    if (from_text) {  // what the engine tokenized the text to (the harness checks it against the workload's ids)
        std::printf("  \"tokenize_s\": %.6f,\n  \"prompt_ids\": [", tokenize_s);
        for (size_t i = 0; i < prompt.size(); ++i) std::printf("%s%d", i ? ", " : "", prompt[i]);
        std::printf("],\n");
    }
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
