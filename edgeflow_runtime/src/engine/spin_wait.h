// Spinning briefly before sleeping on a condition variable. A decode step posts about a dozen data-parallel jobs per
// layer, each tens of microseconds long; a helper woken through a futex arrives tens of microseconds late, often
// after the job is done, so decode ran on one thread while the other slept (measured: ~half the compute threads'
// samples idle in the scheduler). Spinning for kSpinWindow first catches the next job at once; a thread with nothing
// to do for longer sleeps as before, so an idle engine costs no CPU.
#pragma once
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace edgeflow {

constexpr std::chrono::microseconds kSpinWindow{200};

inline void cpu_relax() {
#if defined(__x86_64__)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// True as soon as ready() holds, false after kSpinWindow without it (then the caller sleeps).
template <class F>
bool spin_until(F&& ready) {
    const auto end = std::chrono::steady_clock::now() + kSpinWindow;
    for (int i = 0;; ++i) {
        if (ready()) return true;
        if ((i & 63) == 63 && std::chrono::steady_clock::now() >= end) return false;
        cpu_relax();
    }
}

}  // namespace edgeflow
