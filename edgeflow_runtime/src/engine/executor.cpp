#include "executor.h"

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

void QueueExecutor::loop(int index) {
    const std::string track = name_ + "-" + std::to_string(index);
    for (;;) {
        Item item;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stop_ || !ready_.empty(); });
            if (stop_ && ready_.empty()) return;
            item = ready_.top();
            ready_.pop();
        }
        std::exception_ptr error;
        if (!item.graph->failed()) {  // after a failure the remaining tasks are skipped, not run
            const double t0 = now_s();
            try {
                item.task->fn();
            } catch (...) {
                error = std::current_exception();
            }
            if (trace_)
                trace_->add({item.task->name, track, lane_name(item.task->lane), item.task->layer, item.task->chunk,
                             t0, now_s()});
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
    for (Task* t : roots) executors_[int(t->lane)]->submit(t, this);
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
