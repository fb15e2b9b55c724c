// Operator tasks and the executors that run them (paper section 4.3, Appendix B).
//
// A TaskGraph holds tasks (one operator stage of one layer and one prefill chunk, or the load / unpack of one
// layer) with their dependencies. A task becomes ready when all its predecessors have finished; it is then handed
// to the executor of its placement (Lane). Each executor keeps its own ready queue, ordered by Task::priority, the
// hook that scheduling policies (position-guided priority, task stealing) change.
//
// Executors here: I/O threads (pread) and the ComputeScheduler that serves the CPU lane (unpacking included) and the
// accelerator lane from one budget of compute threads. Without an NPU SDK the accelerator is an emulator: a
// dispatcher thread whose tasks (the INT8 matmuls) run on CPU cores of the same budget.
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

#include "defaults.h"
#include <vector>

#include "thread_pool.h"
#include "trace.h"

namespace edgeflow {

enum class Lane { IO = 0, Unpack = 1, CPU = 2, Accel = 3 };
constexpr int kNumLanes = 4;
const char* lane_name(Lane lane);
double thread_cpu_s();  // CPU time of the calling thread, s

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
    // Several ready tasks at once: none of them starts before all are queued (the graph's roots), so that with one
    // worker the order depends on the priorities only.
    virtual void submit_all(const std::vector<Task*>& tasks, TaskGraph* graph) {
        for (Task* t : tasks) submit(t, graph);
    }
};

// A ready task in an executor's queue; ReadyQueue hands out the lowest Task::priority first, ties in submission
// order (seq).
struct ReadyItem {
    Task* task;
    TaskGraph* graph;
    long seq;
};
struct ReadyLater {
    bool operator()(const ReadyItem& a, const ReadyItem& b) const {
        return a.task->priority != b.task->priority ? a.task->priority > b.task->priority : a.seq > b.seq;
    }
};
using ReadyQueue = std::priority_queue<ReadyItem, std::vector<ReadyItem>, ReadyLater>;

// Dispatcher threads that take ready tasks in priority order; optionally a thread pool that the tasks use for
// data parallelism (the dispatcher thread takes part in it).
class QueueExecutor : public Executor {
public:
    QueueExecutor(std::string name, int n_dispatchers, int pool_threads, Trace* trace);
    ~QueueExecutor() override;
    const char* name() const override { return name_.c_str(); }
    void submit(Task* task, TaskGraph* graph) override;
    ThreadPool* pool() { return pool_.get(); }
    double cpu_s();  // CPU time its threads spent running tasks (thread_cpu_s), since construction

private:
    void loop(int index);
    double cpu_s_ = 0;
    std::string name_;
    Trace* trace_;
    std::unique_ptr<ThreadPool> pool_;
    std::mutex mu_;
    std::condition_variable cv_;
    ReadyQueue ready_;
    long seq_ = 0;
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

// How the compute lanes are scheduled (paper section 4.3, Figure 14's ablation). Each policy is a few settings of the
// one ComputeScheduler below plus the graph's placement and priorities (pipeline.cpp):
//   llmnpu-static         llm.npu's coarse split: attention on the CPU; norms, SwiGLU, (de)quantization and the
//                         matmuls on the accelerator; at most two adjacent chunks in flight; topological order.
//   place                 INT8 matmuls on the accelerator, everything else on the CPU (Figure 17); topological order.
//   place+priority        + position-guided priority: among ready tasks, the earliest chunk first.
//   place+priority+steal  + task stealing: an idle CPU worker takes the head of the accelerator queue when that queue
//                         holds more than steal_threshold tasks (the default policy).
enum class Policy { LlmNpuStatic = 0, Place = 1, PlacePriority = 2, PlacePrioritySteal = 3 };
const char* policy_name(Policy p);
Policy parse_policy(const std::string& name);  // throws EngineError naming the allowed values

// The compute thread budget and its split. threads = every thread of the engine that computes: unpack tasks queue
// with the CPU lane's (I/O threads are extra: they block in pread, and their CPU time is reported). With threads = 1 one worker serves both queues, lowest priority
// first (a deterministic order when the weights are in memory). Otherwise accel_threads go to the accelerator lane
// (0 = automatic: threads / 2) and the rest to the CPU lane; each lane has one dispatcher thread that runs its
// tasks in priority order, and its other threads are helpers that only take items of data-parallel jobs.
struct SchedOptions {
    int threads = defaults::kThreads;
    int accel_threads = 0;
    Policy policy = parse_policy(defaults::kPolicy);
    int steal_threshold = defaults::kStealThreshold;
    bool lane_help = true;  // idle threads of one lane help the other lane's data-parallel jobs (host emulation)
    int cpu_share() const;
    int accel_share() const;
    void validate() const;
};

// Time accounting of one compute thread between reset_stats() and stats().
struct WorkerStats {
    std::string name;  // "cpu-0", "accel-0", "cpu-help-2", or "both-0" (threads = 1)
    std::string lane;  // the lane whose share the thread belongs to ("cpu", "accel")
    double task_s = 0;  // running tasks (own and stolen)
    double help_s = 0;  // running items of another task's data-parallel job
    int tasks = 0, stolen = 0;
};

// The CPU and accelerator lanes over one fixed set of `threads` compute threads: never more compute threads than the
// budget (a pool lends no thread of its own), and a thread idles only when its queue is empty, it may not steal, and
// no data-parallel job has an unclaimed item.
class ComputeScheduler : public Executor {
public:
    ComputeScheduler(SchedOptions opt, Trace* trace);
    ~ComputeScheduler() override;
    const char* name() const override { return "compute"; }
    void submit(Task* task, TaskGraph* graph) override;  // Lane::CPU or Lane::Accel
    void submit_all(const std::vector<Task*>& tasks, TaskGraph* graph) override;
    ThreadPool& cpu_pool() { return *cpu_pool_; }
    ThreadPool& accel_pool() { return *accel_pool_; }
    const SchedOptions& options() const { return opt_; }
    void reset_stats();
    std::vector<WorkerStats> stats();

private:
    enum Role { DispatchCpu, DispatchAccel, DispatchBoth, Helper };
    void loop(int index);
    int choose(int index, bool& stolen) const;      // under mu_: the queue to take from, -1 none
    bool pick(int index, ReadyItem& out, bool& stolen);  // under mu_
    bool help(int index);                          // not under mu_
    bool helpable(int index);
    void wake();

    SchedOptions opt_;
    Trace* trace_;
    std::unique_ptr<ThreadPool> cpu_pool_, accel_pool_;
    std::mutex mu_;
    std::condition_variable cv_;
    ReadyQueue queue_[3];  // 0 CPU, 1 accelerator, 2 unpack (see choose())
    long seq_ = 0;
    unsigned posted_ = 0;  // bumped when a data-parallel job is posted
    bool stop_ = false;
    std::vector<Role> role_;
    std::vector<WorkerStats> stats_;
    std::vector<std::thread> threads_;
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
