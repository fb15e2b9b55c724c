#include "executor.h"

#include <algorithm>
#include <ctime>

#include "model.h"

namespace edgeflow {

const char* lane_name(Lane lane) {
    static const char* names[kNumLanes] = {"io", "unpack", "cpu", "accel"};
    return names[int(lane)];
}

QueueExecutor::QueueExecutor(std::string name, int n_dispatchers, int pool_threads, Trace* trace)
    : name_(std::move(name)), trace_(trace) {
    if (pool_threads > 0) pool_ = std::make_unique<ThreadPool>(pool_threads);
    for (int i = 0; i < n_dispatchers; ++i) threads_.emplace_back([this, i] { loop(i); });
}

QueueExecutor::~QueueExecutor() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
}

void QueueExecutor::submit(Task* task, TaskGraph* graph) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        ready_.push({task, graph, seq_++});
    }
    cv_.notify_one();
}

double QueueExecutor::cpu_s() {
    std::lock_guard<std::mutex> lk(mu_);
    return cpu_s_;
}

// CPU time of the calling thread (user + system): what a thread blocked in pread does not spend.
double thread_cpu_s() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

void QueueExecutor::loop(int index) {
    const std::string track = name_ + "-" + std::to_string(index);
    for (;;) {
        ReadyItem item;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stop_ || !ready_.empty(); });
            if (stop_ && ready_.empty()) return;
            item = ready_.top();
            ready_.pop();
        }
        std::exception_ptr error;
        if (!item.graph->failed()) {  // after a failure the remaining tasks are skipped, not run
            const double t0 = now_s(), cpu0 = thread_cpu_s();
            try {
                item.task->fn();
            } catch (...) {
                error = std::current_exception();
            }
            {
                std::lock_guard<std::mutex> lk(mu_);
                cpu_s_ += thread_cpu_s() - cpu0;
            }
            if (trace_)
                trace_->add({item.task->name, track, lane_name(item.task->lane), item.task->layer, item.task->chunk,
                             t0, now_s(), false});
        }
        item.graph->finished(item.task, error);
    }
}

const char* policy_name(Policy p) {
    static const char* names[] = {"llmnpu-static", "place", "place+priority", "place+priority+steal"};
    return names[int(p)];
}

Policy parse_policy(const std::string& name) {
    for (int i = 0; i < 4; ++i)
        if (name == policy_name(Policy(i))) return Policy(i);
    throw EngineError("unknown pipeline policy '" + name +
                      "' (one of llmnpu-static, place, place+priority, place+priority+steal)");
}

int SchedOptions::accel_share() const {
    if (threads <= 1) return 0;  // one worker serves both lanes
    return accel_threads > 0 ? accel_threads : threads / 2;
}
int SchedOptions::cpu_share() const { return threads <= 1 ? 1 : threads - accel_share(); }

void SchedOptions::validate() const {
    if (threads <= 0) throw EngineError("threads must be at least 1 (got " + std::to_string(threads) + ")");
    if (accel_threads < 0 || (threads == 1 && accel_threads > 0) || (threads > 1 && accel_threads >= threads))
        throw EngineError("accelerator threads must be in [0, threads - 1] (0 = threads / 2; with 1 thread only 0), "
                          "got " + std::to_string(accel_threads) + " of " + std::to_string(threads));
    if (steal_threshold < 0)
        throw EngineError("steal threshold must be >= 0 (got " + std::to_string(steal_threshold) + ")");
}

ComputeScheduler::ComputeScheduler(SchedOptions opt, Trace* trace) : opt_(opt), trace_(trace) {
    opt_.validate();
    const int T = opt_.threads, a = opt_.accel_share(), c = opt_.cpu_share();
    auto hook = [this] { wake(); };
    cpu_pool_ = std::make_unique<ThreadPool>(T == 1 ? 1 : opt_.lane_help ? T : c, hook);
    accel_pool_ = std::make_unique<ThreadPool>(T == 1 ? 1 : opt_.lane_help ? T : a, hook);
    for (int i = 0; i < T; ++i) {
        WorkerStats w;
        Role r;
        if (T == 1) r = DispatchBoth, w.name = "both-0", w.lane = "cpu";
        else if (i == 0) r = DispatchCpu, w.name = "cpu-0", w.lane = "cpu";
        else if (i == 1) r = DispatchAccel, w.name = "accel-0", w.lane = "accel";
        else if (i < 1 + a) r = Helper, w.name = "accel-help-" + std::to_string(i), w.lane = "accel";
        else r = Helper, w.name = "cpu-help-" + std::to_string(i), w.lane = "cpu";
        role_.push_back(r);
        stats_.push_back(w);
    }
    for (int i = 0; i < T; ++i) threads_.emplace_back([this, i] { loop(i); });
}

ComputeScheduler::~ComputeScheduler() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
}

static int queue_of(Lane lane) { return lane == Lane::Accel ? 1 : lane == Lane::Unpack ? 2 : 0; }

void ComputeScheduler::submit(Task* task, TaskGraph* graph) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        queue_[queue_of(task->lane)].push({task, graph, seq_++});
    }
    cv_.notify_all();
}

void ComputeScheduler::submit_all(const std::vector<Task*>& tasks, TaskGraph* graph) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        for (Task* t : tasks) queue_[queue_of(t->lane)].push({t, graph, seq_++});
    }
    cv_.notify_all();
}

void ComputeScheduler::wake() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        ++posted_;
    }
    cv_.notify_all();
}

void ComputeScheduler::reset_stats() {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& w : stats_) w.task_s = w.help_s = 0, w.tasks = w.stolen = 0;
}

std::vector<WorkerStats> ComputeScheduler::stats() {
    std::lock_guard<std::mutex> lk(mu_);
    return stats_;
}

// Which queue worker `index` takes its next task from (-1: none). Under mu_.
//   CPU dispatcher: the earlier (priority, submission order) head of its own queue and the unpack queue; when both are
//   empty and stealing is on, the accelerator queue's head once that queue holds more than steal_threshold tasks
//   (fewer are left to the accelerator, which would otherwise idle).
//   Accelerator dispatcher: its own queue; when that is empty and lane help is on, the unpack queue (on the host
//   both lanes are CPU cores: a layer is unpacked by whichever is free, as a dedicated unpack thread would, but
//   inside the budget). Never the CPU lane's operators (an NPU cannot run them).
//   The single worker of threads = 1: the earliest of the three heads.
int ComputeScheduler::choose(int index, bool& stolen) const {
    const ReadyQueue& aq = queue_[1];
    const ReadyQueue& uq = queue_[2];
    auto earlier = [&](std::initializer_list<int> qs) {
        int best = -1;
        for (int q : qs)
            if (!queue_[q].empty() && (best < 0 || ReadyLater()(queue_[best].top(), queue_[q].top()))) best = q;
        return best;
    };
    int q = -1;
    stolen = false;
    switch (role_[index]) {
        case DispatchCpu:
            q = earlier({0, 2});
            if (q < 0 && opt_.policy == Policy::PlacePrioritySteal && int(aq.size()) > opt_.steal_threshold)
                q = 1, stolen = true;
            break;
        case DispatchAccel:
            if (!aq.empty()) q = 1;
            else if (opt_.lane_help && !uq.empty()) q = 2;
            break;
        case DispatchBoth:
            q = earlier({0, 1, 2});
            break;
        case Helper:
            break;
    }
    return q;
}

bool ComputeScheduler::pick(int index, ReadyItem& out, bool& stolen) {
    const int q = choose(index, stolen);
    if (q < 0) return false;
    out = queue_[q].top();
    queue_[q].pop();
    return true;
}

// Pools this worker may help: its own lane's first, the other lane's too with lane_help.
bool ComputeScheduler::helpable(int index) {
    const bool accel = stats_[index].lane == "accel";
    ThreadPool* own = accel ? accel_pool_.get() : cpu_pool_.get();
    ThreadPool* other = accel ? cpu_pool_.get() : accel_pool_.get();
    return own->has_work() || (opt_.lane_help && other->has_work());
}

bool ComputeScheduler::help(int index) {
    const bool accel = stats_[index].lane == "accel";
    ThreadPool* own = accel ? accel_pool_.get() : cpu_pool_.get();
    ThreadPool* other = accel ? cpu_pool_.get() : accel_pool_.get();
    const double t0 = now_s();
    const bool did = own->help_one() || (opt_.lane_help && other->help_one());
    if (did) {
        const double dt = now_s() - t0;
        std::lock_guard<std::mutex> lk(mu_);
        stats_[index].help_s += dt;
    }
    return did;
}

void ComputeScheduler::loop(int index) {
    for (;;) {
        ReadyItem item;
        bool stolen = false;
        {
            std::unique_lock<std::mutex> lk(mu_);
            for (;;) {
                if (pick(index, item, stolen)) break;
                if (stop_) return;
                const unsigned seen = posted_;
                lk.unlock();
                const bool helped = help(index);
                lk.lock();
                if (helped) continue;
                // A job posted after `seen` or a task submitted since wakes us; both change what the predicate reads.
                cv_.wait(lk, [&] {
                    bool s;
                    return stop_ || posted_ != seen || choose(index, s) >= 0;
                });
            }
        }
        std::exception_ptr error;
        if (!item.graph->failed()) {  // after a failure the remaining tasks are skipped, not run
            const double t0 = now_s();
            try {
                item.task->fn();
            } catch (...) {
                error = std::current_exception();
            }
            const double t1 = now_s();
            {
                std::lock_guard<std::mutex> lk(mu_);
                stats_[index].task_s += t1 - t0;
                stats_[index].tasks += 1;
                stats_[index].stolen += stolen ? 1 : 0;
            }
            if (trace_)
                trace_->add({item.task->name, stats_[index].name, lane_name(item.task->lane), item.task->layer,
                             item.task->chunk, t0, t1, stolen});
        }
        item.graph->finished(item.task, error);
    }
}

Task* TaskGraph::add(std::string name, int layer, int chunk, Lane lane, long priority, std::function<void()> fn) {
    auto t = std::make_unique<Task>();
    t->name = std::move(name);
    t->layer = layer;
    t->chunk = chunk;
    t->lane = lane;
    t->priority = priority;
    t->fn = std::move(fn);
    tasks_.push_back(std::move(t));
    return tasks_.back().get();
}

void TaskGraph::depend(Task* before, Task* after) {
    if (!before) return;
    before->next.push_back(after);
    after->waiting.fetch_add(1);
}

void TaskGraph::run(Executor* const executors[kNumLanes]) {
    executors_ = executors;
    done_ = 0;
    std::vector<Task*> roots;
    for (auto& t : tasks_)
        if (t->waiting.load() == 0) roots.push_back(t.get());
    // Roots grouped by executor (the CPU and accelerator lanes share one), each group queued at once.
    std::vector<std::pair<Executor*, std::vector<Task*>>> groups;
    for (Task* t : roots) {
        Executor* e = executors_[int(t->lane)];
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == e; });
        if (it == groups.end()) groups.push_back({e, {t}});
        else it->second.push_back(t);
    }
    for (auto& [e, ts] : groups) e->submit_all(ts, this);
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return done_ == tasks_.size(); });
    if (error_) std::rethrow_exception(error_);
}

void TaskGraph::finished(Task* task, std::exception_ptr error) {
    if (error) {
        bool first = false;
        {
            std::lock_guard<std::mutex> lk(mu_);
            first = !error_;
            if (first) error_ = error;
            failed_ = true;
        }
        if (first && on_failure) on_failure();
    }
    for (Task* n : task->next)
        if (n->waiting.fetch_sub(1) == 1) executors_[int(n->lane)]->submit(n, this);
    std::lock_guard<std::mutex> lk(mu_);
    if (++done_ == tasks_.size()) cv_.notify_all();
}

}  // namespace edgeflow
