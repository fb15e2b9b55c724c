// Operator tasks and the executors that run them (paper section 4.3, Appendix B).
//
// A TaskGraph holds tasks (one operator stage of one layer and one prefill chunk, or the load / unpack of one
// layer) with their dependencies. A task becomes ready when all its predecessors have finished; it is then handed
// to the executor of its placement (Lane). Each executor keeps its own ready queue, ordered by Task::priority, the
// hook that scheduling policies (position-guided priority, task stealing) change.
//
// Executors here: I/O threads (pread), an unpack thread, the CPU executor and the accelerator executor. Without an
// NPU SDK the accelerator is an emulator: a dedicated dispatcher whose INT8 matmuls run on its own thread pool.
#pragma once
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "thread_pool.h"
#include "trace.h"

namespace edgeflow {

enum class Lane { IO = 0, Unpack = 1, CPU = 2, Accel = 3 };
constexpr int kNumLanes = 4;
const char* lane_name(Lane lane);

struct Task {
    std::string name;  // operator stage: "load", "unpack", "attn_in", "qkv", ...
    int layer = -1, chunk = -1;
    Lane lane = Lane::CPU;
    long priority = 0;  // among ready tasks of one executor, lower runs first
    std::function<void()> fn;
    std::vector<Task*> next;       // tasks that depend on this one
    std::atomic<int> waiting{0};   // unfinished predecessors
};

class TaskGraph;

// Runs ready tasks placed on it. An implementation must call TaskGraph::finished(task) after running each task.
class Executor {
public:
    virtual ~Executor() = default;
    virtual const char* name() const = 0;
    virtual void submit(Task* task, TaskGraph* graph) = 0;
};

// Dispatcher threads that take ready tasks in priority order; optionally a thread pool that the tasks use for
// data parallelism (the dispatcher thread takes part in it).
class QueueExecutor : public Executor {
public:
    QueueExecutor(std::string name, int n_dispatchers, int pool_threads, Trace* trace);
    ~QueueExecutor() override;
    const char* name() const override { return name_.c_str(); }
    void submit(Task* task, TaskGraph* graph) override;
    ThreadPool* pool() { return pool_.get(); }

private:
    void loop(int index);
    struct Item {
        Task* task;
        TaskGraph* graph;
        long seq;
    };
    struct Later {
        bool operator()(const Item& a, const Item& b) const {
            return a.task->priority != b.task->priority ? a.task->priority > b.task->priority : a.seq > b.seq;
        }
    };
    std::string name_;
    Trace* trace_;
    std::unique_ptr<ThreadPool> pool_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::priority_queue<Item, std::vector<Item>, Later> ready_;
    long seq_ = 0;
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

// The CPU executor: norms, (de)quantization, RoPE, attention, SwiGLU, residual adds.
class CpuExecutor : public QueueExecutor {
public:
    CpuExecutor(int threads, Trace* trace) : QueueExecutor("cpu", 1, threads, trace) {}
};

// The accelerator executor, emulated on the host: a dedicated dispatcher whose INT8 matmuls run on their own
// `threads` cores. A real NPU backend (QNN) would implement Executor by submitting the matmul graphs instead.
class AcceleratorEmulator : public QueueExecutor {
public:
    AcceleratorEmulator(int threads, Trace* trace) : QueueExecutor("accel", 1, threads, trace) {}
};

class TaskGraph {
public:
    Task* add(std::string name, int layer, int chunk, Lane lane, long priority, std::function<void()> fn);
    static void depend(Task* before, Task* after);  // `after` waits for `before`; nullptr before is ignored

    // Submits the tasks without predecessors and blocks until every task has run. Rethrows the first exception a
    // task threw (tasks not yet started are then skipped).
    void run(Executor* const executors[kNumLanes]);

    void finished(Task* task, std::exception_ptr error);  // called by executors
    std::function<void()> on_failure;  // runs once, on the thread of the first task that fails
    bool failed() const { return failed_.load(); }
    size_t size() const { return tasks_.size(); }

private:
    std::vector<std::unique_ptr<Task>> tasks_;
    Executor* const* executors_ = nullptr;
    std::mutex mu_;
    std::condition_variable cv_;
    size_t done_ = 0;
    std::exception_ptr error_;
    std::atomic<bool> failed_{false};
};

}  // namespace edgeflow
